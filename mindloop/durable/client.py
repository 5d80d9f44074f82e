"""The scale-out fleet seen from outside it: `mindloop run TASK` enqueues a task's loop for
the workers and reads how its workflow stands, through a DBOS client (no DBOS runtime in
the calling process, nothing launched, no workflow run here)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from mindloop.durable.steps import JsonObject
from mindloop.durable.worker import dbos_config, input_max_steps, loop_enqueue_options

ENDED = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})


class WorkflowState(BaseModel):
    """Where one workflow stands: DBOS's status, and once it ended its output (JSON) or
    its error."""

    workflow_id: str
    status: str  # ENQUEUED, PENDING, SUCCESS, ERROR, CANCELLED …
    executor_id: str | None = None
    output: JsonObject | None = None
    error: str | None = None

    @property
    def ended(self) -> bool:
        return self.status in ENDED


class FleetClient:
    """A DBOS client on the rtws's database (close it with `close()`)."""

    def __init__(self, database_url: str) -> None:
        from dbos import DBOSClient

        config = dbos_config(database_url, "client")
        self._client = DBOSClient(
            system_database_url=config["system_database_url"],
            serializer=config["serializer"],
            application_name=config["name"],
        )

    def enqueue_loop(self, root_id: str, task_path: str, max_steps: int | None = None) -> str:
        """Enqueue the task's loop, its tree's drives limited to `max_steps` steps each
        (None: the workers' default); the id of the loop workflow queued or running for
        it (one already there is joined, not doubled: it keeps its own limit)."""
        handle: Any = self._client.enqueue(loop_enqueue_options(root_id), task_path, max_steps)
        return str(handle.get_workflow_id())

    def max_steps(self, workflow_id: str) -> int | None:
        """The step limit a workflow was enqueued with (None: the default)."""
        found: list[Any] = self._client.list_workflows(workflow_ids=[workflow_id], load_input=True)
        return input_max_steps(found[0].input) if found else None

    def state(self, workflow_id: str) -> WorkflowState:
        found: list[Any] = self._client.list_workflows(workflow_ids=[workflow_id], load_input=False)
        if not found:
            raise LookupError(f"no workflow {workflow_id} in the database")
        st = found[0]
        output = st.output if isinstance(st.output, dict) else None
        error = None if st.error is None else str(st.error)
        return WorkflowState(
            workflow_id=workflow_id,
            status=str(st.status),
            executor_id=st.executor_id,
            output=output,
            error=error,
        )

    def close(self) -> None:
        self._client.destroy()
