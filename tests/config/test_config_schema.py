"""`mindloop schema`: JSON Schemas of team.yaml and llm.yaml from the pydantic models, for
editors. What the schema accepts and refuses agrees with `mindloop check` on the cases
an editor meets: the scaffolded files pass, a typo'd key, a provider `name:` and an
out-of-range `fbr-effort` do not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from mindloop.config import check_config
from mindloop.config.schema import SCHEMA_FILES, json_schema
from mindloop.rtws import init_rtws
from tests.scenario_util import ml


def _errors(name: str, data: Any) -> list[str]:
    """Every error message, those under `anyOf` branches (a member may be null) too."""
    validator = jsonschema.Draft202012Validator(json_schema(name))
    found: list[str] = []

    def walk(errors: Any) -> None:
        for e in errors:
            found.append(e.message)
            walk(e.context or [])

    walk(validator.iter_errors(data))
    return found


def test_the_schemas_are_valid_and_pass_what_init_writes(tmp_path: Path) -> None:
    init_rtws(tmp_path, provider="mock")
    for name, (file, _) in SCHEMA_FILES.items():
        jsonschema.Draft202012Validator.check_schema(json_schema(name))
        data = yaml.safe_load((tmp_path / file).read_text())
        assert _errors(name, data) == [], name
    assert check_config(tmp_path) == []


@pytest.mark.parametrize(
    ("name", "edit", "says"),
    [
        ("team", lambda d: d["members"]["dev"].update(colour="blue"), "'colour' was unexpected"),
        ("team", lambda d: d["members"]["dev"].update({"fbr-effort": 101}), "101 is greater"),
        ("team", lambda d: d["members"]["dev"].update({"fbr-effort": "3"}), "is not of type"),
        ("llm", lambda d: d["providers"]["mock"].update(name="mock"), "'name' was unexpected"),
        ("llm", lambda d: d["providers"]["openai"].update(kind="gpt"), "is not one of"),
        ("llm", lambda d: d["providers"]["openai"].pop("kind"), "'kind' is a required"),
    ],
)
def test_the_schemas_refuse_what_check_refuses(
    tmp_path: Path, name: str, edit: Any, says: str
) -> None:
    init_rtws(tmp_path, provider="mock")
    file = tmp_path / SCHEMA_FILES[name][0]
    data = yaml.safe_load(file.read_text())
    edit(data)
    assert any(says in e for e in _errors(name, data)), _errors(name, data)
    file.write_text(yaml.safe_dump(data, sort_keys=False))
    assert check_config(tmp_path) != []


def test_the_schema_command(tmp_path: Path) -> None:
    team = ml("schema", "team", cwd=tmp_path)
    assert team.returncode == 0 and json.loads(team.stdout) == json_schema("team")
    both = json.loads(ml("schema", cwd=tmp_path).stdout)
    assert set(both) == {".minds/team.yaml", ".minds/llm.yaml"}
    assert ml("schema", ".minds/llm.yaml", cwd=tmp_path).stdout == ml("schema", "llm").stdout
    bad = ml("schema", "mcp", cwd=tmp_path)
    assert bad.returncode == 1 and "choose one of team, llm" in bad.stderr
