"""The dialog engine: creates dialogs and drives them.

A drive: take queued replies → build the context → stream a generation → persist it
together with what its tellasks start (side dialogs, questions, failure notes) and, when
it is a final answer, its delivery to whoever waits → run the requested tools
(concurrently) → persist their results → repeat, until the model answers without tool
calls, the dialog waits on others, or the per-drive step limit is reached. Each step
commits at most twice; nothing re-reads the dialog.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mindloop.config import (
    Config,
    ConfigError,
    MemberConfig,
    load_config,
    tool_selection_problems,
)
from mindloop.dialogs import fbr
from mindloop.dialogs.context import ContextBuilder
from mindloop.dialogs.formats import INTERRUPTED_TOOL_RESULT, NEW_COURSE_PROMPT
from mindloop.dialogs.generation import GenerationOutcome, run_generation
from mindloop.dialogs.history import History
from mindloop.dialogs.prompts import STEP_LIMIT_NOTE, text_for
from mindloop.dialogs.routing import Route, RouteKind, route_message
from mindloop.dialogs.tellask import parse_message
from mindloop.dialogs.tree import DialogTree
from mindloop.errors import MindloopError
from mindloop.events.bus import EventBus
from mindloop.i18n import Lang
from mindloop.providers.base import (
    AssistantMessage,
    GenerationRequest,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from mindloop.providers.pool import ProviderPool
from mindloop.store import (
    DialogRecord,
    GenerationRecord,
    MessageRecord,
    Reminder,
    Store,
    new_id,
)
from mindloop.tools.base import Acl, Tool, ToolContext, ToolOutput, call_key
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets import (
    REMINDER_TOOLS,
    ROOT_ONLY_TOOLS,
    CourseSwitch,
    StoreReminders,
    StoreTaskdocAudit,
    llm_secret_env_names,
    standard_registry,
)

DEFAULT_MAX_STEPS = 50


@dataclass
class DriveResult:
    dialog_id: str
    reason: str  # done | waiting | step_limit | error | cancelled | idle
    steps: int = 0
    final_text: str = ""
    error: str | None = None


@dataclass
class _Live:
    """What the engine keeps in memory for a dialog it drives."""

    record: DialogRecord
    member: MemberConfig
    history: History
    tools: list[Tool]
    tool_specs: list[ToolSpec]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    course: CourseSwitch = field(default_factory=CourseSwitch)  # clear_mind's request
    reminders: list[Reminder] = field(default_factory=list)  # loaded at each drive start
    # Tool names a call may reach: the offered tools, plus (side dialogs) the member's
    # root-only tools, kept off the tool list but answered by the tool's own
    # "mainline-only" error (naming the maintainer to ask) rather than "unknown tool".
    callable: frozenset[str] = frozenset()

    @property
    def is_fbr(self) -> bool:
        return self.record.kind == "fbr"


class DialogRuntime:
    """One rtws's runtime: config, store, providers, tools, the dialog tree, the bus."""

    def __init__(
        self,
        rtws: Path | str,
        *,
        config: Config | None = None,
        store: Store | None = None,
        bus: EventBus | None = None,
        tools: ToolRegistry | None = None,
        durable: bool = True,
        max_steps: int = DEFAULT_MAX_STEPS,
        lang: Lang | None = None,
    ) -> None:
        self.rtws = Path(rtws).resolve()
        self.config = config or load_config(self.rtws)
        self.lang: Lang = lang or self.config.team.work_language
        self.tools = tools or standard_registry(self.lang)
        # Before the store is opened (nothing written yet): a toolset or tool team.yaml
        # names that this registry lacks is a file:line error now, not a surprise mid-drive
        # for the member it hits. Every entry point (CLI or Python API) gets this check.
        problems = tool_selection_problems(
            self.rtws, self.tools.toolset_names, self.tools.tool_names
        )
        if problems:
            raise ConfigError(problems)
        self.store = store or Store.for_rtws(self.rtws, durable=durable)
        self.bus = bus or EventBus()
        self.providers = ProviderPool(self.config.llm, self.rtws)
        self.tree = DialogTree(self.store, self.bus, self.lang)
        self.max_steps = max_steps
        self.context = ContextBuilder(self.rtws, self.config, self.lang)
        self._live: dict[str, _Live] = {}
        self._root_members: dict[str, str] = {}  # root dialog id -> its member (immutable)
        self._params: dict[tuple[str, bool], dict[str, Any]] = {}
        self.wake = asyncio.Event()  # set whenever a dialog may have become drivable

    async def aclose(self) -> None:
        await self.providers.aclose()
        self.store.close()

    async def __aenter__(self) -> DialogRuntime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ dialogs

    def create_root_dialog(
        self, task_path: str | Path, member: str | None = None, title: str | None = None
    ) -> DialogRecord:
        """Open a root dialog bound for life to one `*.tsk` package."""
        pkg = self.context.package(str(task_path))
        if not pkg.exists():
            raise MindloopError(
                f"task package {pkg.rel_path} does not exist "
                f"(create it with `mindloop task new <slug>`)"
            )
        member_id = member or self.config.team.default_responder
        self.config.member(member_id)  # raises a clear error for an unknown member
        did = new_id("d")
        rec = DialogRecord(
            id=did, root_id=did, member=member_id, task_path=pkg.rel_path, kind="root", title=title
        )
        rec = self.store.create_dialog(rec)
        self.bus.publish("dialog_created", did, member=member_id, task=pkg.rel_path, kind="root")
        return rec

    def post_user_message(self, dialog_id: str, text: str) -> MessageRecord:
        """Append a user message and mark the dialog to be driven (one transaction)."""
        if not text.strip():
            raise MindloopError("the message is empty")
        live = self._live.get(dialog_id)
        rec = self.store.get_dialog(dialog_id) if live is None else live.record
        with self.store.tx():
            stored = self.store.append_message(dialog_id, "user", {"text": text}, course=rec.course)
            self.store.update_dialog(dialog_id, needs_drive=True)
        if live is not None:
            live.history.add(stored)
        self.wake.set()
        return stored

    def answer_question(self, question_id: str, answer: str) -> str:
        """Record the human's answer; the asking dialog becomes drivable. Returns its id."""
        if not answer.strip():
            raise MindloopError("the answer is empty")
        with self.store.tx():
            q = self.tree.answer_question(question_id, answer)
        self._forget(q.dialog_id)
        self.wake.set()
        return q.dialog_id

    def _forget(self, dialog_id: str) -> None:
        """Drop the in-memory view of a dialog changed outside its drive."""
        live = self._live.get(dialog_id)
        if live is not None and not live.lock.locked():
            del self._live[dialog_id]

    def _load(self, dialog_id: str) -> _Live:
        live = self._live.get(dialog_id)
        if live is not None:
            return live
        rec = self.store.get_dialog(dialog_id)
        member = self.config.member(rec.member)
        tools = [] if rec.kind == "fbr" else self._tools_for(member, is_root=rec.kind == "root")
        specs = [
            ToolSpec(name=t.name, description=t.description, parameters=t.schema()) for t in tools
        ]
        callable_ = {t.name for t in tools}
        if rec.kind == "side":
            selected = self.tools.select(member.toolsets, member.tools)
            callable_ |= {t.name for t in selected if t.name in ROOT_ONLY_TOOLS}
        history = History.from_rows(self.store.history_view(dialog_id, rec.course))
        live = self._live[dialog_id] = _Live(
            rec, member, history, tools, specs, callable=frozenset(callable_)
        )
        return live

    def _tools_for(self, member: MemberConfig, *, is_root: bool) -> list[Tool]:
        tools = self.tools.select(member.toolsets, member.tools)
        if not is_root:
            tools = [t for t in tools if t.name not in ROOT_ONLY_TOOLS]
        return tools

    # ------------------------------------------------------------------ driving

    async def drive(self, dialog_id: str, *, max_steps: int | None = None) -> DriveResult:
        """Drive one dialog (one drive at a time per dialog)."""
        live = self._live.get(dialog_id)
        just_loaded = live is None
        if live is None:
            live = self._load(dialog_id)
        async with live.lock:
            if not just_loaded:  # a view from an earlier drive: catch up with the store
                fresh = self.store.get_dialog(dialog_id)
                if fresh.course != live.record.course:
                    live.history = History.from_rows(
                        self.store.history_view(dialog_id, fresh.course)
                    )
                else:  # what others appended meanwhile (replies, tellask-backs, answers)
                    live.history.extend(
                        self.store.messages_after(dialog_id, fresh.course, live.history.last_id)
                    )
                live.record = fresh
            return await self._drive_locked(live, max_steps or self.max_steps)

    async def _drive_locked(self, live: _Live, max_steps: int) -> DriveResult:
        did = live.record.id
        result = DriveResult(dialog_id=did, reason="done")
        state = self.tree.wait_state(did)
        if not state.drivable:
            self.store.update_dialog(did, needs_drive=False, status="waiting")
            result.reason = "waiting"
            return result
        # Lazy commits (no fsync of their own) hold only bookkeeping whose loss on a power
        # failure leaves an earlier state that recovery handles the same way; the next
        # durable commit makes them durable too (the WAL is replayed in order).
        with self.store.tx(durable=False):
            self.store.update_dialog(did, status="running", needs_drive=False)
            self._take_inbox(live)
        if self._nothing_to_answer(live):
            self._settle(live, result, "idle")
            return result
        live.reminders = self.store.reminders(did)
        self.bus.publish("drive_start", did, member=live.member.id)
        try:
            for step in range(1, max_steps + 1):
                result.steps = step
                if step > 1 and state.pending:  # replies only come while tellasks are out
                    with self.store.tx(durable=False):
                        self._take_inbox(live)
                outcome = await self._step_generate(live)
                if outcome.error is not None:
                    result.reason, result.error = "error", str(outcome.error)
                    self._report_failure(live, result.error)
                    break
                if outcome.calls:
                    await self._step_tools(live, outcome)
                    if live.course.pending is not None:
                        self._start_new_course(live)
                # Only this dialog's own tellasks make it wait; others only resolve waits.
                if outcome.dispatched or state.pending:
                    state = self.tree.wait_state(did)
                if state.waiting and not state.asked_back:
                    result.reason = "waiting"
                    break
                if outcome.final:
                    result.final_text = outcome.text
                    break
            else:
                result.reason = "step_limit"
                note = text_for(STEP_LIMIT_NOTE, self.lang).format(n=max_steps)
                stored = self.store.append_message(
                    did, "note", {"text": note}, course=live.record.course
                )
                live.history.add(stored)
                self.bus.publish("note", did, text=note)
        except asyncio.CancelledError:
            result.reason = "cancelled"
            self._settle(live, result, "interrupted", resume=True)  # the next run re-drives it
            raise
        except Exception as exc:  # a bug must not leave the dialog marked running
            result.reason, result.error = "error", f"{type(exc).__name__}: {exc}"
            self.bus.publish("error", did, message=result.error)
            self._settle(live, result, "error")
            raise
        status = {"error": "error", "waiting": "waiting"}.get(result.reason, "idle")
        self._settle(live, result, status)
        return result

    def _report_failure(self, live: _Live, error: str) -> None:
        """A side dialog that cannot go on tells whoever waits on it, so no caller waits
        forever; the others' answers are still delivered."""
        if live.record.kind == "root":
            return
        with self.store.tx():
            self.tree.deliver_final(live.record, error, status="failed")
        self.wake.set()

    def _settle(
        self, live: _Live, result: DriveResult, status: str, *, resume: bool = False
    ) -> None:
        """End a drive. Lazy: if this commit is lost, the dialog is still `running` (or
        marked to drive) and recovery drives it again, which finds nothing to answer."""
        with self.store.tx(durable=False):
            if resume:
                self.store.update_dialog(live.record.id, status=status, needs_drive=True)
            else:
                self.store.update_dialog(live.record.id, status=status)
            self.store.record_event(
                "drive_end",
                live.record.id,
                {"reason": result.reason, "steps": result.steps, "error": result.error},
            )
        live.record.status = status
        self.bus.publish(
            "drive_end",
            live.record.id,
            reason=result.reason,
            steps=result.steps,
            error=result.error,
        )

    def _take_inbox(self, live: _Live) -> None:
        """Inside a tx: queued replies into history; dangling tool calls (a crash between
        a generation and its tool results) get an explicit 'interrupted' result."""
        dangling = _unanswered_calls(live.history.messages)
        if dangling:
            recs = [
                MessageRecord(
                    dialog_id=live.record.id,
                    course=live.record.course,
                    kind="tool_result",
                    data={
                        "call_id": c.id,
                        "name": c.name,
                        "content": INTERRUPTED_TOOL_RESULT,
                        "is_error": True,
                    },
                )
                for c in dangling
            ]
            live.history.extend(self.store.append_messages(recs))
        live.history.extend(self.tree.take_responses(live.record))

    def _nothing_to_answer(self, live: _Live) -> bool:
        msgs = live.history.messages
        if not msgs:
            return True
        last = msgs[-1]
        return isinstance(last, AssistantMessage) and not last.tool_calls

    def _request(self, live: _Live) -> GenerationRequest:
        member = live.member
        model = self.config.model_info(member.id)
        if live.is_fbr:
            req = GenerationRequest.model_construct(
                model=model.name or member.model,
                system=fbr.FBR_SYSTEM_PROMPTS[self.lang],
                messages=fbr.fbr_messages(
                    live.history.messages,
                    fbr.fbr_taskdoc(self.context.package(live.record.task_path), self.lang),
                    lang=self.lang,
                ),
                tools=[],
                params=self._request_params(member, fbr=True),
                member=member.id,
            )
            fbr.check_request(req, self.lang)
            return req
        root_member = self._root_member(live.record)
        messages = self._with_reminders(live)
        return GenerationRequest.model_construct(
            model=model.name or member.model,
            system=self.context.system_prompt(live.record, member, root_member),
            messages=messages,
            tools=live.tool_specs,
            params=self._request_params(member, fbr=False),
            member=member.id,
        )

    def _with_reminders(self, live: _Live) -> list[Any]:
        """Reminders go just before the last user message (rendered, never persisted)."""
        msgs = live.history.messages
        reminders = live.reminders
        if not reminders:
            return msgs
        msgs = list(msgs)
        text = "[reminders]\n" + "\n".join(f"{r.position}. {r.content}" for r in reminders)
        note = UserMessage.model_construct(role="user", text=text)
        for i in range(len(msgs) - 1, -1, -1):
            if isinstance(msgs[i], UserMessage):
                msgs.insert(i, note)
                return msgs
        return [note, *msgs]

    async def _step_generate(self, live: _Live) -> _Outcome:
        did = live.record.id
        try:
            req = self._request(live)
        except fbr.FbrPolicyError as exc:
            out = _Outcome()
            out.error = exc  # type: ignore[assignment]
            self.bus.publish("error", did, code=fbr.POLICY_CODE, message=str(exc))
            self.store.record_event("error", did, {"code": fbr.POLICY_CODE, "message": str(exc)})
            return out
        out = _Outcome()
        self.bus.publish("generation_start", did, member=live.member.id, model=req.model)
        try:
            await run_generation(
                self.providers.stream(live.member.provider, req), self.bus, did, out
            )
        except asyncio.CancelledError:
            # Interrupted mid-stream: the partial output is not a turn. Persisted as one it
            # would end the dialog's turn (a side dialog would never reply) and could
            # dispatch a half-written tellask; kept as an event, and re-run on resume.
            out.finish_reason = "cancelled"
            self._record_cancelled(live, out, req.model)
            raise
        self._persist_generation(live, out, req.model, final=None)
        if out.error is not None:
            self.bus.publish("error", did, message=str(out.error))
        self.bus.publish(
            "generation_end",
            did,
            finish_reason=out.finish_reason,
            input_tokens=out.input_tokens,
            output_tokens=out.output_tokens,
            tool_calls=len(out.calls),
        )
        return out

    def _record_cancelled(self, live: _Live, out: _Outcome, model: str) -> None:
        with self.store.tx():
            self.store.record_generation(_generation_record(live, out, model), [])
            self.store.record_event(
                "generation_cancelled", live.record.id, {"text": out.text, "thinking": out.thinking}
            )

    def _persist_generation(
        self, live: _Live, out: _Outcome, model: str, *, final: bool | None
    ) -> None:
        """Persist the generation, carry out its tellasks and — for a final answer —
        deliver it, all in one transaction."""
        rec = live.record
        did, course = rec.id, rec.course
        tellasks = parse_message(out.text).calls if out.text and out.error is None else []
        violation = fbr.find_violation(out.calls, tellasks, self.lang) if live.is_fbr else None
        assistant_data: dict[str, Any] = {"text": out.text}
        if violation is not None:
            assistant_data = {
                "text": violation,
                "rejected_output": out.text,
                "rejected_calls": [c.model_dump() for c in out.calls],
            }
            out.text, out.calls, tellasks = violation, [], []
            out.violation = True
        routes = []
        if tellasks:  # in FBR only a valid @tellasker survives find_violation
            routes = route_message(
                tellasks,
                caller_member=rec.member,
                caller_is_root=rec.kind == "root",
                members=list(self.config.team.members),
                fbr_effort=live.member.fbr_effort,
            )
        if final is None:
            final = out.error is None and not out.calls and not routes and not tellasks
        out.final = bool(final)
        msgs: list[MessageRecord] = []
        if out.thinking:
            msgs.append(
                MessageRecord(
                    dialog_id=did, course=course, kind="thinking", data={"text": out.thinking}
                )
            )
        if out.text or out.error is None:
            msgs.append(
                MessageRecord(dialog_id=did, course=course, kind="assistant", data=assistant_data)
            )
        for call in out.calls:
            msgs.append(
                MessageRecord(
                    dialog_id=did,
                    course=course,
                    kind="tool_call",
                    data={"id": call.id, "name": call.name, "arguments": call.arguments},
                )
            )
        gen = _generation_record(live, out, model)
        with self.store.tx(durable=_has_outside_effect(rec, out, routes)):
            saved, stored = self.store.record_generation(gen, msgs)
            out.generation_id = saved.id
            live.history.extend(stored)
            if out.error is not None:
                self.store.record_event("error", did, {"message": str(out.error)})
            if violation is not None:
                self.store.record_event(
                    "error", did, {"code": fbr.VIOLATION_CODE, "message": violation}
                )
            if routes:
                dispatched = self.tree.dispatch(
                    rec, tellasks, routes, fbr_effort=live.member.fbr_effort
                )
                live.history.extend(dispatched.notes)
                if (
                    dispatched.failed
                    and not out.calls
                    and not dispatched.created
                    and not dispatched.resumed
                    and not dispatched.questions
                ):
                    out.final = False  # let the model see why its tellask failed
            if out.final:  # a root answers tellask-backs of its side dialogs too
                self.tree.deliver_final(rec, out.text)
        if violation is not None:
            self.bus.publish("error", did, code=fbr.VIOLATION_CODE, message=violation)
        out.dispatched = bool(routes)
        if routes or out.final:
            self.wake.set()

    async def _step_tools(self, live: _Live, outcome: _Outcome) -> None:
        did = live.record.id
        offered = live.callable

        async def one(index: int, call_id: str, name: str, arguments: str) -> ToolOutput:
            ctx = self._tool_context(live, call_key(did, outcome.generation_id, index))
            self.bus.publish("tool_call", did, call_id=call_id, name=name, arguments=arguments)
            out = await self.tools.execute(name, arguments, ctx, allowed=offered)
            self.bus.publish(
                "tool_result", did, call_id=call_id, name=name, text=out.text, is_error=out.is_error
            )
            return out

        calls = outcome.calls
        if len(calls) == 1:  # the common case: no task to schedule
            results = [await one(0, calls[0].id, calls[0].name, calls[0].arguments)]
        else:  # independent calls run concurrently
            results = list(
                await asyncio.gather(
                    *(one(i, c.id, c.name, c.arguments) for i, c in enumerate(calls))
                )
            )
        msgs = [
            MessageRecord(
                dialog_id=did,
                course=live.record.course,
                kind="tool_result",
                data={"call_id": c.id, "name": c.name, "content": r.text, "is_error": r.is_error},
            )
            for c, r in zip(outcome.calls, results, strict=True)
        ]
        # Lazy: lost only with a power failure before the next (durable) generation
        # commit, which leaves the calls unanswered, as a crash during the tools does;
        # recovery answers them as interrupted. So a step costs one fsync.
        with self.store.tx(durable=False):
            live.history.extend(self.store.append_messages(msgs))
        if any(c.name in REMINDER_TOOLS for c in outcome.calls):
            live.reminders = self.store.reminders(did)

    def _start_new_course(self, live: _Live) -> None:
        """clear_mind: a new course with an empty history; reminders and sessions stay,
        open questions of this dialog are discarded."""
        rec = live.record
        reminder = live.course.take()
        course = rec.course + 1
        prompt = NEW_COURSE_PROMPT.format(course=course)
        if rec.assignment and rec.kind != "root":
            prompt = (
                "Your assignment:\n"
                + rec.assignment.get("headline", "")
                + rec.assignment.get("body", "")
                + "\n\n"
                + prompt
            )
        with self.store.tx():
            self.store.update_dialog(rec.id, course=course)
            self.store.discard_questions(rec.id)
            if reminder:
                contents = [r.content for r in live.reminders] + [reminder]
                live.reminders = self.store.set_reminders(rec.id, contents)
            stored = self.store.append_message(rec.id, "user", {"text": prompt}, course=course)
        rec.course = course
        live.history = History([stored])
        self.bus.publish("note", rec.id, text=f"new course #{course} started (clear_mind)")

    def _request_params(self, member: MemberConfig, *, fbr: bool) -> dict[str, Any]:
        """A member's merged model params as requests carry them (config is immutable for
        the runtime's life; shared: providers only read them)."""
        key = (member.id, fbr)
        params = self._params.get(key)
        if params is None:
            merged = member.fbr_params() if fbr else member.model_params
            params = self._params[key] = merged.as_request_params()
        return params

    def _root_member(self, rec: DialogRecord) -> str:
        if rec.kind == "root":
            return rec.member
        member = self._root_members.get(rec.root_id)
        if member is None:
            member = self._root_members[rec.root_id] = self.store.get_dialog(rec.root_id).member
        return member

    def _tool_context(self, live: _Live, key: str) -> ToolContext:
        """What one tool call sees: typed facts and the narrow services bound to this
        dialog (never the engine itself)."""
        m = live.member
        did = live.record.id
        publish = self.bus.publish  # the hook reaches the bus, never the engine
        return ToolContext(
            rtws=self.rtws,
            member=m.id,
            dialog_id=did,
            call_key=key,
            acl=Acl(
                read_dirs=tuple(m.read_dirs),
                write_dirs=tuple(m.write_dirs),
                no_read_dirs=tuple(m.no_read_dirs),
                no_write_dirs=tuple(m.no_write_dirs),
            ),
            is_root=live.record.kind == "root",
            task_path=live.record.task_path,
            root_member=self._root_member(live.record),
            work_language=self.lang,
            secret_env_names=llm_secret_env_names(self.config.llm),
            reminders=StoreReminders(self.store, did),
            course=live.course,
            taskdoc_audit=StoreTaskdocAudit(self.store),
            on_taskdoc_changed=lambda section: publish("taskdoc_changed", did, section=section),
        )


def _generation_record(live: _Live, out: _Outcome, model: str) -> GenerationRecord:
    return GenerationRecord(
        dialog_id=live.record.id,
        provider=live.member.provider,
        model=model,
        started_at=out.started_at,
        ended_at=out.ended_at or time.time(),
        input_tokens=out.input_tokens,
        output_tokens=out.output_tokens,
        finish_reason=out.finish_reason,
        error=str(out.error) if out.error else None,
    )


def _has_outside_effect(rec: DialogRecord, out: _Outcome, routes: list[Route]) -> bool:
    """Whether a generation's commit precedes an effect outside the store: tools about to
    run, a question put to the human, or a root's final answer reported to the user. Only
    those commits fsync; every other commit is lazy and becomes durable with the next
    fsync (the WAL is replayed as an ordered prefix). A power failure can so only lose a
    suffix that nothing outside saw: generations that recovery runs again, as if they had
    been in flight."""
    if out.calls or (out.final and rec.kind == "root"):
        return True
    return any(r.kind is RouteKind.HUMAN for r in routes)


def _unanswered_calls(msgs: list[Any]) -> list[Any]:
    """Tool calls of the latest assistant turn that have no result yet. Only a crash
    leaves such calls; runtime notes (e.g. a failed tellask of the same message) may
    follow them, so look back to the latest assistant message, not just the last one."""
    answered: set[str] = set()
    for msg in reversed(msgs):
        if isinstance(msg, AssistantMessage):
            return [c for c in msg.tool_calls if c.id not in answered]
        if isinstance(msg, ToolResultMessage):
            answered.add(msg.call_id)
    return []


@dataclass
class _Outcome(GenerationOutcome):
    generation_id: int = 0  # the stored generation (part of each tool call's key)
    final: bool = False
    violation: bool = False
    dispatched: bool = False  # its tellasks were carried out (the dialog may now wait)
