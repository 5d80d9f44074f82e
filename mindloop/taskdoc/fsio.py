"""Small filesystem primitives the Taskdoc needs: atomic writes and non-creating reads.

Section files are high-integrity state, so a write either lands whole or not at all:
write a temp file in the package, fsync it, `os.replace` it over the target, fsync the
directory. Temp files are hidden top-level entries of the package (`.change_mind.*.tmp`),
which are neither sections nor layout violations.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import uuid
from pathlib import Path

TEMP_PREFIX = ".change_mind."
TEMP_SUFFIX = ".tmp"


def sha256_text(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def regular_file_stat(path: Path) -> os.stat_result | None:
    """`lstat` of `path` if it is a regular file (symlinks do not count), else None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def read_text_or_none(path: Path) -> str | None:
    """Content of a regular file, None if absent (or not a regular file). Never creates."""
    if regular_file_stat(path) is None:
        return None
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_temp(dir_: Path, text: str, *, fsync: bool = True) -> Path:
    """Write `text` to a new (fsynced) temp file in `dir_`; the caller replaces or removes
    it."""
    tmp = dir_ / f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}"
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())
    return tmp


def replace_into(tmp: Path, target: Path, *, fsync: bool = True) -> None:
    """Atomically move `tmp` over `target` and (with `fsync`) make the rename durable."""
    os.replace(tmp, target)
    if fsync:
        fsync_dir(target.parent)
        if tmp.parent != target.parent:
            fsync_dir(tmp.parent)


def atomic_write(
    target: Path, text: str, *, temp_dir: Path | None = None, fsync: bool = True
) -> None:
    """Replace `target` with `text` whole. `fsync=False` keeps the atomicity (readers and
    a killed process see the old or the new file) but not the durability across a power
    failure: for files derived from durable state, rebuilt from it."""
    tmp = write_temp(temp_dir or target.parent, text, fsync=fsync)
    try:
        replace_into(tmp, target, fsync=fsync)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
