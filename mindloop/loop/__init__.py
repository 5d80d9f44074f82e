"""The work loop over a task: phases as turn policies, routing, waits, memory, retries,
self-improvement; it drives the dialog engine from above (DESIGN.md §8)."""
