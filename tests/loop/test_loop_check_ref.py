"""The workspace ref a CHECK entry's nodes pass at (`loop.check_ref`): the ref its input
showed when the entry did nothing that could change the files (only store-only tools, no
tellask), the ref at its close otherwise."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop import check_ref
from mindloop.loop.driver import LoopOutcome
from mindloop.memory.workspace_summary import workspace_summary
from mindloop.providers.base import GenerationRequest
from mindloop.store import MessageRecord
from mindloop.store import loop_state as ls
from mindloop.testing import FunctionModel, ScriptedModel, Turn, call
from mindloop.workspace.ref import workspace_ref
from tests.loop.loop_util import TASK, complete, create, end, phase_of, run_task, turn, verdict
from tests.scenario_util import write_team

# the node's criterion is verified with a command that writes a file (CHECK may run it)
VERIFY = "echo checked > report.txt"


async def _run(rtws: Path, check: list[tuple[Turn, Callable[[], None] | None]]) -> Any:
    """PLAN one node, DO it, then CHECK it with the `check` turns (each with what happens
    before it is answered); the run's runtime, and the ref the CHECK input showed."""
    write_team(rtws, {"dev": {"toolsets": ["fs", "shell"]}})
    shown: list[str] = []
    script: deque[tuple[Turn, Callable[[], None] | None]] = deque(
        [
            (turn(create("a", verify=VERIFY), end("DO")), None),
            (turn(complete("n1"), end("CHECK")), None),
            *check,
        ]
    )

    def respond(req: GenerationRequest) -> Turn:
        if phase_of(req) == "SELF_IMPROVE":
            return turn(end("END", "reviewed"))
        if phase_of(req) == "CHECK" and not shown:  # nothing changed since the entry
            shown.append(workspace_ref(rtws))
        t, before = script.popleft()
        if before is not None:
            before()
        return t

    report, rt = await run_task(rtws, FunctionModel(respond), "make a")
    assert report.outcome is LoopOutcome.DONE and not script, report.reason
    return rt, report.root_id, shown[0]


async def test_a_check_entry_of_store_only_calls_passes_its_nodes_at_the_ref_it_showed(
    rtws: Path,
) -> None:
    # A file changed from outside the entry while it ran (here: before its one step) is
    # taken as changed just after its close: the pass is recorded at the ref the entry
    # showed, and the next look at the ref sees the change.
    def edit() -> None:
        (rtws / "notes.txt").write_text("written by someone else\n")

    rt, root, shown = await _run(rtws, [(turn(verdict("n1"), end("END")), edit)])
    try:
        assert ls.checks(rt.store, root)["n1"][1] == shown != workspace_ref(rtws)
        summary = workspace_summary(rt.store, TASK)
        assert summary is not None and summary.checked_ref == shown
    finally:
        await rt.aclose()


async def test_a_check_entry_that_acted_outside_the_store_passes_its_nodes_at_the_ref_then(
    rtws: Path,
) -> None:
    verify = call("run_shell", command=VERIFY)
    rt, root, shown = await _run(
        rtws, [(turn(verify), None), (turn(verdict("n1"), end("END")), None)]
    )
    try:
        assert (rtws / "report.txt").read_text() == "checked\n"
        now = workspace_ref(rtws)
        assert ls.checks(rt.store, root)["n1"][1] == now != shown
        summary = workspace_summary(rt.store, TASK)
        assert summary is not None and summary.checked_ref == now
    finally:
        await rt.aclose()


def _message(kind: str, **data: Any) -> MessageRecord:
    return MessageRecord(dialog_id="d", kind=kind, data=data)  # type: ignore[arg-type]


STORE_ONLY = [
    _message("assistant", text="checking"),
    _message("tool_call", id="c1", name="node_transition", arguments="{}"),
    _message("tool_result", call_id="c1", name="node_transition", content="ok"),
    _message("note", text="[mindloop] a note"),
]


@pytest.mark.parametrize(
    ("extra", "course", "takes_it"),
    [
        ([], 1, True),
        ([_message("tool_call", id="c2", name="write_file", arguments="{}")], 1, False),
        ([_message("tool_result", call_id="c2", name="write_file", content="ok")], 1, False),
        ([_message("tool_call", id="c2", name="no_such_tool", arguments="{}")], 1, False),
        ([_message("assistant", text="!?@dev run the tests\n")], 1, False),
        ([_message("tellask_result", text="done")], 1, False),
        ([], 2, False),  # the course changed: the entry's first messages are not these
    ],
)
async def test_the_close_takes_the_shown_ref_only_when_the_entry_cannot_have_changed_files(
    rtws: Path, extra: list[MessageRecord], course: int, takes_it: bool
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs", "workspace"]}})
    rt = DialogRuntime(rtws, providers={"mock": ScriptedModel([])})
    try:
        root = rt.create_root_dialog(TASK, "dev")
        entry_input = rt.store.append_message(root.id, "user", {"text": "CHECK"}, course=1)
        check_ref.hold(rt.store, TASK, entry_input, "tree:shown")  # no transaction: kept now
        state = ls.LoopState(
            task_id="t", task_path=TASK, root_id=root.id, entry_message_id=entry_input.id
        )
        found = check_ref.at_close(rt, state, course, [*STORE_ONLY, *extra])
        assert found == ("tree:shown" if takes_it else None)
        other = state.model_copy(update={"entry_message_id": entry_input.id + 1})
        assert check_ref.at_close(rt, other, course, STORE_ONLY) is None  # another entry
    finally:
        await rt.aclose()


# ---------------------------------------------------------------- DO's ref carried to CHECK


async def _shown_at_check(rtws: Path, *do_steps: Turn) -> tuple[str, str, str]:
    """PLAN one node, DO it with `do_steps` (which complete it), CHECK it: the ref the
    CHECK input showed, the node's checkpoint ref and the ref when CHECK was asked."""
    write_team(rtws, {"dev": {"toolsets": ["fs", "shell"]}})
    seen: list[tuple[str, str]] = []
    script = deque([turn(create("a"), end("DO")), *do_steps, turn(verdict("n1"), end("END"))])

    def respond(req: GenerationRequest) -> Turn:
        if phase_of(req) == "SELF_IMPROVE":
            return turn(end("END", "reviewed"))
        if phase_of(req) == "CHECK" and not seen:
            text = str(getattr(req.messages[-1], "text", ""))
            line = next(x for x in text.splitlines() if x.startswith("workspace ref: "))
            seen.append((line.removeprefix("workspace ref: "), workspace_ref(rtws)))
        return script.popleft()

    report, rt = await run_task(rtws, FunctionModel(respond), "make a")
    try:
        assert report.outcome is LoopOutcome.DONE and not script, report.reason
        checkpoint = repo_node(rt, "n1").checkpoint_ref
        assert checkpoint is not None
        return seen[0][0], checkpoint, seen[0][1]
    finally:
        await rt.aclose()


def repo_node(rt: DialogRuntime, node: str) -> Any:
    from mindloop.workspace import repo

    return repo.load(rt.store, TASK).nodes[node]


async def test_a_check_entry_after_a_store_only_complete_shows_the_ref_of_the_complete(
    rtws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindloop.loop import phase_ops

    computed: list[Path] = []  # refs the loop computed itself (not the tools)

    def counted(at: Path) -> str:
        computed.append(at)
        return workspace_ref(at)

    monkeypatch.setattr(phase_ops, "workspace_ref", counted)
    shown, checkpoint, now = await _shown_at_check(rtws, turn(complete("n1"), end("CHECK")))
    assert shown == checkpoint == now
    assert computed == []  # carried from the COMPLETE, not computed again


async def test_a_check_entry_after_a_file_write_since_the_complete_shows_the_ref_now(
    rtws: Path,
) -> None:
    write = call("write_file", path="out.txt", content="made\n")
    shown, checkpoint, now = await _shown_at_check(
        rtws, turn(complete("n1")), turn(write, end("CHECK"))
    )
    assert (rtws / "out.txt").exists()
    assert shown == now != checkpoint  # computed again, not carried


def _do_state(rt: DialogRuntime, root: str) -> ls.LoopState:
    return ls.LoopState(task_id="t", task_path=TASK, root_id=root, phase=ls.Phase.DO, node_id="n1")


COMPLETE_ARGS = '{"node_id": "n1", "to": "COMPLETE", "reason": "ok"}'


def _complete_step(ok: bool = True, *also: MessageRecord) -> list[MessageRecord]:
    return [
        _message("assistant", text=""),
        _message("tool_call", id="k1", name="node_transition", arguments=COMPLETE_ARGS),
        *(m for m in also if m.kind == "tool_call"),
        _message("tool_call", id="k2", name="phase_end", arguments="{}"),
        _message("tool_result", call_id="k1", name="node_transition", content="", is_error=not ok),
        *(m for m in also if m.kind != "tool_call"),
        _message("tool_result", call_id="k2", name="phase_end", content="Phase ended"),
    ]


WRITE_CALL = _message("tool_call", id="w", name="write_file", arguments="{}")
WRITE_RESULT = _message("tool_result", call_id="w", name="write_file", content="ok")


@pytest.mark.parametrize(
    ("messages", "takes_it"),
    [
        (_complete_step(), True),
        ([_message("assistant", text=""), WRITE_CALL, WRITE_RESULT, *_complete_step()], True),
        (_complete_step(True, WRITE_CALL, WRITE_RESULT), False),  # the same step wrote
        ([*_complete_step(), _message("assistant", text=""), WRITE_CALL, WRITE_RESULT], False),
        (_complete_step(False), False),  # the transition failed: not this entry's ref
        ([*_complete_step(), _message("assistant", text="!?@dev look\n")], False),
        ([*_complete_step(), _message("tellask_result", text="done")], False),
        ([_message("assistant", text=""), WRITE_CALL, WRITE_RESULT], False),  # no COMPLETE
    ],
)
async def test_a_do_entry_hands_its_complete_ref_on_only_when_nothing_since_changed_files(
    rtws: Path, messages: list[MessageRecord], takes_it: bool
) -> None:
    from mindloop.workspace import api
    from mindloop.workspace.commands import Session
    from mindloop.workspace.models import NodeKind, NodeStatus
    from mindloop.workspace.transitions import Actor, Authority

    write_team(rtws, {"dev": {"toolsets": ["fs", "workspace"]}})
    rt = DialogRuntime(rtws, providers={"mock": ScriptedModel([])})
    try:
        root = rt.create_root_dialog(TASK, "dev")

        def plan(s: Session) -> None:
            s.create_node(parent_id="root", kind=NodeKind.EXECUTION, title="a", requirement="r")

        def work(s: Session) -> None:
            s.transition(node_id="n1", to=NodeStatus.IN_PROGRESS, reason="go")
            s.transition(
                node_id="n1",
                to=NodeStatus.COMPLETE,
                reason="done",
                self_check=[],
                no_artifacts_reason="none",
                workspace_ref="tree:at-complete",
            )

        api.execute(rt.store, rtws, TASK, Authority.phase(Actor.PLAN, "@dev"), plan)
        authority = Authority(actors=frozenset({Actor.RT, Actor.DO}), who="@dev")
        _, change = api.execute(rt.store, rtws, TASK, authority, work)
        ws = change.after
        found = check_ref.after_do(rt, _do_state(rt, root.id), messages, ws)
        assert found == ("tree:at-complete" if takes_it else None)
        other = ls.LoopState(
            task_id="t", task_path=TASK, root_id=root.id, phase=ls.Phase.DO, node_id="n2"
        )
        assert check_ref.after_do(rt, other, _complete_step(), ws) is None  # another node
    finally:
        await rt.aclose()
