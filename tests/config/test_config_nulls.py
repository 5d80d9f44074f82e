"""An explicit `null` is refused wherever null is not a value (file:line, key path).

A key typed "optional" may be left out; writing `key: null` (or `key:` with nothing after
it) is then a mistake, not a way to ask for the default: seed 002 says a non-integer
`fbr-effort` is an error, and `null` is not an integer. Mapping values whose type admits
null stay nullable: `members: {alice: }` is a member with no keys of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from config_testutil import SAMPLE_LLM, SAMPLE_TEAM, problem_lines, write_config

from mindloop.config import ConfigError, MemberSpec, load_config

TEAM = ".minds/team.yaml"
LLM = ".minds/llm.yaml"
HEAD = "member_defaults:\n  provider: mock\n  model: mock-model\nmembers:\n"  # lines 1-4
NULL = "must not be null: write a value, or leave the key out to get its default"


@pytest.mark.parametrize("spelled", ["fbr-effort: null", "fbr-effort:", "fbr-effort: ~"])
def test_fbr_effort_null_is_an_error(tmp_path: Path, spelled: str) -> None:
    write_config(tmp_path, team=HEAD + f"  ux:\n    {spelled}\n")
    assert problem_lines(tmp_path) == [f"{TEAM}:6: members.ux.fbr-effort: {NULL}"]
    with pytest.raises(ConfigError):
        load_config(tmp_path)


def test_null_in_member_defaults(tmp_path: Path) -> None:
    team = "member_defaults:\n  provider: mock\n  model: mock-model\n  fbr-effort: null\n"
    write_config(tmp_path, team=team + "members:\n  ux: {}\n")
    assert problem_lines(tmp_path) == [f"{TEAM}:4: member_defaults.fbr-effort: {NULL}"]


def _yaml_key(name: str) -> str:
    return "fbr-effort" if name == "fbr_effort" else name


@pytest.mark.parametrize("field", sorted(MemberSpec.model_fields))
def test_every_member_key_refuses_null(tmp_path: Path, field: str) -> None:
    key = _yaml_key(field)
    write_config(tmp_path, team=HEAD + f"  ux:\n    {key}: null\n")
    assert problem_lines(tmp_path) == [f"{TEAM}:6: members.ux.{key}: {NULL}"]


def test_nested_model_params_null(tmp_path: Path) -> None:
    write_config(tmp_path, team=HEAD + "  ux:\n    model_params:\n      openai:\n        seed:\n")
    assert problem_lines(tmp_path) == [f"{TEAM}:8: members.ux.model_params.openai.seed: {NULL}"]


def test_null_in_a_list_is_a_type_error_once(tmp_path: Path) -> None:
    write_config(tmp_path, team=HEAD + "  ux:\n    toolsets: [fs, null]\n")
    assert problem_lines(tmp_path) == [
        f"{TEAM}:6: members.ux.toolsets.1: must be a string, got null"
    ]


def test_default_responder_null(tmp_path: Path) -> None:
    write_config(
        tmp_path, team=SAMPLE_TEAM.replace("default_responder: alice", "default_responder:")
    )
    assert problem_lines(tmp_path) == [f"{TEAM}:5: default_responder: {NULL}"]


def test_a_member_written_as_null_is_still_a_member(tmp_path: Path) -> None:
    write_config(tmp_path, team=HEAD + "  alice:\n  bob: ~\n")
    assert problem_lines(tmp_path) == []
    assert sorted(load_config(tmp_path).team.members) == ["alice", "bob"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "base_url: https://api.openai.com/v1",
            "base_url: null",
            f"{LLM}:8: providers.openai.base_url: {NULL}",
        ),
        (
            "max_output_tokens: 16384}",
            "max_output_tokens: null}",
            f"{LLM}:11: providers.openai.models.gpt-4o-mini.max_output_tokens: {NULL}",
        ),
        (
            "kind: mock\n",
            "kind: mock\n    script_dir:\n",
            f"{LLM}:4: providers.mock.script_dir: {NULL}",
        ),
    ],
)
def test_llm_yaml_refuses_null(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in SAMPLE_LLM
    write_config(tmp_path, llm=SAMPLE_LLM.replace(old, new))
    assert problem_lines(tmp_path) == [expected]


def test_null_where_no_null_is_typed_is_reported_once(tmp_path: Path) -> None:
    """`kind` has no None in its type: pydantic's own error, not a second one."""
    write_config(tmp_path, llm=SAMPLE_LLM.replace("kind: mock", "kind: null"))
    (line,) = problem_lines(tmp_path)
    assert line.startswith(f"{LLM}:3: providers.mock.kind: must be one of")
