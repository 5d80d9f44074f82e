"""With `loop.self_md.git_commit`, a self.md change is committed to git: exactly self.md
and its history file, never anything else that is staged or modified, once per call key
(a real git repository in `tmp_path`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mindloop.config.loop_self_md import SelfMdConfig
from mindloop.tools.base import ToolContext, call_key
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets import self_md as sm
from mindloop.toolsets import self_md_doc as doc
from mindloop.toolsets.self_improve import revert_self_md, self_md_patch_tool

SELF, HISTORY = ".minds/team/dev/self.md", ".minds/team/dev/self.history.jsonl"


@pytest.fixture(autouse=True)
def _no_user_git_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Git as on a fresh machine: no global identity (mindloop's fallback is used)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("hello\n")
    (repo / ".gitignore").write_text(".minds/\n")  # ignored: committed anyway (-f)
    git(repo, "add", "README.md", ".gitignore")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    return repo


async def _patch(repo: Path, n: int, content: str, *, commit: bool = True) -> dict[str, object]:
    reg = ToolRegistry()
    reg.add_toolset("s", [self_md_patch_tool(SelfMdConfig(git_commit=commit))], loop_owned=True)
    ctx = ToolContext(
        rtws=repo,
        member="dev",
        dialog_id="d1",
        call_key=call_key("d1", 3, n),
        task_path="tasks/a.tsk",
    )
    args = {
        "section": "Habits",
        "op": "append",
        "content": content,
        "base_sha256": doc.sha256_hex(sm.read_text(repo / SELF)),
        "rationale": "tests caught it twice",
        "evidence_refs": ["worklog:12"],
    }
    out = await reg.execute("self_md_patch", json.dumps(args), ctx)
    result: dict[str, object] = json.loads(out.text)
    return result


async def test_exactly_the_two_files_are_committed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "staged.txt").write_text("not mine\n")
    git(repo, "add", "staged.txt")
    (repo / "README.md").write_text("changed, not staged\n")
    res = await _patch(repo, 0, "Run the tests first.")
    assert res["result"] == "APPLIED"
    assert git(repo, "rev-parse", "HEAD").strip() == res["git_commit"]
    assert sorted(git(repo, "show", "--name-only", "--format=", "HEAD").split()) == [HISTORY, SELF]
    # what else was staged or modified is left as it was
    assert git(repo, "diff", "--cached", "--name-only").split() == ["staged.txt"]
    assert git(repo, "diff", "--name-only").split() == ["README.md"]
    assert git(repo, "status", "--porcelain", "--", ".minds").strip() == ""
    message = git(repo, "log", "-1", "--format=%B")
    assert message.startswith("self-improve(dev): append 'Habits': tests caught it twice\n")
    key = call_key("d1", 3, 0)
    assert f"Idempotency-Key: {key}" in message
    assert "Task: tasks/a.tsk" in message and "Evidence: worklog:12" in message
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == "mindloop <mindloop@localhost>"


async def test_a_replayed_call_is_committed_once(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    first = await _patch(repo, 0, "Once.")
    again = await _patch(repo, 0, "Once.")
    assert again["result"] == "ALREADY_APPLIED" and again["git_commit"] == first["git_commit"]
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "2"


async def test_a_change_whose_commit_was_cut_off_is_committed_on_replay(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    await _patch(repo, 0, "Once.", commit=False)  # as if killed before the commit
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"
    again = await _patch(repo, 0, "Once.")
    assert again["result"] == "ALREADY_APPLIED" and again["git_commit"]
    assert sorted(git(repo, "show", "--name-only", "--format=", "HEAD").split()) == [HISTORY, SELF]


async def test_off_or_outside_git_nothing_is_committed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    res = await _patch(repo, 0, "Quiet.", commit=False)
    assert res["result"] == "APPLIED" and "git_commit" not in res
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"
    plain = tmp_path / "plain"
    plain.mkdir()
    res = await _patch(plain, 0, "No repo.")
    assert res["result"] == "APPLIED" and "git_commit" not in res and "message" not in res


async def test_a_revert_is_committed_too(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    await _patch(repo, 0, "Once.")
    res = revert_self_md(repo, "dev", 1, SelfMdConfig(git_commit=True))
    assert res.git_commit == git(repo, "rev-parse", "HEAD").strip()
    assert git(repo, "log", "-1", "--format=%s").strip() == "self-improve(dev): revert #1"
    assert "Once." not in (repo / SELF).read_text()
