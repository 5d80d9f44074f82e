"""Every file tool against every kind of path into encapsulated state: refused, nothing changed.

Issue 4 part 8; dominds.md §12 "Encapsulation", acceptance 38-39.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mindloop.tools import Acl

# Paths into the Taskdoc package `tasks/login.tsk` (and the `X.TSK` dir), by kind.
# `{rtws}` is replaced by the absolute rtws path.
TASKDOC_PATHS = {
    "package_dir": "tasks/login.tsk",
    "section": "tasks/login.tsk/goals.md",
    "bearinmind": "tasks/login.tsk/bearinmind/risks.md",
    "extra_section": "tasks/login.tsk/ux/checklist.md",
    "new_file_in_package": "tasks/login.tsk/new.md",
    "absolute": "{rtws}/tasks/login.tsk/goals.md",
    "absolute_dir": "{rtws}/tasks/login.tsk",
    "dotdot": "src/../tasks/login.tsk/goals.md",
    "dotdot_through_package": "tasks/login.tsk/../login.tsk/progress.md",
    "symlink_to_dir": "links/pkg",
    "symlink_into_dir": "links/pkg/goals.md",
    "symlink_to_file": "links/goals",
    "case_variant": "tasks/LOGIN.TSK/goals.md",
    "case_variant_dir": "X.TSK/goals.md",
    "mixed_case": "x.TsK",
    "backslashes": "tasks\\login.tsk\\goals.md",
    "trailing_slash": "tasks/login.tsk/",
    "dot_segment": "tasks/./login.tsk/./goals.md",
    "double_slash": "tasks//login.tsk//goals.md",
    "trailing_dot_alias": "tasks/login.tsk./goals.md",
    "new_package": "tasks/fresh.tsk/goals.md",
    "new_package_dir": "tasks/fresh.tsk",
    "new_nested_package": "deep/er/other.tsk/bearinmind/risks.md",
}

OTHER_ENCAPSULATED = {
    "minds": ".minds/team.yaml",
    "minds_dir": ".minds",
    "minds_upper": ".MINDS/team.yaml",
    "minds_symlink": "links/minds/team.yaml",
    "mindloop": ".mindloop/state.txt",
    "mindloop_new": ".mindloop/new.txt",
}


def _calls(path: str) -> list[tuple[str, dict[str, Any]]]:
    """Every fs tool invocation that names `path` somewhere it would be touched."""
    return [
        ("read_file", {"path": path}),
        ("read_file", {"path": path, "start_line": 1, "end_line": 1}),
        ("write_file", {"path": path, "content": "pwned"}),
        ("write_file", {"path": path, "content": "pwned", "mode": "append"}),
        ("write_file", {"path": path, "content": "pwned", "mode": "create"}),
        ("list_dir", {"path": path, "depth": 5}),
        ("search", {"pattern": ".", "path": path}),
        ("move", {"src": path, "dst": "stolen.md"}),
        ("move", {"src": "README.md", "dst": path, "overwrite": True}),
        ("delete", {"path": path, "recursive": True}),
        ("delete", {"path": path}),
    ]


CASES = [
    pytest.param(kind, path, tool, args, id=f"{kind}-{tool}-{i}")
    for kind, path in TASKDOC_PATHS.items()
    for i, (tool, args) in enumerate(_calls(path))
]


@pytest.mark.parametrize(("kind", "path", "tool", "args"), CASES)
async def test_taskdoc_paths_are_refused_with_hints_and_no_side_effect(
    rtws: Path,
    call: Callable[..., Any],
    tree_snapshot: Callable[..., dict[str, str]],
    markers: dict[str, str],
    kind: str,
    path: str,
    tool: str,
    args: dict[str, Any],
) -> None:
    args = {k: v.replace("{rtws}", str(rtws)) if isinstance(v, str) else v for k, v in args.items()}
    before = tree_snapshot(rtws, rtws.parent / "outside")

    # Even the widest ACLs do not open a package (acceptance 38).
    out = await call(tool, acl=Acl(read_dirs=("**",), write_dirs=("**",)), **args)

    assert out.is_error, out.text
    assert "ACCESS_DENIED" in out.text
    assert "change_mind" in out.text
    assert "recall_taskdoc" in out.text
    assert markers["goal"] not in out.text and markers["risk"] not in out.text
    assert tree_snapshot(rtws, rtws.parent / "outside") == before


@pytest.mark.parametrize(
    ("path", "tool", "args"),
    [
        pytest.param(path, tool, args, id=f"{kind}-{tool}-{i}")
        for kind, path in OTHER_ENCAPSULATED.items()
        for i, (tool, args) in enumerate(_calls(path))
    ],
)
async def test_minds_and_mindloop_are_refused_with_no_side_effect(
    rtws: Path,
    call: Callable[..., Any],
    tree_snapshot: Callable[..., dict[str, str]],
    markers: dict[str, str],
    path: str,
    tool: str,
    args: dict[str, Any],
) -> None:
    before = tree_snapshot(rtws)
    out = await call(tool, **args)
    assert out.is_error, out.text
    assert out.text.startswith("ACCESS_DENIED:")
    assert ".minds/" in out.text or ".mindloop/" in out.text
    assert markers["minds"] not in out.text
    assert tree_snapshot(rtws) == before


@pytest.mark.parametrize(
    "path", ["a.tsk", "a.tsk/goals.md", "x/y/b.tsk/bearinmind/risks.md"], ids=str
)
@pytest.mark.parametrize("tool", ["read_file", "write_file"])
async def test_acceptance_38_paths_denied_even_with_read_dirs_everything(
    rtws: Path, call: Callable[..., Any], path: str, tool: str
) -> None:
    for rel in ("a.tsk/goals.md", "x/y/b.tsk/bearinmind/risks.md"):
        (rtws / rel).parent.mkdir(parents=True, exist_ok=True)
        (rtws / rel).write_text("content\n")
    args: dict[str, Any] = {"path": path}
    if tool == "write_file":
        args["content"] = "x"
    out = await call(tool, acl=Acl(read_dirs=("**",), write_dirs=("**",)), **args)
    assert out.is_error
    for needle in ("ACCESS_DENIED", "change_mind", "recall_taskdoc"):
        assert needle in out.text
    assert (rtws / "a.tsk/goals.md").read_text() == "content\n"


async def test_acl_scope_naming_packages_does_not_open_them(
    rtws: Path, call: Callable[..., Any]
) -> None:
    out = await call(
        "read_file", acl=Acl(read_dirs=("tasks/*.tsk/**",)), path="tasks/login.tsk/goals.md"
    )
    assert out.is_error and "ACCESS_DENIED" in out.text


@pytest.mark.parametrize(
    "glob", ["**/*.tsk/**", "**/*.tsk", "tasks/login.tsk/*", "**/goals.md", "*.TSK/**", "**"]
)
async def test_search_globs_targeting_packages_find_nothing_inside(
    rtws: Path, call: Callable[..., Any], markers: dict[str, str], glob: str
) -> None:
    marker = markers["goal"]
    # A character class, so the echoed pattern in "no matches for ..." is not the marker.
    out = await call("search", pattern=f"{marker[:-1]}[{marker[-1]}]", glob=glob)
    assert not out.is_error
    assert markers["goal"] not in out.text
    assert out.text.startswith("no matches")


async def test_search_from_root_never_reports_encapsulated_content(
    rtws: Path, call: Callable[..., Any], markers: dict[str, str]
) -> None:
    out = await call("search", pattern="MARKER|hello")
    assert "README.md:2: hello world" in out.text
    assert "links/readme:2: hello world" in out.text  # a symlink to a plain file is fine
    for marker in markers.values():
        assert marker not in out.text
    assert ".tsk" not in out.text.lower() and ".minds" not in out.text


async def test_listing_parent_shows_package_name_but_never_its_content(
    rtws: Path, call: Callable[..., Any]
) -> None:
    out = await call("list_dir", path=".", depth=5)
    assert not out.is_error
    assert "login.tsk/ [Taskdoc package" in out.text
    assert "X.TSK/ [Taskdoc package" in out.text
    assert ".minds/ [encapsulated" in out.text
    assert ".mindloop/ [encapsulated" in out.text
    for hidden in (
        "goals.md",
        "constraints.md",
        "progress.md",
        "bearinmind",
        "risks.md",
        "checklist.md",
        "team.yaml",
        "state.txt",
    ):
        assert hidden not in out.text
    assert "pkg/ (symlink)" in out.text  # the link is shown, never followed


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("move", {"src": "tasks", "dst": "archive"}),
        ("delete", {"path": "tasks", "recursive": True}),
        ("delete", {"path": "links/pkg"}),
    ],
)
async def test_moving_or_deleting_a_directory_holding_a_package_is_refused(
    rtws: Path,
    call: Callable[..., Any],
    tree_snapshot: Callable[..., dict[str, str]],
    tool: str,
    args: dict[str, Any],
) -> None:
    before = tree_snapshot(rtws)
    out = await call(tool, **args)
    assert out.is_error and "ACCESS_DENIED" in out.text
    assert "change_mind" in out.text
    assert tree_snapshot(rtws) == before


def test_file_tool_docs_state_the_refusal_and_the_injection() -> None:
    """Seed (canonical copy): the general file tools' documentation says Taskdoc packages
    are refused, that the Taskdoc is already injected, and which tools to use instead."""
    from mindloop.toolsets import standard_registry

    tools = {t.name: t for t in standard_registry().select(["fs"], [])}
    for name in ("read_file", "write_file", "list_dir"):
        desc = tools[name].description
        assert "`*.tsk`" in desc and "refused" in desc, name
        assert "already injected" in desc and "every generation" in desc, name
        assert "change_mind" in desc and "recall_taskdoc" in desc, name
