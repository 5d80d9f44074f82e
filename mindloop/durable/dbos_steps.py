"""The engine's two outside effects as DBOS steps, found again by key after a recovery.

Inside a drive's workflow (`worker.py`) every model call and every tool call runs as a
DBOS step (`DBOS.run_step_async`, named `mindloop.<kind>`), whose output DBOS records as
JSON in its system tables: `{"key": <the effect's key>, "value": <the result as JSON>}`.

Why by key and not by position. DBOS replays a recovered workflow by running it again
from the start and handing each step, in call order, the output recorded at its position.
That assumes the workflow does the same steps in the same order. A drive does not: it
resumes from mindloop's store, the source of truth, which already holds every step whose
turn was committed, so the resumed run starts with the first step that was not. So a
recovered execution reads the workflow's recorded steps once (outside the replay, so the
reading is not a step itself), matches them by key, and moves DBOS's step counter past
them (`DBOS.reserve_step`, which may leave gaps); a new step gets a new position. A model
call that completed before the crash — recorded, its turn not yet committed — is found by
its key (same dialog, course and history) and not made again; one whose turn was
committed is not reached again at all.

A tool result that carries store effects (`ToolOutput.effects`, which are code, not data)
is recorded with `"rerun": true` and runs again on replay; such tools key their effects by
the call key and commit them with the result, so the store keeps them exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from mindloop.durable.steps import Codec, JsonObject

T = TypeVar("T")

STEP_PREFIX = "mindloop."

# The recorded results of the workflow execution this task runs in: kind -> key -> value.
_recorded: contextvars.ContextVar[dict[str, dict[str, JsonObject]] | None] = contextvars.ContextVar(
    "mindloop_dbos_recorded", default=None
)


def _list_steps(workflow_id: str) -> list[Any]:
    from dbos import DBOS

    return list(DBOS.list_workflow_steps(workflow_id))


@contextlib.asynccontextmanager
async def execution() -> AsyncIterator[None]:
    """Wrap one execution of a workflow that uses `DbosSteps`: read what earlier
    executions of it recorded, and start new steps after them."""
    from dbos import DBOS

    wfid = DBOS.workflow_id
    if wfid is None:
        raise RuntimeError("durable.dbos_steps.execution() runs only inside a DBOS workflow")
    # Read in a context without the workflow's: a read from inside would itself be a step
    # (and would return, on a later recovery, what this read saw).
    clean = contextvars.Context()
    steps = await asyncio.get_running_loop().run_in_executor(
        None, lambda: clean.run(_list_steps, wfid)
    )
    found: dict[str, dict[str, JsonObject]] = {}
    last = 0
    for step in steps:
        last = max(last, int(step["function_id"]))
        name = str(step["function_name"])
        out = step.get("output")
        if name.startswith(STEP_PREFIX) and isinstance(out, dict) and "key" in out:
            found.setdefault(name.removeprefix(STEP_PREFIX), {})[out["key"]] = out["value"]
    while last and DBOS.reserve_step().step_id < last:
        pass  # past every recorded position: a new step never lands on an old one
    token = _recorded.set(found)
    try:
        yield
    finally:
        _recorded.reset(token)


class DbosSteps:
    """`Steps` on DBOS: inside a workflow execution (`execution()`), effects are DBOS
    steps recorded by key; anywhere else they just run."""

    def recorded(self, kind: str, key: str) -> JsonObject | None:
        found = _recorded.get()
        if found is None:
            return None
        value = found.get(kind, {}).get(key)
        if value is None or value.get("rerun"):
            return None
        return value

    async def run(
        self, kind: str, key: str, effect: Callable[[], Awaitable[T]], codec: Codec[T]
    ) -> T:
        found = _recorded.get()
        if found is None:  # not in a drive workflow (a CLI command's own drive)
            return await effect()
        value = self.recorded(kind, key)
        if value is not None:
            return codec.decode(value)
        from dbos import DBOS

        result: list[T] = []

        async def step() -> JsonObject:
            result.append(await effect())
            return {"key": key, "value": codec.encode(result[0])}

        out = await DBOS.run_step_async({"name": STEP_PREFIX + kind}, step)
        found.setdefault(kind, {})[key] = out["value"]
        # The live result (not its JSON round trip) when this execution ran the effect.
        return result[0] if result else codec.decode(out["value"])
