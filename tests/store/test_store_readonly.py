"""A read-only project through the store's API: a store opens on it and reads; every write
is one `StoreError` naming what is read-only; nothing is changed. Run in a child process,
as a user the project is read-only for (see the `readonly_base` fixture)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mindloop.store import DialogRecord, Store
from tests.scenario_util import as_user
from tests.store.readonly import make_read_only

# The SQLite state file itself (damaged, foreign, read-only): not a PostgreSQL matter.
pytestmark = pytest.mark.sqlite_only

CHILD = """
import json, sys
from pathlib import Path
from mindloop.store import DialogRecord, Store, StoreError

out = {}
try:
    store = Store.for_rtws(Path(sys.argv[1]))
except StoreError as exc:
    print(json.dumps({"open": str(exc)}))
    raise SystemExit
out["dialogs"] = [d.id for d in store.list_dialogs()]
out["history"] = [m.data["text"] for m in store.load_history("d1")]
writes = {
    "create": lambda: store.create_dialog(DialogRecord(id="d2", root_id="d2", member="m",
                                                       task_path="t")),
    "claim": lambda: store.claim_dialog("d1", "me", 60.0),
    "tx": lambda: store.tx().__enter__(),
}
for name, write in writes.items():
    try:
        write()
        out[name] = "written"
    except StoreError as exc:
        out[name] = str(exc)
print(json.dumps(out))
"""


def _run(user: int | None, *args: str) -> dict[str, object]:
    proc = subprocess.run(
        [*as_user(user), sys.executable, "-c", CHILD, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    found: dict[str, object] = json.loads(proc.stdout)
    return found


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


def test_a_read_only_state_reads_and_refuses_every_write(
    readonly_base: tuple[Path, int | None],
) -> None:
    base, user = readonly_base
    proj = base / "p"
    store = Store.for_rtws(proj)
    store.create_dialog(DialogRecord(id="d1", root_id="d1", member="dev", task_path="t"))
    store.append_message("d1", "user", {"text": "hello"})
    store.close()
    make_read_only(proj)
    before = _files(proj)

    out = _run(user, str(proj))
    db = proj / ".mindloop" / "state.sqlite"
    assert out["dialogs"] == ["d1"] and out["history"] == ["hello"]
    for write in ("create", "claim", "tx"):
        assert out[write] == f"cannot write {db}: {db.parent} is read-only", write
    assert _files(proj) == before


def test_no_state_directory_in_a_read_only_project_is_one_error(
    readonly_base: tuple[Path, int | None],
) -> None:
    base, user = readonly_base
    proj = base / "p"
    proj.mkdir()
    make_read_only(proj)
    out = _run(user, str(proj))
    assert out == {
        "open": f"cannot create {proj / '.mindloop'}: {proj} is read-only (Permission denied)"
    }
    assert list(proj.iterdir()) == []
