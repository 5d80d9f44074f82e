"""Whether the files a generation reads changed, in one system call for all of them.

Every generation's system prompt and request read a few files again (the effective
Taskdoc's sections and directories, the member's persona and `self.md`, its memory):
each is cached on its `stat`, which costs a system call per file at every generation.
The kernel can say instead whether anything happened to them: `watcher().arm(paths)`
asks it (Linux inotify) to report every change to those paths and to the directories
holding them, and the `Mark` it returns is `quiet()` — one `poll` of the queue for all
the files a process watches — while none was reported since.

A change by any process counts, this one or another: written in place, truncated,
touched, replaced, created, removed, renamed, its directory replaced. The kernel queues
the report inside the writer's system call, so a write that returned before `quiet()`
is seen by it. A mark that is not quiet says only that something happened near the
paths: the caller checks them as it would without a watcher (their stats) and arms
again — before that check, so a change racing with it is reported to the new mark.

Arm before reading what the paths hold, and check a mark before using what was read.

Used only where the kernel reports every change: Linux, local filesystems (a network
or overlay filesystem may not report another machine's or layer's writes), in the
process that armed it (a forked child has no watcher of its own), within a bound on
the paths watched. Anywhere else `arm` gives None and the caller stats as before; a
queue that overflowed, or a watch the kernel dropped, leaves the marks concerned
never quiet again until armed anew.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import sys
import threading
from collections.abc import Iterable

# inotify(7) event masks
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then the name, len bytes)

MAX_WATCHES = 1024  # paths (files and directories) one process watches at most
# Filesystems whose every change, by any writer, the kernel reports to a watch.
LOCAL_FILESYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs", "zfs", "bcachefs", "jfs"}
)
DISABLE_ENV = "MINDLOOP_NO_FILE_WATCH"  # set: no watcher (every check stats its files)


class Mark:
    """What one `arm` watched, as it stood then (see the module doc)."""

    __slots__ = ("_seen", "_stamps", "_watcher")

    def __init__(self, watcher: Watcher, stamps: tuple[tuple[int, int], ...], seen: int) -> None:
        self._watcher = watcher
        self._stamps = stamps  # (watch, its stamp) at arming
        self._seen = seen  # the watcher's stamp when the mark was last found quiet

    def quiet(self) -> bool:
        """Whether no change was reported on the paths since the mark was armed."""
        w = self._watcher
        now = w.drain()
        if now == self._seen:  # nothing reported (and no watch added) since
            return True
        if now < 0:
            return False
        stamps = w.stamps
        for wd, stamp in self._stamps:
            if stamps.get(wd) != stamp:
                return False
        self._seen = now  # nothing of its own: quiet until the next report
        return True


class Watcher:
    """One process's inotify queue and the paths it watches. Each watch has a stamp, new
    at each report on it (and when it is added): a mark is quiet while its watches keep
    the stamps they had when it was armed."""

    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        self._libc = libc
        self._fd = fd
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)
        self._lock = threading.Lock()
        self._wds: dict[str, int] = {}  # path -> its watch
        self.stamps: dict[int, int] = {}  # watch -> its stamp (absent: dropped)
        self._stamp = 0  # the last stamp given (-1: this process cannot watch)
        self._local: dict[str, bool] = {}  # path -> on a local filesystem

    def drain(self) -> int:
        """Take what the kernel reported since the last call; the last stamp given
        (-1 when the watches cannot be trusted here: a forked child's copy)."""
        if self._stamp < 0:
            return -1
        if not self._poll.poll(0):
            return self._stamp
        with self._lock:
            while True:
                try:
                    data = os.read(self._fd, 65536)
                except BlockingIOError:
                    break
                self._events(data)
            return self._stamp

    def disown(self) -> None:
        """No mark of this watcher is quiet any more (a forked child's copy)."""
        self._stamp = -1

    def _events(self, data: bytes) -> None:
        stamps = self.stamps
        at = 0
        while at + _EVENT.size <= len(data):
            wd, mask, _, size = _EVENT.unpack_from(data, at)
            at += _EVENT.size + size
            self._stamp += 1
            if mask & _IN_Q_OVERFLOW:  # reports were lost: no mark is quiet any more
                stamps.clear()
                self._wds.clear()
            elif mask & _IN_IGNORED:  # the kernel dropped the watch (its path is gone)
                stamps.pop(wd, None)
                for path in [p for p, w in self._wds.items() if w == wd]:
                    del self._wds[path]
            elif wd in stamps:
                stamps[wd] = self._stamp

    def arm(self, paths: Iterable[str]) -> Mark | None:
        """Watch `paths` (each that exists, and the nearest existing directory above
        each) and return the mark of how they stand now; None when one of them cannot
        be watched (the caller then stats them)."""
        if self.drain() < 0:
            return None
        wanted: dict[str, None] = {}
        for path in paths:
            path = os.path.abspath(path)
            if os.path.lexists(path):
                wanted[path] = None
            parent = os.path.dirname(path)
            while not os.path.isdir(parent):
                up = os.path.dirname(parent)
                if up == parent:
                    return None
                parent = up
            wanted[parent] = None
        with self._lock:
            out = []
            for path in wanted:
                wd = self._watch(path)
                if wd is None:
                    return None
                out.append((wd, self.stamps[wd]))
            return Mark(self, tuple(out), self._stamp)

    def _watch(self, path: str) -> int | None:
        """The watch of `path`, added anew (the same inode keeps its watch and stamp; a
        file replaced since gets a watch of its own); None where it cannot be trusted."""
        if not self._is_local(path):
            return None
        if len(self._wds) >= MAX_WATCHES and path not in self._wds:
            return None
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), _MASK)
        if wd < 0:
            self._wds.pop(path, None)
            return None
        self._wds[path] = wd
        if wd not in self.stamps:
            self._stamp += 1
            self.stamps[wd] = self._stamp
        return int(wd)

    def _is_local(self, path: str) -> bool:
        """Whether `path` is on a filesystem whose every writer the kernel reports."""
        found = self._local.get(path)
        if found is None:
            found = self._local[path] = _filesystem(path) in LOCAL_FILESYSTEMS
        return found


def _filesystem(path: str) -> str | None:
    """The type of the filesystem `path` is on (the longest mount point above its real
    path in /proc/self/mountinfo), or None."""
    real = os.path.realpath(path)
    best, kind = -1, None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                try:
                    sep = fields.index("-")
                except ValueError:
                    continue
                point = fields[4].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) > best and sep + 1 < len(fields):
                    best, kind = len(point), fields[sep + 1]
    except OSError:
        return None
    return kind


_watcher: Watcher | None = None
_watcher_pid: int | None = None  # the process `_watcher` was made in
_made_lock = threading.Lock()


def watcher() -> Watcher | None:
    """This process's watcher (made at its first call), or None where there is none."""
    global _watcher, _watcher_pid
    pid = os.getpid()
    if _watcher_pid != pid:  # the first call, or a forked child: a queue of its own
        with _made_lock:
            if _watcher_pid != pid:
                _watcher, _watcher_pid = _new_watcher(), pid
    return _watcher


def _forked() -> None:
    """In a forked child: the parent's queue is not the child's (its marks are never
    quiet; the child makes a watcher of its own when it arms)."""
    if _watcher is not None:
        _watcher.disown()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _new_watcher() -> Watcher | None:
    if not sys.platform.startswith("linux") or os.environ.get(DISABLE_ENV):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        init = libc.inotify_init1
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:  # (the user's inotify instances used up)
        return None
    return Watcher(libc, fd)


def arm(paths: Iterable[str]) -> Mark | None:
    """`watcher().arm(paths)`, or None without a watcher."""
    w = watcher()
    return w.arm(paths) if w is not None else None
