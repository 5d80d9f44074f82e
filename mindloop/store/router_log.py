"""The Router's decisions, as records (DESIGN.md §8.8: "each decision (input, candidate
tasks, decision, usage) is recorded in the store").

The Router is one standalone model call, not a dialog, so it has no messages or
generations of its own; this table is its whole trace: the message it was given, the
tasks it could choose from, every attempt (a refused answer and why), what it decided or
why it could not, and the tokens and cost of the call.

`RouterDecision` is also the schema of the Router's one tool call (its field
descriptions are what the model reads), so the decision that is stored is exactly the
one the model made, once checked.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, model_validator

from mindloop.store import schema as t
from mindloop.store.statements import prebuilt
from mindloop.store.tasks import TaskStatus

_R = TypeVar("_R", bound=BaseModel)


class RouterCandidate(BaseModel):
    """A task the Router may pick: its id (the package path) and topic."""

    task: str  # rtws-relative package path: the id the Router answers with
    topic: str
    status: TaskStatus | None = None  # None: the package has no loop root yet
    updated_at: float | None = None


class RouterDecision(BaseModel):
    """Where a message goes: an existing task (one of the candidates, by id) or a new
    task made from the message; whether to reply to the user now, and with what."""

    model_config = ConfigDict(extra="forbid")

    target_task_id: str | None = Field(
        default=None,
        description="The id of the task the message continues, copied exactly from the "
        "list of tasks. Null when create_new_task is true.",
    )
    create_new_task: bool = Field(
        default=False,
        description="True when no listed task is clearly the one the message is about: a "
        "new task is created from the message. Never guess an id.",
    )
    new_task_slug: str | None = Field(
        default=None,
        description="With create_new_task: a short kebab-case name for the new task "
        "(letters, digits, '-'), e.g. login-page.",
    )
    new_task_topic: str | None = Field(
        default=None,
        description="With create_new_task: the new task's topic, one short line.",
    )
    should_reply_user: bool = Field(
        default=True,
        description="False when the input needs no reply to the user (e.g. an event).",
    )
    quick_reply: str | None = Field(
        default=None,
        description="Optional: a short reply shown to the user at once (e.g. what will "
        "happen next). Never the work itself.",
    )
    ask_which_task: bool = Field(
        default=False,
        description="True when the message could continue two or more listed tasks and "
        "nothing in it says which: the human is asked which task should continue.",
    )
    question: str | None = Field(
        default=None,
        description="With ask_which_task: the question for the human, one short line.",
    )
    options: list[str] = Field(
        default_factory=list,
        description="With ask_which_task: the ids of the listed tasks the message could "
        "continue (two or more), each copied exactly from the list.",
    )
    reason: str = Field(default="", description="One sentence: why this task.")

    @model_validator(mode="after")
    def _one_target(self) -> RouterDecision:
        chosen = [
            name
            for name, on in (
                ("target_task_id", bool(self.target_task_id)),
                ("create_new_task", self.create_new_task),
                ("ask_which_task", self.ask_which_task),
            )
            if on
        ]
        if len(chosen) > 1:
            raise ValueError(
                "set one of target_task_id (an existing task), create_new_task or "
                f"ask_which_task, not both {chosen[0]} and {chosen[1]}"
            )
        if not chosen:
            raise ValueError(
                "no target: set target_task_id to a listed task's id, create_new_task to "
                "true, or ask_which_task when several listed tasks fit"
            )
        if self.ask_which_task and len(set(self.options)) < 2:
            raise ValueError(
                "ask_which_task needs the ids of the two or more listed tasks the message "
                "could continue, in options"
            )
        if self.options and not self.ask_which_task:
            raise ValueError("options go with ask_which_task")
        return self


class RouterAttempt(BaseModel):
    """One model call of a Router run: what came back, and why it was refused (if so)."""

    answer: str  # the tool call's arguments as sent, or the reply text without a call
    error: str | None = None  # None: accepted
    input_tokens: int | None = None
    output_tokens: int | None = None


class RouterRecord(BaseModel):
    """One Router run, accepted or failed."""

    id: int = 0
    created_at: float = 0.0
    message: str
    candidates: list[RouterCandidate]
    # asking: the decision asks the human which task should continue (`ask_which_task`);
    # the record becomes accepted, with its task, once the human answered
    status: Literal["accepted", "failed", "asking"]
    decision: RouterDecision | None = None
    attempts: list[RouterAttempt] = Field(default_factory=list)
    error: str | None = None  # why it failed
    task_path: str | None = None  # the task the message went to
    root_id: str | None = None  # its loop root
    created_task: bool = False
    member: str  # whose provider, model and model_params the call used
    provider: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


INSERT_ROUTER_DECISION = sa.insert(t.router_decisions)
_c = t.router_decisions.c
ROUTER_DECISIONS = sa.select(t.router_decisions).order_by(_c.id)
LATEST_ROUTER_DECISIONS = (
    sa.select(t.router_decisions).order_by(_c.id.desc()).limit(sa.bindparam("limit"))
)


class RouterLog:
    """The store's methods on `router_decisions` (a base of `Store`)."""

    if TYPE_CHECKING:  # provided by Store

        def _insert(self, stmt: sa.Executable, params: dict[str, Any]) -> int: ...
        def _records(
            self, model: type[_R], stmt: sa.Executable, params: dict[str, Any] | None = None
        ) -> list[_R]: ...

    def record_router_decision(self, rec: RouterRecord) -> RouterRecord:
        """Store one Router run (joining the caller's transaction, if any)."""
        rec = rec.model_copy(update={"created_at": rec.created_at or time.time()})
        row = rec.model_dump(mode="json", exclude={"id"})
        return rec.model_copy(update={"id": self._insert(INSERT_ROUTER_DECISION, row)})

    def router_decisions(self, limit: int | None = None) -> list[RouterRecord]:
        """Router runs, oldest first (the latest `limit` of them if given)."""
        if limit is None:
            return self._records(RouterRecord, ROUTER_DECISIONS)
        latest = self._records(RouterRecord, LATEST_ROUTER_DECISIONS, {"limit": limit})
        return latest[::-1]


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
