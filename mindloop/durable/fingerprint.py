"""What every worker of one database must see alike: the same rtws.

The rtws (configuration, Taskdoc packages, the files agents work on) is not in the
database: every worker must run on one path they all share (a network file system, a
volume mounted on every machine). Two checks catch a worker that does not:

- the fingerprint: a hash of the human-owned configuration under `.minds/` (the YAML
  files and the members' personas; not the memory or `self.md` files the runtime writes);
  a worker whose fingerprint differs from a live worker's is refused;
- the probe: each worker leaves `.mindloop/workers/<executor id>` in the rtws; a new
  worker that cannot see a live worker's probe is not on the same files (a copy, not the
  shared path) and is refused, even when the copies are alike today.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

PROBE_DIR = Path(".mindloop") / "workers"


def config_files(rtws: Path) -> list[Path]:
    minds = rtws / ".minds"
    found = [p for p in minds.glob("*.yaml") if p.is_file()]
    found += [p for p in minds.glob("team/*/persona.md") if p.is_file()]
    return sorted(found)


def fingerprint(rtws: Path) -> str:
    """A short hash of the rtws's configuration (paths relative to the rtws, contents)."""
    h = hashlib.sha256()
    for p in config_files(rtws):
        h.update(p.relative_to(rtws).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:16]


def probe_path(rtws: Path, executor_id: str) -> Path:
    return rtws / PROBE_DIR / executor_id


def leave_probe(rtws: Path, executor_id: str) -> None:
    path = probe_path(rtws, executor_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(executor_id + "\n", encoding="utf-8")


def remove_probe(rtws: Path, executor_id: str) -> None:
    probe_path(rtws, executor_id).unlink(missing_ok=True)


def sees_probe(rtws: Path, executor_id: str) -> bool:
    try:
        return probe_path(rtws, executor_id).read_text(encoding="utf-8").strip() == executor_id
    except OSError:
        return False
