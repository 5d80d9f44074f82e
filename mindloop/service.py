"""The use cases every face calls: open a project, start a chat, post, send a task's work
loop a message, ask (a message the Router routes to a task), answer a question, retry a
dialog that stopped on an error, run (or watch), and list and show what is stored.

The CLI, the demo command and the web UI must do each of these the same way, so the way
lives here, once:

- What the user gave is checked completely before the state database is opened: the
  configuration (`open_project`), then the task package, the member, the member's provider
  (built, so a missing API key is refused) and its mock script, the dialog or question
  named. A refusal raises a `MindloopError` and changes nothing on disk.
- A new root dialog and its first message commit in one transaction
  (`DialogRuntime.start_root_dialog`): a crash never leaves a root without its message.
- What a run came to is a typed value (`DriveReport`, with its `Outcome`) that the faces
  render; they map outcomes to exit codes or HTTP statuses and decide nothing themselves.

Commands that only read (`list_dialogs`, `show_dialog`, `list_questions`) never create
state and need no valid configuration: an rtws that has run nothing simply has nothing.

A project's listeners hear the runtime's events and, as `ProviderRetried` events, every
retry of a model call (the provider pool's notices, tied to the dialog whose generation
is retried).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mindloop.config import (
    Config,
    ConfigError,
    LlmConfig,
    load_config,
    tool_selection_problems,
)
from mindloop.dialogs.approvals import ApprovalView
from mindloop.dialogs.runtime import DEFAULT_MAX_STEPS, DialogRuntime, DriveEnd, DriveResult
from mindloop.dialogs.scheduler import Scheduler
from mindloop.dialogs.wait_kinds import SystemEvent
from mindloop.errors import MindloopError, NotFoundError, RtwsError
from mindloop.events.otel_setup import Tracing, tracing_from_env
from mindloop.events.types import Event, ProviderRetried
from mindloop.i18n import Lang
from mindloop.loop import api as loop_api
from mindloop.loop.driver import LoopPolicies, LoopReport
from mindloop.loop.kb import KbDispatcher
from mindloop.loop.router import Router, RoutingFailed
from mindloop.loop.router_copy import WHICH_TASK
from mindloop.loop.tasks import create_task_package, one_line, post_to_task, task_candidates
from mindloop.providers.base import Provider
from mindloop.providers.mock import MockProvider
from mindloop.providers.mock_script import MockScriptError, validate_script
from mindloop.providers.pool import RetryNotice, build_provider
from mindloop.store import (
    STATE_DIR,
    STATE_FILE,
    DialogRecord,
    GenerationRecord,
    MessageRecord,
    QuestionRecord,
    RouterCandidate,
    RouterRecord,
    Store,
    TaskRecord,
    UsageTotals,
    WaitRecord,
    loop_state,
)
from mindloop.store.location import database_url
from mindloop.store.router_questions import (
    ASKING,
    open_router_questions,
    router_record,
    settle_router_question,
)
from mindloop.store.waits import open_waits_of_kind
from mindloop.taskdoc import TaskPackage, discover_packages
from mindloop.taskdoc.fsio import atomic_write
from mindloop.taskdoc.package import slug_from_text
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets import config_registry

Listener = Callable[[Event], None]

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------- results


class Outcome(StrEnum):
    """What a run came to, seen from one dialog tree (or from the whole rtws)."""

    DONE = "done"  # answered, or nothing was left to do
    WAITING = "waiting"  # waits on the human (an open question or approval)
    STEP_LIMIT = "step_limit"  # a drive stopped at the per-drive step limit
    CAP_REACHED = "cap_reached"  # a drive stopped at a spending cap (`caps:` in team.yaml)
    ERROR = "error"  # a drive stopped on an error (or raised)
    FAILED = "failed"  # a task's loop ended FAILED (a node failed at its cap)


# Which outcome a run reports when several parts of it came to different ones.
_WORST = [
    Outcome.ERROR,
    Outcome.CAP_REACHED,
    Outcome.STEP_LIMIT,
    Outcome.FAILED,
    Outcome.WAITING,
    Outcome.DONE,
]


class LoopSummary(BaseModel):
    """What a task's work loop came to in a run (`mindloop run TASK`)."""

    task: str
    root_id: str
    outcome: Outcome
    reason: str = ""
    phase: str | None = None
    entries: int = 0  # phases entered during the run
    kb_delivered: int = 0  # KB requests posted to the KB dialog before the run returned

    @classmethod
    def of(cls, r: LoopReport) -> LoopSummary:
        return cls(
            task=r.task_path,
            root_id=r.root_id,
            outcome=Outcome(r.outcome.value),
            reason=r.reason,
            phase=r.phase.value if r.phase else None,
            entries=r.entries,
            kb_delivered=r.kb_delivered,
        )


class Posted(BaseModel):
    """A message posted to a root dialog (new or continued)."""

    dialog: DialogRecord
    message: MessageRecord | None  # None: it answered a question (`answered`) instead
    tree: list[DialogRecord]  # the root's dialog tree as it was when the message went in
    created_task: str | None = None  # the package made for a chat started without a task
    answered: str | None = None  # the task's only open question, which the message answered

    @classmethod
    def to_root(
        cls, store: Store, root_id: str, msg: MessageRecord | None, *, answered: str | None = None
    ) -> Posted:
        """A post to loop root `root_id`: the root and its tree, read once."""
        tree = store.list_dialogs(root_id=root_id)
        root = next(d for d in tree if d.id == root_id)
        return cls(dialog=root, message=msg, tree=tree, answered=answered)


class Answered(BaseModel):
    question_id: str
    dialog_id: str  # the dialog that asked, now driven on
    root_id: str  # the root of its tree


class Decided(BaseModel):
    """An approval decided (`approve` / `reject`): its dialog is driven on."""

    approval_id: str
    decision: str  # approve | edit | reject
    dialog_id: str
    root_id: str
    # What the decision did at once, for a change a tool proposed (the tool's words:
    # "self.md of @dev: proposal #1 applied as #2"); None: the call runs in its dialog.
    result: str | None = None


class DriveReport(BaseModel):
    """What one run of the scheduler came to. With `root_id` it is seen from that tree:
    failures, step limits and questions elsewhere in the rtws do not count."""

    root_id: str | None = None
    # The root's latest answer when another process drove it (not streamed here).
    answer: str | None = None
    max_steps: int
    resumed: list[str] = []  # dialogs a crash left running, resumed by this run
    drives: list[DriveResult] = []
    crashed: list[str] = []  # drives that raised instead of ending (e.g. a broken store)
    tree: list[DialogRecord] = []  # the root's tree after the run
    questions: list[QuestionRecord] = []  # open questions (of the tree, with `root_id`)
    approvals: list[ApprovalView] = []  # calls waiting for approval (likewise)
    members: dict[str, str] = {}  # dialog id -> member, for the tree and every failed drive
    tree_usage: UsageTotals | None = None  # the root's whole tree, every run so far
    loops: list[LoopSummary] = []  # the task loops this run drove

    @property
    def loop(self) -> LoopSummary | None:
        """The loop of the task this run was about (`mindloop run TASK`)."""
        return next((x for x in self.loops if x.root_id == self.root_id), None)

    def _in_scope(self, r: DriveResult) -> bool:
        return self.root_id is None or any(d.id == r.dialog_id for d in self.tree)

    @property
    def failed(self) -> list[DriveResult]:
        return [r for r in self.drives if r.reason is DriveEnd.ERROR and self._in_scope(r)]

    @property
    def step_limited(self) -> list[DriveResult]:
        return [r for r in self.drives if r.reason is DriveEnd.STEP_LIMIT and self._in_scope(r)]

    @property
    def capped(self) -> list[DriveResult]:
        """Drives a spending cap stopped (`DriveResult.cap` says which)."""
        return [r for r in self.drives if r.reason is DriveEnd.CAP_REACHED and self._in_scope(r)]

    @property
    def usage(self) -> UsageTotals:
        """Tokens and cost of this run's drives (in scope)."""
        total = UsageTotals()
        for r in self.drives:
            if self._in_scope(r):
                total.merge(r.usage)
        return total

    @property
    def last(self) -> DriveResult | None:
        """The root's last drive of this run (None when it was not driven)."""
        mine = [r for r in self.drives if r.dialog_id == self.root_id]
        return mine[-1] if mine else None

    @property
    def outcome(self) -> Outcome:
        found = [self._drives_outcome(), *(x.outcome for x in self.loops)]
        return min(found, key=_WORST.index)

    def _drives_outcome(self) -> Outcome:
        if self.failed or self.crashed:
            return Outcome.ERROR
        if self.capped:
            return Outcome.CAP_REACHED
        if self.step_limited:
            return Outcome.STEP_LIMIT
        if self.questions or any(not a.proposal for a in self.approvals):
            return Outcome.WAITING  # (a proposed change left to decide holds nothing up)
        return Outcome.DONE

    def member_of(self, dialog_id: str) -> str | None:
        return self.members.get(dialog_id)


class DialogSummary(DialogRecord):
    messages: int | None = None  # how many messages it holds (when asked for)
    usage: UsageTotals | None = None  # its generations' tokens and cost (when asked for)


class TreeNode(BaseModel):
    """One dialog of a tree, depth-first: the root at depth 0, its side dialogs below."""

    dialog: DialogRecord
    depth: int
    asks_human: bool  # it has an open question
    waiting_on: int  # its tellasks not answered yet


class Transcript(BaseModel):
    dialog: DialogRecord
    messages: list[MessageRecord]
    generations: list[GenerationRecord]
    usage: UsageTotals  # of this dialog's generations
    tree_usage: UsageTotals  # of its whole dialog tree (the root's and every side dialog's)
    # What a model said before Ctrl-C or a crash cut it off: kept, but not part of the
    # history (the generation is re-run on resume). Store events: {"ts", "data": {...}}.
    interrupted: list[dict[str, Any]]


# ---------------------------------------------------------------------------- the project


class Project:
    """An rtws opened for use: its configuration loaded and checked. The runtime, and so
    the state database, is opened only when a use case needs it, after that use case has
    checked its input. Close it with `aclose()` (or `async with`)."""

    def __init__(
        self,
        rtws: Path,
        config: Config,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        providers: Mapping[str, Provider] | None = None,
        durable: bool = True,
        tracing: Tracing | None = None,
        tools: ToolRegistry | None = None,
    ) -> None:
        self.rtws = rtws
        self.config = config
        self._tools = tools
        self.max_steps = max_steps
        self.durable = durable
        self._injected = dict(providers or {})
        self._built: dict[str, Provider] = {}  # built here to check them; closed here
        self._listeners: list[Listener] = []
        # Spans of the runtime's events (`events.otel`), when tracing is configured.
        self.tracing = tracing
        if tracing is not None:
            self._listeners.append(tracing.recorder)
        self._runtime: DialogRuntime | None = None
        self._recovered = False
        # The turn policy of each task's loop root in its phase (DESIGN.md §8.13).
        self.loops = LoopPolicies(config.team.work_language)

    @property
    def state_file(self) -> Path:
        return self.rtws / STATE_DIR / STATE_FILE

    def has_state(self) -> bool:
        return database_url() is not None or self.state_file.is_file()

    def subscribe(self, listener: Listener) -> None:
        """Hear the runtime's events (a renderer, a web socket …) from now on."""
        self._listeners.append(listener)
        if self._runtime is not None:
            self._runtime.bus.subscribe(listener)

    @property
    def runtime(self) -> DialogRuntime:
        """The engine; opening it creates the state database when there is none."""
        if self._runtime is None:
            rt = DialogRuntime(
                self.rtws,
                config=self.config,
                max_steps=self.max_steps,
                durable=self.durable,
                providers={**self._built, **self._injected},
                tools=self._tools,
                policies=self.loops,
            )
            rt.providers.on_retry(lambda notice: rt.bus.publish(_retry_event(notice)))
            self.loops.bind(rt)  # loop roots get their phase's policy whoever drives them
            for listener in self._listeners:
                rt.bus.subscribe(listener)
            self._runtime = rt
        return self._runtime

    def check_member(self, member_id: str) -> None:
        """Refuse now what would fail the member's first generation: an unknown member, a
        provider that cannot be built (a missing API key), a broken mock script."""
        member = self.config.member(member_id)
        provider = self._provider(member_id)
        if isinstance(provider, MockProvider):
            model = self.config.model_info(member_id)
            script = provider.script_path(model.name or member.model)
            # A missing script is the mock's own loud failure, with an entry to paste.
            problems = validate_script(script) if script.exists() else []
            if problems:
                raise MockScriptError([_rtws_relative(self.rtws, p) for p in problems])

    def _provider(self, member_id: str) -> Provider:
        """The member's provider, built now if nobody has yet (the runtime then uses it)."""
        cfg = self.config.provider_for(member_id)
        provider = self._injected.get(cfg.name)
        if provider is not None:
            return provider
        if self._runtime is not None:
            return self._runtime.providers.get(cfg.name)
        provider = self._built.get(cfg.name)
        if provider is None:
            provider = self._built[cfg.name] = build_provider(cfg, self.rtws)
        return provider

    def recover(self) -> list[str]:
        """Dialogs a crash left running are marked to drive again; done once per project
        (by `run` if not before). Returns what this call resumed."""
        if self._recovered:
            return []
        self._recovered = True
        return self.runtime.recover()

    async def aclose(self) -> None:
        if self._runtime is not None:
            await self._runtime.aclose()
            self._runtime = None
        for provider in self._built.values():
            await provider.aclose()
        self._built.clear()
        if self.tracing is not None:
            self.tracing.close()  # open spans end, queued ones are exported
            self.tracing = None

    async def __aenter__(self) -> Project:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _retry_event(n: RetryNotice) -> ProviderRetried:
    return ProviderRetried(
        dialog_id=n.caller,
        member=n.member,
        provider=n.provider,
        model=n.model,
        host=n.host,
        attempt=n.attempt,
        max_attempts=n.max_attempts,
        status=n.status,
        error=n.error,
        delay=n.delay,
    )


def open_project(
    rtws: Path | str,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    providers: Mapping[str, Provider] | None = None,
    durable: bool = True,
    tracer_provider: Any = None,
) -> Project:
    """Load and check an rtws's configuration (team, providers, tool names); nothing is
    written. `providers` replace the llm.yaml entries of their names (e.g. a
    `mindloop.testing.ScriptedModel` under the name the team's members use).

    The runtime's events become OpenTelemetry spans when tracing is configured: by the
    `OTEL_*` environment variables, or with an OpenTelemetry `tracer_provider` (see
    `events.otel_setup`)."""
    path = Path(rtws).resolve()
    if not path.is_dir():
        raise RtwsError(f"rtws {path} does not exist (create it with `mindloop init {rtws}`)")
    config = load_config(path)
    # Imports the Python tool modules and starts the MCP servers members select: a part
    # that cannot be offered is refused here, before anything is written.
    registry = config_registry(config)
    problems = tool_selection_problems(path, registry.toolset_names, registry.tool_names)
    if problems:
        raise ConfigError(problems)
    tracing = tracing_from_env(
        os.environ,
        provider_names=gen_ai_provider_names(config.llm),
        tracer_provider=tracer_provider,
    )
    return Project(
        path,
        config,
        max_steps=max_steps,
        providers=providers,
        durable=durable,
        tracing=tracing,
        tools=registry,
    )


# `gen_ai.provider.name` of each llm.yaml provider kind on traces (GenAI conventions'
# well-known values; the mock is mindloop's own).
GEN_AI_PROVIDER_BY_KIND = {
    "openai-compatible": "openai",
    "anthropic": "anthropic",
    "mock": "mindloop.mock",
}


def gen_ai_provider_names(llm: LlmConfig) -> dict[str, str]:
    return {name: GEN_AI_PROVIDER_BY_KIND[p.kind] for name, p in llm.providers.items()}


# ---------------------------------------------------------------------------- writing


def start_chat(
    project: Project,
    message: str,
    *,
    task: str | None = None,
    member: str | None = None,
    title: str | None = None,
    drive_here: bool = False,
) -> Posted:
    """A new root dialog on `task` (default: the rtws's only package, or a new one named
    after the message) with `message` as its first message. Everything is checked before
    anything is written; the dialog and its message commit together. `drive_here`: the
    caller drives the dialog next (`run(root_id=…)`); no other process takes that drive
    (its claim is reserved with the message)."""
    _check_text(message, "the message is empty: say something (nothing was created)")
    if task is not None:
        if not task.strip():
            raise MindloopError("the task is empty: name a task package, e.g. tasks/example.tsk")
        pkg = TaskPackage(project.rtws, task)  # refuses paths outside, files, non-.tsk
        if not pkg.exists():
            raise MindloopError(
                f"task package {pkg.rel_path} does not exist "
                f"(create it with `mindloop task new <slug>`)"
            )
    member_id = member or project.config.team.default_responder
    project.check_member(member_id)
    created = None
    if task is None:
        task, created = _default_task(project.rtws, message)
    rec, msg = project.runtime.start_root_dialog(
        task, message, member_id, title, reserve=drive_here
    )
    log.info("started dialog %s (@%s on %s)", rec.id, rec.member, rec.task_path)
    return Posted(dialog=rec, message=msg, tree=[rec], created_task=created)


def post(project: Project, dialog: str, message: str, *, drive_here: bool = False) -> Posted:
    """Post `message` to the root dialog `dialog` (an id or an unambiguous prefix);
    `drive_here` as for `start_chat`."""
    _check_text(message, "the message is empty: say something (nothing was created)")
    if not project.has_state():
        raise _no_dialog(dialog)
    store = project.runtime.store
    rec = store.get_dialog(store.resolve_dialog_id(dialog))
    if rec.kind != "root":
        raise MindloopError(f"dialog {rec.id} is a side dialog; chat with its root {rec.root_id}")
    project.check_member(rec.member)
    msg = project.runtime.post_user_message(rec.id, message, reserve=drive_here)
    log.info("posted to dialog %s", rec.id)
    return Posted(dialog=rec, message=msg, tree=store.list_dialogs(root_id=rec.root_id))


ROUTE_QUESTION_PREFIX = "route-"  # the id of a Router question: route-<its run's id>


class RouterQuestion(BaseModel):
    """The Router asks the human which task a message should continue (agent-loop §3):
    answered with `answer` (an option's id or number, or `new`), which posts the message
    there and runs that task's loop."""

    id: str  # route-<the Router run's id>
    message: str
    question: str
    options: list[RouterCandidate]  # the listed tasks it could continue, in the Router's order
    asked_at: float

    @classmethod
    def of(cls, rec: RouterRecord, lang: Lang = "en") -> RouterQuestion:
        assert rec.decision is not None
        topics = {c.task: c for c in rec.candidates}
        return cls(
            id=f"{ROUTE_QUESTION_PREFIX}{rec.id}",
            message=rec.message,
            question=rec.decision.question or WHICH_TASK[lang],
            options=[topics[t] for t in rec.decision.options if t in topics],
            asked_at=rec.created_at,
        )


class Asked(BaseModel):
    """A message the Router routed (`ask`): its decision, as recorded, and where it went —
    or, when the Router asks which task should continue, that question (`asking`: nothing
    was posted yet)."""

    routing: RouterRecord  # the Router's run as stored (candidates, decision, usage)
    task: TaskRecord | None = None  # the task the message went to
    posted: Posted | None = None  # the message, in the task's loop root
    created_task: str | None = None  # the package made for the message, if any
    asking: RouterQuestion | None = None  # the human is asked which task should continue

    @property
    def reply(self) -> str | None:
        """The Router's quick reply, when it chose to reply to the user."""
        decision = self.routing.decision
        if decision is None or not decision.should_reply_user:
            return None
        return decision.quick_reply or None


ROUTER_ACTOR = "router"  # who created a package the Router made, in the Taskdoc audit


async def ask(project: Project, message: str) -> Asked:
    """Route `message` to a task with the Router (DESIGN.md §8.6, §8.8) and post it to
    that task's loop root (created on first use; a new package when the Router says
    `create_new_task`). The Router's run is recorded in any case; the message, the loop
    root, its binding and the recorded decision commit together. `run` on its root then
    runs the task's work loop (`run_task`)."""
    _check_text(message, "the message is empty: say something (nothing was created)")
    config = project.config
    router_member = config.team.loop.router.member or config.team.default_responder
    project.check_member(router_member)
    project.check_member(config.team.default_responder)  # the loop root's member
    rt = project.runtime
    store = rt.store
    kb = task_key(project.rtws, config.team.loop.kb.task_path)
    candidates = task_candidates(
        store, project.rtws, limit=config.team.loop.router.recent_tasks, exclude=[kb]
    )
    routing = await Router(config, rt.providers, lang=rt.lang).route(message, candidates)
    decision = routing.decision
    if decision is None:
        raise RoutingFailed(store.record_router_decision(routing))
    if decision.ask_which_task:  # agent-loop §3: the human says which task continues
        asking = store.record_router_decision(routing.model_copy(update={"status": ASKING}))
        log.info("asked: the Router asks which task (%s)", ", ".join(decision.options))
        return Asked(routing=asking, asking=RouterQuestion.of(asking, rt.lang))
    created = topic = None
    if decision.create_new_task:
        topic = one_line(decision.new_task_topic or "") or one_line(message)
        created = _new_routed_task(project, message, topic, decision.new_task_slug or topic)
    target = created or decision.target_task_id or ""
    stored: list[RouterRecord] = []

    def record(task: TaskRecord, _msg: MessageRecord) -> None:
        done = routing.model_copy(
            update={
                "task_path": task.task_path,
                "root_id": task.root_id,
                "created_task": bool(created),
            }
        )
        stored.append(store.record_router_decision(done))

    task, msg = post_to_task(rt, target, message, topic=topic, also=record)
    posted = Posted.to_root(store, task.root_id, msg)
    log.info(
        "asked: routed to %s (loop root %s)%s",
        task.task_path,
        task.root_id,
        " (new)" if created else "",
    )
    return Asked(routing=stored[-1], task=task, posted=posted, created_task=created)


def _new_routed_task(project: Project, message: str, topic: str, slug: str) -> str:
    """A new package for a routed message (goals.md: the topic and the message), audited
    as made by the Router; its path."""
    kb = task_key(project.rtws, project.config.team.loop.kb.task_path)
    goal = message if one_line(message) == topic else f"# {topic}\n\n{message}"
    pkg = create_task_package(
        project.rtws, project.runtime.store, slug, goal, actor=ROUTER_ACTOR, reserved=[kb]
    )
    return pkg.rel_path


NEW_TASK_ANSWER = "new"  # the answer to a Router question that makes a new task


def list_router_questions(source: Source) -> list[RouterQuestion]:
    """The Router's open questions (which task should a message continue), oldest first."""
    with _reading(source) as store:
        if store is None:
            return []
        return [RouterQuestion.of(r) for r in open_router_questions(store)]


def _router_question(project: Project, question_id: str) -> RouterRecord:
    raw = question_id.removeprefix(ROUTE_QUESTION_PREFIX)
    rec = router_record(project.runtime.store, int(raw)) if raw.isdigit() else None
    if rec is None or rec.decision is None or not rec.decision.ask_which_task:
        raise NotFoundError(f"no question with id {question_id!r} (see `mindloop questions`)")
    if rec.status != ASKING:
        raise NotFoundError(
            f"question {question_id} is answered, not open (its message went to {rec.task_path})"
        )
    return rec


def _chosen_task(q: RouterQuestion, text: str, rtws: Path) -> str | None:
    """The task an answer to a Router question names: an option's id (as users type task
    paths) or number; None for `new`. Anything else is refused, naming the choices."""
    said = text.strip()
    if said.casefold() == NEW_TASK_ANSWER:
        return None
    ids = [c.task for c in q.options]
    if said.isdigit() and 1 <= int(said) <= len(ids):
        return ids[int(said) - 1]
    try:
        key = task_key(rtws, said)
    except MindloopError:
        key = said
    if key in ids:
        return key
    choices = ", ".join(f"{i} {t}" for i, t in enumerate(ids, 1))
    raise MindloopError(
        f"answer {q.id} with one of its tasks ({choices}) or `{NEW_TASK_ANSWER}` for a new "
        f"task; {said!r} is none of them (nothing was posted)"
    )


def _answer_router(project: Project, question_id: str, text: str) -> Answered:
    """The human chose the task a routed message continues: the message goes to that
    task's loop root (a new task with `new`), the Router's record settled with it, in one
    transaction; the task's loop runs on the next drive of that root."""
    rec = _router_question(project, question_id)
    q = RouterQuestion.of(rec, project.runtime.lang)
    target = _chosen_task(q, text, project.rtws)
    project.check_member(project.config.team.default_responder)  # the loop root's member
    topic = None
    if target is None:
        topic = one_line(rec.message)
        target = _new_routed_task(project, rec.message, topic, topic)
    created = topic is not None
    store = project.runtime.store

    def settle(task: TaskRecord, _msg: MessageRecord) -> None:
        if not settle_router_question(
            store, rec.id, task_path=task.task_path, root_id=task.root_id, created_task=created
        ):
            raise NotFoundError(f"question {question_id} was answered meanwhile")

    task, _msg = post_to_task(project.runtime, target, rec.message, topic=topic, also=settle)
    log.info("answered %s: the message went to %s", question_id, task.task_path)
    return Answered(question_id=question_id, dialog_id=task.root_id, root_id=task.root_id)


def answer(
    project: Project, question_id: str, text: str, *, check_provider: bool = True
) -> Answered:
    """Record the human's answer to an open question; the asking dialog becomes drivable.
    With `check_provider` (the caller drives the dialog on next), the asking member's
    provider is built first: a missing API key is refused and the question stays open."""
    _check_text(text, "the answer is empty")
    if not project.has_state():
        raise NotFoundError(f"no question with id {question_id!r} (see `mindloop questions`)")
    if question_id.startswith(ROUTE_QUESTION_PREFIX):  # the Router asks which task
        return _answer_router(project, question_id, text)
    store = project.runtime.store
    if check_provider:
        try:
            question = store.get_question(question_id)
        except NotFoundError:
            project.runtime.not_an_approval(question_id)
            raise
        if question.status == "open":
            project.check_member(store.get_dialog(question.dialog_id).member)
    did = project.runtime.answer_question(question_id, text)
    root = store.get_dialog(did).root_id
    log.info("answered %s (dialog %s)", question_id, did)
    return Answered(question_id=question_id, dialog_id=did, root_id=root)


class NodeCancelled(BaseModel):
    """A node the user cancelled (`mindloop node cancel`) and the side dialogs stopped
    with it (those still at work on it: a reply they give is dropped)."""

    task: str
    node_id: str
    stopped: list[str]


def cancel_node(project: Project, task: str, node_id: str, reason: str) -> NodeCancelled:
    """Cancel a node of `task`'s workspace as the user (agent-loop §5.4: any non-terminal
    status → CANCELLED, with `reason` as its conclusion), then stop the side dialogs still
    working on it (`DialogTree.cancel_node_dispatches`): they are not driven again, their
    questions are withdrawn, and whoever dispatched them gets a note."""
    from mindloop.workspace.api import WorkspaceApi
    from mindloop.workspace.models import NodeStatus

    _check_text(reason, "the reason is empty: say why the node is cancelled")
    rt = project.runtime
    with WorkspaceApi(project.rtws, task, store=rt.store, lang=rt.lang) as api:
        api.run(
            lambda s: s.transition(
                node_id=node_id,
                to=NodeStatus.CANCELLED,
                reason="cancelled by the user",
                conclusion=reason.strip(),
            )
        )
        task_path = api.task
    why = f"node {node_id} was cancelled by the user: {reason.strip()}"
    stopped = rt.tree.cancel_node_dispatches(task_path, node_id, why)
    log.info("cancelled node %s of %s (side dialogs stopped: %s)", node_id, task_path, stopped)
    return NodeCancelled(task=task_path, node_id=node_id, stopped=stopped)


def approve(
    project: Project,
    approval_id: str,
    *,
    by: str = "human",
    expected_digest: str | None = None,
    edited_args: str | None = None,
    check_provider: bool = True,
) -> Decided:
    """Approve a call waiting for approval (`edited_args`: the human's arguments instead,
    a JSON object). Its dialog's next drive (`run`) runs exactly that call; refused, with
    nothing decided, if the stored call no longer matches its digest or `expected_digest`
    (what the human was shown). With `check_provider` the dialog's provider is built
    first, as for `answer`."""
    rec = _approval_dialog(project, approval_id, check_provider)
    done = project.runtime.approve(
        approval_id, by=by, expected_digest=expected_digest, edited_args=edited_args
    )
    decision = "approve" if edited_args is None else "edit"
    log.info("approved %s (%s, dialog %s)", approval_id, decision, done.dialog_id)
    return Decided(
        approval_id=done.id,
        decision=decision,
        dialog_id=done.dialog_id,
        root_id=rec.root_id,
        result=_decided_result(done),
    )


def reject(
    project: Project,
    approval_id: str,
    reason: str,
    *,
    by: str = "human",
    expected_digest: str | None = None,
    check_provider: bool = True,
) -> Decided:
    """Reject a call waiting for approval: it never runs; its dialog reads `reason`."""
    _check_text(reason, "a rejection needs a reason (--reason …): the model reads it")
    rec = _approval_dialog(project, approval_id, check_provider)
    done = project.runtime.reject(approval_id, reason, by=by, expected_digest=expected_digest)
    log.info("rejected %s (dialog %s)", approval_id, done.dialog_id)
    return Decided(
        approval_id=done.id,
        decision="reject",
        dialog_id=done.dialog_id,
        root_id=rec.root_id,
        result=_decided_result(done),
    )


def _decided_result(rec: WaitRecord) -> str | None:
    """What a decision on a proposed change did (`Approvals`: the tool's words)."""
    event = (rec.resolution or {}).get("event") or {}
    found = event.get("result") if isinstance(event, dict) else None
    return str(found) if found is not None else None


def _approval_dialog(project: Project, approval_id: str, check_provider: bool) -> DialogRecord:
    if not project.has_state():
        raise NotFoundError(f"no approval with id {approval_id!r} (see `mindloop questions`)")
    rt = project.runtime
    wait = rt.approvals.get(approval_id)
    dialog = rt.store.get_dialog(wait.dialog_id)
    if check_provider and wait.status == "open":
        project.check_member(dialog.member)
    return dialog


class Delivered(BaseModel):
    """A system event delivered from outside (`mindloop event`, the web's POST
    /system-events): the `wait_for` waits it resolved, whose dialogs are now driven on, or
    the id it is kept under until a wait for it opens (agent-loop §6.3: an event that
    comes before its wait is matched at registration)."""

    event_type: str
    key: str | None = None
    resolved: list[str] = []  # wait ids
    dialogs: list[str] = []  # the dialogs those waits held (each now drivable)
    root_ids: list[str] = []  # … and their trees' roots
    kept: int | None = None

    @property
    def root_id(self) -> str | None:
        """The one tree the event woke (what `event` drives on), else None."""
        return self.root_ids[0] if len(self.root_ids) == 1 else None


def event_payload(text: str | None, where: str = "--payload") -> dict[str, Any]:
    """An event's payload as given by a person or a script: a JSON object (or nothing)."""
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MindloopError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise MindloopError(f"{where}: a JSON object is needed, got {type(value).__name__}")
    return value


def deliver_event(
    project: Project,
    event_type: str,
    *,
    key: str | None = None,
    payload: Mapping[str, Any] | None = None,
) -> Delivered:
    """Deliver a system event (`SystemEvent`) to the runtime (`DialogRuntime.deliver`): it
    resolves the open WAIT_SYSTEM_EVENT waits of `event_type` whose filter it matches
    (`key` is matched as the filter's `key`), or is kept for a wait still to come."""
    _check_text(event_type, "the event type is empty: name it, e.g. deploy")
    event = SystemEvent(event_type=event_type.strip(), key=key or None, payload=dict(payload or {}))
    rt = project.runtime
    done = rt.deliver(event)
    dialogs = list(dict.fromkeys(w.dialog_id for w in done.resolved))
    roots = list(dict.fromkeys(rt.store.get_dialog(d).root_id for d in dialogs))
    log.info(
        "event %s (key %s): resolved %s%s",
        event.event_type,
        event.key,
        [w.id for w in done.resolved] or "nothing",
        f", kept as {done.kept}" if done.kept is not None else "",
    )
    return Delivered(
        event_type=event.event_type,
        key=event.key,
        resolved=[w.id for w in done.resolved],
        dialogs=dialogs,
        root_ids=roots,
        kept=done.kept,
    )


def retry(project: Project, dialog: str | None = None) -> list[str]:
    """Mark to drive again what stopped short of an answer, once its cause is fixed
    (`DialogRuntime.retry_stopped`): roots that stopped on an error and any dialog that
    stopped at the step limit — of the tree of `dialog` (a root), or all."""
    rt = project.runtime
    root_id = None
    if dialog is not None:
        rec = rt.store.get_dialog(rt.store.resolve_dialog_id(dialog))
        if rec.kind != "root":
            raise MindloopError(
                f"dialog {rec.id} is a {rec.kind} dialog; retry its root {rec.root_id}"
            )
        root_id = rec.id
    ids = rt.retry_stopped(root_id)
    log.info("retrying %d dialog(s): %s", len(ids), ", ".join(ids) or "-")
    if dialog is not None and not ids:
        raise MindloopError(
            f"nothing to retry in dialog {root_id}'s tree: no root stopped on an error and "
            "no dialog stopped at the step limit"
        )
    return ids


class DeletedTree(BaseModel):
    """A dialog tree deleted (`delete_tree`): its root, every dialog id it had, and the
    archive written first, if one was asked for."""

    root_id: str
    dialogs: list[str]
    archive: Path | None = None


def tree_to_delete(source: Source, dialog: str) -> list[DialogRecord]:
    """The tree `delete_tree` would delete, root first; refuses as it does (no such
    dialog, a side dialog). Changes nothing."""
    with _reading(source) as store:
        if store is None:
            raise _no_dialog(dialog)
        return _deletable_tree(store, dialog)


def _deletable_tree(store: Store, dialog: str) -> list[DialogRecord]:
    rec = store.get_dialog(store.resolve_dialog_id(dialog))
    if rec.kind != "root":
        raise MindloopError(
            f"dialog {rec.id} is a {rec.kind} dialog of the tree of {rec.root_id}; "
            f"delete the whole tree with its root: {rec.root_id}"
        )
    tree = store.list_dialogs(root_id=rec.id)
    return [rec, *(d for d in tree if d.id != rec.id)]


def delete_tree(source: Source, dialog: str, *, archive: Path | None = None) -> DeletedTree:
    """Delete the root dialog `dialog` (an id or an unambiguous prefix) and its whole tree
    from the store. With `archive`, the tree's transcripts (as `show_dialog` gives them)
    are first written there as one JSON document; the deletion happens only once that file
    is complete on disk. A side dialog is refused (its root holds its tellasks): name its
    root. A tree a live process is driving is refused, and nothing is deleted."""
    with _reading(source) as store:
        if store is None:
            raise _no_dialog(dialog)
        tree = _deletable_tree(store, dialog)
        root = tree[0]
        if archive is not None:
            _write_archive(store, tree, archive)
        deleted = store.delete_tree(root.id)
    if deleted is None:
        raise MindloopError(
            f"dialog {root.id}'s tree is being driven by a live mindloop process; stop it "
            "(or wait for it to finish), then delete it"
        )
    log.info("deleted dialog tree %s (%d dialogs)", root.id, len(deleted))
    return DeletedTree(root_id=root.id, dialogs=deleted, archive=archive)


def _write_archive(store: Store, tree: list[DialogRecord], path: Path) -> None:
    doc = {
        "archived_at": time.time(),
        "root_id": tree[0].root_id if tree else None,
        "dialogs": [
            Transcript(
                dialog=d,
                messages=store.load_history(d.id),
                generations=store.generations(d.id),
                usage=store.usage(dialog_id=d.id),
                tree_usage=store.usage(root_id=d.root_id),
                interrupted=[e for e in store.events(d.id) if e["type"] == "generation_cancelled"],
            ).model_dump(mode="json")
            for d in tree
        ],
    }
    try:
        atomic_write(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise MindloopError(
            f"--archive {path}: cannot write it ({exc.strerror}); nothing was deleted"
        ) from None


async def run(
    project: Project,
    *,
    root_id: str | None = None,
    watch: bool = False,
    poll_interval: float = 0.5,
    stop: Callable[[], bool] | None = None,
) -> DriveReport:
    """Drive everything drivable until nothing is (or forever with `watch`, picking up
    work other processes write), after resuming what a crash left running; every task's
    work loop with work left runs too, each driving its own tree. The report is seen from
    `root_id`'s tree when given; the root of a task's loop runs that task's loop."""
    rt = project.runtime
    resumed = project.recover()
    if root_id is not None:
        state = loop_state.by_root(rt.store, root_id)
        if state is not None:
            return await run_task(project, state.task_path, resumed=resumed)
    # The outbox's KB requests are delivered by every run (cheaply: one read of the
    # outbox per poll interval); the KB dialog they wake is driven by a run of all trees.
    tickers = [KbDispatcher(rt)]
    sched = Scheduler(rt, tickers=tickers)
    loops: list[LoopReport] = []
    if root_id is not None and not watch and stop is None:
        # Follow the tree until it settles: a dialog of it that another live process
        # drives (a `run --watch`, the web UI) is not driven here, but waited for; other
        # trees are not driven here at all (ending with this tree would cut them off).
        sched = Scheduler(rt, root_id=root_id, tickers=tickers)
        watch, stop = True, lambda: not rt.store.tree_busy(root_id)
        log.info("run started (one tree)")
        results = await sched.run(watch=watch, poll_interval=poll_interval, stop=stop)
    else:
        log.info("run started%s", " (watching)" if watch else "")
        here = loop_api.LocalLoops(rt, project.loops)
        sched = loop_api.OtherDialogs(rt, here, tickers=tickers)
        here.start_resumable()
        results = await sched.run(watch=watch, poll_interval=poll_interval, stop=stop)
        loops = await here.finish()
        results = [*results, *(d for r in loops for d in (*r.drives, *r.side_drives))]
    resumed += sched.resumed
    report = _report(project, root_id, resumed, results, [str(e) for e in sched.errors], loops)
    log.info("run ended: %s after %d drive(s)", report.outcome, len(report.drives))
    return report


async def run_task(
    project: Project,
    task: str,
    *,
    message: str | None = None,
    member: str | None = None,
    resumed: list[str] | None = None,
) -> DriveReport:
    """Drive a task's work loop (`mindloop run TASK [--message M]`) until it is DONE or
    FAILED, reaches a cap, or waits on the human; its loop root is made on first use."""
    if message is not None:
        message_task(project, task, message, member=member)
    rel = check_task(project, task, member)
    rt = project.runtime
    resumed = [*(resumed or []), *project.recover()]
    log.info("run task %s", rel)
    loop = await loop_api.run_task(
        rt,
        project.loops,
        rel,
        member=member or project.config.team.default_responder,
        max_steps=project.max_steps,
    )
    results = [*loop.drives, *loop.side_drives]
    report = _report(project, loop.root_id, resumed, results, [], [loop])
    log.info("run of %s ended: %s (%s)", rel, report.outcome, loop.reason)
    return report


def adopt_step_limit(project: Project, root_id: str) -> int:
    """Drive `root_id`'s tree on with the per-drive step limit its task's last `run`
    recorded (`run TASK --max-steps N`), as the workers do: an answer or a decision goes
    on as that run would have. The limit now in use (the project's when none was)."""
    limit = loop_state.step_limit(project.runtime.store, root_id)
    if limit is not None:
        project.max_steps = project.runtime.max_steps = limit
    return project.max_steps


def message_task(project: Project, task: str, message: str, *, member: str | None = None) -> Posted:
    """A message from the user to a task's work loop, as `run TASK --message M` gives it:
    posted to the task's loop root (made on first use, with `member`) and marked to be
    driven, root, binding and message in one transaction. Nothing is driven here:
    `run_task` (or `run` on the loop root, as the web UI's driver does) runs the loop,
    which takes the message as new scope (PLAN) when its phase ends — also after the
    task ended DONE. When exactly one question of the task's tree is open, the message is
    its answer instead (agent-loop §6.2; `answered` says which). Everything is checked
    before anything is written."""
    _check_text(message, "the message is empty: say something (nothing was posted)")
    rel = check_task(project, task, member)
    rt = project.runtime
    state = loop_state.get(rt.store, rel) if project.has_state() else None
    if state is not None:
        # agent-loop §6.2: a plain message answers the task's question when exactly one
        # is open (no guessing between several: then it is a message to the loop)
        open_qs = rt.store.open_questions(root_ids=[state.root_id])
        if len(open_qs) == 1:
            rt.answer_question(open_qs[0].id, message)
            log.info("message to %s answered its open question %s", rel, open_qs[0].id)
            return Posted.to_root(rt.store, state.root_id, None, answered=open_qs[0].id)
    bound, msg = post_to_task(
        rt, rel, message, member=member or project.config.team.default_responder
    )
    log.info("message to the work loop of %s (loop root %s)", rel, bound.root_id)
    return Posted.to_root(rt.store, bound.root_id, msg)


def check_task(project: Project, task: str, member: str | None = None) -> str:
    """Refuse now what `run_task` could not do (nothing is written): a package that is
    not one, or does not exist; an unknown member or one whose provider cannot be built.
    Returns the package as the store records it."""
    if not task.strip():
        raise MindloopError("the task is empty: name a task package, e.g. tasks/example.tsk")
    pkg = TaskPackage(project.rtws, task_key(project.rtws, task))  # refuses non-packages
    if not pkg.exists():
        raise MindloopError(
            f"task package {pkg.rel_path} does not exist (create it with `mindloop task new "
            "<slug>`)"
        )
    project.check_member(member or project.config.team.default_responder)
    return pkg.rel_path


def _report(
    project: Project,
    root_id: str | None,
    resumed: list[str],
    results: list[DriveResult],
    crashed: list[str],
    loops: list[LoopReport],
) -> DriveReport:
    rt = project.runtime
    tree = rt.store.list_dialogs(root_id=root_id) if root_id is not None else []
    members = {d.id: d.member for d in tree}
    for r in results:
        stopped = (DriveEnd.ERROR, DriveEnd.STEP_LIMIT, DriveEnd.CAP_REACHED)
        if r.reason in stopped and r.dialog_id not in members:
            members[r.dialog_id] = rt.store.get_dialog(r.dialog_id).member
    answer = None
    if root_id is not None and not loops and not any(r.dialog_id == root_id for r in results):
        hist = rt.store.load_history(root_id)
        if hist and hist[-1].kind == "assistant" and not rt.store.open_questions(dialog_id=root_id):
            answer = hist[-1].data.get("text")
    return DriveReport(
        root_id=root_id,
        answer=answer,
        max_steps=project.max_steps,
        resumed=resumed,
        drives=list(results),
        crashed=crashed,
        tree=tree,
        members=members,
        questions=rt.store.open_questions(root_ids=[root_id] if root_id is not None else None),
        approvals=rt.pending_approvals([root_id] if root_id is not None else None),
        tree_usage=rt.store.usage(root_id=root_id) if root_id is not None else None,
        loops=[LoopSummary.of(r) for r in loops],
    )


def task_status(source: Source, task: str) -> loop_api.TaskStatus:
    """Where a task's work loop stands: phase, node tree, open waits, retries, usage
    (`mindloop status TASK`). Reads only; an rtws that ran nothing has nothing."""
    rtws = _rtws_of(source)
    key = task_key(rtws, task)
    pkg = TaskPackage(rtws, key)
    if not pkg.exists():
        raise NotFoundError(f"task package {pkg.rel_path} does not exist (see `mindloop tasks`)")
    with _reading(source) as store:
        if store is None:
            return loop_api.TaskStatus(task=pkg.rel_path, bound=False)
        return loop_api.task_status(store, pkg.rel_path)


# ---------------------------------------------------------------------------- reading

Source = Path | Project


def list_dialogs(
    source: Source,
    *,
    task: str | None = None,
    root_id: str | None = None,
    counts: bool = False,
    usage: bool = False,
) -> list[DialogSummary]:
    """Dialogs, oldest first; of one task or one tree; with message counts and with
    their usage (tokens, cost) when asked."""
    with _reading(source) as store:
        if store is None:
            return []
        rtws = _rtws_of(source)
        rows = store.list_dialogs(task_path=task_key(rtws, task) if task else None, root_id=root_id)
        used = store.usage_by_dialog() if usage else {}
        return [
            DialogSummary(
                **r.model_dump(),
                messages=store.count_messages(r.id) if counts else None,
                usage=used.get(r.id, UsageTotals()) if usage else None,
            )
            for r in rows
        ]


def show_dialog(source: Source, dialog: str) -> Transcript:
    """One dialog's whole transcript (every course), its generations and cut-off output."""
    with _reading(source) as store:
        if store is None:
            raise _no_dialog(dialog)
        did = store.resolve_dialog_id(dialog)
        rec = store.get_dialog(did)
        return Transcript(
            dialog=rec,
            messages=store.load_history(did),
            generations=store.generations(did),
            usage=store.usage(dialog_id=did),
            tree_usage=store.usage(root_id=rec.root_id),
            interrupted=[e for e in store.events(did) if e["type"] == "generation_cancelled"],
        )


def task_usage(source: Source, task: str) -> UsageTotals:
    """Tokens and cost of every dialog of a task package (`task` as users type it)."""
    with _reading(source) as store:
        if store is None:
            return UsageTotals()
        return store.usage(task_path=task_key(_rtws_of(source), task))


def list_questions(source: Source, *, task: str | None = None) -> list[QuestionRecord]:
    """Open questions for the human, across dialogs (or of one task's root dialogs)."""
    with _reading(source) as store:
        if store is None:
            return []
        roots = None
        if task is not None:
            key = task_key(_rtws_of(source), task)
            roots = [d.id for d in store.list_dialogs(task_path=key) if d.kind == "root"]
        return store.open_questions(root_ids=roots)


def list_approvals(source: Source, *, task: str | None = None) -> list[ApprovalView]:
    """Calls waiting for the human's approval, across dialogs (or of one task's trees)."""
    with _reading(source) as store:
        if store is None:
            return []
        roots = None
        if task is not None:
            key = task_key(_rtws_of(source), task)
            roots = [d.id for d in store.list_dialogs(task_path=key) if d.kind == "root"]
        return [ApprovalView.of(r) for r in open_waits_of_kind(store, "approval", root_ids=roots)]


def tasks_of(source: Source, dialog_ids: Iterable[str]) -> dict[str, str]:
    """The task package of each dialog (what a list of questions shows beside them)."""
    with _reading(source) as store:
        if store is None:
            return {}
        return {did: store.get_dialog(did).task_path for did in set(dialog_ids)}


def dialog_trees(source: Source, target: str) -> list[list[TreeNode]]:
    """The dialog trees of a task (`target` a package path as users type it), or the tree
    containing the dialog `target` (an id or an unambiguous prefix)."""
    with _reading(source) as store:
        if store is None:
            raise NotFoundError(f"no dialogs yet, so no tree for {target!r}")
        task = task_key(_rtws_of(source), target)
        roots = [d.id for d in store.list_dialogs(task_path=task) if d.kind == "root"]
        if not roots:
            try:
                did = store.resolve_dialog_id(target)
            except NotFoundError as exc:
                if "ambiguous" in str(exc):
                    raise
                raise NotFoundError(
                    f"{target!r} is neither a task with dialogs nor a dialog id "
                    "(see `mindloop tasks` and `mindloop dialogs list`)"
                ) from None
            roots = [store.get_dialog(did).root_id]
        return [_tree(store, rid) for rid in roots]


def _tree(store: Store, root_id: str) -> list[TreeNode]:
    rows = store.list_dialogs(root_id=root_id)
    children: dict[str | None, list[DialogRecord]] = {}
    for r in rows:
        children.setdefault(r.parent_id if r.id != root_id else None, []).append(r)
    asking = {q.dialog_id for q in store.open_questions(root_ids=[root_id])}
    nodes: list[TreeNode] = []

    def walk(rec: DialogRecord, depth: int) -> None:
        waits = len(store.pending_for(rec.id))
        nodes.append(
            TreeNode(dialog=rec, depth=depth, asks_human=rec.id in asking, waiting_on=waits)
        )
        for child in children.get(rec.id, []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)
    return nodes


def open_state(rtws: Path) -> Store | None:
    """The rtws's store for reading, or None when nothing was run yet.

    Reading never creates state: a directory that is no rtws at all is an error (and stays
    untouched), an initialised rtws without state simply has no dialogs and questions.
    Whatever else is at the state path (a directory, a damaged file) is the store's to
    refuse."""
    if database_url() is None and (rtws / STATE_DIR / STATE_FILE).exists():
        return Store.for_rtws(rtws)
    if not (rtws / ".minds").is_dir():
        raise RtwsError(
            f"{rtws} is not a mindloop rtws (no .minds/ and no {STATE_DIR}/{STATE_FILE}); "
            f"create one with `mindloop init` or choose one with -C DIR"
        )
    return Store.for_rtws(rtws) if database_url() is not None else None


def task_key(rtws: Path, raw: str) -> str:
    """A task path as the store records it (rtws-relative, posix): users also type
    `./tasks/x.tsk/`, `tasks\\x.tsk` or an absolute path inside the rtws."""
    path = Path(raw.replace("\\", "/"))
    if path.is_absolute():
        try:
            path = path.resolve().relative_to(rtws)
        except ValueError:
            return raw
    return os.path.normpath(path.as_posix()).replace(os.sep, "/")


task_slug = slug_from_text  # `Fix the login page!` -> `fix-the-login-page`


# ---------------------------------------------------------------------------- helpers


def _check_text(text: str, why: str) -> None:
    if not text.strip():
        raise MindloopError(why)


def _no_dialog(ref: str) -> NotFoundError:
    return NotFoundError(f"no dialog with id {ref!r} (see `mindloop dialogs list`)")


def _default_task(rtws: Path, message: str) -> tuple[str, str | None]:
    """The task of a new dialog started without one: the rtws's only package, or a new
    `tasks/<slug>.tsk/` named after the message when there is none (every dialog has a
    Taskdoc). With several packages the user must choose. Returns (task, created)."""
    found = discover_packages(rtws)
    if len(found) == 1:
        return found[0], None
    if found:
        raise MindloopError("several tasks exist; choose one with --task: " + ", ".join(found))
    pkg = TaskPackage.create(rtws, task_slug(message), goal=message, exist_ok=True)
    return pkg.rel_path, pkg.rel_path


def _rtws_relative(rtws: Path, line: str) -> str:
    prefix = str(rtws) + os.sep
    return line.replace(prefix, "", 1) if line.startswith(prefix) else line


def _rtws_of(source: Source) -> Path:
    return source.rtws if isinstance(source, Project) else Path(source).resolve()


@contextmanager
def _reading(source: Source) -> Iterator[Store | None]:
    """An open project's store, or the rtws's store opened (and closed) for this read."""
    if isinstance(source, Project) and source._runtime is not None:
        yield source._runtime.store
        return
    store = open_state(_rtws_of(source))
    try:
        yield store
    finally:
        if store is not None:
            store.close()
