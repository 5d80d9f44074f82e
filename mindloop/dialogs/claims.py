"""One driver per dialog, across processes: the claim a drive holds.

A drive takes its dialog's claim (an owner id and an expiry) in the same transaction that
marks it running (`Store.claim_dialog`: one conditional update under the write lock, so
of processes racing for a dialog exactly one wins); a process that finds a dialog claimed
skips it and does not wait. While the drive runs, a heartbeat renews the claim every
quarter of its time to live — so a generation that streams for longer than the time to
live keeps it — and every commit of the drive checks it inside its transaction: renewed
within a third of its time to live it cannot have expired (no statement); otherwise it
is renewed there, and a drive that lost its claim (its process stalled past the expiry
and another took over) cannot commit: its transaction rolls back. The claim is released with the
dialog's final status when the drive settles.

A process that posts a message and drives it itself (`chat`) reserves the claim in the
transaction that posts (`reserve`): no other process starts that drive in between, and a
reservation whose process died or that expired is anybody's again.

Recovery (`recover`) resumes only dialogs whose claim expired, or whose owner is a
process of this host that no longer exists (the owner id names host, pid and the
process's start time, so a reused pid is not mistaken for the owner). A claim of a live
process, or of another host before it expires, is never taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mindloop.errors import MindloopError
from mindloop.store import DialogRecord, DialogStatus, Store

# How long a claim lives without renewal; `MINDLOOP_CLAIM_TTL` (seconds) overrides it.
DEFAULT_CLAIM_TTL = 60.0
CLAIM_TTL_ENV = "MINDLOOP_CLAIM_TTL"


class ClaimLost(MindloopError):
    """This process no longer holds the claim of the dialog it was driving."""


def claim_ttl_from_env(default: float = DEFAULT_CLAIM_TTL) -> float:
    raw = os.environ.get(CLAIM_TTL_ENV)
    if not raw:
        return default
    try:
        ttl = float(raw)
    except ValueError:
        raise MindloopError(f"{CLAIM_TTL_ENV}={raw!r}: must be a number of seconds") from None
    if ttl <= 0:
        raise MindloopError(f"{CLAIM_TTL_ENV}={raw!r}: must be greater than 0")
    return ttl


def _start_ticks(pid: int) -> str | None:
    """The start time of process `pid` (Linux: clock ticks since boot), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


@dataclass(frozen=True)
class Owner:
    """Who holds claims: this host, this process (pid and start time), this runtime."""

    host: str
    pid: int
    started: str
    nonce: str

    @classmethod
    def this_process(cls) -> Owner:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _start_ticks(pid) or "?", uuid.uuid4().hex[:8])

    @property
    def id(self) -> str:
        return f"{self.host}/{self.pid}/{self.started}/{self.nonce}"


def owner_is_dead(owner_id: str, host: str | None = None) -> bool:
    """Whether a claim's owner is a process of this host that no longer exists. Owners on
    other hosts (or ids this cannot read) are never declared dead: their claims expire."""
    parts = owner_id.split("/")
    if len(parts) != 4 or parts[0] != (host or socket.gethostname()):
        return False
    try:
        pid = int(parts[1])
    except ValueError:
        return False
    started = _start_ticks(pid)
    if started is not None:
        return started != parts[2]
    if os.path.isdir("/proc"):  # Linux: no such process
        return True
    try:  # elsewhere: whether any process has that pid
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Claims:
    """The claims of one runtime (one owner id)."""

    def __init__(self, store: Store, ttl: float) -> None:
        self.store = store
        self.ttl = ttl
        self.owner = Owner.this_process().id
        self._renewed: dict[str, float] = {}  # dialog -> when its claim was last extended

    def take(self, dialog_id: str) -> DialogRecord | None:
        """Inside the caller's transaction: claim the dialog and mark it running; its
        record as it now stands, or None if another live process holds it."""
        taken = self.store.claim_dialog(dialog_id, self.owner, self.ttl)
        if taken is not None:
            self._renewed[dialog_id] = time.monotonic()
        return taken

    def reserve(self, dialog_id: str) -> bool:
        """Inside the caller's transaction (the one posting the message this process is
        about to drive): hold the dialog's claim ahead of the drive, so a `run --watch`
        beside this process does not take the drive over between the post and its start.
        Whether it was taken (not while another live process drives the dialog)."""
        return self.store.reserve_dialog(dialog_id, self.owner, self.ttl)

    def renew(self, dialog_id: str) -> None:
        """Inside the caller's transaction (a commit of the drive): make sure the claim
        holds, or raise `ClaimLost` (which rolls the transaction back). A claim renewed
        less than a third of its time to live ago cannot have expired, so the common
        case costs no statement; otherwise it is extended (one conditional update)."""
        if time.monotonic() - self._renewed.get(dialog_id, -1e18) < self.ttl / 3:
            return
        if not self.store.renew_claim(dialog_id, self.owner, self.ttl):
            raise ClaimLost(f"dialog {dialog_id}: this process no longer holds its claim")
        self._renewed[dialog_id] = time.monotonic()

    def settle(self, dialog_id: str, status: DialogStatus, **fields: Any) -> None:
        """Inside the caller's transaction: the dialog's final status and the release of
        its claim, in one statement."""
        self._renewed.pop(dialog_id, None)
        self.store.settle_dialog(dialog_id, self.owner, status=status, **fields)

    @contextlib.contextmanager
    def heartbeat(self, dialog_id: str) -> Iterator[None]:
        """Renew the claim every quarter of its time to live while the block runs: a
        timer callback on the running loop (no task to create, or to await when done)."""
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def beat() -> None:
            nonlocal handle
            with contextlib.suppress(Exception):  # a failed renewal shows at the next commit
                if self.store.renew_claim(dialog_id, self.owner, self.ttl):
                    self._renewed[dialog_id] = time.monotonic()
            handle = loop.call_later(self.ttl / 4, beat)

        handle = loop.call_later(self.ttl / 4, beat)
        try:
            yield
        finally:
            handle.cancel()

    def recover(self, now: float | None = None) -> list[str]:
        """Mark to drive again every dialog left running by an owner that is gone (claim
        expired, or a dead process of this host); returns their ids."""
        now = time.time() if now is None else now
        store = self.store
        host = socket.gethostname()
        for did, owner in store.held_claims():
            if owner and owner != self.owner and owner_is_dead(owner, host):
                store.expire_claim(did, owner)
        with store.tx():  # under the write lock: nobody claims one of them meanwhile
            found = store.expired_running_dialogs(now)
            for did in found:
                store.update_dialog(did, status=DialogStatus.INTERRUPTED, needs_drive=True)
        return found
