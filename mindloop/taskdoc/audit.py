"""The audited write of one Taskdoc section, and the reconciliation that makes a section
file equal its last audit record after any kill.

Invariant: for every section with audit records, the file holds the last record's
`content_after` — unless a person edited the file outside mindloop, which is reported
(`section_status`, `mindloop check`) and never overwritten.

Order of one change (`commit_change`, under the package lock):

1. write the new content to a temp file in the package (`.change_mind.<id>.tmp`), fsync
   it and the package directory (the temp is durable before the record can be);
2. commit the audit record (`hash_before`, `hash_after`, both contents), durably;
3. `os.replace` the temp over the section, then fsync the directory.

Why the record first. The record is the intent, the temp file the proof that the intent
is not applied yet: `os.replace` consumes the temp, so after any kill exactly one of
these holds, and a reader can tell which from the files and the store alone:
- killed in 1, or between 1 and 2: a temp, no record for it → the change never happened;
  the temp is removed and the file still equals the previous record;
- killed between 2 and 3: the record's `hash_after` is the temp's hash and the file still
  has the record's `hash_before` → rolled forward by renaming that temp over the file;
- killed in 3: `rename(2)` is atomic, so the file is old (as above) or new and complete
  (the temp is gone, the file equals the record).
The reverse order (replace, then record) cannot be reconciled: a kill between the two
leaves a new file and no record, which looks exactly like a person's edit — rolling it
back would also erase real human edits, keeping it breaks the invariant, and the old
content would exist nowhere. A marker file to tell the two apart would be an intent log
written before the replace, i.e. this order again.

Who may remove a temp. A reader that finds a temp cannot know whether a live writer is
between steps 1 and 2 (its temp would be removed under it, and its replace would then
fail after the record committed). So writers hold an exclusive `flock` on the package
directory for the whole change, and reconciliation takes it too: a temp seen while
holding the lock belongs to a writer that is dead. The kernel releases the lock of a
killed process, so a crash never leaves it held. The lock also serialises two writers
(two root dialogs on one package), so each record's `hash_before` is the previous one's
`hash_after`.

When. `reconcile` runs before every change and on every read of the package
(`render_cached`, through which every generation's Taskdoc is rendered, and
`section_status`); recovery needs nothing more, since the first generation after it reads
the Taskdoc. Without temps it costs one directory listing. Reads without a store at hand
use the rtws's own store (`.mindloop/state.sqlite`), opened only when a temp is found.

The record must commit on its own, before the replace: `change_mind` must not run inside
an outer `store.tx()` (its commit would come after step 3, and a kill in between would
leave a change with no record, reported as an outside edit).

Power loss: steps 1–3 fsync in order (file, directory, record, directory), so a record
that survived has a temp or a replaced file that survived too. Argued, not tested; the
crash points below (process kills) are tested.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from mindloop.store import STATE_DIR, STATE_FILE, Store, StoreError, TaskdocChange
from mindloop.store.crash_points import CRASH_ENV, CRASH_EXIT_CODE
from mindloop.store.location import database_url
from mindloop.taskdoc import fsio
from mindloop.taskdoc.discovery import discover_packages
from mindloop.taskdoc.package import TaskPackage

# ---------------------------------------------------------------- crash points (tests only)

CRASH_POINTS: tuple[str, ...] = (
    "change_mind.before_commit",  # temp durable, record not committed
    "change_mind.after_commit",  # record committed, section not replaced
    "change_mind.in_replace",  # renamed over the section, directory not yet fsynced
    "change_mind.after_replace",  # everything done, package lock still held
    "reconcile.after_roll_forward",  # a change rolled forward, stray temps not yet removed
)


def crash_point(name: str) -> None:
    """End the process at once, as a kill would (no cleanup, no `finally`), when the test
    environment names this point. Only tests set `MINDLOOP_TEST_CRASH_AT`."""
    if os.environ.get(CRASH_ENV) == name:
        os._exit(CRASH_EXIT_CODE)


# ---------------------------------------------------------------- lock and files


@contextlib.contextmanager
def package_lock(pkg: TaskPackage) -> Iterator[None]:
    """Exclusive lock on the package directory (across processes and threads); a package
    swapped for a symlink is refused (`OSError`), never locked or written through."""
    fd = os.open(pkg.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def temp_files(pkg: TaskPackage) -> list[Path]:
    """Temp files of `change_mind` left in the package (top level), sorted."""
    try:
        with os.scandir(pkg.path) as it:
            names = [
                e.name
                for e in it
                if e.name.startswith(fsio.TEMP_PREFIX) and e.name.endswith(fsio.TEMP_SUFFIX)
            ]
    except OSError:
        return []
    return [pkg.path / n for n in sorted(names)]


def file_hash(pkg: TaskPackage, rel: str) -> str | None:
    text = pkg.read_section_or_none(rel)
    return None if text is None else fsio.sha256_text(text)


def last_changes(store: Store, task_path: str) -> dict[str, TaskdocChange]:
    """The last audit record of each section of a package."""
    last: dict[str, TaskdocChange] = {}
    for change in store.taskdoc_history(task_path):
        last[change.section] = change
    return last


def safe_parent(pkg: TaskPackage, rel: str) -> Path | None:
    """Create the section's directory inside the package; None if it would leave it."""
    pkg.path.mkdir(parents=True, exist_ok=True)
    parent = (pkg.path / rel).parent
    if parent != pkg.path:
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            return None
        parent.mkdir(exist_ok=True)
    # `pkg.path` is canonical (resolved when the package was opened): a package or
    # category swapped for a symlink since then resolves elsewhere and is refused.
    if Path(os.path.realpath(parent)) != pkg.path / Path(rel).parent:
        return None
    return parent


# ---------------------------------------------------------------- the write


def commit_change(pkg: TaskPackage, change: TaskdocChange, store: Store) -> TaskdocChange:
    """Steps 1–3 of the module doc. The caller holds `package_lock`, has reconciled, and
    has made the section's directory (`safe_parent`)."""
    tmp = fsio.write_temp(pkg.path, change.content_after)
    try:
        fsio.fsync_dir(pkg.path)
        crash_point("change_mind.before_commit")
        recorded = store.record_taskdoc_change(change)
        crash_point("change_mind.after_commit")
        os.replace(tmp, pkg.path / change.section)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    crash_point("change_mind.in_replace")
    fsio.fsync_dir((pkg.path / change.section).parent)
    crash_point("change_mind.after_replace")
    return recorded


# ---------------------------------------------------------------- reconciliation


def reconcile_locked(pkg: TaskPackage, store: Store) -> list[str]:
    """Roll forward the change a kill left recorded but not applied, and remove stray
    temps. The caller holds `package_lock`. Returns the sections repaired."""
    temps = temp_files(pkg)
    if not temps:
        return []
    by_hash: dict[str, Path] = {}
    for tmp in temps:
        text = fsio.read_text_or_none(tmp)
        if text is not None:
            by_hash.setdefault(fsio.sha256_text(text), tmp)
    repaired: list[str] = []
    for rel, change in last_changes(store, pkg.rel_path).items():
        now = file_hash(pkg, rel)
        pending = by_hash.get(change.hash_after)
        if now == change.hash_after or now != change.hash_before or pending is None:
            continue
        if safe_parent(pkg, rel) is None:
            continue  # a category swapped for a symlink: left as it is, and reported
        os.replace(pending, pkg.path / rel)
        fsio.fsync_dir((pkg.path / rel).parent)
        del by_hash[change.hash_after]
        repaired.append(rel)
    crash_point("reconcile.after_roll_forward")
    for tmp in temp_files(pkg):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    fsio.fsync_dir(pkg.path)
    return repaired


def _rtws_store(pkg: TaskPackage) -> Store | None:
    """The rtws's own store, if the runtime ever ran here (reading creates no state)."""
    if database_url() is None and not (pkg.rtws / STATE_DIR / STATE_FILE).is_file():
        return None
    return Store.for_rtws(pkg.rtws)


def reconcile(pkg: TaskPackage, store: Store | None = None) -> list[str]:
    """Make every section file of `pkg` equal its last audit record again after a kill
    (see the module doc); returns the sections repaired. `store` defaults to the rtws's
    own store. Costs one directory listing when no change was interrupted."""
    if not temp_files(pkg):
        return []
    own = store is None
    audit = _rtws_store(pkg) if own else store
    if audit is None:
        return []
    try:
        with package_lock(pkg):
            return reconcile_locked(pkg, audit)
    finally:
        if own:
            audit.close()


def reconcile_before_read(pkg: TaskPackage) -> None:
    """`reconcile` for readers: a package or store this process cannot write (a read-only
    project) is read as it is; the next writable read repairs it."""
    with contextlib.suppress(OSError, StoreError):
        reconcile(pkg)


# ---------------------------------------------------------------- reporting

MismatchKind = Literal["interrupted", "changed_outside", "deleted_outside"]


class Mismatch(BaseModel):
    """A section file that does not hold its last audit record's content."""

    section: str
    kind: MismatchKind
    change: TaskdocChange

    def describe(self, task_path: str) -> str:
        c = self.change
        where = f"{task_path}/{self.section}"
        last = f"audit record #{c.id} by {c.actor_member}"
        if self.kind == "interrupted":
            return (
                f"{where}: a change_mind interrupted by a crash ({last}) is not applied yet; "
                "the next read of the Taskdoc (a generation, `mindloop taskdoc show`) applies it"
            )
        if self.kind == "deleted_outside":
            return f"{where}: deleted outside mindloop since its last audited change ({last})"
        return (
            f"{where}: changed outside mindloop since its last audited change ({last}); "
            f"`mindloop taskdoc show {task_path} --history "
            f"{self.section.removesuffix('.md')}` lists the audited versions"
        )


def mismatches(pkg: TaskPackage, store: Store) -> list[Mismatch]:
    """Sections whose file differs from their last audit record (read-only: no repair)."""
    temp_hashes = set()
    for tmp in temp_files(pkg):
        text = fsio.read_text_or_none(tmp)
        if text is not None:
            temp_hashes.add(fsio.sha256_text(text))
    found: list[Mismatch] = []
    for rel, change in sorted(last_changes(store, pkg.rel_path).items()):
        now = file_hash(pkg, rel)
        if now == change.hash_after:
            continue
        kind: MismatchKind
        if now == change.hash_before and change.hash_after in temp_hashes:
            kind = "interrupted"
        elif now is None:
            kind = "deleted_outside"
        else:
            kind = "changed_outside"
        found.append(Mismatch(section=rel, kind=kind, change=change))
    return found


def audit_warnings(rtws: Path | str) -> list[str]:
    """Every section of every package of the rtws whose file disagrees with its last audit
    record, one line each (for `mindloop check`); [] when the runtime never ran here."""
    rtws = Path(rtws).resolve()
    if database_url() is None and not (rtws / STATE_DIR / STATE_FILE).is_file():
        return []
    try:
        store = Store.for_rtws(rtws)
    except StoreError:
        return []  # a damaged state file is reported where it is opened for use
    try:
        lines: list[str] = []
        for rel in discover_packages(rtws):
            pkg = TaskPackage(rtws, rel)
            lines += [m.describe(pkg.rel_path) for m in mismatches(pkg, store)]
        return lines
    finally:
        store.close()
