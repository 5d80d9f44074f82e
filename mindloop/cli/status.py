"""The live "who is working" lines under the transcript (a rich spinner, terminals only).

While a generation has produced nothing the user can see yet, a line says which member
works on which model and for how long; a retry of the model call says so on that line
while it waits; `run --watch` shows an idle line when nothing runs. The lines are drawn by
a transient `rich.live.Live` whose renderable is recomputed at each refresh (so the
elapsed time moves on its own) and which the transcript renderer stops before it writes
anything and starts again after. On a console that is not a terminal nothing is drawn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

Clock = Callable[[], float]


def elapsed(seconds: float) -> str:
    """`7s`, `2m 03s`, `1h 02m`: short, and fixed in shape as it grows."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


@dataclass
class Working:
    """One generation the user is waiting on."""

    member: str
    model: str
    indent: str
    since: float
    doing: str = "is working"
    attempt: tuple[int, int] | None = None  # (attempt, of how many) once retried
    retry_at: float = 0.0  # when the retry's wait ends

    def describe(self, now: float) -> str:
        if self.attempt is None:
            return self.doing
        n, most = self.attempt
        if now < self.retry_at:
            return f"waits to retry ({n} of {most}, in {elapsed(self.retry_at - now + 0.999)})"
        return f"{self.doing} (attempt {n} of {most})"


class WorkingStatus:
    def __init__(self, console: Console, *, clock: Clock = time.monotonic) -> None:
        self.console = console
        self.enabled = console.is_terminal and not console.is_dumb_terminal
        self.clock = clock
        self._working: dict[str, Working] = {}
        self._spinners: dict[str, Spinner] = {}
        self._idle_since: float | None = None
        self._live: Live | None = None

    # ------------------------------------------------------------------ state

    def start(self, dialog_id: str, member: str, model: str, indent: str = "") -> None:
        self._working[dialog_id] = Working(member, model, indent, self.clock())

    def set_doing(self, dialog_id: str, doing: str) -> None:
        w = self._working.get(dialog_id)
        if w is not None:
            w.doing = doing

    def retrying(self, dialog_id: str, attempt: int, of: int, delay: float) -> None:
        """The generation's model call failed; attempt `attempt` of `of` starts in `delay`."""
        w = self._working.get(dialog_id)
        if w is not None:
            w.attempt = (attempt, of)
            w.retry_at = self.clock() + delay

    def stop(self, dialog_id: str) -> None:
        self._working.pop(dialog_id, None)
        self._spinners.pop(dialog_id, None)

    def waiting_on(self, dialog_id: str) -> bool:
        return dialog_id in self._working

    def set_idle(self, since: float | None) -> None:
        """Show (since a monotonic time) or drop the idle line of `run --watch`."""
        self._idle_since = since

    def lines(self) -> list[str]:
        """The status lines as plain text, oldest generation first."""
        now = self.clock()
        out = [
            f"{w.indent}@{w.member} {w.describe(now)} · {w.model} · {elapsed(now - w.since)}"
            for w in list(self._working.values())
        ]
        if not out and self._idle_since is not None:
            out.append(f"watching for work · idle {elapsed(now - self._idle_since)} · Ctrl-C stops")
        return out

    # ------------------------------------------------------------------ drawing

    def _renderable(self) -> RenderableType:
        rows: list[RenderableType] = []
        for key, line in zip([*self._working, "idle"], self.lines(), strict=False):
            spinner = self._spinners.get(key)
            if spinner is None:
                spinner = self._spinners[key] = Spinner("dots", style="cyan")
            spinner.update(text=Text(line, style="dim"))
            rows.append(spinner)
        return Group(*rows)

    @property
    def has_lines(self) -> bool:
        return bool(self._working) or self._idle_since is not None

    def show(self) -> None:
        """Draw the lines (if there are any, on a terminal) until `hide`."""
        if not self.enabled or self._live is not None or not self.has_lines:
            return
        self._live = Live(
            console=self.console,
            get_renderable=self._renderable,
            refresh_per_second=8,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()

    def hide(self) -> None:
        """Erase the lines, so the transcript can be written where they were."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()
