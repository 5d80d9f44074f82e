"""Node dispatch (issue 11, part 6; DESIGN §8.2): a detached side dialog with the node's
assignee, whose first message is the node's context and nothing else; the node waits
without parking the root, and the member's reply moves it in the reply's transaction and
leaves a note in the dialog that dispatched it."""

from __future__ import annotations

from pathlib import Path

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.testing import Failure, ScriptedModel, Turn, call
from mindloop.workspace.api import WorkspaceApi
from mindloop.workspace.commands import CriterionInput, DocInput
from mindloop.workspace.models import NodeKind, NodeStatus, RefAction
from mindloop.workspace.transitions import Authority
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"
DOC = {
    "docs/auth.md": "AUTH_BODY_71c: JWT tokens.\n",
    "docs/api.md": "API_BODY_2f9: POST /login.\n",
    "docs/db.md": "DB_BODY_88a: users table.\n",
    "docs/notes.md": "NOTES_BODY_3d0: old notes.\n",
}


def _setup(rtws: Path) -> WorkspaceApi:
    write_team(
        rtws, {"lead": {"toolsets": ["fs", "control", "workspace"]}, "bob": {"toolsets": ["fs"]}}
    )
    for rel, text in DOC.items():
        (rtws / rel).parent.mkdir(parents=True, exist_ok=True)
        (rtws / rel).write_text(text)
    api = WorkspaceApi(rtws, TASK)
    api.add_rule("RULE_5e1: use type hints everywhere")
    chat = Authority.chat("@lead")

    def build(s):  # type: ignore[no-untyped-def]
        s.create_node(
            parent_id="root",
            kind=NodeKind.PLANNING,
            title="Backend",
            requirement="b",
            docs=[DocInput("docs/db.md", "schema")],  # an ancestor's doc: never inherited
        )
        s.create_node(
            parent_id="n1",
            kind=NodeKind.EXECUTION,
            title="API",
            requirement="REQ_9b2: build POST /login",
            docs=[
                DocInput("docs/auth.md", "auth"),
                DocInput("docs/api.md", "api"),
                DocInput("docs/notes.md"),
            ],
            acceptance_criteria=[CriterionInput("POST /login", "200 and a token", "pytest")],
            assignee="MEMBER:bob",
        )
        s.reference(node_id="n2", target="docs/notes.md", action=RefAction.EXPIRE)

    api.command(build, authority=chat)
    return api


def _runtime(rtws: Path, model: ScriptedModel) -> DialogRuntime:
    return DialogRuntime(rtws, providers={"mock": model})


def _texts(rt: DialogRuntime, dialog_id: str) -> list[str]:
    return [
        str(m.data.get("text", m.data.get("content", ""))) for m in rt.store.load_history(dialog_id)
    ]


async def test_the_member_gets_exactly_the_nodes_context_and_its_reply_completes_it(
    rtws: Path,
) -> None:
    api = _setup(rtws)
    model = ScriptedModel(
        {
            "lead": [
                Turn(tool_calls=[call("node_dispatch", node_id="n2")]),
                Turn(text="Dispatched; waiting for bob."),
                Turn(text="Noted: the API is done."),
            ],
            "bob": [
                Turn(text="Implemented POST /login; AC1 passes (pytest).\nARTIFACT: src/login.py")
            ],
        }
    )
    rt = _runtime(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "give the API to bob", "lead")
    await Scheduler(rt).run()
    [bob_request] = [r for r in model.requests if r.member == "bob"]
    first = bob_request.messages[0].text  # type: ignore[union-attr]
    for needle in (
        "REQ_9b2",
        "AC1: WHEN POST /login THEN 200 and a token",
        "RULE_5e1",
        "AUTH_BODY_71c",
        "API_BODY_2f9",
        "BLOCKED:",
    ):
        assert needle in first, needle
    whole = bob_request.system + "\n".join(
        str(getattr(m, "text", "")) for m in bob_request.messages
    )
    assert "DB_BODY_88a" not in whole and "docs/db.md" not in whole  # the ancestor's doc
    assert "NOTES_BODY_3d0" not in whole and "docs/notes.md" not in whole  # expired
    assert "RULE_5e1" in bob_request.system  # rules bind every dialog of the task
    node = api.state().nodes["n2"]
    assert node.status is NodeStatus.COMPLETE and node.artifacts == ["src/login.py"]
    assert node.conclusion.startswith("Implemented POST /login") and node.dispatch is None
    assert [c.criterion for c in node.self_check] == ["AC1"]
    moves = [e.text for e in api.log() if e.node_id == "n2" and e.kind == "transition"]
    assert moves[-2].startswith("NEW → WAIT by RT") and moves[-1].startswith(
        "WAIT → COMPLETE by RT"
    )
    texts = _texts(rt, root.id)
    assert any("[workspace] Node n2 'API': WAIT → COMPLETE (reply of @bob)" in t for t in texts)
    assert any("[detached] @bob" in t for t in texts)
    assert texts[-1] == "Noted: the API is done."
    # the root was not parked: it answered before bob's reply came in
    assert texts.index("Dispatched; waiting for bob.") < next(
        i for i, t in enumerate(texts) if "[workspace] Node n2" in t
    )
    side = next(d for d in rt.store.list_dialogs(root_id=root.id) if d.kind == "side")
    assert side.member == "bob" and side.assignment["detached"]["payload"]["node_id"] == "n2"  # type: ignore[index]
    await rt.aclose()


async def test_a_member_lacking_information_fails_the_node_with_blockers(rtws: Path) -> None:
    api = _setup(rtws)
    model = ScriptedModel(
        {
            "lead": [
                Turn(tool_calls=[call("node_dispatch", node_id="n2")]),
                "ok",
                "I will add it.",
            ],
            "bob": [
                "I cannot finish.\nBLOCKED: the token lifetime\nBLOCKED: the user table schema"
            ],
        }
    )
    rt = _runtime(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "go", "lead")
    await Scheduler(rt).run()
    node = api.state().nodes["n2"]
    assert node.status is NodeStatus.CHECK_FAILED
    assert node.blockers == ["the token lifetime", "the user table schema"]
    assert any("WAIT → CHECK_FAILED (@bob blocked)" in t for t in _texts(rt, root.id))
    # back with the planner: it adds what is missing and dispatches again (ADJUSTING → WAIT)
    chat = Authority.chat("@lead")
    api.command(
        lambda s: s.transition(node_id="n2", to=NodeStatus.ADJUSTING, reason="adjust"),
        authority=chat,
    )
    api.command(
        lambda s: s.reference(node_id="n2", target="docs/db.md", action=RefAction.ADD),
        authority=chat,
    )
    model2 = ScriptedModel(
        {
            "lead": [Turn(tool_calls=[call("node_dispatch", node_id="n2")]), "ok", "done"],
            "bob": ["Done.\nNO_ARTIFACTS: reviewed only"],
        }
    )
    await rt.aclose()
    rt = _runtime(rtws, model2)
    rt.post_user_message(root.id, "again")
    await Scheduler(rt).run()
    node = api.state().nodes["n2"]
    assert node.status is NodeStatus.COMPLETE and node.adjust_count == 1 and node.blockers == []
    assert node.no_artifacts_reason == "reviewed only"
    [req] = [r for r in model2.requests if r.member == "bob"]
    assert "DB_BODY_88a" in req.messages[0].text  # type: ignore[union-attr]
    await rt.aclose()


async def test_a_failed_side_dialog_fails_the_node(rtws: Path) -> None:
    api = _setup(rtws)
    model = ScriptedModel(
        {
            "lead": [Turn(tool_calls=[call("node_dispatch", node_id="n2")]), "ok", "noted"],
            "bob": [Turn(error=Failure(message="model exploded", status=400))],
        }
    )
    rt = _runtime(rtws, model)
    _root, _ = rt.start_root_dialog(TASK, "go", "lead")
    await Scheduler(rt).run()
    node = api.state().nodes["n2"]
    assert node.status is NodeStatus.CHECK_FAILED and "model exploded" in node.blockers[0]
    await rt.aclose()


async def test_a_reply_for_a_node_that_no_longer_waits_is_only_logged(rtws: Path) -> None:
    api = _setup(rtws)
    model = ScriptedModel(
        {
            "lead": [Turn(tool_calls=[call("node_dispatch", node_id="n2")]), "ok", "noted"],
            "bob": ["Done."],
        }
    )
    rt = _runtime(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "go", "lead")
    await rt.drive(root.id)  # the root dispatches; bob has not answered yet
    assert api.state().nodes["n2"].status is NodeStatus.WAIT
    api.command(
        lambda s: s.transition(
            node_id="n2", to=NodeStatus.CANCELLED, reason="scope", conclusion="dropped"
        ),
        authority=Authority.chat("@lead"),
    )
    await Scheduler(rt).run()
    node = api.state().nodes["n2"]
    assert node.status is NodeStatus.CANCELLED and node.conclusion == "dropped"
    assert any(
        "which no longer waits on that dispatch (CANCELLED)" in t for t in _texts(rt, root.id)
    )
    await rt.aclose()


async def test_dispatch_refusals_start_nothing(rtws: Path) -> None:
    api = _setup(rtws)
    api.command(
        lambda s: s.create_node(
            parent_id="root", kind=NodeKind.EXECUTION, title="Later", requirement="x", deps=["n2"]
        ),
        authority=Authority.chat("@lead"),
    )
    model = ScriptedModel(
        {"lead": [Turn(tool_calls=[call("node_dispatch", node_id="n3", member="bob")]), "ok"]}
    )
    rt = _runtime(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "go", "lead")
    await Scheduler(rt).run()
    [result] = [m.data for m in rt.store.load_history(root.id) if m.kind == "tool_result"]
    assert result["is_error"] and result["content"].startswith(
        "NOT_READY: node_id: n3 waits for deps"
    )
    assert [d.kind for d in rt.store.list_dialogs(root_id=root.id)] == ["root"]
    assert api.state().nodes["n3"].status is NodeStatus.NEW
    await rt.aclose()
