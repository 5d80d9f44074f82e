"""`loop.self_md` and `loop.kb` in team.yaml: the reference's defaults, strict keys with
file:line errors, and the default `kb` member when team.yaml declares none."""

from __future__ import annotations

from pathlib import Path

from mindloop.config import load_config
from tests.config.config_testutil import SAMPLE_TEAM, problem_lines, write_config

TEAM = ".minds/team.yaml"


def test_defaults_and_the_default_kb_member(tmp_path: Path) -> None:
    write_config(tmp_path)
    config = load_config(tmp_path)
    loop = config.team.loop
    assert loop.self_md.protected_sections == ["Hard rules"] and not loop.self_md.git_commit
    assert (loop.self_md.max_tokens, loop.self_md.max_net_tokens_per_call) == (1500, 200)
    assert (loop.kb.member, loop.kb.task_path) == ("kb", "tasks/kb.tsk")
    assert "kb" not in config.team.members  # not a teammate: no roster line, no tellask
    kb = config.member("kb")
    alice = config.member("alice")
    assert (kb.provider, kb.model, kb.hidden) == (alice.provider, alice.model, True)
    assert kb.toolsets == ["fs", "control"] and kb.write_dirs == ["kb/**"]


def test_a_declared_member_keeps_the_kb(tmp_path: Path) -> None:
    team = SAMPLE_TEAM + "loop:\n  kb: {member: bob, task_slug: library}\n"
    write_config(tmp_path, team=team)
    config = load_config(tmp_path)
    assert config.member("bob") is config.team.members["bob"]
    assert config.team.loop.kb.task_path == "tasks/library.tsk"


def test_bad_loop_keys_are_reported_at_their_line(tmp_path: Path) -> None:
    team = SAMPLE_TEAM + (
        "loop:\n"  # line 13
        "  self_md:\n"
        "    max_tokens: 0\n"  # 15
        "    gitcommit: true\n"  # 16
        "    protected_sections: ['  ']\n"  # 17
        "  kb:\n"
        "    member: human\n"  # 19
        "    task_slug: 'a/b'\n"  # 20
    )
    write_config(tmp_path, team=team)
    lines = problem_lines(tmp_path)
    assert any(p.startswith(f"{TEAM}:15: loop.self_md.max_tokens: ") for p in lines), lines
    assert any(p.startswith(f"{TEAM}:16: loop.self_md.gitcommit: unknown key") for p in lines)
    assert any(p.startswith(f"{TEAM}:17: loop.self_md.protected_sections") for p in lines)
    assert any(
        p.startswith(f"{TEAM}:19: loop.kb.member: ") and "not self, human" in p for p in lines
    )
    assert any(p.startswith(f"{TEAM}:20: loop.kb.task_slug: ") for p in lines), lines


def test_the_per_run_limit_and_approval_are_configured_strictly(tmp_path: Path) -> None:
    write_config(tmp_path)
    defaults = load_config(tmp_path).team.loop.self_md
    assert (defaults.max_calls_per_run, defaults.require_approval) == (3, False)
    team = SAMPLE_TEAM + "loop:\n  self_md: {max_calls_per_run: 1, require_approval: true}\n"
    write_config(tmp_path, team=team)
    set_ = load_config(tmp_path).team.loop.self_md
    assert (set_.max_calls_per_run, set_.require_approval) == (1, True)
    team = SAMPLE_TEAM + (
        "loop:\n"  # line 13
        "  self_md:\n"
        "    max_calls_per_run: 0\n"  # 15
        "    require_approval: 'yes'\n"  # 16
    )
    write_config(tmp_path, team=team)
    lines = problem_lines(tmp_path)
    assert any(p.startswith(f"{TEAM}:15: loop.self_md.max_calls_per_run: ") for p in lines), lines
    assert any(p.startswith(f"{TEAM}:16: loop.self_md.require_approval: ") for p in lines), lines
