"""`mindloop schema`: JSON Schemas of team.yaml, llm.yaml and mcp.yaml from the pydantic
models, for editors. What the schema accepts and refuses agrees with `mindloop check` on
the cases an editor meets: the scaffolded files and the README's mcp.yaml pass; a typo'd
key, a provider `name:`, an out-of-range `fbr-effort`, an MCP server with both or neither
of `command` and `url`, a stdio key on an HTTP server (and back), `tools` with
`exclude`, a bad server name, prefix, URL or variable reference do not."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from mindloop.config import MCP_FILE, TEAM_FILE, check_config
from mindloop.config.schema import SCHEMA_FILES, json_schema
from mindloop.rtws import init_rtws
from tests.scenario_util import ml

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_mcp_yaml() -> str:
    """The mcp.yaml example of the README's MCP section."""
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    [block] = [b for b in blocks if b.startswith("# .minds/mcp.yaml")]
    return str(block)


def _project(tmp_path: Path) -> Path:
    """A scaffolded rtws with the README's mcp.yaml: every schema has its file."""
    init_rtws(tmp_path, provider="mock")
    (tmp_path / SCHEMA_FILES["mcp"][0]).write_text(_readme_mcp_yaml())
    return tmp_path


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


def test_the_schemas_are_valid_and_pass_what_init_and_the_readme_write(tmp_path: Path) -> None:
    _project(tmp_path)
    assert set(SCHEMA_FILES) == {"team", "llm", "mcp"}
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
        ("mcp", lambda d: d["servers"]["git"].update(colour="blue"), "'colour' was unexpected"),
        ("mcp", lambda d: d["servers"]["git"].pop("command"), "'url' is a required"),
        ("mcp", lambda d: d["servers"]["git"].update(url="http://h/mcp"), "not both"),
        ("mcp", lambda d: d["servers"]["tracker"].update(args=["-v"]), "only to stdio"),
        ("mcp", lambda d: d["servers"]["tracker"].update(cwd="."), "only to stdio"),
        ("mcp", lambda d: d["servers"]["git"].update(headers={"A": "b"}), "only to HTTP"),
        ("mcp", lambda d: d["servers"]["git"].update(exclude=["git_diff"]), "not both"),
        ("mcp", lambda d: d["servers"].update({"my server": {"command": "x"}}), "does not match"),
        ("mcp", lambda d: d["servers"]["git"].update(prefix="repo."), "does not match"),
        ("mcp", lambda d: d["servers"]["git"].update(tools=[" git_log"]), "does not match"),
        ("mcp", lambda d: d["servers"]["git"].update(env={"A": "${NOT-A-NAME}"}), "not match"),
        ("mcp", lambda d: d["servers"]["git"].update(args=["${UNCLOSED"]), "does not match"),
        ("mcp", lambda d: d["servers"]["tracker"].update(url="ftp://h/mcp"), "does not match"),
        ("mcp", lambda d: d["servers"]["tracker"].update(headers_env={"K": "a b"}), "not match"),
        ("mcp", lambda d: d["servers"]["tracker"].update(call_timeout=0), "less than or equal"),
        ("mcp", lambda d: d["servers"]["tracker"].update(startup_timeout="30"), "not of type"),
    ],
)
def test_the_schemas_refuse_what_check_refuses(
    tmp_path: Path, name: str, edit: Any, says: str
) -> None:
    _project(tmp_path)
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
    assert set(both) == {".minds/team.yaml", ".minds/llm.yaml", ".minds/mcp.yaml"}
    assert ml("schema", ".minds/llm.yaml", cwd=tmp_path).stdout == ml("schema", "llm").stdout
    mcp = ml("schema", "mcp", cwd=tmp_path)
    assert mcp.returncode == 0 and json.loads(mcp.stdout) == json_schema("mcp")
    assert [json_schema(n)["title"] for n in ("team", "mcp")] == [TEAM_FILE, MCP_FILE]
    bad = ml("schema", "tools", cwd=tmp_path)
    assert bad.returncode == 1 and "choose one of team, llm, mcp" in bad.stderr
    helped = ml("schema", "--help", cwd=tmp_path)
    assert "team | llm | mcp" in helped.stdout and ".minds/mcp.yaml" in helped.stdout
