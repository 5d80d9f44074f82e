"""The closed outcomes of the engine: how a step ends, and how a drive ends.

A step of a drive (one generation, then its tools) returns exactly one `StepOutcome`;
the drive loop matches on it instead of reading flags. A drive ends with one `DriveEnd`.
Both are closed: adding a case means handling it where the loop matches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from mindloop.store import UsageTotals


class DriveEnd(StrEnum):
    DONE = "done"  # the model answered without tool calls or tellasks
    WAITING = "waiting"  # it waits on side dialogs, the human, or another wait
    STEP_LIMIT = "step_limit"  # the per-drive step limit was reached
    STOPPED = "stopped"  # the turn policy ended the drive
    CAP_REACHED = "cap_reached"  # a spending cap of team.yaml (`caps:`) was reached
    ERROR = "error"  # a provider failure or a policy error
    CANCELLED = "cancelled"  # interrupted (Ctrl-C, shutdown): resumed by the next run
    # the run that drove it ended meanwhile (its task's loop parked, say): the drive
    # stopped at its step's end, nothing cut off; resumed by the next run
    PAUSED = "paused"
    IDLE = "idle"  # there was nothing to answer
    CLAIMED = "claimed"  # another live process drives this dialog; not touched


@dataclass
class DriveResult:
    dialog_id: str
    reason: DriveEnd
    steps: int = 0
    final_text: str = ""
    error: str | None = None
    usage: UsageTotals = field(default_factory=UsageTotals)  # this drive's generations
    cap: str | None = None  # with CAP_REACHED: which cap, as a sentence
    cap_scope: str | None = None  # with CAP_REACHED: "drive" or "task" (`caps.CapScope`)
    # A drive carried on by its segue (`Driver.drive`) is a run of segments: where the
    # current one started (steps, cost), so a caller can tell what its last one spent.
    segment_start: tuple[int, float] = (0, 0.0)

    @property
    def segment_steps(self) -> int:
        return self.steps - self.segment_start[0]

    @property
    def segment_cost(self) -> float:
        return self.usage.cost_usd - self.segment_start[1]

    def next_segment(self) -> None:
        self.segment_start = (self.steps, self.usage.cost_usd)


@dataclass(frozen=True)
class Continue:
    """Tools ran; the model speaks again."""


@dataclass(frozen=True)
class Final:
    """The model answered: no tool calls, no tellasks."""

    text: str


@dataclass(frozen=True)
class Waiting:
    """The dialog now waits on something outside this drive."""


@dataclass(frozen=True)
class Failed:
    """The generation failed (provider error, policy error): the drive stops."""

    error: str


StepOutcome = Continue | Final | Waiting | Failed
