"""The file-tool defects found by independent fault and fuzz runs (issue 10, items 11-17),
each reproduced as the report describes it, through the registry as the engine calls it."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mindloop.tools import Acl

Call = Callable[..., Any]


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


@pytest.fixture
def unblock_fifos() -> Iterator[list[Path]]:
    """FIFOs a broken tool might block on: from 5 s into the test until its end, each is
    opened for writing again and again, so a reader stuck in open() wakes up and the test
    fails instead of hanging the run."""
    fifos: list[Path] = []
    done = threading.Event()

    def release() -> None:
        if done.wait(5):
            return
        while not done.wait(0.05):
            for fifo in fifos:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:  # no reader: nothing is blocked on it
                    continue
                os.close(fd)

    helper = threading.Thread(target=release, daemon=True)
    helper.start()
    yield fifos
    done.set()
    helper.join()


# --- 11: write_file is crash-atomic -----------------------------------------------------

_CRASHING_WRITE = textwrap.dedent(
    """
    import asyncio, json, resource, signal, sys
    from mindloop.tools import ToolContext
    from mindloop.toolsets import standard_registry

    rtws, mode, crash = sys.argv[1], sys.argv[2], sys.argv[3] == "crash"
    registry = standard_registry()
    ctx = ToolContext.for_test(rtws)
    args = json.dumps({"path": "notes/a.txt", "content": "N" * 1_000_000, "mode": mode})
    # The file-size limit stops the write in its middle: with SIGXFSZ's default action it
    # kills this process there (a crash); ignored (Python's default), the write fails with
    # EFBIG (a full disk).
    if crash:
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65_536, 65_536))
    print(asyncio.run(registry.execute("write_file", args, ctx)).text)
    """
)


@pytest.mark.parametrize("mode", ["overwrite", "append"])
@pytest.mark.parametrize("stop", ["crash", "disk full"])
def test_a_write_stopped_midway_leaves_the_old_content(rtws: Path, mode: str, stop: str) -> None:
    target = rtws / "notes" / "a.txt"
    target.parent.mkdir()
    target.write_text("old content\n")
    proc = subprocess.run(
        [sys.executable, "-c", _CRASHING_WRITE, str(rtws), mode, stop.split()[0]],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    if stop == "crash":
        assert proc.returncode == -signal.SIGXFSZ, proc.stdout + proc.stderr
    else:
        assert proc.stdout.startswith("write_file failed: File too large"), proc.stdout
        # a failed write cleans up after itself; only a crash can leave its temporary file
        assert sorted(os.listdir(target.parent)) == ["a.txt"]
    assert target.read_text() == "old content\n"


async def test_writes_keep_the_mode_and_leave_no_temporary_file(rtws: Path, call: Call) -> None:
    target = rtws / "run.sh"
    target.write_text("echo old\n")
    target.chmod(0o754)
    for mode, content in [("overwrite", "echo new\n"), ("append", "echo more\n")]:
        out = await call("write_file", path="run.sh", content=content, mode=mode)
        assert not out.is_error, out.text
        assert stat.S_IMODE(target.stat().st_mode) == 0o754
    assert target.read_text() == "echo new\necho more\n"
    out = await call("write_file", path="fresh/new.txt", content="x", mode="create")
    assert not out.is_error
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((rtws / "fresh/new.txt").stat().st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in rtws.iterdir() if p.name.startswith(".")) == [
        ".mindloop",
        ".minds",
    ]
    assert [p.name for p in (rtws / "fresh").iterdir()] == ["new.txt"]
    again = await call("write_file", path="fresh/new.txt", content="y", mode="create")
    assert again.is_error and "already exists" in again.text
    assert (rtws / "fresh/new.txt").read_text() == "x"


# --- 12: a deny list is not bypassed through a parent -----------------------------------


@pytest.fixture
def notes(rtws: Path) -> Path:
    (rtws / "notes/private").mkdir(parents=True)
    (rtws / "notes/public.txt").write_text("public\n")
    (rtws / "notes/private/p.txt").write_text("SECRET\n")
    return rtws / "notes"


async def test_deleting_a_parent_of_a_write_denied_dir_is_refused(notes: Path, call: Call) -> None:
    acl = Acl(write_dirs=("notes/**",), no_write_dirs=("notes/private/**",))
    direct = await call("delete", acl=acl, path="notes/private/p.txt")
    assert direct.is_error and "ACCESS_DENIED" in direct.text
    parent = await call("delete", acl=acl, path="notes", recursive=True)
    assert parent.is_error and "ACCESS_DENIED" in parent.text
    assert "notes/private" in parent.text
    assert (notes / "private/p.txt").read_text() == "SECRET\n"
    assert (notes / "public.txt").exists()


async def test_moving_a_parent_of_a_read_denied_dir_is_refused(notes: Path, call: Call) -> None:
    acl = Acl(no_read_dirs=("notes/private/**",))
    moved = await call("move", acl=acl, src="notes", dst="moved")
    assert moved.is_error and "ACCESS_DENIED" in moved.text
    leak = await call("read_file", acl=acl, path="moved/private/p.txt")
    assert leak.is_error and "SECRET" not in leak.text
    assert (notes / "private/p.txt").read_text() == "SECRET\n"


async def test_moving_a_parent_of_a_write_denied_dir_is_refused(notes: Path, call: Call) -> None:
    acl = Acl(no_write_dirs=("notes/private/**",))
    moved = await call("move", acl=acl, src="notes", dst="moved")
    assert moved.is_error and "ACCESS_DENIED" in moved.text
    assert (notes / "private/p.txt").exists() and not (notes.parent / "moved").exists()


async def test_a_move_may_not_land_content_where_it_may_not_be_written(
    notes: Path, call: Call
) -> None:
    acl = Acl(no_write_dirs=("archive/private/**",))
    moved = await call("move", acl=acl, src="notes", dst="archive")
    assert moved.is_error and "ACCESS_DENIED" in moved.text and "archive/private" in moved.text
    assert (notes / "private/p.txt").exists()


async def test_file_level_deny_patterns_hold_for_a_parent(notes: Path, call: Call) -> None:
    (notes / "id.key").write_text("KEY\n")
    acl = Acl(no_read_dirs=("**/*.key",))
    moved = await call("move", acl=acl, src="notes", dst="elsewhere")
    assert moved.is_error and "notes/id.key" in moved.text


async def test_a_parent_with_nothing_denied_beneath_still_moves_and_deletes(
    notes: Path, call: Call
) -> None:
    acl = Acl(write_dirs=("notes/**", "kept/**"), no_write_dirs=("other/**",))
    moved = await call("move", acl=acl, src="notes", dst="kept")
    assert not moved.is_error, moved.text
    assert (notes.parent / "kept/private/p.txt").read_text() == "SECRET\n"
    gone = await call("delete", acl=acl, path="kept", recursive=True)
    assert not gone.is_error, gone.text
    assert not (notes.parent / "kept").exists()


# --- 13: FIFOs and other special files --------------------------------------------------


async def test_read_file_refuses_a_fifo_without_blocking(
    rtws: Path, call: Call, unblock_fifos: list[Path]
) -> None:
    unblock_fifos.append(_fifo(rtws / "pipe"))
    started = time.monotonic()
    out = await call("read_file", path="pipe")
    assert time.monotonic() - started < 4
    assert out.is_error and "`pipe` is not a regular file" in out.text


async def test_search_skips_fifos_and_refuses_one_named_directly(
    rtws: Path, call: Call, unblock_fifos: list[Path]
) -> None:
    unblock_fifos.append(_fifo(rtws / "src" / "pipe"))
    started = time.monotonic()
    out = await call("search", pattern="hello", path="src")
    assert not out.is_error and out.text == "src/app.py:2:     return 'hello'"
    direct = await call("search", pattern="hello", path="src/pipe")
    assert time.monotonic() - started < 4
    assert direct.is_error and "`src/pipe` is not a regular file" in direct.text


async def test_write_file_refuses_to_replace_a_fifo(
    rtws: Path, call: Call, unblock_fifos: list[Path]
) -> None:
    unblock_fifos.append(_fifo(rtws / "pipe"))
    for mode in ("overwrite", "append"):
        out = await call("write_file", path="pipe", content="x", mode=mode)
        assert out.is_error and "`pipe` is not a regular file" in out.text
    assert stat.S_ISFIFO((rtws / "pipe").lstat().st_mode)


def _hang_on_open(name: str, release: threading.Event) -> Callable[[Any], Any]:
    """Wrap an `open` function so that opening a file called `name` blocks until
    `release` is set: a file system that stopped answering."""

    def wrap(real: Any) -> Any:
        def opener(file: Any, *args: Any, **kwargs: Any) -> Any:
            if os.fsdecode(file).endswith(name):
                release.wait()
            return real(file, *args, **kwargs)

        return opener

    return wrap


async def test_a_read_past_its_deadline_is_an_error(
    rtws: Path, call: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindloop.toolsets import files

    release = threading.Event()
    hang = _hang_on_open("README.md", release)
    monkeypatch.setattr(os, "open", hang(os.open))
    monkeypatch.setattr(io, "open", hang(io.open))
    monkeypatch.setattr(files, "READ_DEADLINE_S", 0.3)
    try:
        out = await asyncio.wait_for(call("read_file", path="README.md"), timeout=10)
    finally:
        release.set()
    assert out.is_error and "`README.md` could not be read within 0.3 s" in out.text


_STUCK_READ = textwrap.dedent(
    """
    import asyncio, io, json, os, sys, threading
    from mindloop.tools import ToolContext
    from mindloop.toolsets import standard_registry

    def hang(real):  # opening README.md never returns: a file system that stopped answering
        def opener(file, *args, **kwargs):
            if os.fsdecode(file).endswith("README.md"):
                threading.Event().wait()
            return real(file, *args, **kwargs)
        return opener

    os.open, io.open = hang(os.open), hang(io.open)
    ctx = ToolContext.for_test(sys.argv[1])
    registry = standard_registry()

    async def main():
        task = asyncio.create_task(
            registry.execute("read_file", json.dumps({"path": "README.md"}), ctx)
        )
        await asyncio.sleep(0.5)
        print("reading" if not task.done() else "not stuck", flush=True)
        await task

    asyncio.run(main())
    """
)


def test_ctrl_c_ends_the_process_while_a_read_hangs(rtws: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _STUCK_READ, str(rtws)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "reading"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not end on Ctrl-C while a file read hung")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0


# --- 14: backslashes --------------------------------------------------------------------


async def test_a_backslash_in_a_path_is_refused_everywhere(rtws: Path, call: Call) -> None:
    acl = Acl(write_dirs=("notes/**",))
    out = await call("write_file", acl=acl, path="notes\\evil.txt", content="x")
    assert out.is_error and "backslash" in out.text
    assert not any("\\" in p.name for p in rtws.iterdir())
    for name, args in [
        ("read_file", {"path": "src\\app.py"}),
        ("list_dir", {"path": "src\\"}),
        ("search", {"pattern": "x", "path": "src\\app.py"}),
        ("move", {"src": "src\\app.py", "dst": "b"}),
        ("move", {"src": "README.md", "dst": "a\\b"}),
        ("delete", {"path": "src\\app.py"}),
    ]:
        refused = await call(name, **args)
        assert refused.is_error and "backslash" in refused.text, (name, refused.text)
    assert (rtws / "src/app.py").exists() and (rtws / "README.md").exists()


async def test_a_backslash_in_a_name_on_disk_is_not_a_separator_for_acls(
    rtws: Path, call: Call
) -> None:
    (rtws / "notes").mkdir()
    (rtws / "notes\\evil.txt").write_text("x")  # made by a shell command, say
    out = await call("list_dir", acl=Acl(read_dirs=("notes/**",)))
    assert "evil" not in out.text


# --- 15: whitespace around a component --------------------------------------------------


@pytest.mark.parametrize("raw", [" link_a", "link_a ", "notes/ a.txt", "notes /a.txt", "\tlink_a"])
async def test_whitespace_around_a_component_is_refused(rtws: Path, call: Call, raw: str) -> None:
    (rtws / "notes").mkdir()
    (rtws / "notes/a.txt").write_text("target\n")
    (rtws / "link_a").symlink_to("notes/a.txt")
    for name, args in [
        ("delete", {"path": raw}),
        ("read_file", {"path": raw}),
        ("write_file", {"path": raw, "content": "x"}),
        ("move", {"src": raw, "dst": "moved"}),
    ]:
        out = await call(name, **args)
        assert out.is_error and "whitespace" in out.text, (name, out.text)
    assert (rtws / "link_a").is_symlink()
    assert (rtws / "notes/a.txt").read_text() == "target\n"


# --- 16: lone surrogates ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["overwrite", "append", "create"])
async def test_lone_surrogates_are_refused_before_touching_the_file(
    rtws: Path, call: Call, mode: str
) -> None:
    target = rtws / "README.md"
    before = target.read_bytes()
    path = "README.md" if mode != "create" else "new.txt"
    out = await call("write_file", path=path, content="ok \ud800 not ok", mode=mode)
    assert out.is_error and "surrogate" in out.text and "nothing was written" in out.text
    assert target.read_bytes() == before and not (rtws / "new.txt").exists()


async def test_a_surrogate_in_a_path_is_refused(rtws: Path, call: Call) -> None:
    out = await call("write_file", path="bad\udc80name.txt", content="x")
    assert out.is_error and "ACCESS_DENIED" in out.text
    assert not [n for n in os.listdir(rtws) if n.startswith("bad")]


async def test_names_on_disk_that_are_not_utf8_come_back_printable(rtws: Path, call: Call) -> None:
    os.mkdir(os.path.join(os.fsencode(rtws), b"raw\xffdir"))
    with open(os.path.join(os.fsencode(rtws), b"raw\xffdir", b"f.txt"), "w") as fh:
        fh.write("hello there\n")
    listing = await call("list_dir", depth=2)
    found = await call("search", pattern="hello there")
    for out in (listing, found):
        out.text.encode("utf-8")  # storable as text: no lone surrogate left
        assert "raw" in out.text


# --- 17: errors never show the host path ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args", "shown"),
    [
        ("read_file", {"path": "a" * 300}, "File name too long"),
        ("write_file", {"path": "a" * 300, "content": "x"}, "File name too long"),
        ("list_dir", {"path": "d" * 300}, "File name too long"),
        ("search", {"pattern": "x", "path": "e" * 300}, "File name too long"),
        ("move", {"src": "README.md", "dst": "b" * 300}, "File name too long"),
        ("delete", {"path": "c" * 300}, "File name too long"),
        ("write_file", {"path": "loop", "content": "x"}, "`loop`"),
        ("write_file", {"path": "loop/x", "content": "x"}, "`loop"),
        ("write_file", {"path": "README.md/x", "content": "x"}, "`README.md"),
        ("move", {"src": "README.md", "dst": "src/app.py/inner"}, "`src/app.py"),
        ("read_file", {"path": "x/" + "a" * 5000}, "too long"),
    ],
)
async def test_errors_name_rtws_relative_paths_only(
    rtws: Path, call: Call, name: str, args: dict[str, Any], shown: str
) -> None:
    (rtws / "loop").symlink_to("loop")
    out = await call(name, **args)
    assert out.is_error
    assert str(rtws) not in out.text and os.path.realpath(rtws) not in out.text
    assert shown in out.text, out.text
    assert len(out.text) < 1500


def test_os_error_text_maps_every_spelling_of_the_rtws(tmp_path: Path) -> None:
    from mindloop.tools.pathguard import os_error_text

    real = tmp_path / "real"
    real.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(real)
    err = OSError(36, "File name too long", str(alias / "a/b"), None, str(real / "c"))
    assert os_error_text(err, alias) == "File name too long: `a/b` -> `c`"
    outside = FileNotFoundError(2, "No such file or directory", "/etc/passwd")
    assert os_error_text(outside, alias) == (
        "No such file or directory: `(a path outside the rtws)`"
    )
    assert json.dumps(os_error_text(OSError("plain"), alias)) == '"plain"'
