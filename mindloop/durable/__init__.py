"""Durable execution: the two outside effects of a drive (a model call, a tool call) as
steps, and the scale-out workers that run drives as DBOS Transact workflows.

- `steps.py`: the step boundary the engine calls (`Steps`); without DBOS there is none
  (the engine calls the effect directly: nothing is added to the SQLite path);
- `dbos_steps.py`: each effect a DBOS step, recorded as JSON and found again by its key
  when a recovered workflow reaches it;
- `worker.py`: `mindloop worker`: DBOS launched on the rtws's PostgreSQL database, a drive
  as a queued workflow, heartbeats, taking over the work of a silent worker;
- `fingerprint.py`: what every worker of one database must see alike (the rtws).
"""
