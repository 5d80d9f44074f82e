"""`kb_request` sends nothing: it answers QUEUED with a store effect that inserts one
outbox row (in the transaction of its result), keyed by the call so a replayed call
queues once, with an idempotency key that names the request whatever its whitespace."""

from __future__ import annotations

import json
from pathlib import Path

from mindloop.config.loop_kb import KbConfig
from mindloop.store import Store
from mindloop.store.outbox import Outbox, OutboxStatus
from mindloop.tools.base import StoreEffect, ToolContext, ToolOutput, call_key
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets.self_improve import kb_idempotency_key, kb_request_tool


async def _ask(ctx: ToolContext, config: KbConfig | None = None, **args: object) -> ToolOutput:
    reg = ToolRegistry()
    reg.add_toolset("s", [kb_request_tool(config or KbConfig())], loop_owned=True)
    args = {"kind": "ADD", "topic": "Tests", "content": "Run pytest -x.", **args}
    return await reg.execute("kb_request", json.dumps(args), ctx)


def _ctx(tmp_path: Path, n: int = 0) -> ToolContext:
    return ToolContext(
        rtws=tmp_path,
        member="dev",
        dialog_id="d1",
        call_key=call_key("d1", 1, n),
        task_path="tasks/t.tsk",
    )


async def test_a_request_is_a_row_queued_with_the_result(tmp_path: Path) -> None:
    out = await _ask(_ctx(tmp_path), evidence_refs=["worklog:3"])
    reply = json.loads(out.text)
    assert not out.is_error and reply["result"] == "QUEUED" and reply["to"] == "kb"
    (effect,) = out.effects
    assert isinstance(effect, StoreEffect)
    store = Store(tmp_path / "state.sqlite")
    assert Outbox(store).all() == []  # nothing is written before the engine commits it
    with store.tx():
        effect.apply(store)
        effect.apply(store)  # a replayed call: same call key, one row
    (row,) = Outbox(store).all()
    assert row.id == reply["msg_id"] and row.idempotency_key == reply["idempotency_key"]
    assert row.status is OutboxStatus.PENDING and row.next_attempt_at == row.created_at
    assert (row.source_member, row.source_dialog, row.task_path) == ("dev", "d1", "tasks/t.tsk")
    assert row.payload == {
        "kind": "ADD",
        "topic": "Tests",
        "content": "Run pytest -x.",
        "evidence_refs": ["worklog:3"],
        "privacy_asserted": "no_pii_no_secrets",
    }
    store.close()


async def test_the_same_request_has_the_same_key() -> None:
    one = kb_idempotency_key("dev", "ADD", "Tests", "Run  pytest\n-x.")
    assert one == kb_idempotency_key("dev", "ADD", " tests ", "Run pytest -x.")
    assert one != kb_idempotency_key("ann", "ADD", "Tests", "Run pytest -x.")
    assert one != kb_idempotency_key("dev", "GAP", "Tests", "Run pytest -x.")


async def test_private_empty_or_oversized_requests_are_refused(tmp_path: Path) -> None:
    cases = [
        ({"content": "ask bob@example.org"}, "PRIVACY"),
        ({"content": "  "}, "FORMAT"),
        ({"content": "x" * 41}, "TOO_LARGE"),
    ]
    for args, reason in cases:
        out = await _ask(_ctx(tmp_path), KbConfig(max_content_tokens=10), **args)
        assert out.is_error and json.loads(out.text)["reason"] == reason, args
        assert out.effects == ()
