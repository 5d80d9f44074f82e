"""The provider settings of `.minds/llm.yaml` that bound and pace model calls
(`first_content_deadline`, `generation_deadline`, `retry_after_cap`): defaults, and
errors naming file, line and key like every other key."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.config import check_config, load_config
from mindloop.config.llm import (
    DEFAULT_FIRST_CONTENT_DEADLINE,
    DEFAULT_GENERATION_DEADLINE,
    DEFAULT_RETRY_AFTER_CAP,
)

LLM = ".minds/llm.yaml"
TEAM = "member_defaults:\n  provider: p\n  model: m\nmembers:\n  dev: {}\n"
HEAD = "providers:\n  p:\n    kind: openai-compatible\n    models: {m: {context_length: 100}}\n"


def write(rtws: Path, extra: str) -> Path:
    minds = rtws / ".minds"
    minds.mkdir(parents=True, exist_ok=True)
    (minds / "team.yaml").write_text(TEAM, encoding="utf-8")
    (minds / "llm.yaml").write_text(HEAD + extra, encoding="utf-8")
    return rtws


def test_defaults(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "")).llm.providers["p"]
    assert cfg.first_content_deadline == DEFAULT_FIRST_CONTENT_DEADLINE
    assert cfg.generation_deadline == DEFAULT_GENERATION_DEADLINE
    assert cfg.retry_after_cap == DEFAULT_RETRY_AFTER_CAP
    assert 0 < cfg.first_content_deadline <= cfg.generation_deadline


def test_values_are_read(tmp_path: Path) -> None:
    extra = (
        "    first_content_deadline: 20\n    generation_deadline: 90.5\n    retry_after_cap: 0\n"
    )
    cfg = load_config(write(tmp_path, extra)).llm.providers["p"]
    assert (cfg.first_content_deadline, cfg.generation_deadline, cfg.retry_after_cap) == (
        20.0,
        90.5,
        0.0,
    )


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (
            "    first_content_deadline: 0\n",
            "providers.p.first_content_deadline: must be > 0, got 0",
        ),
        ("    generation_deadline: -1\n", "providers.p.generation_deadline: must be > 0, got -1"),
        (
            '    generation_deadline: "60"\n',
            'providers.p.generation_deadline: must be a number, got "60"',
        ),
        ("    retry_after_cap: -0.5\n", "providers.p.retry_after_cap: must be >= 0, got -0.5"),
        ("    retry_after_cap: true\n", "providers.p.retry_after_cap: must be a number, got true"),
        (
            "    first_content_deadlin: 5\n",
            "providers.p.first_content_deadlin: unknown key (did you mean first_content_deadline?)",
        ),
    ],
)
def test_bad_values_name_file_line_and_key(tmp_path: Path, extra: str, problem: str) -> None:
    assert [str(p) for p in check_config(write(tmp_path, extra))] == [f"{LLM}:5: {problem}"]


def test_first_content_deadline_longer_than_the_whole_is_refused(tmp_path: Path) -> None:
    extra = "    generation_deadline: 60\n    first_content_deadline: 120\n"
    assert [str(p) for p in check_config(write(tmp_path, extra))] == [
        f"{LLM}:6: providers.p.first_content_deadline: first_content_deadline (120) is longer "
        "than generation_deadline (60): the first content must come within the whole "
        "attempt's deadline"
    ]


def test_the_readme_llm_yaml_example_is_valid(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    after = readme.split("`.minds/llm.yaml` — providers:", 1)[1]
    block = after.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert "first_content_deadline" in block and "retry_after_cap" in block
    minds = tmp_path / ".minds"
    minds.mkdir()
    (minds / "llm.yaml").write_text(block, encoding="utf-8")
    (minds / "team.yaml").write_text(
        "member_defaults:\n  provider: mock\n  model: mock-model\nmembers:\n  dev: {}\n",
        encoding="utf-8",
    )
    assert [str(p) for p in check_config(tmp_path)] == []
