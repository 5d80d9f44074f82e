"""The work loop: PDCA over a task (agent-loop.md). This package sits above the dialog
engine and plugs into it through turn policies."""
