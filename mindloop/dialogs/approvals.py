"""Approvals: calls that wait for the human's decision before they run (DESIGN §8.10).

Which calls need one is configured per member (`approval_required:` tool or toolset names
in team.yaml). Such a call is not run: its result says it waits, and an approval wait
record (`WaitKind.APPROVAL`, agent-loop's WAIT_USER_APPROVAL) is registered in the
step's transaction with the exact arguments the model wrote and their digest; the
dialog parks (a workspace node's call: the node waits instead, `Waits.open`). Only a
structured decision answers it (`Approvals.decide`, behind `mindloop approve|reject`,
the Python API and the web UI) — never free text:

- approve: the digest is checked against the stored arguments, the wait resolved, and the
  call queued in the dialog's inbox (`APPROVED`), in one transaction. The dialog's next
  drive runs exactly that call (a node's call: the next drive or work-loop segment that
  works that node, `LiveDialog.node`), with the call's own key (tools are at-least-once
  and key their effects by it), and the result reaches the model as a note, committed
  with the inbox item marked done: a crash before that commit runs it again, never twice
  after.
- edit: as approve, with the human's arguments instead (their digest is recorded);
- reject: the wait resolves `rejected` and the model gets a note with the reason.

A tool may instead run and *propose* its change for approval (`tools.approval.
proposal_wait`; `self_md_patch` under `loop.self_md.require_approval`): its approval
does not park the dialog, and the decision is carried out by the tool's `on_decision`
(apply, or record rejected) before the approval resolves, without waking the dialog. An
edit is refused for those: a proposal is approved or rejected as proposed.

Nothing here costs a dialog whose member has no `approval_required` anything per step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mindloop.config import MemberConfig
from mindloop.dialogs.wait_kinds import (
    ApprovalDecision,
    ApprovalPayload,
    Decision,
    Resolution,
    WaitKind,
)
from mindloop.dialogs.waits import Waits
from mindloop.errors import MindloopError, NotFoundError
from mindloop.events.bus import EventBus
from mindloop.events.types import ApprovalResolved
from mindloop.providers.base import ToolCall
from mindloop.store import Store, WaitRecord, WaitStatus, new_id
from mindloop.store import waits as rows
from mindloop.tools.approval import SUMMARY_CHARS, args_digest, call_summary
from mindloop.tools.base import OpenWait, ProposalDecision, Tool, ToolOutput
from mindloop.tools.registry import ToolRegistry

__all__ = [
    "APPROVED",
    "SUMMARY_CHARS",
    "ApprovalError",
    "ApprovalView",
    "Approvals",
    "approved_digest",
    "approved_note",
    "args_digest",
    "call_summary",
    "is_proposal",
    "needs_approval",
    "request",
    "tampered_note",
]

# The inbox item kind of an approved call waiting to run in its dialog's next drive.
APPROVED = "approved_call"


class ApprovalError(MindloopError):
    """An approval that cannot be decided as asked (unknown, closed, tampered with)."""


def is_proposal(rec: WaitRecord) -> bool:
    """An approval of a change a tool proposed (`tools.approval.proposal_wait`): nothing
    waits for it — it parks no dialog and no task, and its closing resumes nothing."""
    return rec.kind == WaitKind.APPROVAL and bool(rec.payload.get("proposal"))


def needs_approval(member: MemberConfig, tool: Tool[Any]) -> bool:
    needed = member.approval_required
    return bool(needed) and (tool.name in needed or tool.toolset in needed)


def request(member: str, call: ToolCall, tool: Tool[Any], call_key: str) -> ToolOutput:
    """The result of a call that needs approval: it has not run; its effect registers
    the approval wait (in the step's transaction)."""
    aid = new_id("apv-")
    summary = call_summary(tool.name, call.arguments)
    payload = ApprovalPayload(
        approval_id=aid,
        member=member,
        tool=tool.name,
        toolset=tool.toolset,
        arguments=call.arguments,
        args_digest=args_digest(tool.name, call.arguments),
        call_id=call.id,
        call_key=call_key,
        summary=summary,
    )
    text = (
        f"[mindloop] {summary} needs the human's approval before it runs (approval {aid}). "
        f"It has not run. The human decides with `mindloop approve {aid}` or "
        f"`mindloop reject {aid} --reason …`; the outcome comes to you as a note."
    )
    wait = OpenWait(WaitKind.APPROVAL, aid, payload.model_dump(), wait_id=aid)
    return ToolOutput(text, effects=(wait,))


def approved_note(item: dict[str, Any], result: str, is_error: bool) -> str:
    how = "with the arguments the human edited" if item["decision"] == Decision.EDIT else ""
    ran = f"it ran {how}".rstrip() if how else "it ran with exactly the approved arguments"
    status = "failed" if is_error else "returned"
    return (
        f"[mindloop] The human approved {item['summary']} (approval {item['wait_id']}); "
        f"{ran} and {status}:\n\n{result}"
    )


def tampered_note(item: dict[str, Any]) -> str:
    return (
        f"[mindloop] Approval {item['wait_id']}: the call queued to run does not match the "
        "digest of what was approved; it was not run."
    )


class ApprovalView(BaseModel):
    """An open approval as faces list it (`mindloop questions`, the web UI)."""

    id: str
    dialog_id: str
    member: str
    tool: str
    toolset: str
    arguments: str
    args_digest: str
    summary: str
    asked_at: float
    reminders: int = 0
    node: str | None = None
    risk: str | None = None
    # A change the call proposed (it ran; the decision applies or drops it), which its
    # dialog does not wait for (`blocks` False): the task may end with it open.
    proposal: bool = False
    blocks: bool = True

    @classmethod
    def of(cls, rec: WaitRecord) -> ApprovalView:
        p = ApprovalPayload.model_validate(rec.payload)
        return cls(
            proposal=p.proposal,
            blocks=rec.blocks,
            id=rec.id,
            dialog_id=rec.dialog_id,
            member=p.member,
            tool=p.tool,
            toolset=p.toolset,
            arguments=p.arguments,
            args_digest=p.args_digest,
            summary=p.summary,
            asked_at=rec.created_at,
            reminders=rec.reminders,
            node=rec.node,
            risk=p.risk,
        )


class Approvals:
    """Deciding approvals. A change a tool proposed (`ApprovalPayload.proposal`) is
    carried out by that tool's `on_decision`, found in `tools` (the runtime's registry)."""

    def __init__(
        self,
        store: Store,
        bus: EventBus,
        waits: Waits,
        *,
        tools: ToolRegistry | None = None,
        rtws: Path | None = None,
    ) -> None:
        self.store = store
        self.bus = bus
        self.waits = waits
        self.tools = tools
        self.rtws = rtws

    def get(self, approval_id: str) -> WaitRecord:
        """The approval's record; a clear error when the id names none."""
        try:
            rec = self.store.get_wait(approval_id)
        except NotFoundError:
            raise NotFoundError(
                f"no approval with id {approval_id!r} (see `mindloop questions`)"
            ) from None
        if rec.kind != WaitKind.APPROVAL:
            raise ApprovalError(f"{approval_id} is a {rec.kind} wait, not an approval")
        return rec

    def pending(self, *, root_ids: Sequence[str] | None = None) -> list[ApprovalView]:
        recs = rows.open_waits_of_kind(self.store, WaitKind.APPROVAL, root_ids=root_ids)
        return [ApprovalView.of(r) for r in recs]

    def _open(
        self, approval_id: str, expected_digest: str | None
    ) -> tuple[WaitRecord, ApprovalPayload]:
        """The approval, still open, its stored arguments matching their digest and
        `expected_digest` (what the human was shown) when given; else `ApprovalError`."""
        rec = self.get(approval_id)
        if rec.status is not WaitStatus.OPEN:
            was = (rec.resolution or {}).get("event", {}).get("decision", rec.status)
            raise ApprovalError(f"approval {rec.id} is already closed ({was})")
        p = ApprovalPayload.model_validate(rec.payload)
        if args_digest(p.tool, p.arguments) != p.args_digest:
            raise ApprovalError(
                f"approval {rec.id}: its stored arguments no longer match their digest "
                "(the record was changed); refusing to decide it"
            )
        if expected_digest is not None and expected_digest != p.args_digest:
            raise ApprovalError(
                f"approval {rec.id}: the digest given ({expected_digest[:16]}…) is not "
                f"that of the call waiting ({p.args_digest[:16]}…); nothing was decided"
            )
        return rec, p

    def decide(self, event: ApprovalDecision, *, expected_digest: str | None = None) -> WaitRecord:
        """Record the human's decision, once, in one transaction (see the module). The
        stored arguments must still match their digest, and `expected_digest` (what the
        human was shown) when given. Returns the resolved record."""
        if event.decision is Decision.REJECT and not (event.reason or "").strip():
            raise ApprovalError("a rejection needs a reason (--reason …): the model reads it")
        with self.store.tx():
            rec, p = self._open(event.approval_id, expected_digest)
            if p.proposal:
                done: WaitRecord | None = None
            else:
                done = self._resolve_call(rec, p, event)
        if p.proposal:
            done = self._decide_proposal(p, event, expected_digest)
        if done is None:  # closed by someone else since it was read (same lock: never)
            raise ApprovalError(f"approval {rec.id} was closed meanwhile")
        self.bus.publish(
            ApprovalResolved(
                dialog_id=done.dialog_id,
                approval_id=done.id,
                decision=event.decision,
                by=event.by,
                reason=event.reason,
            )
        )
        return done

    def _resolve_call(
        self, rec: WaitRecord, p: ApprovalPayload, event: ApprovalDecision
    ) -> WaitRecord | None:
        """A held-back call: rejected (a note), or queued to run as approved."""
        res = Resolution(outcome=event.outcome(), event=event.model_dump(mode="json"), by=event.by)
        if event.decision is Decision.REJECT:
            note = (
                f"[mindloop] The human rejected {p.summary} (approval {rec.id}); it did "
                f"not run. Reason: {(event.reason or '').strip()}"
            )
            return self.waits.resolve(rec.id, res, note=note)
        arguments = p.arguments
        if event.decision is Decision.EDIT:
            arguments = _edited(event.edited_args)
        item = {
            "kind": APPROVED,
            "wait_id": rec.id,
            "decision": event.decision,
            "tool": p.tool,
            "arguments": arguments,
            "digest": args_digest(p.tool, arguments),
            "call_id": p.call_id,
            "call_key": p.call_key,
            "summary": call_summary(p.tool, arguments),
            "node": rec.node,  # a node's call runs when its dialog works that node
        }
        return self.waits.resolve(rec.id, res, item=item)

    def _decide_proposal(
        self, p: ApprovalPayload, event: ApprovalDecision, expected_digest: str | None
    ) -> WaitRecord | None:
        """A change a tool proposed: its `on_decision` carries the decision out first
        (it refuses, with nothing decided, by raising), then the approval resolves —
        without waking the dialog, which did not wait for it. Both steps are idempotent:
        a crash between them leaves the approval open, and deciding it again the same way
        finds the decision carried out and only records it."""
        if event.decision is Decision.EDIT:
            raise ApprovalError(
                f"approval {p.approval_id}: a proposed change is approved or rejected as "
                "proposed; to change it, reject it and edit the file yourself"
            )
        tool = self.tools.get(p.tool) if self.tools is not None else None
        hook = tool.on_decision if tool is not None else None
        if hook is None or self.rtws is None:
            raise ApprovalError(
                f"approval {p.approval_id}: no tool {p.tool!r} here to carry out the decision "
                "on the change it proposed"
            )
        did = hook(
            ProposalDecision(
                rtws=self.rtws,
                approval_id=p.approval_id,
                member=p.member,
                approve=event.decision is not Decision.REJECT,
                by=event.by,
                reason=(event.reason or "").strip() or None,
            )
        )
        with self.store.tx():
            rec, _ = self._open(p.approval_id, expected_digest)
            res = Resolution(
                outcome=event.outcome(),
                event={**event.model_dump(mode="json"), "result": did},
                by=event.by,
            )
            return self.waits.resolve(rec.id, res, wake=False, detail=did)


def _edited(arguments: str | None) -> str:
    if arguments is None:
        raise ApprovalError("an edit needs the arguments that run instead (a JSON object)")
    try:
        value = json.loads(arguments)
    except ValueError as exc:
        raise ApprovalError(f"the edited arguments are not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ApprovalError("the edited arguments must be a JSON object")
    return arguments


def approved_digest(rec: WaitRecord) -> str:
    """The digest of the call an approval's decision lets run: the one asked for, or the
    human's edit."""
    p = ApprovalPayload.model_validate(rec.payload)
    event = (rec.resolution or {}).get("event") or {}
    if event.get("decision") == Decision.EDIT and isinstance(event.get("edited_args"), str):
        return args_digest(p.tool, event["edited_args"])
    return p.args_digest
