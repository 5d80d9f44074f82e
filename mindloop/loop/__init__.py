"""The work loop over a task (issue 12): phases as turn policies of the task's loop root,
routing by the runtime from node statuses, and the driver that carries a task from PLAN
to DONE. It sits above the dialog engine (which it plugs into through turn policies) and
below the use cases (`service`)."""
