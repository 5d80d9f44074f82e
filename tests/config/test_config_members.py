"""Member resolution: inheritance from member_defaults, fbr-effort, FBR param merge."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_testutil import SAMPLE_TEAM, write_config

from mindloop.config import (
    DEFAULT_FBR_EFFORT,
    Config,
    MemberConfig,
    ModelParams,
    load_config,
)
from mindloop.providers.base import GenerationRequest, UserMessage


def _load(tmp_path: Path, team: str) -> Config:
    return load_config(write_config(tmp_path, team=team))


def test_sample_config_loads(tmp_path: Path) -> None:
    config = _load(tmp_path, SAMPLE_TEAM)
    assert list(config.team.members) == ["alice", "bob"]
    assert config.team.default_responder == "alice"
    alice, bob = config.member("alice"), config.member("bob")
    assert (alice.id, alice.name, alice.toolsets) == ("alice", "Alice", ["*"])
    assert (bob.name, bob.toolsets, bob.tools) == ("bob", ["fs", "!shell"], [])
    assert bob.persona == ".minds/team/bob/persona.md"
    assert config.provider_for("bob").kind == "mock"
    assert config.provider_for("bob").script_dir == ".minds/mock"
    assert config.model_info("bob").name == "mock-model"
    assert config.model_info("bob").context_length == 128000
    openai = config.llm.providers["openai"]
    assert (openai.name, openai.api_key_env, openai.max_retries, openai.concurrency) == (
        "openai",
        "OPENAI_API_KEY",
        5,
        8,
    )
    assert openai.models["gpt-4o-mini"].max_output_tokens == 16384
    assert config.persona_text("bob") == ""


def test_persona_text_reads_default_persona_file(tmp_path: Path) -> None:
    config = _load(tmp_path, SAMPLE_TEAM)
    persona = tmp_path / ".minds/team/alice/persona.md"
    persona.parent.mkdir(parents=True)
    persona.write_text("You are Alice.", encoding="utf-8")
    assert config.persona_text("alice") == "You are Alice."


def test_members_inherit_unset_keys_and_keep_their_own(tmp_path: Path) -> None:
    team = """\
member_defaults:
  provider: openai
  model: gpt-4o-mini
  toolsets: [fs]
  read_dirs: [src]
  hidden: true
  gofor: helping
  model_params: {max_tokens: 500, openai: {temperature: 0.1, top_p: 0.5}}
members:
  a: {}
  b:
    provider: mock
    model: mock-model
    toolsets: [shell]
    hidden: false
    model_params: {openai: {temperature: 0.7}}
"""
    config = _load(tmp_path, team)
    a, b = config.member("a"), config.member("b")
    assert (a.provider, a.model, a.toolsets, a.read_dirs, a.hidden, a.gofor) == (
        "openai",
        "gpt-4o-mini",
        ["fs"],
        ["src"],
        True,
        "helping",
    )
    assert (b.provider, b.model, b.toolsets, b.read_dirs, b.hidden) == (
        "mock",
        "mock-model",
        ["shell"],
        ["src"],
        False,
    )
    # model_params deep-merge: b keeps the default top_p and max_tokens, overrides temperature
    assert b.model_params.as_request_params() == {
        "max_tokens": 500,
        "general": {"max_tokens": 500},
        "openai": {"temperature": 0.7, "top_p": 0.5},
        "anthropic": {},
    }
    # the first visible member is the default responder when none is named
    assert config.team.default_responder == "b"


def test_builtin_member_defaults(tmp_path: Path) -> None:
    config = _load(tmp_path, "members:\n  m: {provider: mock, model: mock-model}\n")
    m = config.member("m")
    assert m.fbr_effort == DEFAULT_FBR_EFFORT == 3
    assert m.toolsets == ["fs", "shell", "control"]
    assert (m.tools, m.read_dirs, m.write_dirs, m.hidden, m.gofor) == ([], [], [], False, None)
    assert m.name == "m"
    assert config.team.default_responder == "m"


@pytest.mark.parametrize(
    ("defaults_line", "member_line", "expected"),
    [
        ("", "", 3),
        ("  fbr-effort: 0\n", "", 0),
        ("  fbr_effort: 0\n", "", 0),
        ("  fbr-effort: 0\n", "    fbr_effort: 7\n", 7),
        ("", "    fbr-effort: 100\n", 100),
        ("  fbr-effort: 50\n", "    fbr-effort: 1\n", 1),
    ],
)
def test_fbr_effort_resolution(
    tmp_path: Path, defaults_line: str, member_line: str, expected: int
) -> None:
    team = (
        "member_defaults:\n  provider: mock\n  model: mock-model\n"
        f"{defaults_line}members:\n  m:\n    name: M\n{member_line}"
    )
    assert _load(tmp_path, team).member("m").fbr_effort == expected


def test_fbr_params_deep_merge_leaves_normal_params_unchanged(tmp_path: Path) -> None:
    team = """\
member_defaults:
  provider: mock
  model: mock-model
  model_params:
    general: {max_tokens: 4000}
    openai: {temperature: 0.2, top_p: 0.9, seed: 7}
    anthropic: {top_k: 40}
members:
  m:
    fbr_model_params:
      max_tokens: 1200
      openai: {temperature: 0.9}
      anthropic: {temperature: 0.5}
"""
    member = _load(tmp_path, team).member("m")
    normal = member.model_params.as_request_params()
    fbr = member.fbr_params().as_request_params()
    assert normal == {
        "max_tokens": 4000,
        "general": {"max_tokens": 4000},
        "openai": {"temperature": 0.2, "top_p": 0.9, "seed": 7},
        "anthropic": {"top_k": 40},
    }
    assert fbr == {
        "max_tokens": 1200,
        "general": {"max_tokens": 1200},
        "openai": {"temperature": 0.9, "top_p": 0.9, "seed": 7},
        "anthropic": {"top_k": 40, "temperature": 0.5},
    }
    # computing FBR params did not touch the member's normal params
    assert member.model_params.as_request_params() == normal
    assert (
        GenerationRequest(
            model="m", system="s", messages=[UserMessage(text="hi")], params=fbr
        ).params["openai"]["temperature"]
        == 0.9
    )


def test_fbr_model_params_inherit_from_defaults_deeply(tmp_path: Path) -> None:
    team = """\
member_defaults:
  provider: mock
  model: mock-model
  fbr_model_params: {general: {max_tokens: 900}, openai: {temperature: 1.0}}
members:
  m:
    fbr_model_params: {openai: {seed: 3}}
"""
    member = _load(tmp_path, team).member("m")
    assert member.fbr_model_params.as_request_params() == {
        "max_tokens": 900,
        "general": {"max_tokens": 900},
        "openai": {"temperature": 1.0, "seed": 3},
        "anthropic": {},
    }


def test_member_config_built_in_python_validates_effort() -> None:
    ok = MemberConfig.model_validate({"id": "x", "provider": "p", "model": "m", "fbr-effort": 0})
    assert ok.fbr_effort == 0 and ok.name == "x"
    assert isinstance(ok.fbr_params(), ModelParams)
    with pytest.raises(ValueError, match=r"must be an integer in 0\.\.100, got 101"):
        MemberConfig.model_validate({"id": "x", "provider": "p", "model": "m", "fbr_effort": 101})


def test_llm_only_change_is_picked_up(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        team=SAMPLE_TEAM.replace("mock-model", "gpt-4o-mini").replace(
            "provider: mock", "provider: openai"
        ),
    )
    config = load_config(tmp_path)
    assert config.model_info("alice").name == "gpt-4o-mini"
    assert config.provider_for("alice").base_url == "https://api.openai.com/v1"
