"""The SELF_IMPROVE phase's tools: `self_md_patch` and `kb_request` (agent-loop §9).

They form the loop-owned toolset `self_improve`: registered in every registry a config
builds (`configured.build_registry`), never selected by a member in team.yaml (not even
by `'*'`), offered only by a turn policy — the work loop's SELF_IMPROVE phase
(DESIGN.md §8.9; `loop.policy.LoopPolicy`).

- `self_md_patch` changes one section of the calling member's own `self.md` (no other
  member's: the file is chosen by the call's member, not by an argument), with a base
  hash against concurrent edits, the engine's call key as idempotency key, a history
  entry per change and, with `loop.self_md.git_commit`, a git commit of just self.md and
  its history (`toolsets.self_md`, `toolsets.self_md_git`). At most
  `loop.self_md.max_calls_per_run` per SELF_IMPROVE run (`run_of`: one phase entry).
  With `loop.self_md.require_approval` it proposes instead: a `proposed` entry and an
  approval the dialog does not wait for; `mindloop approve` applies it, `reject` records
  it rejected (`decide_self_md`, the tool's `on_decision`).
- `kb_request` describes a need of the team's knowledge base. It sends nothing: its
  result carries a store effect that inserts an outbox row in the transaction that
  records the result, so the request exists exactly when the step does; the dispatcher
  (`loop.kb`) delivers it afterwards. The requester never waits on it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from mindloop.config import Config
from mindloop.config.loop import LoopConfig
from mindloop.config.loop_kb import KbConfig
from mindloop.config.loop_self_md import SelfMdConfig
from mindloop.store.outbox import Outbox, OutboxRecord
from mindloop.tools.approval import proposal_wait
from mindloop.tools.base import ProposalDecision, StoreEffect, Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs, ToolRegistry
from mindloop.toolsets import self_md_git as git
from mindloop.toolsets.privacy import privacy_problem
from mindloop.toolsets.self_md import (
    HistoryEntry,
    PatchRequest,
    PatchResult,
    PatchStatus,
    SelfMdFile,
    rel_paths,
)
from mindloop.toolsets.self_md_doc import EMPTY_SHA256, count_tokens, sha256_hex

SELF_IMPROVE_TOOLSET = "self_improve"
SELF_MD_PATCH = "self_md_patch"
KB_REQUEST = "kb_request"
SELF_IMPROVE_TOOLS: tuple[str, ...] = (SELF_MD_PATCH, KB_REQUEST)
KB_REQUEST_KIND = "kb_request"  # the outbox row kind


class SelfMdPatchArgs(ToolArgs):
    section: str = Field(description="The section's title: the text after '## '.")
    op: Literal["replace", "append", "delete"] = Field(
        description="replace the section's body, append to it (both create the section "
        "when absent), or delete the section"
    )
    content: str = Field(
        default="",
        description="The body to write or append, without the '## ' heading ('' for delete).",
    )
    base_sha256: str = Field(
        description="The sha256 of self.md as you read it, shown with it in your system "
        f"prompt (its first 12 characters suffice); {EMPTY_SHA256[:12]} if you have none."
    )
    rationale: str = Field(description="Why this change makes your work better.")
    evidence_refs: list[str] = Field(
        default_factory=list, description="What shows it: worklog ids, files, messages."
    )


class KbRequestArgs(ToolArgs):
    kind: Literal["ADD", "UPDATE", "DEPRECATE", "GAP"] = Field(
        description="ADD new knowledge, UPDATE or DEPRECATE an entry, or report a GAP."
    )
    topic: str = Field(max_length=200, description="What the knowledge is about, one line.")
    content: str = Field(description="The knowledge or the need, self-contained.")
    evidence_refs: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------- self_md_patch


def _summary(entry: HistoryEntry) -> str:
    if entry.op == "revert":
        return f"revert #{entry.reverts_seq}"
    why = entry.rationale.strip().splitlines()[0] if entry.rationale.strip() else ""
    text = f"{entry.op} {entry.section!r}" + (f": {why}" if why else "")
    return text if len(text) <= 72 else text[:71] + "…"


def commit_entry(rtws: Path, entry: HistoryEntry) -> str:
    """Commit self.md and its history for `entry` (once per idempotency key); the commit's
    hash. Raises `self_md_git.GitFailed`."""
    existing = git.commit_with_key(rtws, entry.idempotency_key)
    if existing is not None:
        return existing
    return git.commit_paths(
        rtws,
        rel_paths(entry.member),
        f"self-improve({entry.member}): {_summary(entry)}",
        [
            ("Idempotency-Key", entry.idempotency_key),
            ("Task", entry.task_path or ""),
            ("Evidence", ", ".join(entry.evidence_refs)),
        ],
    )


def _maybe_commit(
    file: SelfMdFile, config: SelfMdConfig, result: PatchResult, entry: HistoryEntry | None
) -> None:
    """With `git_commit` on and a git rtws: commit the change `result` reports, when the
    file still holds it (a replayed call whose commit was cut off is committed now)."""
    if not config.git_commit or entry is None or not result.ok:
        return
    if result.sha256 != entry.new_sha256 or not git.in_git_repo(file.rtws):
        return
    try:
        result.git_commit = commit_entry(file.rtws, entry)
    except git.GitFailed as err:
        result.message = f"applied, but not committed to git: {err}"


def patch_self_md(rtws: Path, member: str, req: PatchRequest, config: SelfMdConfig) -> PatchResult:
    """One `self_md_patch` call, start to end (blocking: file lock, fsyncs, git)."""
    file = SelfMdFile(rtws, member)
    with file.locked():
        result, entry = file.patch_locked(req, config)
        if entry is None and result.history_seq is not None:
            entry = next((e for e in file.history() if e.seq == result.history_seq), None)
        _maybe_commit(file, config, result, entry)
    return result


def revert_self_md(rtws: Path, member: str, seq: int, config: SelfMdConfig) -> PatchResult:
    """A human's `mindloop self revert SEQ`: the new entry, committed like a patch."""
    file = SelfMdFile(rtws, member)
    with file.locked():
        return _commit_applied(file, config, file.revert_locked(seq))


def _commit_applied(file: SelfMdFile, config: SelfMdConfig, entry: HistoryEntry) -> PatchResult:
    """An entry the human's command applied, committed like a patch; its result."""
    result = PatchResult(result=PatchStatus.APPLIED, history_seq=entry.seq, sha256=entry.new_sha256)
    _maybe_commit(file, config, result, entry)
    return result


def decide_self_md(
    rtws: Path,
    member: str,
    approval_id: str,
    approve: bool,
    by: str,
    reason: str | None,
    config: SelfMdConfig,
) -> HistoryEntry:
    """The human's decision on a proposed change (`mindloop approve` / `reject` under
    `loop.self_md.require_approval`): applied — and committed like a patch — or recorded
    rejected. Raises `SelfMdError` when it cannot be applied as proposed."""
    file = SelfMdFile(rtws, member)
    with file.locked():
        entry = file.decide_locked(
            approval_id, approve=approve, by=by, reason=reason, config=config
        )
        if entry.status == "applied":
            _commit_applied(file, config, entry)
    return entry


def run_of(ctx: ToolContext) -> str:
    """The SELF_IMPROVE run a call belongs to: its loop root's current phase entry
    (`<root>#<entry>`), or, outside the work loop, its dialog."""
    entry = ctx.workspace.loop_entry(ctx.dialog_id) if ctx.workspace is not None else None
    return ctx.dialog_id if entry is None else f"{ctx.dialog_id}#{entry}"


def self_md_patch_tool(config: SelfMdConfig) -> Tool[SelfMdPatchArgs]:
    async def run(args: SelfMdPatchArgs, ctx: ToolContext) -> ToolOutput:
        req = PatchRequest(
            section=args.section,
            op=args.op,
            content=args.content,
            base_sha256=args.base_sha256,
            rationale=args.rationale,
            evidence_refs=tuple(args.evidence_refs),
            key=ctx.call_key,
            task_path=ctx.task_path,
            dialog_id=ctx.dialog_id,
            run=run_of(ctx),
        )
        result = await asyncio.to_thread(patch_self_md, ctx.rtws, ctx.member, req, config)
        out = ToolOutput(result.model_dump_json(exclude_none=True), is_error=result.failed)
        if result.approval_id is not None:  # PROPOSED: the approval, with this result
            out.effects = (
                proposal_wait(
                    result.approval_id,
                    member=ctx.member,
                    tool=SELF_MD_PATCH,
                    toolset=tool.toolset,
                    arguments=args.model_dump_json(),
                    call_key=ctx.call_key,
                ),
            )
        return out

    def decided(d: ProposalDecision) -> str:
        entry = decide_self_md(d.rtws, d.member, d.approval_id, d.approve, d.by, d.reason, config)
        return (
            f"self.md of @{d.member}: proposal #{entry.proposal_seq} {entry.status} as #{entry.seq}"
        )

    proposes = (
        ", or PROPOSED (the human approves it later; you do not wait)"
        if config.require_approval
        else ""
    )
    tool = Tool(
        name=SELF_MD_PATCH,
        description=(
            "Change one section of your own self.md (how you work: habits, pitfalls, "
            "procedures), shown in your system prompt. One section per call, at most "
            f"{config.max_net_tokens_per_call} tokens added per call, at most "
            f"{config.max_calls_per_run} changes per run; protected sections are for humans. "
            "Answers APPLIED, ALREADY_APPLIED, CONFLICT (re-read and retry), REJECTED with a "
            f"reason{proposes}."
        ),
        args_model=SelfMdPatchArgs,
        run=run,
        # With `require_approval` a call proposes its change and the approval is decided
        # later (`mindloop approve` applies it): SELF_IMPROVE does not wait (§9.1).
        on_decision=decided,
    )
    return tool


# ---------------------------------------------------------------------- kb_request


def kb_idempotency_key(member: str, kind: str, topic: str, content: str) -> str:
    """sha256(member | kind | topic | normalised content): the same request, however
    often it is made, is processed once by the KB."""
    norm_topic = " ".join(topic.split()).casefold()
    return sha256_hex(f"{member}|{kind}|{norm_topic}|{' '.join(content.split())}")


def _reply(result: str, *, error: bool = False, **fields: Any) -> ToolOutput:
    return ToolOutput(json.dumps({"result": result, **fields}, ensure_ascii=False), is_error=error)


def kb_request_tool(config: KbConfig) -> Tool[KbRequestArgs]:
    async def run(args: KbRequestArgs, ctx: ToolContext) -> ToolOutput:
        if not args.topic.strip() or not args.content.strip():
            return _reply(
                "REJECTED",
                error=True,
                reason="FORMAT",
                message="topic and content must not be empty",
            )
        found = privacy_problem(f"{args.topic}\n{args.content}")
        if found is not None:
            return _reply(
                "REJECTED",
                error=True,
                reason="PRIVACY",
                message=f"not sent: {found}; KB requests carry no secrets or personal data",
            )
        tokens = count_tokens(args.content)
        if tokens > config.max_content_tokens:
            return _reply(
                "REJECTED",
                error=True,
                reason="TOO_LARGE",
                message=f"content is {tokens} tokens; at most {config.max_content_tokens}",
            )
        key = kb_idempotency_key(ctx.member, args.kind, args.topic, args.content)
        rec = OutboxRecord(
            id=f"kb-{ctx.call_key[:20]}",  # one row per call: a replay names the same row
            kind=KB_REQUEST_KIND,
            call_key=ctx.call_key,
            idempotency_key=key,
            source_dialog=ctx.dialog_id,
            source_member=ctx.member,
            task_path=ctx.task_path,
            target=config.member,
            payload={
                "kind": args.kind,
                "topic": args.topic.strip(),
                "content": args.content.strip(),
                "evidence_refs": list(args.evidence_refs),
                "privacy_asserted": "no_pii_no_secrets",
            },
        )

        def enqueue(store: Any) -> None:  # in the transaction of the tool's result
            Outbox(store).enqueue(rec)

        effect = StoreEffect(apply=enqueue, what="kb_request")
        out = _reply("QUEUED", msg_id=rec.id, idempotency_key=key, to=config.member)
        out.effects = (effect,)
        return out

    return Tool(
        name=KB_REQUEST,
        description=(
            "Ask the team's knowledge-base keeper to ADD, UPDATE or DEPRECATE knowledge, or "
            "report a GAP. Describe the need; you do not edit the knowledge base. Sent after "
            "this step commits; you do not wait for it."
        ),
        args_model=KbRequestArgs,
        run=run,
        store_only=True,  # an outbox row, committed with the result
    )


# ---------------------------------------------------------------------- registry


def self_improve_tools(loop: LoopConfig) -> list[Tool[Any]]:
    return [self_md_patch_tool(loop.self_md), kb_request_tool(loop.kb)]


def add_loop_toolsets(registry: ToolRegistry, config: Config) -> None:
    """Register the loop-owned toolsets this module defines (offered by phases only)."""
    registry.add_toolset(
        SELF_IMPROVE_TOOLSET, self_improve_tools(config.team.loop), loop_owned=True
    )
