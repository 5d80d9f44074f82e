"""Toolset fs: behaviour of each tool on ordinary paths, through the registry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mindloop.tools import DEFAULT_OUTPUT_CAP, Acl
from mindloop.toolsets.fs import LIST_CAP_ENTRIES, READ_CAP_CHARS

Call = Callable[..., Any]


# --- read_file --------------------------------------------------------------------------


async def test_read_whole_file_with_header(rtws: Path, call: Call) -> None:
    out = await call("read_file", path="src/app.py")
    assert not out.is_error
    assert out.text == "src/app.py (lines 1-2 of 2)\ndef main():\n    return 'hello'\n"


async def test_read_line_range(rtws: Path, call: Call) -> None:
    (rtws / "n.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
    out = await call("read_file", path="n.txt", start_line=3, end_line=5)
    assert out.text == "n.txt (lines 3-5 of 10)\nline3\nline4\nline5\n"
    tail = await call("read_file", path="n.txt", start_line=9)
    assert tail.text == "n.txt (lines 9-10 of 10)\nline9\nline10\n"
    clipped = await call("read_file", path="n.txt", end_line=50)
    assert clipped.text.startswith("n.txt (lines 1-10 of 10)\n")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"path": "n.txt", "start_line": 20}, "past the end of `n.txt` (3 lines)"),
        ({"path": "n.txt", "start_line": 3, "end_line": 2}, "end_line (2) is before start_line"),
        ({"path": "missing.txt"}, "not found: `missing.txt`"),
        ({"path": "src"}, "`src` is a directory; use list_dir"),
        ({"path": "bin.dat"}, "`bin.dat` is a binary file"),
    ],
)
async def test_read_errors_name_the_path(
    rtws: Path, call: Call, args: dict[str, Any], needle: str
) -> None:
    (rtws / "n.txt").write_text("a\nb\nc\n")
    (rtws / "bin.dat").write_bytes(b"\x00\x01\x02abc")
    out = await call("read_file", **args)
    assert out.is_error and needle in out.text


async def test_read_empty_file(rtws: Path, call: Call) -> None:
    (rtws / "empty.txt").write_text("")
    out = await call("read_file", path="empty.txt")
    assert out.text == "empty.txt (empty file)"


@pytest.mark.parametrize(
    ("output_cap", "effective"),
    [(None, DEFAULT_OUTPUT_CAP - 500), (10 * READ_CAP_CHARS, READ_CAP_CHARS)],
)
async def test_read_truncates_at_cap_and_says_how_to_continue(
    rtws: Path, call: Call, output_cap: int | None, effective: int
) -> None:
    line = "z" * 99 + "\n"  # 100 chars per line
    shown = effective // 100
    lines = shown + 50
    (rtws / "big.txt").write_text(line * lines)
    fields = {"output_cap": output_cap} if output_cap else None
    out = await call("read_file", ctx_fields=fields, path="big.txt")
    assert out.text.startswith(f"big.txt (lines 1-{shown} of {lines})\n")
    assert out.text.endswith(
        f"[truncated at {effective} characters: call read_file with start_line={shown + 1} "
        "to read the rest]"
    )
    rest = await call("read_file", ctx_fields=fields, path="big.txt", start_line=shown + 1)
    assert rest.text == f"big.txt (lines {shown + 1}-{lines} of {lines})\n" + line * 50


async def test_read_single_enormous_line_is_cut_with_a_note(rtws: Path, call: Call) -> None:
    (rtws / "wide.txt").write_text("w" * 60_000 + "\nnext\n")
    out = await call("read_file", path="wide.txt")
    assert out.text.startswith("wide.txt (lines 1-1 of 2)\n")
    assert "line 1 alone is 60001 characters" in out.text
    assert "output truncated" not in out.text


async def test_read_through_symlink_inside_rtws(rtws: Path, call: Call) -> None:
    out = await call("read_file", path="links/readme")
    assert "hello world" in out.text


# --- write_file -------------------------------------------------------------------------


async def test_write_modes(rtws: Path, call: Call) -> None:
    out = await call("write_file", path="deep/new/f.txt", content="one\n")
    assert out.text == "created `deep/new/f.txt` (4 characters written)"
    await call("write_file", path="deep/new/f.txt", content="two\n", mode="append")
    assert (rtws / "deep/new/f.txt").read_text() == "one\ntwo\n"
    again = await call("write_file", path="deep/new/f.txt", content="x", mode="create")
    assert again.is_error and "`deep/new/f.txt` already exists" in again.text
    assert (rtws / "deep/new/f.txt").read_text() == "one\ntwo\n"
    over = await call("write_file", path="deep/new/f.txt", content="three")
    assert over.text.startswith("overwrote")
    assert (rtws / "deep/new/f.txt").read_text() == "three"


async def test_write_to_directory_is_an_error(rtws: Path, call: Call) -> None:
    out = await call("write_file", path="src", content="x")
    assert out.is_error and "`src` is a directory" in out.text


async def test_write_outside_rtws_is_denied(rtws: Path, call: Call) -> None:
    out = await call("write_file", path="links/out/evil.txt", content="x")
    assert out.is_error and "ACCESS_DENIED" in out.text
    assert not (rtws.parent / "outside" / "evil.txt").exists()
    out = await call("write_file", path="../evil.txt", content="x")
    assert out.is_error and not (rtws.parent / "evil.txt").exists()


async def test_write_respects_write_acl(rtws: Path, call: Call) -> None:
    acl = Acl(write_dirs=("out/**",))
    denied = await call("write_file", acl=acl, path="README.md", content="x")
    assert denied.is_error and "ACCESS_DENIED" in denied.text
    ok = await call("write_file", acl=acl, path="out/a.txt", content="x")
    assert not ok.is_error and (rtws / "out/a.txt").read_text() == "x"


# --- list_dir ---------------------------------------------------------------------------


async def test_list_sorted_with_dir_slashes_and_depth(rtws: Path, call: Call) -> None:
    (rtws / "src/sub").mkdir()
    (rtws / "src/sub/deep.txt").write_text("")
    (rtws / "src/b.txt").write_text("")
    one = await call("list_dir", path="src")
    assert one.text.splitlines() == ["src/", "  app.py", "  b.txt", "  sub/"]
    two = await call("list_dir", path="src", depth=2)
    assert two.text.splitlines() == ["src/", "  app.py", "  b.txt", "  sub/", "    deep.txt"]


async def test_list_errors(rtws: Path, call: Call) -> None:
    missing = await call("list_dir", path="nope")
    assert missing.is_error and "not found: `nope`" in missing.text
    afile = await call("list_dir", path="README.md")
    assert afile.is_error and "is a file" in afile.text
    bad_depth = await call("list_dir", depth=9)
    assert bad_depth.is_error and "depth: input should be less than or equal to 5" in bad_depth.text


async def test_list_caps_entries(rtws: Path, call: Call) -> None:
    many = rtws / "many"
    many.mkdir()
    for i in range(LIST_CAP_ENTRIES + 7):
        (many / f"f{i:05d}").write_text("")
    out = await call("list_dir", path="many")
    assert len(out.text.splitlines()) == 1 + LIST_CAP_ENTRIES + 1
    assert f"[listing truncated: {LIST_CAP_ENTRIES} entries shown, 7 more" in out.text


async def test_list_root_with_read_acl_shows_only_readable(rtws: Path, call: Call) -> None:
    out = await call("list_dir", acl=Acl(read_dirs=("src/**",)), path=".")
    assert out.text.splitlines() == ["./", "  src/"]
    hidden = await call("list_dir", acl=Acl(no_read_dirs=("src",)), path=".")
    assert "src/" not in hidden.text and "README.md" in hidden.text


# --- search -----------------------------------------------------------------------------


async def test_search_reports_path_line_text(rtws: Path, call: Call) -> None:
    out = await call("search", pattern=r"return '\w+'", path="src")
    assert out.text == "src/app.py:2:     return 'hello'"


async def test_search_respects_root_and_nested_gitignore(rtws: Path, call: Call) -> None:
    (rtws / ".gitignore").write_text("build/\n*.log\n")
    (rtws / "build").mkdir()
    (rtws / "build/out.txt").write_text("needle\n")
    (rtws / "x.log").write_text("needle\n")
    (rtws / "pkg/sub").mkdir(parents=True)
    (rtws / "pkg/.gitignore").write_text("gen.txt\n!keep.log\n")
    (rtws / "pkg/gen.txt").write_text("needle\n")
    (rtws / "pkg/sub/gen.txt").write_text("needle\n")
    (rtws / "pkg/keep.log").write_text("needle\n")
    (rtws / "pkg/real.txt").write_text("needle\n")
    (rtws / ".git").mkdir()
    (rtws / ".git/config").write_text("needle\n")
    (rtws / "blob.bin").write_bytes(b"needle\x00\x00")
    out = await call("search", pattern="needle")
    assert sorted(out.text.splitlines()) == ["pkg/keep.log:1: needle", "pkg/real.txt:1: needle"]
    sub = await call("search", pattern="needle", path="pkg/sub")
    assert sub.text.startswith("no matches")


async def test_search_glob_and_max_results(rtws: Path, call: Call) -> None:
    (rtws / "many.txt").write_text("hit\n" * 10)
    (rtws / "src/hit.py").write_text("hit\n")
    py = await call("search", pattern="hit", glob="*.py")
    assert py.text == "src/hit.py:1: hit"
    capped = await call("search", pattern="hit", path="many.txt", max_results=3)
    assert capped.text.splitlines() == [
        "many.txt:1: hit",
        "many.txt:2: hit",
        "many.txt:3: hit",
        "[stopped after 3 matches; narrow the pattern, path or glob]",
    ]


async def test_search_invalid_regex_and_missing_path(rtws: Path, call: Call) -> None:
    bad = await call("search", pattern="(unclosed")
    assert bad.is_error and "invalid regular expression '(unclosed'" in bad.text
    missing = await call("search", pattern="x", path="nope")
    assert missing.is_error and "not found: `nope`" in missing.text


async def test_search_respects_no_read_acl(rtws: Path, call: Call) -> None:
    out = await call("search", acl=Acl(no_read_dirs=("src",)), pattern="hello")
    assert "src/app.py" not in out.text and "README.md:2: hello world" in out.text


async def test_search_does_not_follow_symlinks_out(rtws: Path, call: Call) -> None:
    out = await call("search", pattern="outside secret")
    assert out.text.startswith("no matches")


# --- move / delete ----------------------------------------------------------------------


async def test_move_file_and_overwrite_rules(rtws: Path, call: Call) -> None:
    (rtws / "b.txt").write_text("b")
    ok = await call("move", src="README.md", dst="docs/README.md")
    assert ok.text == "moved `README.md` to `docs/README.md`"
    assert not (rtws / "README.md").exists() and (rtws / "docs/README.md").exists()
    clash = await call("move", src="b.txt", dst="docs/README.md")
    assert clash.is_error and "`docs/README.md` already exists; pass overwrite=true" in clash.text
    over = await call("move", src="b.txt", dst="docs/README.md", overwrite=True)
    assert not over.is_error and (rtws / "docs/README.md").read_text() == "b"
    into_dir = await call("move", src="docs/README.md", dst="src", overwrite=True)
    assert into_dir.is_error and "is an existing directory" in into_dir.text


async def test_move_errors(rtws: Path, call: Call) -> None:
    missing = await call("move", src="nope", dst="x")
    assert missing.is_error and "not found: `nope`" in missing.text
    into_self = await call("move", src="src", dst="src/inner")
    assert into_self.is_error and "into itself" in into_self.text


async def test_move_directory(rtws: Path, call: Call) -> None:
    out = await call("move", src="src", dst="lib")
    assert not out.is_error and (rtws / "lib/app.py").exists() and not (rtws / "src").exists()


async def test_move_symlink_moves_the_link(rtws: Path, call: Call) -> None:
    out = await call("move", src="links/readme", dst="readme-link")
    assert not out.is_error
    assert (rtws / "readme-link").is_symlink() and (rtws / "README.md").exists()


async def test_delete_file_dir_and_symlink(rtws: Path, call: Call) -> None:
    assert (await call("delete", path="src/app.py")).text == "deleted `src/app.py`"
    assert not (rtws / "src/app.py").exists()
    (rtws / "d/e").mkdir(parents=True)
    needs = await call("delete", path="d")
    assert needs.is_error and "pass recursive=true" in needs.text and (rtws / "d").exists()
    assert not (await call("delete", path="d", recursive=True)).is_error
    assert not (rtws / "d").exists()
    assert not (await call("delete", path="links/readme")).is_error
    assert not (rtws / "links/readme").exists() and (rtws / "README.md").exists()
    missing = await call("delete", path="nope")
    assert missing.is_error and "not found: `nope`" in missing.text
    root = await call("delete", path=".", recursive=True)
    assert root.is_error and (rtws / "README.md").exists()


async def test_move_over_a_link_replaces_the_link_and_never_lands_in_its_target(
    rtws: Path, call: Call
) -> None:
    (rtws / "b.txt").write_text("b")
    (rtws / "dirlink").symlink_to("src")
    out = await call("move", src="b.txt", dst="dirlink", overwrite=True)
    assert not out.is_error, out.text
    assert not (rtws / "dirlink").is_symlink() and (rtws / "dirlink").read_text() == "b"
    assert sorted(p.name for p in (rtws / "src").iterdir()) == ["app.py"]
