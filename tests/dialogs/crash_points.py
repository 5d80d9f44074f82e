"""A store that dies at a chosen commit, as a killed process would, for in-process tests
of what a crash at that point leaves behind."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.store import Store, WaitRecord, WaitStatus
from mindloop.store.location import env_dialect


class CrashingStore(Store):
    """Dies (raises) at the commit that records the given event type, before or after
    that commit — what a killed process leaves behind at that point. Wait records count
    as events too: `wait_opened:<kind>` and `wait_resolved:<kind>`."""

    def __init__(self, path: Path, event: str, after: bool) -> None:
        self.event, self.after, self.armed = event, after, False
        super().__init__(path, durable=False, dialect=env_dialect(durable=False))

    def _reached(self, type: str) -> None:
        if type == self.event and not self.after:
            raise SystemExit("killed before the commit")
        if type == self.event:
            self.armed = True

    def record_event(self, type: str, dialog_id: str | None, data: dict[str, Any]) -> None:
        super().record_event(type, dialog_id, data)
        self._reached(type)

    def add_wait(self, rec: WaitRecord) -> WaitRecord:
        done = super().add_wait(rec)
        self._reached(f"wait_opened:{rec.kind}")
        return done

    def resolve_wait(
        self, wait_id: str, status: WaitStatus, resolution: dict[str, Any]
    ) -> WaitRecord | None:
        done = super().resolve_wait(wait_id, status, resolution)
        if done is not None:
            self._reached(f"wait_resolved:{done.kind}")
        return done

    def tx(self, *, durable: bool = True) -> Any:  # type: ignore[override]
        outer = self

        class _Tx:
            def __enter__(self) -> Any:
                self._cm = Store.tx(outer, durable=durable)
                return self._cm.__enter__()

            def __exit__(self, *exc: Any) -> Any:
                done = self._cm.__exit__(*exc)
                if outer.armed and outer._depth == 0:
                    raise SystemExit("killed after the commit")
                return done

        return _Tx()


def process_died(rt: DialogRuntime) -> None:
    """End the claims a simulated dead process left (a real death is told by its pid)."""
    for did, owner in rt.store.held_claims():
        if owner:
            rt.store.expire_claim(did, owner)


class DiesAfterCommit(Store):
    """Dies (raises SystemExit) right after the first commit after which `when(store)`
    holds — what a process killed between that commit and whatever it would have done
    next leaves behind."""

    def __init__(self, path: Path, when: Callable[[Store], bool]) -> None:
        self.when, self.armed = when, False
        super().__init__(path, durable=False, dialect=env_dialect(durable=False))
        self.armed = True  # the schema migration in __init__ does not count

    @contextmanager
    def tx(self, *, durable: bool = True) -> Iterator[Any]:
        outer = self._depth == 0
        with Store.tx(self, durable=durable) as conn:
            yield conn
        if outer and self.armed and self.when(self):
            self.armed = False
            raise SystemExit("killed after the commit")
