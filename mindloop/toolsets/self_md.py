"""A member's `self.md`: how it works, in its own words, changed by SELF_IMPROVE through
`self_md_patch` and by humans (agent-loop §9.1).

The file lives at `.minds/team/<member>/self.md` and is rendered into that member's system
prompt after its persona (`dialogs.context`). It is split into sections by `## ` headings
(outside code fences); text before the first heading is the preamble, which only humans
edit. A section is **protected** — humans only — when its title is listed in
`loop.self_md.protected_sections` (default `Hard rules`, compared case-insensitively) or
when its heading ends with `(protected)`, e.g. `## Safety (protected)`.

Every change is traceable: before `self.md` is replaced, an entry is appended to
`.minds/team/<member>/self.history.jsonl` with the whole previous content, the change,
its rationale and evidence, and the idempotency key of the call (the engine's call key).
`revert` appends an entry too; the history is never rewritten. With
`loop.self_md.require_approval` a call appends a `proposed` entry and leaves `self.md`
as it is; the human's decision appends an `applied` entry (and replaces the file, as any
change) or a `rejected` one, each naming the proposal (`decide_locked`).

Crash safety (the Taskdoc audit's order, `taskdoc/audit.py`), all under an exclusive
`flock` on `self.md.lock`:

1. the new content goes to a temp file beside `self.md`, fsynced;
2. the history entry is appended and fsynced;
3. the temp is renamed over `self.md` and the directory fsynced.

A kill between 2 and 3 leaves a temp whose hash is the last entry's `new_sha256` while
the file still has its `prev_sha256`: the next operation rolls it forward. Any other temp
belongs to a change that never happened and is removed; a torn last history line (a kill
inside step 2) is cut off. So a replayed call (same key) finds its entry and answers
ALREADY_APPLIED, never applying twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from mindloop.config.loop_self_md import SelfMdConfig
from mindloop.errors import MindloopError
from mindloop.taskdoc.fsio import fsync_dir
from mindloop.tools.approval import proposal_id
from mindloop.toolsets.privacy import privacy_problem
from mindloop.toolsets.self_md_doc import (
    PROTECTED_MARK,
    Op,
    apply_op,
    count_tokens,
    headings,
    is_protected,
    normal_body,
    normal_title,
    restore_section,
    section_text,
    sha256_hex,
)

SELF_MD = "self.md"
HISTORY = "self.history.jsonl"
LOCK = "self.md.lock"
TEMP_PREFIX = ".self.md."
TEMP_SUFFIX = ".tmp"
MIN_BASE_PREFIX = 8  # hex characters of a base hash the model must give at least

_HEX = re.compile(r"[0-9a-f]+")


class SelfMdError(MindloopError):
    """A human's self.md operation that cannot be done (an unknown seq, a conflict)."""


def member_dir(rtws: Path, member: str) -> Path:
    return Path(rtws) / ".minds" / "team" / member


def self_md_path(rtws: Path, member: str) -> Path:
    return member_dir(rtws, member) / SELF_MD


def rel_paths(member: str) -> tuple[str, str]:
    """self.md and its history, rtws-relative (as git and users name them)."""
    base = f".minds/team/{member}"
    return f"{base}/{SELF_MD}", f"{base}/{HISTORY}"


def read_text(path: Path) -> str:
    """The file's text ("" when absent), decoded as the system prompt shows it."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


# ---------------------------------------------------------------------- history


class HistoryEntry(BaseModel):
    """One line of `self.history.jsonl`."""

    seq: int
    at: float
    member: str
    by: str  # the member (self_md_patch) or "human" (self revert)
    idempotency_key: str  # the call key of the tool call (or a revert's own key)
    content_key: str  # sha256(member | section | op | normalised content)
    task_path: str | None = None
    dialog_id: str | None = None
    section: str
    op: Literal["replace", "append", "delete", "revert"]
    content: str  # the patch's content; for a revert, the whole restored file
    prev_sha256: str
    prev_content: str  # the whole previous file
    new_sha256: str
    rationale: str = ""
    evidence_refs: list[str] = Field(default_factory=list)
    # applied: self.md was replaced. With `loop.self_md.require_approval` a call writes a
    # `proposed` entry (self.md unchanged) and the human's decision a second entry,
    # `applied` (self.md replaced) or `rejected` (nothing changed), naming the proposal.
    status: Literal["applied", "proposed", "rejected"] = "applied"
    reverts_seq: int | None = None
    # The SELF_IMPROVE run that made the call: `<loop root>#<phase entry>` (a dialog
    # outside the work loop: its id); `loop.self_md.max_calls_per_run` counts per run.
    run: str | None = None
    approval_id: str | None = None  # a proposal's approval (`mindloop approve`)
    proposal_seq: int | None = None  # on the decision's entry: the proposal it decided
    decided_by: str | None = None
    decision_reason: str | None = None

    def new_content(self) -> str:
        """The whole file this entry leaves (a proposal: would leave, applied as is)."""
        return self.applied_to(self.prev_content)

    def applied_to(self, text: str) -> str:
        """`text` with this entry's change made (`KeyError`: a delete of a section that
        `text` lacks)."""
        if self.op == "revert":
            return self.content
        return apply_op(text, self.section, self.op, self.content)


def content_key(member: str, section: str, op: str, content: str) -> str:
    return sha256_hex(f"{member}|{normal_title(section)}|{op}|{normal_body(content)}")


# ---------------------------------------------------------------------- results


class PatchStatus(StrEnum):
    APPLIED = "APPLIED"
    ALREADY_APPLIED = "ALREADY_APPLIED"
    CONFLICT = "CONFLICT"
    REJECTED = "REJECTED"
    PROPOSED = "PROPOSED"  # waits for the human's approval (`loop.self_md.require_approval`)


class RejectReason(StrEnum):
    STALE_BASE = "STALE_BASE"  # with CONFLICT: the file changed since it was read
    PROTECTED = "PROTECTED"  # a protected section, or the preamble
    TOO_LARGE = "TOO_LARGE"  # over the net growth per call, or the file's budget
    PRIVACY = "PRIVACY"  # looks like a secret or personal data
    FORMAT = "FORMAT"  # a heading inside the content, a bad base hash, content on delete
    NOT_FOUND = "NOT_FOUND"  # delete of a section that does not exist
    NO_CHANGE = "NO_CHANGE"  # the section already says this
    LIMIT = "LIMIT"  # the run already made `loop.self_md.max_calls_per_run` changes


class PatchResult(BaseModel):
    """What `self_md_patch` answers (as JSON)."""

    result: PatchStatus
    reason: RejectReason | None = None
    message: str | None = None
    history_seq: int | None = None
    sha256: str | None = None  # the file's hash now (the base of a next call)
    git_commit: str | None = None
    approval_id: str | None = None  # PROPOSED: the approval the human decides

    @property
    def ok(self) -> bool:
        return self.result in (PatchStatus.APPLIED, PatchStatus.ALREADY_APPLIED)

    @property
    def failed(self) -> bool:
        """Nothing was applied or proposed (the tool's result is an error)."""
        return self.result in (PatchStatus.CONFLICT, PatchStatus.REJECTED)


@dataclass(frozen=True)
class PatchRequest:
    section: str
    op: Op
    content: str
    base_sha256: str
    rationale: str
    evidence_refs: tuple[str, ...]
    key: str  # the call key
    task_path: str | None = None
    dialog_id: str | None = None
    run: str | None = None  # the SELF_IMPROVE run (`HistoryEntry.run`)


def base_matches(base: str, current_hash: str) -> bool | None:
    """Whether `base` (a full hash or a prefix of ≥ 8 hex characters, optionally
    `sha256:`) names `current_hash`; None when it is not a hash at all."""
    base = base.strip().lower().removeprefix("sha256:")
    if len(base) < MIN_BASE_PREFIX or len(base) > 64 or not _HEX.fullmatch(base):
        return None
    return current_hash.startswith(base)


# ---------------------------------------------------------------------- the file


class SelfMdFile:
    """One member's self.md and its history. Every operation takes the file lock."""

    def __init__(self, rtws: Path, member: str) -> None:
        self.rtws = Path(rtws)
        self.member = member
        self.dir = member_dir(self.rtws, member)
        self.path = self.dir / SELF_MD
        self.history_path = self.dir / HISTORY

    def read(self) -> str:
        return read_text(self.path)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The exclusive lock of this member's self.md (across processes); a crash
        releases it. Recovers what a killed writer left before yielding."""
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._recover()
            yield
        finally:
            os.close(fd)

    # ---------------------------------------------------------------- history

    def history(self) -> list[HistoryEntry]:
        """Every entry, oldest first (a torn last line, left by a kill, is skipped)."""
        try:
            raw = self.history_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        entries = []
        lines = raw.split("\n")
        complete = lines[:-1]  # the part after the last newline is torn or empty
        for n, line in enumerate(complete, 1):
            if not line.strip():
                continue
            try:
                entries.append(HistoryEntry.model_validate_json(line))
            except ValidationError as err:
                raise SelfMdError(
                    f"{rel_paths(self.member)[1]}:{n}: not a history entry ({err.error_count()} "
                    "problem(s)); fix or remove that line"
                ) from None
        return entries

    def entry(self, seq: int, history: list[HistoryEntry] | None = None) -> HistoryEntry:
        """Change `seq` of `history` (read when not given)."""
        for e in self.history() if history is None else history:
            if e.seq == seq:
                return e
        raise SelfMdError(
            f"no change #{seq} in {rel_paths(self.member)[1]} (see `mindloop self history`)"
        )

    def _append_history(self, entry: HistoryEntry) -> None:
        line = entry.model_dump_json() + "\n"
        with open(self.history_path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        fsync_dir(self.dir)

    # ---------------------------------------------------------------- recovery

    def _temps(self) -> list[Path]:
        try:
            names = sorted(
                n
                for n in os.listdir(self.dir)
                if n.startswith(TEMP_PREFIX) and n.endswith(TEMP_SUFFIX)
            )
        except FileNotFoundError:
            return []
        return [self.dir / n for n in names]

    def _recover(self) -> None:
        """Under the lock: cut a torn history line, roll a recorded change forward, and
        remove temps of changes that never happened (module doc)."""
        try:
            raw = self.history_path.read_bytes()
        except FileNotFoundError:
            raw = b""
        if raw and not raw.endswith(b"\n"):
            with open(self.history_path, "r+b") as fh:
                fh.truncate(raw.rfind(b"\n") + 1)
                os.fsync(fh.fileno())
        temps = self._temps()
        if not temps:
            return
        history = self.history()
        last = history[-1] if history else None
        current = sha256_hex(self.read())
        for tmp in temps:
            if (
                last is not None
                and last.status == "applied"
                and current == last.prev_sha256
                and sha256_hex(read_text(tmp)) == last.new_sha256
            ):
                os.replace(tmp, self.path)
                fsync_dir(self.dir)
                current = last.new_sha256
            else:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()

    # ---------------------------------------------------------------- writing

    def _write(self, entry: HistoryEntry, new_text: str) -> None:
        """Steps 1–3 of the module doc; the caller holds the lock."""
        tmp = self.dir / f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}"
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(new_text)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            self._append_history(entry)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        os.replace(tmp, self.path)
        fsync_dir(self.dir)

    def run_changes(self, history: list[HistoryEntry], req: PatchRequest) -> list[HistoryEntry]:
        """The changes this member's calls already made (or proposed) in `req`'s run: one
        SELF_IMPROVE entry of its task's loop (`HistoryEntry.run`)."""
        return [
            e
            for e in history
            if e.run == req.run
            and e.by == self.member
            and e.op != "revert"
            and e.proposal_seq is None  # a decision: its proposal is counted
            and e.status != "rejected"
        ]

    def patch_locked(
        self, req: PatchRequest, config: SelfMdConfig
    ) -> tuple[PatchResult, HistoryEntry | None]:
        """Apply one `self_md_patch` call (the procedure of agent-loop §9.1) — or, with
        `loop.self_md.require_approval`, propose it: a `proposed` entry, self.md
        unchanged. The caller holds `locked()`. Returns the result and the entry written
        or found (None when there is none)."""
        history = self.history()
        current = self.read()
        cur_hash = sha256_hex(current)
        ckey = content_key(self.member, req.section, req.op, req.content)
        for e in history:  # 1. a replayed call: applied (or proposed) once
            if e.idempotency_key == req.key:
                if e.status == "proposed":
                    return _proposed(e, cur_hash), e
                return _result(PatchStatus.ALREADY_APPLIED, cur_hash, seq=e.seq), None
        last = history[-1] if history else None
        if config.require_approval:
            waiting = open_proposal(history, self.member, ckey, cur_hash)
            if waiting is not None:  # the same change, proposed and not decided yet
                return _proposed(waiting, cur_hash), waiting
        elif (
            last is not None
            and last.status == "applied"
            and last.content_key == ckey
            and last.new_sha256 == cur_hash
        ):
            # The same change again (a call re-issued after an interrupted result).
            return _result(PatchStatus.ALREADY_APPLIED, cur_hash, seq=last.seq), None
        done = self.run_changes(history, req)
        if len(done) >= config.max_calls_per_run:  # counted from the file: a resume agrees
            return _rejected(
                RejectReason.LIMIT,
                f"this run already changed self.md {len(done)} times (#"
                f"{', #'.join(str(e.seq) for e in done)}); at most "
                f"{config.max_calls_per_run} per run (loop.self_md.max_calls_per_run): "
                "nothing written, keep the rest for a later run",
                cur_hash,
            ), None
        matches = base_matches(req.base_sha256, cur_hash)  # 2. concurrent edits
        if matches is None:
            return _rejected(
                RejectReason.FORMAT,
                f"base_sha256 must be the hash of self.md as you read it (at least "
                f"{MIN_BASE_PREFIX} hex characters); the file's is {cur_hash[:12]}",
                cur_hash,
            ), None
        if not matches:
            return PatchResult(
                result=PatchStatus.CONFLICT,
                reason=RejectReason.STALE_BASE,
                message=f"self.md changed since you read it (your base {req.base_sha256[:12]}, "
                f"now {cur_hash[:12]}); read the current self.md in your system prompt and "
                "patch it again",
                sha256=cur_hash,
            ), None
        problem = _check_rules(req, config)
        if problem is not None:
            return _rejected(*problem, cur_hash), None
        try:
            new_text = apply_op(current, req.section, req.op, req.content)
        except KeyError:
            return _rejected(
                RejectReason.NOT_FOUND,
                f"self.md has no section {req.section!r} to delete",
                cur_hash,
            ), None
        if new_text == current:
            return _rejected(
                RejectReason.NO_CHANGE, f"section {req.section!r} already says this", cur_hash
            ), None
        too_large = _size_problem(current, new_text, config)
        if too_large is not None:
            return _rejected(RejectReason.TOO_LARGE, too_large, cur_hash), None
        entry = HistoryEntry(
            seq=(last.seq + 1) if last is not None else 1,
            at=time.time(),
            member=self.member,
            by=self.member,
            idempotency_key=req.key,
            content_key=ckey,
            task_path=req.task_path,
            dialog_id=req.dialog_id,
            section=" ".join(req.section.split()),
            op=req.op,
            content=req.content,
            prev_sha256=cur_hash,
            prev_content=current,
            new_sha256=sha256_hex(new_text),
            rationale=req.rationale,
            evidence_refs=list(req.evidence_refs),
            run=req.run,
        )
        if config.require_approval:  # 3'. proposed: only the history entry
            entry.status, entry.approval_id = "proposed", proposal_id(req.key)
            self._append_history(entry)
            return _proposed(entry, cur_hash), entry
        self._write(entry, new_text)  # 3.
        return _result(PatchStatus.APPLIED, entry.new_sha256, seq=entry.seq), entry

    def decide_locked(
        self, approval_id: str, *, approve: bool, by: str, reason: str | None, config: SelfMdConfig
    ) -> HistoryEntry:
        """Carry out the human's decision on the proposal waiting for `approval_id`: apply
        it (an `applied` entry, self.md replaced) or record it `rejected`. Idempotent: the
        same decision again returns its entry. Applied exactly as proposed — on the file
        as it was then, or on a file changed elsewhere whose section is as it was then;
        else `SelfMdError`, nothing written. The caller holds `locked()`."""
        history = self.history()
        proposal = next(
            (e for e in history if e.status == "proposed" and e.approval_id == approval_id), None
        )
        if proposal is None:
            raise SelfMdError(
                f"no self.md proposal waits for approval {approval_id} in "
                f"{rel_paths(self.member)[1]}"
            )
        want = "applied" if approve else "rejected"
        for e in history:
            if e.proposal_seq == proposal.seq:
                if e.status == want:  # decided already (a crash before it was recorded)
                    return e
                undo = (
                    f"; `mindloop self revert {e.seq}` undoes it" if e.status == "applied" else ""
                )
                raise SelfMdError(
                    f"proposal #{proposal.seq} was already {e.status} (#{e.seq}){undo}"
                )
        current = self.read()
        cur_hash = sha256_hex(current)
        new_text = current
        if approve:
            new_text = self._as_proposed(proposal, current, cur_hash, config)
        entry = proposal.model_copy(
            update={
                "seq": history[-1].seq + 1,
                "at": time.time(),
                "idempotency_key": f"{proposal.idempotency_key}:{want}",
                "prev_sha256": cur_hash,
                "prev_content": current,
                "new_sha256": sha256_hex(new_text),
                "status": want,
                "approval_id": approval_id,
                "proposal_seq": proposal.seq,
                "decided_by": by,
                "decision_reason": reason,
            }
        )
        if approve:
            self._write(entry, new_text)
        else:
            self._append_history(entry)
        return entry

    def _as_proposed(
        self, proposal: HistoryEntry, current: str, cur_hash: str, config: SelfMdConfig
    ) -> str:
        """self.md with `proposal` applied: what it proposed, when nothing changed since;
        its section changed the same way, when only other sections changed."""
        if cur_hash == proposal.prev_sha256:
            return proposal.new_content()
        why = f"section {proposal.section!r} changed since"
        if section_text(current, proposal.section) == section_text(
            proposal.prev_content, proposal.section
        ):
            try:
                new_text = proposal.applied_to(current)
            except KeyError:
                new_text = None
            too_large = None if new_text is None else _size_problem(current, new_text, config)
            if new_text is not None and too_large is None:
                return new_text
            why = too_large or why
        raise SelfMdError(
            f"cannot apply proposal #{proposal.seq} (approval {proposal.approval_id}): {why}; "
            f"reject it (`mindloop reject {proposal.approval_id} --reason …`) and edit self.md "
            "yourself, or let a later run propose again"
        )

    def revert_locked(self, seq: int, *, key: str | None = None) -> HistoryEntry:
        """Undo change `seq` (a human's `mindloop self revert`): the whole file as it was
        before it when nothing changed since, else only its section, when that section
        has not changed since. Appends an entry; raises `SelfMdError` when it cannot. The
        caller holds `locked()`."""
        history = self.history()
        target = self.entry(seq, history)
        if target.status != "applied":
            raise SelfMdError(
                f"cannot revert #{seq}: it is a {target.status} change, not an applied one "
                "(self.md never held it)"
            )
        current = self.read()
        cur_hash = sha256_hex(current)
        if cur_hash == target.new_sha256:
            restored = target.prev_content
        elif target.op != "revert" and section_text(current, target.section) == section_text(
            target.new_content(), target.section
        ):
            restored = restore_section(current, target.prev_content, target.section)
        else:
            later = [
                e.seq
                for e in history
                if e.seq > seq
                and (e.op == "revert" or normal_title(e.section) == normal_title(target.section))
            ]
            since = (
                f" (changed by #{', #'.join(map(str, later))})" if later else " (edited by hand)"
            )
            raise SelfMdError(
                f"cannot revert #{seq}: section {target.section!r} changed since{since}; "
                "revert the later changes first, or edit the file"
            )
        if restored == current:
            raise SelfMdError(f"cannot revert #{seq}: self.md already has that content")
        key = key or sha256_hex(f"revert|{self.member}|{seq}|{uuid.uuid4().hex}")
        entry = HistoryEntry(
            seq=history[-1].seq + 1,
            at=time.time(),
            member=self.member,
            by="human",
            idempotency_key=key,
            content_key=content_key(self.member, target.section, "revert", restored),
            section=target.section,
            op="revert",
            content=restored,
            prev_sha256=cur_hash,
            prev_content=current,
            new_sha256=sha256_hex(restored),
            rationale=f"revert #{seq}",
            reverts_seq=seq,
        )
        self._write(entry, restored)
        return entry


def open_proposal(
    history: list[HistoryEntry], member: str, ckey: str, cur_hash: str
) -> HistoryEntry | None:
    """`member`'s undecided proposal of the change `ckey` on the file as it is, if any:
    a second call proposing it names the same approval."""
    decided = {e.proposal_seq for e in history if e.proposal_seq is not None}
    for e in reversed(history):
        if (
            e.status == "proposed"
            and e.seq not in decided
            and e.by == member
            and e.content_key == ckey
            and e.prev_sha256 == cur_hash
        ):
            return e
    return None


def _result(status: PatchStatus, sha: str, *, seq: int | None) -> PatchResult:
    return PatchResult(result=status, history_seq=seq, sha256=sha)


def _proposed(entry: HistoryEntry, sha: str) -> PatchResult:
    return PatchResult(
        result=PatchStatus.PROPOSED,
        history_seq=entry.seq,
        sha256=sha,
        approval_id=entry.approval_id,
        message=f"proposed as #{entry.seq}: self.md changes when the human approves it "
        f"(`mindloop approve {entry.approval_id}`); you do not wait for it",
    )


def _size_problem(current: str, new_text: str, config: SelfMdConfig) -> str | None:
    """Why `new_text` may not replace `current` by size (loop.self_md limits), if it may not."""
    old_tokens, new_tokens = count_tokens(current), count_tokens(new_text)
    if new_tokens - old_tokens > config.max_net_tokens_per_call:
        return (
            f"this change adds {new_tokens - old_tokens} tokens; at most "
            f"{config.max_net_tokens_per_call} per call (characters / 4): make it "
            "shorter, or replace text instead of adding"
        )
    if new_tokens > config.max_tokens and new_tokens > old_tokens:
        return (
            f"self.md would be {new_tokens} tokens; at most {config.max_tokens}: "
            "condense or delete a section first"
        )
    return None


def _rejected(reason: RejectReason, message: str, sha: str) -> PatchResult:
    return PatchResult(result=PatchStatus.REJECTED, reason=reason, message=message, sha256=sha)


def _check_rules(req: PatchRequest, config: SelfMdConfig) -> tuple[RejectReason, str] | None:
    """The rules a change must follow whatever the file holds."""
    title = " ".join(req.section.split())
    if not title:
        return (
            RejectReason.PROTECTED,
            "the preamble (text before the first ## heading) is for humans",
        )
    if "\n" in req.section.strip() or title.startswith("#"):
        return RejectReason.FORMAT, "section is a title (the text after '## '), one line"
    if is_protected(title, config.protected_sections):
        return RejectReason.PROTECTED, (
            f"section {title!r} is protected: only humans edit it (loop.self_md."
            f"protected_sections, or a heading ending in {PROTECTED_MARK})"
        )
    if req.op == "delete" and req.content.strip():
        return RejectReason.FORMAT, "delete takes no content"
    if req.op != "delete" and not req.content.strip():
        return RejectReason.FORMAT, f"{req.op} needs content (use delete to remove a section)"
    if headings(req.content):
        return RejectReason.FORMAT, "content must not contain '## ' headings: one section per call"
    found = privacy_problem(req.content) or privacy_problem(req.rationale)
    if found is not None:
        return (
            RejectReason.PRIVACY,
            f"not written: {found}; self.md must hold no secrets or personal data",
        )
    return None
