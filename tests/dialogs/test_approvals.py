"""Approvals (issue 12 part 4, DESIGN §8.10): a call of a tool named in the member's
`approval_required` is not run but waits, as a WAIT_USER_APPROVAL record holding the exact
arguments and their digest; approve runs exactly that call (digest checked), reject gives
the model the reason; nothing decides it but approve / reject. A kill at any point of
that — registering, deciding, running the approved call — loses and duplicates nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from pydantic import BaseModel

from mindloop.dialogs.approvals import ApprovalError, args_digest
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.dialogs.wait_kinds import WaitKind, WaitOutcome
from mindloop.errors import MindloopError
from mindloop.events.types import ApprovalRequested, ApprovalResolved, Event
from mindloop.providers.base import GenerationRequest, ToolResultMessage, UserMessage
from mindloop.store import Store, WaitStatus
from mindloop.store import schema as t
from mindloop.store.location import database_url
from mindloop.store.postgres import engine_url
from mindloop.testing import FunctionModel, ScriptedModel, Turn, TurnLike, call
from mindloop.tools.base import StoreEffect, Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs
from mindloop.toolsets import standard_registry
from tests.dialogs.crash_points import CrashingStore, process_died
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"
RUNS = "deploy-runs.txt"  # every execution of the tool appends a line: at-least-once shows


class DeployArgs(ToolArgs):
    env: str


async def _deploy(args: DeployArgs, ctx: ToolContext) -> ToolOutput:
    with (ctx.rtws / RUNS).open("a") as fh:
        fh.write(f"{args.env}\n")

    def record(store: Store) -> None:  # keyed by the call: a re-run records nothing twice
        store.record_event("deployed", ctx.dialog_id, {"env": args.env, "key": ctx.call_key})

    return ToolOutput(f"deployed to {args.env}", effects=(StoreEffect(record, "deploy"),))


def _registry() -> object:
    reg = standard_registry()
    reg.add_toolset("ops", [Tool[BaseModel]("deploy", "Deploy.", DeployArgs, _deploy)])  # type: ignore[arg-type]
    return reg


def _team(rtws: Path, approval: list[str] | None = None) -> None:
    write_team(
        rtws,
        {"dev": {"toolsets": ["ops", "fs"], "approval_required": approval or ["deploy"]}},
    )


def _rt(rtws: Path, model: object, store: Store | None = None) -> DialogRuntime:
    return DialogRuntime(rtws, providers={"mock": model}, tools=_registry(), store=store)  # type: ignore[arg-type]


def _deployed(store: Store) -> list[dict[str, str]]:
    return [e["data"] for e in store.events() if e["type"] == "deployed"]


def _runs(rtws: Path) -> list[str]:
    path = rtws / RUNS
    return path.read_text().splitlines() if path.exists() else []


def _said(rt: DialogRuntime, did: str) -> list[str]:
    return [m.data["text"] for m in rt.store.load_history(did) if m.kind == "assistant"]


def _notes(rt: DialogRuntime, did: str) -> list[str]:
    return [m.data["text"] for m in rt.store.load_history(did) if m.kind == "note"]


def _deploy_then_report() -> ScriptedModel:
    return ScriptedModel([Turn(tool_calls=[call("deploy", env="prod")]), "deploy reported"])


async def test_an_approved_call_runs_with_exactly_the_approved_arguments(rtws: Path) -> None:
    _team(rtws)
    model = _deploy_then_report()
    rt = _rt(rtws, model)
    heard: list[Event] = []
    rt.bus.subscribe(heard.append)
    root, _ = rt.start_root_dialog(TASK, "ship it", "dev")
    assert (await rt.drive(root.id)).reason == "waiting"
    assert _runs(rtws) == [] and _deployed(rt.store) == []  # not run
    [result] = [m.data for m in rt.store.load_history(root.id) if m.kind == "tool_result"]
    [view] = rt.pending_approvals()
    assert view.id.startswith("apv-") and view.id in result["content"]
    assert "needs the human's approval" in result["content"] and not result["is_error"]
    assert (view.member, view.tool, view.toolset) == ("dev", "deploy", "ops")
    assert view.arguments == '{"env": "prod"}'
    assert view.args_digest == args_digest("deploy", '{"env": "prod"}')
    assert view.summary == 'deploy(env="prod")'
    [asked] = [e for e in heard if isinstance(e, ApprovalRequested)]
    assert (asked.approval_id, asked.args_digest) == (view.id, view.args_digest)
    wait = rt.store.get_wait(view.id)
    assert (wait.kind, wait.blocks, wait.due_at) == (
        WaitKind.APPROVAL,
        True,
        pytest.approx(wait.created_at + 72 * 3600),
    )
    assert await Scheduler(rt).run() == []  # parked until decided

    rt.approve(view.id, by="ops-lead", expected_digest=view.args_digest)
    await Scheduler(rt).run()
    [deployed] = _deployed(rt.store)
    assert deployed["env"] == "prod" and deployed["key"] == wait.payload["call_key"]
    assert _runs(rtws) == ["prod"]
    [note] = _notes(rt, root.id)
    assert note.startswith(f'[mindloop] The human approved deploy(env="prod") (approval {view.id})')
    assert "exactly the approved arguments" in note and note.endswith("deployed to prod")
    assert _said(rt, root.id)[-1] == "deploy reported"
    closed = rt.store.get_wait(view.id)
    assert closed.resolution is not None
    assert (closed.status, closed.resolution["outcome"], closed.resolution["by"]) == (
        WaitStatus.RESOLVED,
        WaitOutcome.OK,
        "ops-lead",
    )
    assert [e.decision for e in heard if isinstance(e, ApprovalResolved)] == ["approve"]
    with pytest.raises(ApprovalError, match="already closed"):
        rt.approve(view.id)
    assert rt.pending_approvals() == [] and model.remaining == 0
    await rt.aclose()


def _outside(rtws: Path) -> sa.Engine:
    """The rtws's database, opened apart from the runtime's store (SQLite or PostgreSQL)."""
    url = database_url()
    if url is None:
        return sa.create_engine(f"sqlite:///{rtws / '.mindloop' / 'state.sqlite'}")
    return sa.create_engine(engine_url(url))


async def test_a_tampered_record_is_refused_by_its_digest(rtws: Path) -> None:
    _team(rtws)
    rt = _rt(rtws, _deploy_then_report())
    root, _ = rt.start_root_dialog(TASK, "ship it", "dev")
    await rt.drive(root.id)
    [view] = rt.pending_approvals()
    db = _outside(rtws)  # another writer than the runtime, on its database
    w = t.waits.c
    with db.begin() as c:
        payload = dict(c.execute(sa.select(w.payload).where(w.id == view.id)).scalar_one())
        payload["arguments"] = '{"env": "everywhere"}'
        c.execute(sa.update(t.waits).where(w.id == view.id).values(payload=payload))
    with pytest.raises(ApprovalError, match="no longer match their digest"):
        rt.approve(view.id)
    assert rt.store.get_wait(view.id).status is WaitStatus.OPEN  # nothing was decided
    payload["arguments"] = view.arguments  # put back: now the human's digest is checked
    with db.begin() as c:
        c.execute(sa.update(t.waits).where(w.id == view.id).values(payload=payload))
    with pytest.raises(ApprovalError, match="is not that of the call waiting"):
        rt.approve(view.id, expected_digest=args_digest("deploy", '{"env": "staging"}'))
    rt.approve(view.id)
    # The approved call queued for the drive is changed before it runs: refused too.
    r = t.responses.c
    with db.begin() as c:
        rid, data = c.execute(sa.select(r.id, r.data).where(r.delivered.is_(False))).one()
        data = dict(data)
        data["arguments"] = '{"env": "everywhere"}'
        data["digest"] = args_digest("deploy", data["arguments"])
        c.execute(sa.update(t.responses).where(r.id == rid).values(data=data))
    db.dispose()
    await Scheduler(rt).run()
    assert _runs(rtws) == [] and _deployed(rt.store) == []
    assert "does not match the digest" in _notes(rt, root.id)[0]
    await rt.aclose()


async def test_a_rejected_call_never_runs_and_the_model_reads_why(rtws: Path) -> None:
    _team(rtws)
    model = ScriptedModel([Turn(tool_calls=[call("deploy", env="prod")]), "ok, not deploying"])
    rt = _rt(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "ship it", "dev")
    await rt.drive(root.id)
    [view] = rt.pending_approvals()
    with pytest.raises(ApprovalError, match="needs a reason"):
        rt.reject(view.id, "  ")
    rt.reject(view.id, "prod is frozen this week")
    await Scheduler(rt).run()
    assert _runs(rtws) == [] and _deployed(rt.store) == []
    assert _notes(rt, root.id) == [
        f'[mindloop] The human rejected deploy(env="prod") (approval {view.id}); it did not '
        "run. Reason: prod is frozen this week"
    ]
    closed = rt.store.get_wait(view.id)
    assert closed.resolution is not None and closed.resolution["outcome"] == WaitOutcome.REJECTED
    assert _said(rt, root.id)[-1] == "ok, not deploying"
    await rt.aclose()


async def test_an_edit_runs_the_humans_arguments_instead(rtws: Path) -> None:
    _team(rtws)
    rt = _rt(rtws, _deploy_then_report())
    root, _ = rt.start_root_dialog(TASK, "ship it", "dev")
    await rt.drive(root.id)
    [view] = rt.pending_approvals()
    for bad in ("not json", "[1, 2]"):
        with pytest.raises(ApprovalError, match="edited arguments"):
            rt.approve(view.id, edited_args=bad)
    rt.approve(view.id, edited_args='{"env": "staging"}')
    await Scheduler(rt).run()
    assert [d["env"] for d in _deployed(rt.store)] == ["staging"]
    assert "with the arguments the human edited" in _notes(rt, root.id)[0]
    await rt.aclose()


async def test_a_toolset_name_requires_approval_for_each_of_its_tools(rtws: Path) -> None:
    _team(rtws, approval=["fs"])
    model = ScriptedModel(
        [
            Turn(
                tool_calls=[
                    call("deploy", env="dev"),
                    call("write_file", path="a.txt", content="x"),
                ]
            ),
            "done",
        ]
    )
    rt = _rt(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    assert (await rt.drive(root.id)).reason == "waiting"
    assert _runs(rtws) == ["dev"]  # not in the list: ran at once
    [view] = rt.pending_approvals()
    assert (view.tool, view.toolset) == ("write_file", "fs")
    assert not (rtws / "a.txt").exists()
    rt.approve(view.id)
    await Scheduler(rt).run()
    assert (rtws / "a.txt").read_text() == "x"
    await rt.aclose()


async def test_an_approval_is_never_answered_as_a_question(rtws: Path) -> None:
    _team(rtws)
    rt = _rt(rtws, _deploy_then_report())
    root, _ = rt.start_root_dialog(TASK, "ship it", "dev")
    await rt.drive(root.id)
    [view] = rt.pending_approvals()
    with pytest.raises(MindloopError, match=f"mindloop approve {view.id}`.*mindloop reject"):
        rt.answer_question(view.id, "yes, go")
    with pytest.raises(MindloopError, match="approve / reject"):
        rt.resolve_wait(view.id, {"by": "free text"})
    assert rt.store.get_wait(view.id).status is WaitStatus.OPEN
    await rt.aclose()


async def test_no_approval_config_adds_no_statement_to_a_step(rtws: Path) -> None:
    """The approval check is in memory: a dialog whose member requires approvals for
    other tools runs exactly the statements of one whose member requires none."""
    counts = []
    for approval in ([], ["write_file"]):
        write_team(rtws, {"dev": {"toolsets": ["ops", "fs"], "approval_required": approval}})
        model = ScriptedModel([Turn(tool_calls=[call("deploy", env="x")]), "done"])
        rt = _rt(rtws, model)
        root, _ = rt.start_root_dialog(TASK, "go", "dev")
        before = rt.store.stats.statements
        await rt.drive(root.id)
        counts.append(rt.store.stats.statements - before)
        await rt.aclose()
    assert counts[0] == counts[1]


# ---------------------------------------------------------------------- crashes


def _model() -> FunctionModel:
    """Deploys; after an interrupted call, deploys again; reports once it reads the
    approved call's result."""

    def respond(req: GenerationRequest) -> TurnLike:
        last = req.messages[-1]
        if isinstance(last, UserMessage) and "The human approved" in last.text:
            return "deploy reported"
        if isinstance(last, ToolResultMessage) and "interrupted" in last.content:
            return Turn(tool_calls=[call("deploy", env="prod")])
        if isinstance(last, UserMessage) and last.text == "ship it":
            return Turn(tool_calls=[call("deploy", env="prod")])
        return f"unexpected: {last}"

    return FunctionModel(respond)


@pytest.mark.parametrize(
    ("point", "after", "runs"),
    [
        ("wait_opened:approval", False, 1),  # the registering step never committed
        ("wait_opened:approval", True, 1),  # parked on the approval
        ("wait_resolved:approval", False, 1),  # killed while approving: nothing decided
        ("wait_resolved:approval", True, 1),  # decided, the call not run yet
        ("deployed", False, 2),  # killed while the approved call ran: it runs again
        ("deployed", True, 1),  # its result committed; killed before the next step
    ],
)
async def test_a_kill_while_parked_on_an_approval_loses_and_duplicates_nothing(
    rtws: Path, point: str, after: bool, runs: int
) -> None:
    _team(rtws)
    state = rtws / ".mindloop" / "state.sqlite"
    rt = _rt(rtws, _model(), store=CrashingStore(state, point, after))
    root, _ = rt.start_root_dialog(TASK, "ship it", "dev")
    decided = False
    with pytest.raises(SystemExit):  # drives in this task: the kill reaches the test
        await rt.drive(root.id)
        [view] = rt.pending_approvals()
        decided = True
        rt.approve(view.id)
        await rt.drive(root.id)
    await rt.aclose()

    rt = _rt(rtws, _model())  # a new process: `mindloop run`, then approve if asked
    process_died(rt)
    await Scheduler(rt).run()
    pending = rt.pending_approvals()
    if pending:
        assert not (decided and point == "wait_resolved:approval" and after)
        [view] = pending
        rt.approve(view.id)
        await Scheduler(rt).run()
    assert rt.pending_approvals() == []
    assert [d["env"] for d in _deployed(rt.store)] == ["prod"]  # recorded once
    assert _runs(rtws) == ["prod"] * runs  # at-least-once: re-run only when cut off mid-run
    approved = [n for n in _notes(rt, root.id) if "The human approved" in n]
    assert len(approved) == 1
    assert _said(rt, root.id).count("deploy reported") == 1
    assert rt.store.undelivered_responses(root.id) == []
    waits = [w for w in (rt.store.open_waits(root.id))]
    assert waits == []
    await rt.aclose()
