"""`mindloop check` beyond the YAML schema: mock scripts and Taskdoc package layouts."""

from __future__ import annotations

from pathlib import Path

from mindloop.config import ConfigError, load_config
from mindloop.providers.mock_script import validate_script
from mindloop.providers.pool import DEFAULT_SCRIPT_DIR
from mindloop.taskdoc import TaskPackage, discover_packages
from mindloop.taskdoc.effective import format_violation


def check_rtws(rtws: Path) -> list[str]:
    """Problems outside team.yaml/llm.yaml, one line each, naming the file."""
    problems: list[str] = []
    try:
        config = load_config(rtws)
    except ConfigError:
        config = None  # reported by check_config already
    if config is not None:
        for prov in config.llm.providers.values():
            if prov.kind != "mock":
                continue
            for model in prov.models.values():
                script = rtws / (prov.script_dir or DEFAULT_SCRIPT_DIR) / f"{model.name}.yaml"
                if script.exists():
                    problems += validate_script(script)
    for rel in discover_packages(rtws):
        for v in TaskPackage(rtws, rel).layout_violations():
            problems.append(f"{rel}: layout violation: {format_violation(v)}")
    return problems
