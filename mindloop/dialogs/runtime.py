"""The dialog engine: creates dialogs and drives them.

A drive: build the context → stream a generation → persist it → run the requested tools
(concurrently) → persist their results → repeat, until the model answers without tool
calls or the per-drive step limit is reached. Each step commits at most twice (the
generation with its output, then the tool results); nothing re-reads the dialog.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mindloop.config import Config, MemberConfig, load_config
from mindloop.dialogs.context import ContextBuilder
from mindloop.dialogs.generation import GenerationOutcome, run_generation
from mindloop.dialogs.history import History
from mindloop.dialogs.prompts import STEP_LIMIT_NOTE, text_for
from mindloop.errors import MindloopError
from mindloop.events.bus import EventBus
from mindloop.providers.base import GenerationRequest, ToolSpec
from mindloop.providers.pool import ProviderPool
from mindloop.store import DialogRecord, GenerationRecord, MessageRecord, Store, new_id
from mindloop.taskdoc import ROOT_ONLY_TOOLS
from mindloop.tools.base import Acl, Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolRegistry
from mindloop.tools.toolsets import standard_registry

DEFAULT_MAX_STEPS = 50


@dataclass
class DriveResult:
    dialog_id: str
    reason: str  # done | step_limit | error | cancelled
    steps: int = 0
    final_text: str = ""
    error: str | None = None


@dataclass
class _Live:
    """What the engine keeps in memory for a dialog it is driving."""

    record: DialogRecord
    member: MemberConfig
    history: History
    tools: list[Tool]
    tool_specs: list[ToolSpec]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class DialogRuntime:
    """One rtws's runtime: config, store, providers, tools and the event bus."""

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
        lang: str = "en",
    ) -> None:
        self.rtws = Path(rtws).resolve()
        self.config = config or load_config(self.rtws)
        self.store = store or Store.for_rtws(self.rtws, durable=durable)
        self.bus = bus or EventBus()
        self.tools = tools or standard_registry()
        self.providers = ProviderPool(self.config.llm, self.rtws)
        self.max_steps = max_steps
        self.lang = lang
        self.context = ContextBuilder(self.rtws, self.config, lang)
        self._live: dict[str, _Live] = {}

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
        member_id = member or self.config.team.default_responder
        self.config.member(member_id)  # raises a clear error for an unknown member
        did = new_id("d")
        rec = DialogRecord(
            id=did,
            root_id=did,
            member=member_id,
            task_path=pkg.rel_path,
            kind="root",
            title=title,
        )
        rec = self.store.create_dialog(rec)
        self.bus.publish("dialog_created", did, member=member_id, task=pkg.rel_path, kind="root")
        return rec

    def post_user_message(self, dialog_id: str, text: str) -> MessageRecord:
        if not text.strip():
            raise MindloopError("the message is empty")
        live = self._live.get(dialog_id)
        rec = self.store.get_dialog(dialog_id) if live is None else live.record
        stored = self.store.append_message(dialog_id, "user", {"text": text}, course=rec.course)
        if live is not None:
            live.history.add(stored)
        return stored

    def _load(self, dialog_id: str) -> _Live:
        live = self._live.get(dialog_id)
        if live is not None:
            return live
        rec = self.store.get_dialog(dialog_id)
        member = self.config.member(rec.member)
        tools = self._tools_for(member, is_root=rec.kind == "root")
        specs = [ToolSpec(name=t.name, description=t.description, parameters=t.schema()) for t in tools]
        history = History(self.store.load_history(dialog_id, course=rec.course))
        live = self._live[dialog_id] = _Live(rec, member, history, tools, specs)
        return live

    def _tools_for(self, member: MemberConfig, *, is_root: bool) -> list[Tool]:
        tools = self.tools.select(member.toolsets, member.tools)
        if not is_root:
            tools = [t for t in tools if t.name not in ROOT_ONLY_TOOLS]
        return tools

    # ------------------------------------------------------------------ driving

    async def drive(self, dialog_id: str, *, max_steps: int | None = None) -> DriveResult:
        """Drive one dialog until it answers without tool calls (one drive at a time)."""
        live = self._load(dialog_id)
        async with live.lock:
            return await self._drive_locked(live, max_steps or self.max_steps)

    async def _drive_locked(self, live: _Live, max_steps: int) -> DriveResult:
        did = live.record.id
        self.store.update_dialog(did, status="running")
        self.bus.publish("drive_start", did, member=live.member.id)
        result = DriveResult(dialog_id=did, reason="done")
        try:
            for step in range(1, max_steps + 1):
                result.steps = step
                outcome = await self._step_generate(live)
                if outcome.error is not None:
                    result.reason, result.error = "error", str(outcome.error)
                    break
                if not outcome.calls:
                    result.final_text = outcome.text
                    break
                await self._step_tools(live, outcome)
            else:
                result.reason = "step_limit"
                note = text_for(STEP_LIMIT_NOTE, self.lang).format(n=max_steps)
                stored = self.store.append_message(did, "note", {"text": note}, course=live.record.course)
                live.history.add(stored)
                self.bus.publish("note", did, text=note)
        except asyncio.CancelledError:
            result.reason = "cancelled"
            self._finish_drive(live, result)
            raise
        self._finish_drive(live, result)
        return result

    def _finish_drive(self, live: _Live, result: DriveResult) -> None:
        status = {"error": "error", "cancelled": "interrupted"}.get(result.reason, "idle")
        with self.store.tx():
            self.store.update_dialog(live.record.id, status=status)
            self.store.record_event(
                "drive_end",
                live.record.id,
                {"reason": result.reason, "steps": result.steps, "error": result.error},
            )
        live.record.status = status
        self.bus.publish(
            "drive_end", live.record.id, reason=result.reason, steps=result.steps, error=result.error
        )

    def _request(self, live: _Live) -> GenerationRequest:
        member = live.member
        root_member = live.record.member
        if live.record.kind != "root":
            root_member = self.store.get_dialog(live.record.root_id).member
        model = self.config.model_info(member.id)
        return GenerationRequest.model_construct(
            model=model.name or member.model,
            system=self.context.system_prompt(live.record, member, root_member),
            messages=list(live.history.messages),
            tools=live.tool_specs,
            params=member.model_params.as_request_params(),
            member=member.id,
        )

    async def _step_generate(self, live: _Live) -> GenerationOutcome:
        did = live.record.id
        req = self._request(live)
        out = GenerationOutcome()
        self.bus.publish("generation_start", did, member=live.member.id, model=req.model)
        try:
            await run_generation(self.providers.stream(live.member.provider, req), self.bus, did, out)
        except asyncio.CancelledError:
            out.cancelled = True
            out.finish_reason = "cancelled"
            self._persist_generation(live, out, req.model)
            raise
        self._persist_generation(live, out, req.model)
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

    def _persist_generation(self, live: _Live, out: GenerationOutcome, model: str) -> None:
        did, course = live.record.id, live.record.course
        msgs: list[MessageRecord] = []
        if out.thinking:
            msgs.append(MessageRecord(dialog_id=did, course=course, kind="thinking", data={"text": out.thinking}))
        if out.text or not out.calls:
            if out.text or out.error is None:
                msgs.append(MessageRecord(dialog_id=did, course=course, kind="assistant", data={"text": out.text}))
        for call in out.calls:
            msgs.append(
                MessageRecord(
                    dialog_id=did,
                    course=course,
                    kind="tool_call",
                    data={"id": call.id, "name": call.name, "arguments": call.arguments},
                )
            )
        gen = GenerationRecord(
            dialog_id=did,
            provider=live.member.provider,
            model=model,
            started_at=out.started_at,
            ended_at=out.ended_at or time.time(),
            input_tokens=out.input_tokens,
            output_tokens=out.output_tokens,
            finish_reason=out.finish_reason,
            error=str(out.error) if out.error else None,
        )
        with self.store.tx():
            _, stored = self.store.record_generation(gen, msgs)
            if out.error is not None:
                self.store.record_event("error", did, {"message": str(out.error)})
        live.history.extend(stored)

    async def _step_tools(self, live: _Live, outcome: GenerationOutcome) -> None:
        did = live.record.id
        offered = {t.name for t in live.tools}
        ctx = self._tool_context(live)

        async def one(call_id: str, name: str, arguments: str) -> ToolOutput:
            self.bus.publish("tool_call", did, call_id=call_id, name=name, arguments=arguments)
            if name not in offered:
                out = ToolOutput(
                    f"tool {name!r} is not available to @{live.member.id}; available: "
                    + ", ".join(sorted(offered)),
                    is_error=True,
                )
            else:
                out = await self.tools.execute(name, arguments, ctx)
            self.bus.publish(
                "tool_result", did, call_id=call_id, name=name, text=out.text, is_error=out.is_error
            )
            return out

        results = await asyncio.gather(*(one(c.id, c.name, c.arguments) for c in outcome.calls))
        msgs = [
            MessageRecord(
                dialog_id=did,
                course=live.record.course,
                kind="tool_result",
                data={"call_id": c.id, "name": c.name, "content": r.text, "is_error": r.is_error},
            )
            for c, r in zip(outcome.calls, results, strict=True)
        ]
        live.history.extend(self.store.append_messages(msgs))

    def _tool_context(self, live: _Live) -> ToolContext:
        m = live.member
        services: dict[str, Any] = {
            "store": self.store,
            "task_path": live.record.task_path,
            "root_member": live.record.member if live.record.kind == "root" else None,
            "runtime": self,
            "on_taskdoc_changed": lambda section: self.bus.publish(
                "taskdoc_changed", live.record.id, section=section
            ),
        }
        if live.record.kind != "root":
            services["root_member"] = self.store.get_dialog(live.record.root_id).member
        return ToolContext(
            rtws=self.rtws,
            member=m.id,
            dialog_id=live.record.id,
            acl=Acl(
                read_dirs=tuple(m.read_dirs),
                write_dirs=tuple(m.write_dirs),
                no_read_dirs=tuple(m.no_read_dirs),
                no_write_dirs=tuple(m.no_write_dirs),
            ),
            is_root=live.record.kind == "root",
            services=services,
        )
