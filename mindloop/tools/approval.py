"""What an approval record says about the call it holds, in one place for the two ways an
approval is asked for:

- the engine holds a call back until the human decides (`dialogs.approvals.request`: a
  member's `approval_required`, a tool's `asks_approval`); the dialog waits, and the
  approved call then runs with exactly the approved arguments;
- a tool runs, finds its change needs the human's approval and *proposes* it
  (`proposal_wait`): the dialog does not wait, and the decision is carried out by the
  tool's `Tool.on_decision` when the human approves or rejects (`self_md_patch` under
  `loop.self_md.require_approval`, agent-loop §9.1: "SELF_IMPROVE does not wait").

Both records have the shape of `dialogs.wait_kinds.ApprovalPayload` (validated when the
wait is registered), so `mindloop questions`, `approve` and `reject` and the web UI treat
them alike.
"""

from __future__ import annotations

import hashlib
import json

from mindloop.tools.base import OpenWait

SUMMARY_CHARS = 160
APPROVAL_KIND = "approval"  # `dialogs.wait_kinds.WaitKind.APPROVAL`


def args_digest(tool: str, arguments: str) -> str:
    """The digest an approval is given for: sha256 of the tool name and the arguments
    exactly as written (JSON text), hex."""
    return hashlib.sha256(f"{tool}\n{arguments}".encode("utf-8", "surrogatepass")).hexdigest()


def call_summary(tool: str, arguments: str) -> str:
    """`tool(arg=value, …)` on one line, for people (cut at SUMMARY_CHARS)."""
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        args = None
    if isinstance(args, dict):
        inner = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    else:
        inner = arguments
    text = " ".join(f"{tool}({inner})".split())  # one line, whatever the arguments hold
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def proposal_id(call_key: str) -> str:
    """The approval id of the change a call proposed: derived from the call's key, so a
    replayed call names the same approval."""
    return f"apv-{call_key[:12]}"


def proposal_wait(
    aid: str,
    *,
    member: str,
    tool: str,
    toolset: str,
    arguments: str,
    call_key: str,
    risk: str | None = None,
) -> OpenWait:
    """The effect that registers approval `aid` of a change a call proposed (with the
    call's result, in its step's transaction): it does not park the dialog
    (`blocks=False`); the human's decision is carried out by the tool's `on_decision`.
    Registering it again (a replayed call) leaves the first record as it is."""
    payload = {
        "approval_id": aid,
        "member": member,
        "tool": tool,
        "toolset": toolset,
        "arguments": arguments,
        "args_digest": args_digest(tool, arguments),
        "call_id": call_key,
        "call_key": call_key,
        "summary": call_summary(tool, arguments),
        "risk": risk,
        "proposal": True,
    }
    return OpenWait(APPROVAL_KIND, aid, payload, wait_id=aid, blocks=False)
