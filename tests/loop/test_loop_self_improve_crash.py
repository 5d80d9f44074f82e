"""A `mindloop run TASK` killed in SELF_IMPROVE after `self_md_patch` changed self.md and
before the phase ended, then run again (issue 12, Tests: "a kill … with `mindloop run`
continuing correctly (no … outbox row … or self.md change lost or duplicated)").

Real processes: each `mindloop run` is the CLI in a child process, killed with
`MINDLOOP_TEST_CRASH_AT=<point>:<n>` (`os._exit` there: no cleanup, as SIGKILL) at a
point of the SELF_IMPROVE entry found by a counting run — just after `self_md_patch`
returned (self.md changed, its result not stored), just after `kb_request` returned, just
after the step with the KB request committed, just before `phase_end` runs, and just
before the entry's close commits. The model is a small agent behind the real wire
protocol (`ChatServer`) that repeats the calls a restart interrupted, as the runtime's
note asks. After `mindloop run TASK` (DONE) and `mindloop run` (the KB teammate's turn):
self.md holds the habit once, its history has one entry, the outbox one row, acknowledged,
and the KB dialog got the request once and answered it once.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from mindloop.store import Store
from mindloop.store import loop_state as ls
from mindloop.store.crash_points import CRASH_ENV, CRASH_EXIT_CODE
from mindloop.store.outbox import Outbox, OutboxStatus
from mindloop.testing.chat_server import KEY_ENV, PROVIDER, ChatServer, Reply
from mindloop.toolsets import self_md as sm
from mindloop.toolsets.self_md_doc import EMPTY_SHA256
from tests.scenario_util import ml

TASK = "tasks/example.tsk"
HABIT = "Run the tests before calling a node complete."
TOPIC = "testing habits"
PHASE_LINE = "# Work loop phase: "
INPUT = "[work loop] Phase SELF_IMPROVE"
INTERRUPTED = "[mindloop] this call was interrupted"
ENV = {KEY_ENV: "local-key"}
PATCH = (
    "self_md_patch",
    {
        "section": "Habits",
        "op": "append",
        "content": HABIT,
        "base_sha256": EMPTY_SHA256[:12],
        "rationale": "a node passed its check only on the second try",
    },
)
KB = ("kb_request", {"kind": "ADD", "topic": TOPIC, "content": "Run pytest -x before COMPLETE."})
END = (
    "phase_end",
    {"next_behavior": "END", "summary": {"progress": "a habit and a KB note"}, "reason": "done"},
)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def answer(body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
    """PLAN plans nothing; SELF_IMPROVE patches self.md, then asks the KB, then ends —
    repeating the calls of a step whose results a restart interrupted; anyone outside the
    loop (the KB teammate) files what it is sent."""
    msgs = body["messages"]
    system = next((_text(m["content"]) for m in msgs if m["role"] == "system"), "")
    phase = next(
        (ln.removeprefix(PHASE_LINE) for ln in system.splitlines() if ln.startswith(PHASE_LINE)),
        None,
    )
    if phase is None:
        return Reply(text="Filed under kb/testing.md.")
    if phase != "SELF_IMPROVE":
        return Reply(tool_calls=[END])
    start = max((i for i, m in enumerate(msgs) if INPUT in _text(m.get("content"))), default=0)
    entry = msgs[start:]
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    last: list[str] = []
    for m in entry:
        if m["role"] == "assistant" and m.get("tool_calls"):
            last = []
            for c in m["tool_calls"]:
                fn = c["function"]
                calls[c["id"]] = (fn["name"], json.loads(fn["arguments"] or "{}"))
                last.append(c["id"])
    results = {m["tool_call_id"]: _text(m["content"]) for m in entry if m["role"] == "tool"}
    if any(results.get(cid, "").startswith(INTERRUPTED) for cid in last):
        return Reply(tool_calls=[calls[cid] for cid in last])  # as the note asks: again
    done = {calls[cid][0] for cid, text in results.items() if cid in calls}
    if "self_md_patch" not in done:
        return Reply(tool_calls=[PATCH])
    if "kb_request" not in done:
        return Reply(tool_calls=[KB])
    return Reply(tool_calls=[END])


@pytest.fixture(scope="module")
def server() -> Iterator[ChatServer]:
    with ChatServer(answer, model="agent") as s:
        yield s


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, server: ChatServer) -> Path:
    root = tmp_path_factory.mktemp("tpl")
    proj = root / "proj"
    assert ml("init", str(proj), cwd=root).returncode == 0
    (proj / ".minds" / "llm.yaml").write_text(server.llm_yaml())
    team = proj / ".minds" / "team.yaml"
    text = team.read_text().replace("provider: mock", f"provider: {PROVIDER}")
    team.write_text(text.replace("model: mock-model", f"model: {server.model}"))
    return proj


def _points(tmp_path: Path, template: Path) -> list[tuple[str, int, str]]:
    """Every crash point an uninterrupted `run TASK` reaches, in order: (point, n, where)."""
    proj = tmp_path / "count"
    shutil.copytree(template, proj)
    log = tmp_path / "points.log"
    done = ml("run", TASK, "-m", "tidy up", "-C", str(proj), env={**ENV, CRASH_ENV: f"count:{log}"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    _check(proj)
    out = []
    for line in log.read_text().splitlines():
        point, n, where = line.split(" ", 2)
        out.append((point, int(n), where))
    return out


def _chosen(points: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """The kill points: after self_md_patch returned, up to the SELF_IMPROVE entry's close."""
    patched = next(
        i for i, p in enumerate(points) if p[0] == "tool.after" and p[2] == "self_md_patch"
    )
    asked = next(i for i, p in enumerate(points) if p[0] == "tool.after" and p[2] == "kb_request")
    step = next(i for i in range(asked, len(points)) if points[i][0] == "commit.after")
    ending = [i for i, p in enumerate(points) if p[0] == "tool.before" and p[2] == "phase_end"]
    # the commit that records phase_end's result, then the one that closes the entry
    ended = next(i for i in range(ending[-1], len(points)) if points[i][0] == "commit.after")
    closing = next(i for i in range(ended + 1, len(points)) if points[i][0] == "commit.before")
    picks = [patched, asked, step, ending[-1], closing]
    if os.environ.get("MINDLOOP_SELF_IMPROVE_CRASH_POINTS") == "all":
        picks = list(range(patched, closing + 1))
    assert picks == sorted(picks) and picks[-1] > picks[0], points
    return [points[i] for i in picks]


def _check(proj: Path) -> None:
    """The task DONE; self.md changed once; one outbox row; the KB processed it once
    (after `mindloop run` drove the KB dialog)."""
    text = sm.read_text(sm.self_md_path(proj, "dev"))
    assert text == f"## Habits\n{HABIT}\n", text
    history = sm.SelfMdFile(proj, "dev").history()
    assert [(e.status, e.content) for e in history] == [("applied", HABIT)], history
    store = Store.for_rtws(proj)
    try:
        state = ls.get(store, TASK)
        assert state is not None and state.status is ls.LoopStatus.DONE
        rows = Outbox(store).all()
        assert [(r.payload["topic"], r.source_member) for r in rows] == [(TOPIC, "dev")], rows
        [kb] = [d for d in store.list_dialogs() if d.member == "kb" and d.kind == "root"]
        history_kb = store.load_history(kb.id)
        asked = [m for m in history_kb if m.kind == "user"]
        said = [m for m in history_kb if m.kind == "assistant"]
        if said:  # `mindloop run` drove the KB dialog
            assert rows[0].status is OutboxStatus.ACKED
            assert len(said) == 1, said
        assert len(asked) == 1 and TOPIC in asked[0].data["text"]
    finally:
        store.close()


@pytest.mark.sqlite_only  # a copied rtws per trial: its state must live in it
def test_a_kill_in_self_improve_after_the_patch_then_run_again_loses_and_repeats_nothing(
    tmp_path: Path, template: Path
) -> None:
    chosen = _chosen(_points(tmp_path, template))
    assert len(chosen) >= 5
    for i, (point, n, where) in enumerate(chosen):
        proj = tmp_path / f"t{i}"
        shutil.copytree(template, proj)
        at = f"after a kill at {point}:{n} ({where})"
        killed = ml(
            "run", TASK, "-m", "tidy up", "-C", str(proj), env={**ENV, CRASH_ENV: f"{point}:{n}"}
        )
        assert killed.returncode == CRASH_EXIT_CODE, (at, killed.stdout[-2000:], killed.stderr)
        # self.md was changed before the kill, whatever the store kept
        assert HABIT in sm.read_text(sm.self_md_path(proj, "dev")), at
        again = ml("run", TASK, "-C", str(proj), env=ENV)
        assert again.returncode == 0, (at, again.stdout[-3000:], again.stderr)
        assert "task tasks/example.tsk: done" in again.stdout, (at, again.stdout[-3000:])
        everything = ml("run", "-C", str(proj), env=ENV)  # the KB teammate's turn
        assert everything.returncode == 0, (at, everything.stdout[-3000:], everything.stderr)
        try:
            _check(proj)
        except AssertionError as exc:
            raise AssertionError(f"{at}: {exc}") from exc
        store = Store.for_rtws(proj)
        try:
            [kb] = [d for d in store.list_dialogs() if d.member == "kb" and d.kind == "root"]
            said = [m for m in store.load_history(kb.id) if m.kind == "assistant"]
            assert len(said) == 1, at  # the KB's model answered once
        finally:
            store.close()


def _count(proj: Path, tmp: Path, *args: str) -> list[tuple[str, int, str]]:
    """The crash points `mindloop <args>` reaches on a copy of `proj`."""
    copy = tmp / f"count-{len(list(tmp.iterdir()))}"
    shutil.copytree(proj, copy)
    log = tmp / f"{copy.name}.log"
    done = ml(*args, "-C", str(copy), env={**ENV, CRASH_ENV: f"count:{log}"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    return [
        (p, int(n), where)
        for p, n, where in (ln.split(" ", 2) for ln in log.read_text().splitlines())
    ]


def _statuses(proj: Path) -> list[tuple[str, int | None]]:
    return [(e.status, e.proposal_seq) for e in sm.SelfMdFile(proj, "dev").history()]


@pytest.mark.sqlite_only
def test_with_approval_a_kill_after_the_proposal_and_one_in_approve_apply_it_once(
    tmp_path: Path, template: Path
) -> None:
    """`loop.self_md.require_approval`: `run TASK` killed just after `self_md_patch`
    proposed (history written, the approval not yet stored), run again: one proposal,
    one open approval, the task DONE (exit 0). `approve` killed after it applied the
    change and before it recorded the decision, run again: applied once, decided once."""
    proj = tmp_path / "proj"
    shutil.copytree(template, proj)
    team = proj / ".minds" / "team.yaml"
    team.write_text(team.read_text() + "loop:\n  self_md: {require_approval: true}\n")
    points = _count(proj, tmp_path, "run", TASK, "-m", "tidy up")
    [(point, n, _)] = [p for p in points if p[0] == "tool.after" and p[2] == "self_md_patch"]
    killed = ml(
        "run", TASK, "-m", "tidy up", "-C", str(proj), env={**ENV, CRASH_ENV: f"{point}:{n}"}
    )
    assert killed.returncode == CRASH_EXIT_CODE, killed.stdout[-2000:] + killed.stderr
    assert _statuses(proj) == [("proposed", None)]
    again = ml("run", TASK, "-C", str(proj), env=ENV)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr
    assert "task tasks/example.tsk: done" in again.stdout
    assert _statuses(proj) == [("proposed", None)]  # the repeated call named it again
    [item] = json.loads(ml("questions", "--json", "-C", str(proj), env=ENV).stdout)
    [proposal] = sm.SelfMdFile(proj, "dev").history()
    assert item["id"] == proposal.approval_id
    assert not sm.self_md_path(proj, "dev").exists()

    points = _count(proj, tmp_path, "approve", item["id"], "--no-drive")
    decided = [p for p in points if p[2] == "dialogs.approvals._decide_proposal"]
    assert decided and decided[0][0] == "commit.before", points
    point, n, _ = decided[0]
    killed = ml(
        "approve", item["id"], "--no-drive", "-C", str(proj), env={**ENV, CRASH_ENV: f"{point}:{n}"}
    )
    assert killed.returncode == CRASH_EXIT_CODE, killed.stdout[-2000:] + killed.stderr
    assert sm.read_text(sm.self_md_path(proj, "dev")) == f"## Habits\n{HABIT}\n"  # applied
    refused = ml("reject", item["id"], "--reason", "changed my mind", "-C", str(proj), env=ENV)
    assert refused.returncode == 1 and "already applied" in refused.stderr, refused.stderr
    done = ml("approve", item["id"], "-C", str(proj), env=ENV)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert _statuses(proj) == [("proposed", None), ("applied", 1)]
    assert sm.read_text(sm.self_md_path(proj, "dev")) == f"## Habits\n{HABIT}\n"
    assert json.loads(ml("questions", "--json", "-C", str(proj), env=ENV).stdout) == []
