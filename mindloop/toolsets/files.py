"""File primitives of the `fs` toolset: reads that cannot hang, writes that cannot tear.

- An agent can create a FIFO (`mkfifo`) or a socket in the rtws; opening one for reading
  blocks until a writer appears, for good. Every read opens with `O_NONBLOCK`, checks with
  `fstat` that it got a regular file, and only then reads; anything else is refused.
- Blocking file work runs on a daemon thread under a deadline: a file system that stops
  answering gives the model an error instead of a hung call, and Ctrl-C still ends the
  process (the default executor's threads are joined at exit; a daemon thread is not).
- `write_file` replaces a file only whole: the new content (for append: the old content
  plus the addition) goes to a temporary file beside the target, which is fsynced and
  renamed over it, and the directory is fsynced. A crash or a full disk at any instant
  leaves the old file or the new one, never a truncated one. The target's permission bits
  (and owner, where allowed) carry over.

A crash between creating the temporary file and the rename leaves a hidden
`.mindloop-write-*.tmp` beside the target, nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import stat
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Literal, TypeVar

from mindloop.errors import MindloopError
from mindloop.taskdoc.fsio import fsync_dir
from mindloop.tools.base import ToolOutput

READ_DEADLINE_S = 30.0
TEMP_PREFIX = ".mindloop-write-"
TEMP_SUFFIX = ".tmp"
_COPY_CHUNK = 1 << 20

T = TypeVar("T")
WriteMode = Literal["overwrite", "create", "append"]

_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotRegularFile(MindloopError):
    """The path is a FIFO, socket, device or directory, which file tools do not open."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def is_regular(path: Path) -> bool:
    """Whether `path` (followed) is a regular file; never opens it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def open_regular(path: Path) -> BinaryIO:
    """Open a regular file for reading without ever blocking on a special file.

    Raises NotRegularFile for anything else (checked before opening and again on the
    opened descriptor, so a swap in between is caught too)."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(_kind(st.st_mode))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(_kind(st.st_mode))
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


async def off_loop(fn: Callable[[], T], *, deadline: float | None) -> T:
    """Run blocking file work on a daemon thread; TimeoutError after `deadline` seconds
    (the thread is left to finish on its own: it cannot be interrupted, but it can no
    longer hold the call, nor the process at exit)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def work() -> None:
        try:
            result = fn()
        except BaseException as exc:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(_settle_error, future, exc)
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, result)

    threading.Thread(target=work, name="mindloop-file-io", daemon=True).start()
    if deadline is None:
        return await future
    return await asyncio.wait_for(future, deadline)


def _settle(future: asyncio.Future[T], result: T) -> None:
    if not future.done():  # not cancelled or timed out meanwhile
        future.set_result(result)


def _settle_error(future: asyncio.Future[T], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def read_text_file(path: Path, consume: Callable[[BinaryIO], T]) -> T:
    """Open a regular file (never blocking on a special one) and hand it to `consume`."""
    with open_regular(path) as fh:
        return consume(fh)


def write_atomically(target: Path, data: bytes, mode: WriteMode) -> bool:
    """Write `data` to `target` (absolute, symlink-free) crash-atomically; returns whether
    the file existed before. Raises FileExistsError for `create` over an existing file and
    NotRegularFile when the target is not a regular file; the target is then untouched."""
    try:
        before: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        before = None
    if before is not None:
        if not stat.S_ISREG(before.st_mode):
            raise NotRegularFile(_kind(before.st_mode))
        if mode == "create":
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}"
    # 0o666 through the umask: a new file gets the same bits `open(..., "w")` gives it.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        try:
            if before is not None:
                os.fchmod(fd, stat.S_IMODE(before.st_mode))
                with contextlib.suppress(OSError):  # only a privileged process may
                    os.fchown(fd, before.st_uid, before.st_gid)
            if mode == "append" and before is not None:
                with open_regular(target) as old:
                    while chunk := old.read(_COPY_CHUNK):
                        _write_all(fd, chunk)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if mode == "create":
            _link_new(tmp, target)
        else:
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(target.parent)
    return before is not None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _link_new(tmp: Path, target: Path) -> None:
    """Put `tmp` in place at `target` only if nothing is there (atomic no-clobber)."""
    try:
        os.link(tmp, target)
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # A file system without hard links: check, then rename (a race can clobber).
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target)) from err
        os.replace(tmp, target)
        return
    tmp.unlink()


def kind_of(path: Path) -> str:
    """What `path` is, in words, for a refusal (`a FIFO (named pipe)`)."""
    try:
        return _kind(os.stat(path).st_mode)
    except OSError:
        return "not a regular file"


# ---------------------------------------------------------------------------------------
# The texts the file tools answer with when these primitives refuse


def not_regular_output(shown: str, kind: str) -> ToolOutput:
    return ToolOutput(
        f"`{shown}` is not a regular file ({kind}); file tools read and write regular files only",
        is_error=True,
    )


def too_slow_output(shown: str) -> ToolOutput:
    return ToolOutput(
        f"`{shown}` could not be read within {READ_DEADLINE_S:g} s: the file system did not answer",
        is_error=True,
    )
