"""Every config error names file, line and key path, in words a user can act on."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_testutil import SAMPLE_LLM, SAMPLE_TEAM, problem_lines, write_config

from mindloop.config import ConfigError, load_config
from mindloop.errors import MindloopError

TEAM = ".minds/team.yaml"
LLM = ".minds/llm.yaml"

HEAD = "member_defaults:\n  provider: mock\n  model: mock-model\nmembers:\n"  # lines 1-4


def _team_problems(tmp_path: Path, members: str) -> list[str]:
    write_config(tmp_path, team=HEAD + members)
    return problem_lines(tmp_path)


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        (
            "  ux:\n    fbr-effort: 101\n",
            f"{TEAM}:6: members.ux.fbr-effort: must be an integer in 0..100, got 101",
        ),
        (
            "  ux:\n    fbr-effort: -1\n",
            f"{TEAM}:6: members.ux.fbr-effort: must be an integer in 0..100, got -1",
        ),
        (
            "  ux:\n    fbr_effort: 1.5\n",
            f"{TEAM}:6: members.ux.fbr_effort: must be an integer in 0..100, got 1.5",
        ),
        (
            "  ux:\n    fbr-effort: '3'\n",
            f'{TEAM}:6: members.ux.fbr-effort: must be an integer in 0..100, got "3"',
        ),
        (
            "  ux:\n    fbr-effort: true\n",
            f"{TEAM}:6: members.ux.fbr-effort: must be an integer in 0..100, got true",
        ),
        (
            "  ux:\n    fbr-effort: 2\n    fbr_effort: 2\n",
            f"{TEAM}:7: members.ux.fbr_effort: both fbr-effort and fbr_effort are set; "
            "use only fbr-effort",
        ),
        (
            "  ux:\n    colour: blue\n",
            f"{TEAM}:6: members.ux.colour: unknown key (allowed: name, provider, model, "
            "model_params, fbr-effort, fbr_model_params, toolsets, tools, read_dirs, "
            "write_dirs, no_read_dirs, no_write_dirs, persona, gofor, hidden, approval_required)",
        ),
        (
            "  ux:\n    toolset: [fs]\n",
            f"{TEAM}:6: members.ux.toolset: unknown key (did you mean toolsets?)",
        ),
        (
            "  ux:\n    hidden: 3\n",
            f"{TEAM}:6: members.ux.hidden: must be true or false, got 3",
        ),
        (
            "  ux:\n    toolsets: fs\n",
            f'{TEAM}:6: members.ux.toolsets: must be a list, got "fs"',
        ),
        (
            "  ux:\n    model_params:\n      max_tokens: 10\n      general: {max_tokens: 20}\n",
            f"{TEAM}:8: members.ux.model_params.general.max_tokens: "
            "do not set both max_tokens and general.max_tokens",
        ),
        (
            "  ux:\n    fbr_model_params:\n      max_tokens: 10\n      general:\n"
            "        max_tokens: 20\n",
            f"{TEAM}:9: members.ux.fbr_model_params.general.max_tokens: "
            "do not set both max_tokens and general.max_tokens",
        ),
        (
            "  ux:\n    model_params:\n      openai: {temprature: 0.2}\n",
            f"{TEAM}:7: members.ux.model_params.openai.temprature: "
            "unknown key (did you mean temperature?)",
        ),
        (
            "  ux:\n    model_params:\n      general: {temperature: 0.2}\n",
            f"{TEAM}:7: members.ux.model_params.general.temperature: "
            "unknown key (allowed: max_tokens)",
        ),
        (
            "  ux:\n    model_params:\n      openai:\n        stop: 5\n",
            f"{TEAM}:8: members.ux.model_params.openai.stop: must be a string or a list, got 5",
        ),
        (
            "  ux:\n    model_params:\n      anthropic:\n        temperature: 1.5\n",
            f"{TEAM}:8: members.ux.model_params.anthropic.temperature: must be <= 1, got 1.5",
        ),
        (
            "  ux:\n    read_dirs: [src, .minds/memory]\n",
            f"{TEAM}:6: members.ux.read_dirs.1: .minds/memory cannot be granted: .minds/ is "
            "encapsulated state (team configuration and memory, changed only by dedicated tools)",
        ),
        (
            "  ux:\n    write_dirs:\n      - docs\n      - .mindloop\n",
            f"{TEAM}:8: members.ux.write_dirs.1: .mindloop cannot be granted: .mindloop/ is "
            "encapsulated state (runtime state, owned by the runtime)",
        ),
        (
            "  ux:\n    read_dirs:\n      - tasks/Big.TSK/goals.md\n",
            f"{TEAM}:7: members.ux.read_dirs.0: tasks/Big.TSK/goals.md cannot be granted: "
            "*.tsk task packages are encapsulated state, read with recall_taskdoc and changed "
            "with change_mind",
        ),
        (
            "  ux:\n    write_dirs: ['../elsewhere']\n",
            f"{TEAM}:6: members.ux.write_dirs.0: must stay inside the rtws ('..' is not "
            'allowed), got "../elsewhere"',
        ),
        (
            "  self:\n    name: Me\n",
            f"{TEAM}:5: members.self: member id 'self' is reserved: @self starts Fresh Boots "
            "Reasoning",
        ),
        (
            "  ux: 5\n",
            f"{TEAM}:5: members.ux: must be a mapping, got 5",
        ),
    ],
)
def test_member_error_is_located(tmp_path: Path, members: str, expected: str) -> None:
    assert _team_problems(tmp_path, members) == [expected]


def test_all_problems_are_collected_across_files(tmp_path: Path) -> None:
    team = HEAD + "  a:\n    fbr-effort: 101\n  b:\n    fbr-effort: -1\n    colour: red\n"
    llm = SAMPLE_LLM.replace("kind: mock", "kind: mocky")
    write_config(tmp_path, team=team, llm=llm)
    assert problem_lines(tmp_path) == [
        f"{TEAM}:6: members.a.fbr-effort: must be an integer in 0..100, got 101",
        f"{TEAM}:8: members.b.fbr-effort: must be an integer in 0..100, got -1",
        f"{TEAM}:9: members.b.colour: unknown key (allowed: name, provider, model, "
        "model_params, fbr-effort, fbr_model_params, toolsets, tools, read_dirs, "
        "write_dirs, no_read_dirs, no_write_dirs, persona, gofor, hidden, approval_required)",
        f"{LLM}:3: providers.mock.kind: must be one of 'openai-compatible', 'anthropic' or "
        "'mock', got \"mocky\"",
    ]


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    write_config(tmp_path, team=HEAD + "  ux:\n    name: [unclosed\n    model: x\n")
    problems = problem_lines(tmp_path)
    assert len(problems) == 1
    assert problems[0].startswith(f"{TEAM}:7: YAML syntax error: ")


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    write_config(tmp_path, team=HEAD + "  ux:\n    name: A\n    name: B\n")
    assert problem_lines(tmp_path) == [
        f"{TEAM}:7: members.ux.name: duplicate key 'name' (first written at line 6)"
    ]


def test_missing_files_are_one_problem_each(tmp_path: Path) -> None:
    write_config(tmp_path, team=None, llm=None)
    assert problem_lines(tmp_path) == [
        f"{TEAM}: is missing (run `mindloop init` to create a starting config)",
        f"{LLM}: is missing (run `mindloop init` to create a starting config)",
    ]


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    write_config(tmp_path, team="- a\n- b\n")
    assert problem_lines(tmp_path) == [f"{TEAM}:1: the top level must be a mapping of keys"]


def test_unknown_root_key(tmp_path: Path) -> None:
    write_config(tmp_path, team=SAMPLE_TEAM + "shell_specialist: [alice]\n")
    assert problem_lines(tmp_path) == [
        f"{TEAM}:13: shell_specialist: unknown key (allowed: member_defaults, "
        "default_responder, members, work_language, caps, python_tools, loop)"
    ]


def test_work_language_is_en_or_zh(tmp_path: Path) -> None:
    write_config(tmp_path, team=SAMPLE_TEAM + "work_language: fr\n")
    (line,) = problem_lines(tmp_path)
    assert line.startswith(f"{TEAM}:13: work_language:") and "'en'" in line


def test_member_without_provider(tmp_path: Path) -> None:
    write_config(tmp_path, team="members:\n  ux:\n    model: mock-model\n")
    assert problem_lines(tmp_path) == [
        f"{TEAM}:2: members.ux: missing provider: set it on the member or in member_defaults"
    ]


def test_no_members(tmp_path: Path) -> None:
    write_config(tmp_path, team="member_defaults: {provider: mock}\n")
    assert problem_lines(tmp_path) == [
        f"{TEAM}:1: members: no members: add at least one member under members"
    ]


# ---------------------------------------------------------------- cross references


def test_unknown_provider_points_at_member_key(tmp_path: Path) -> None:
    write_config(tmp_path, team=HEAD + "  ux:\n    provider: nope\n")
    assert problem_lines(tmp_path) == [
        f"{TEAM}:6: members.ux.provider: provider 'nope' is not defined in {LLM} "
        "(providers: mock, openai)"
    ]


def test_inherited_bad_model_is_reported_once_at_member_defaults(tmp_path: Path) -> None:
    team = "member_defaults:\n  provider: openai\n  model: gpt-9\nmembers:\n  a: {}\n  b: {}\n"
    write_config(tmp_path, team=team)
    assert problem_lines(tmp_path) == [
        f"{TEAM}:3: member_defaults.model: model 'gpt-9' is not listed under "
        f"providers.openai.models in {LLM} (models: gpt-4o-mini)"
    ]


def test_unknown_default_responder(tmp_path: Path) -> None:
    write_config(
        tmp_path, team=SAMPLE_TEAM.replace("default_responder: alice", "default_responder: zed")
    )
    assert problem_lines(tmp_path) == [
        f"{TEAM}:5: default_responder: 'zed' is not a member (members: alice, bob)"
    ]


def test_explicit_missing_persona(tmp_path: Path) -> None:
    write_config(tmp_path, team=HEAD + "  ux:\n    persona: docs/ux.md\n")
    assert problem_lines(tmp_path) == [
        f"{TEAM}:6: members.ux.persona: persona file docs/ux.md does not exist"
    ]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/ux.md").write_text("You are UX.", encoding="utf-8")
    assert problem_lines(tmp_path) == []
    assert load_config(tmp_path).persona_text("ux") == "You are UX."


def test_cross_references_still_checked_when_another_member_is_invalid(tmp_path: Path) -> None:
    write_config(tmp_path, team=HEAD + "  a:\n    fbr-effort: 500\n  b:\n    provider: nope\n")
    assert problem_lines(tmp_path) == [
        f"{TEAM}:6: members.a.fbr-effort: must be an integer in 0..100, got 500",
        f"{TEAM}:8: members.b.provider: provider 'nope' is not defined in {LLM} "
        "(providers: mock, openai)",
    ]


# ---------------------------------------------------------------- llm.yaml


def test_provider_errors(tmp_path: Path) -> None:
    llm = (
        "providers:\n"  # 1
        "  openai:\n"  # 2
        "    kind: openai-compatible\n"  # 3
        "    name: openai\n"  # 4
        "    baseUrl: http://localhost\n"  # 5
        "    timeout: soon\n"  # 6
        "    models:\n"  # 7
        "      m: {context_length: 0}\n"  # 8
        "      n: {}\n"  # 9
        "  mock:\n"  # 10
        "    models: {mock-model: {context_length: 10}}\n"  # 11
    )
    write_config(tmp_path, llm=llm)
    assert problem_lines(tmp_path) == [
        f"{LLM}:4: providers.openai.name: unknown key: a provider's name is its key under "
        "providers",
        f"{LLM}:5: providers.openai.baseUrl: unknown key: use base_url",
        f'{LLM}:6: providers.openai.timeout: must be a number, got "soon"',
        f"{LLM}:8: providers.openai.models.m.context_length: must be > 0, got 0",
        f"{LLM}:9: providers.openai.models.n.context_length: missing required key",
        f"{LLM}:10: providers.mock.kind: missing required key",
    ]


@pytest.mark.parametrize(
    "line",
    [
        "    api_key: sk-abcdefghijklmnopqrstuvwx\n",
        "    api_key_env: sk-abcdefghijklmnopqrstuvwx\n",
    ],
)
def test_api_key_literal_is_refused_and_never_echoed(tmp_path: Path, line: str) -> None:
    llm = SAMPLE_LLM.replace("    api_key_env: OPENAI_API_KEY\n", line)
    write_config(tmp_path, llm=llm)
    problems = problem_lines(tmp_path)
    assert len(problems) == 1
    assert problems[0].startswith(f"{LLM}:9: providers.openai.api_key")
    assert "api_key_env" in problems[0] and "NAME" in problems[0]
    assert "sk-abc" not in problems[0]


def test_key_shaped_value_anywhere_is_refused(tmp_path: Path) -> None:
    llm = SAMPLE_LLM.replace(
        "base_url: https://api.openai.com/v1", "base_url: sk-abcdefghijklmnop12"
    )
    write_config(tmp_path, llm=llm)
    problems = problem_lines(tmp_path)
    assert any(
        p.startswith(f"{LLM}:8: providers.openai.base_url: this looks like an API key")
        for p in problems
    )
    assert all("sk-abc" not in p for p in problems)


def test_api_key_env_must_be_a_variable_name(tmp_path: Path) -> None:
    write_config(tmp_path, llm=SAMPLE_LLM.replace("OPENAI_API_KEY", "my key"))
    assert problem_lines(tmp_path) == [
        f"{LLM}:9: providers.openai.api_key_env: must be the name of an environment variable "
        "(letters, digits, '_'), e.g. OPENAI_API_KEY"
    ]


# ---------------------------------------------------------------- load_config


def test_load_config_raises_with_every_problem(tmp_path: Path) -> None:
    write_config(tmp_path, team=HEAD + "  a:\n    fbr-effort: 101\n  b:\n    hidden: 2\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    err = info.value
    assert isinstance(err, MindloopError)
    assert str(err).splitlines() == [
        f"{TEAM}:6: members.a.fbr-effort: must be an integer in 0..100, got 101",
        f"{TEAM}:8: members.b.hidden: must be true or false, got 2",
    ]
    assert [p.path for p in err.problems] == ["members.a.fbr-effort", "members.b.hidden"]
    assert [p.line for p in err.problems] == [6, 8]


def test_unknown_member_lookup_names_known_members(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    with pytest.raises(MindloopError, match=r"'carol'.*alice, bob"):
        config.member("carol")


def test_sample_is_clean(tmp_path: Path) -> None:
    write_config(tmp_path, team=SAMPLE_TEAM, llm=SAMPLE_LLM)
    assert problem_lines(tmp_path) == []
