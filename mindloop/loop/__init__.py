"""The work loop over a task (issue 12): the Router that routes a message to a task, the
tasks themselves (one loop root per `*.tsk` package), phases as turn policies of the
task's loop root, routing by the runtime from node statuses, waits, memory, retries,
self-improvement, and the driver that carries a task from PLAN to DONE. The loop drives
a task's loop root through the engine's turn policies; it sits above the dialog engine
and below the use cases (`service`) (DESIGN.md §8)."""
