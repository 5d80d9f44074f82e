"""The path guard: property tests over hostile paths, encapsulation texts, and ACLs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindloop.errors import MindloopError
from mindloop.tools import AccessDenied, Acl, ToolContext, is_encapsulated, resolve_agent_path

SEGMENTS = [
    "..",
    ".",
    "",
    "a",
    "b",
    "new",
    "x.tsk",
    "X.TsK",
    "goals.md",
    ".minds",
    ".MINDS",
    ".mindloop",
    "up",
    "out",
    "pkg",
    "goal",
    "self",
    "dang",
    "minds",
]
MODES = ["read", "write", "list", "search"]


def _encapsulated_component(name: str) -> bool:
    low = name.lower()
    return low.endswith(".tsk") or low in (".minds", ".mindloop")


@pytest.fixture(scope="module")
def hostile_rtws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree whose symlinks lead up, out, into packages and in circles."""
    base = tmp_path_factory.mktemp("guard")
    rtws = base / "rtws"
    (base / "outside").mkdir()
    for rel in (
        "a/b/goals.md",
        "x.tsk/goals.md",
        "X.TsK/goals.md",
        ".minds/team.yaml",
        ".mindloop/s.txt",
        "b/new",
    ):
        (rtws / rel).parent.mkdir(parents=True, exist_ok=True)
        (rtws / rel).write_text("x")
    for where in (rtws / "a", rtws / "a" / "b"):
        (where / "up").symlink_to("..")
        (where / "out").symlink_to(base / "outside")
        (where / "pkg").symlink_to(rtws / "x.tsk")
        (where / "goal").symlink_to(rtws / "x.tsk" / "goals.md")
        (where / "self").symlink_to(".")
        (where / "dang").symlink_to(base / "outside" / "nowhere" / "file")
        (where / "minds").symlink_to(rtws / ".minds")
    return rtws


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    parts=st.lists(st.sampled_from(SEGMENTS), min_size=0, max_size=7),
    absolute=st.booleans(),
    mode=st.sampled_from(MODES),
)
def test_guard_denies_or_resolves_strictly_inside_and_unencapsulated(
    hostile_rtws: Path, parts: list[str], absolute: bool, mode: str
) -> None:
    rtws = hostile_rtws
    raw = "/".join(parts)
    if absolute:
        raw = f"{rtws}/{raw}"
    root = Path(os.path.realpath(rtws))
    oracle = Path(os.path.realpath(rtws / raw))
    oracle_ok = (oracle == root or root in oracle.parents) and not any(
        _encapsulated_component(c)
        for c in [*parts, *oracle.relative_to(root).parts]
        if (oracle == root or root in oracle.parents)
    )
    try:
        resolved = resolve_agent_path(rtws, raw, Acl(), mode)  # type: ignore[arg-type]
    except AccessDenied as err:
        assert str(err).startswith("ACCESS_DENIED:")
        # The guard may only be stricter than the oracle where the oracle also refuses.
        assert not oracle_ok, f"{raw!r} was refused but is a plain path inside the rtws"
        return
    assert resolved.is_absolute()
    assert resolved == Path(os.path.realpath(resolved))
    assert resolved == root or root in resolved.parents
    rel = resolved.relative_to(root)
    assert not any(_encapsulated_component(c) for c in rel.parts)
    assert not any(_encapsulated_component(c) for c in parts)
    assert not is_encapsulated(rel.as_posix())


@given(name=st.text(min_size=1, max_size=12).filter(lambda s: "/" not in s and "\\" not in s))
def test_is_encapsulated_matches_any_tsk_component_case_insensitively(name: str) -> None:
    assert is_encapsulated(f"dir/{name}.tsk/file")
    assert is_encapsulated(f"{name}.TSK")
    assert is_encapsulated(f"{name}/.MiNdS/x")


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("a.tsk", True),
        ("a.tsk/goals.md", True),
        ("x/y/b.tsk/bearinmind/risks.md", True),
        ("A.TSK", True),
        (".minds", True),
        (".mindloop/state.sqlite", True),
        ("tsk", False),
        ("a.tsk.md", False),
        ("notes/tsk/a.md", False),
        ("src/minds.py", False),
        (".", False),
        ("", False),
    ],
)
def test_is_encapsulated_table(rel: str, expected: bool) -> None:
    assert is_encapsulated(rel) is expected


def test_nul_byte_is_denied(tmp_path: Path) -> None:
    with pytest.raises(AccessDenied, match=r"^ACCESS_DENIED: .*NUL byte"):
        resolve_agent_path(tmp_path, "a\x00b", Acl(), "read")


def test_access_denied_is_a_mindloop_error(tmp_path: Path) -> None:
    assert issubclass(AccessDenied, MindloopError)


@pytest.mark.parametrize("raw", ["../x", "/etc/passwd", "a/../../x", "/"])
def test_escapes_are_denied_with_the_reason(tmp_path: Path, raw: str) -> None:
    (tmp_path / "rtws").mkdir()
    with pytest.raises(AccessDenied) as err:
        resolve_agent_path(tmp_path / "rtws", raw, Acl(), "read")
    assert "inside the rtws" in str(err.value)


def test_not_yet_existing_path_under_symlink_is_judged_by_its_target(tmp_path: Path) -> None:
    rtws = tmp_path / "rtws"
    (rtws / "t.tsk").mkdir(parents=True)
    (tmp_path / "out").mkdir()
    (rtws / "p").symlink_to(rtws / "t.tsk")
    (rtws / "o").symlink_to(tmp_path / "out")
    with pytest.raises(AccessDenied, match="change_mind"):
        resolve_agent_path(rtws, "p/new/deeper.md", Acl(), "write")
    with pytest.raises(AccessDenied, match="outside the rtws"):
        resolve_agent_path(rtws, "o/new.md", Acl(), "write")
    ok = resolve_agent_path(rtws, "fresh/dir/file.md", Acl(), "write")
    assert ok == Path(os.path.realpath(rtws)) / "fresh/dir/file.md"


def test_absolute_path_inside_rtws_and_context_form(tmp_path: Path) -> None:
    rtws = tmp_path / "rtws"
    (rtws / "src").mkdir(parents=True)
    ctx = ToolContext.for_test(rtws, member="m", dialog_id="d")
    assert resolve_agent_path(ctx, str(rtws / "src"), Acl(), "list") == Path(
        os.path.realpath(rtws / "src")
    )
    assert resolve_agent_path(ctx, "", Acl(), "list") == Path(os.path.realpath(rtws))


@pytest.mark.parametrize(
    ("raw", "needles"),
    [
        ("t.tsk/goals.md", ["Taskdoc package", "change_mind", "recall_taskdoc", "injected"]),
        (".minds/team.yaml", ["human-owned", "memory tools"]),
        (".mindloop/state.sqlite", ["runtime"]),
    ],
)
def test_denial_texts_say_why_and_what_to_use(tmp_path: Path, raw: str, needles: list[str]) -> None:
    with pytest.raises(AccessDenied) as err:
        resolve_agent_path(tmp_path, raw, Acl(), "read")
    text = str(err.value)
    assert text.startswith("ACCESS_DENIED:")
    for needle in needles:
        assert needle in text


# --- ACLs -------------------------------------------------------------------------------


@pytest.fixture
def acl_rtws(tmp_path: Path) -> Path:
    for rel in ("src/app.py", "src/secret/key.txt", "docs/a.md", "out/x.txt", "README.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / "pub").symlink_to(tmp_path / "src" / "secret")
    return tmp_path


@pytest.mark.parametrize(
    ("acl", "mode", "allowed", "denied"),
    [
        (
            Acl(read_dirs=("src",)),
            "read",
            ["src", "src/app.py", "src/secret/key.txt"],
            ["README.md", "docs/a.md"],
        ),
        (Acl(read_dirs=("src/**",)), "read", ["src", "src/app.py"], ["docs/a.md"]),
        (Acl(read_dirs=("src/**",)), "list", [".", "src"], ["docs"]),
        (Acl(read_dirs=("docs/*.md",)), "read", ["docs/a.md"], ["docs/b.txt", "src/app.py"]),
        (
            Acl(no_read_dirs=("src/secret",)),
            "read",
            ["src/app.py", "README.md"],
            ["src/secret/key.txt", "pub/key.txt", "pub"],
        ),
        (Acl(no_read_dirs=("src/secret",)), "search", ["src"], ["src/secret"]),
        (
            Acl(write_dirs=("out/**",)),
            "write",
            ["out/x.txt", "out/new/y.txt"],
            ["README.md", "src/app.py"],
        ),
        (
            Acl(write_dirs=("out",), no_write_dirs=("out/keep",)),
            "write",
            ["out/x.txt"],
            ["out/keep/a.txt"],
        ),
        (Acl(write_dirs=("out",)), "read", ["README.md"], []),
        (Acl(), "write", ["README.md", "anything/new.txt"], []),
    ],
)
def test_acl_table(
    acl_rtws: Path, acl: Acl, mode: str, allowed: list[str], denied: list[str]
) -> None:
    for rel in allowed:
        resolve_agent_path(acl_rtws, rel, acl, mode)  # type: ignore[arg-type]
    for rel in denied:
        with pytest.raises(AccessDenied, match=r"ACCESS_DENIED: .*ACLs"):
            resolve_agent_path(acl_rtws, rel, acl, mode)  # type: ignore[arg-type]


def test_acl_denial_names_the_scopes(acl_rtws: Path) -> None:
    with pytest.raises(AccessDenied) as err:
        resolve_agent_path(acl_rtws, "README.md", Acl(read_dirs=("src", "docs")), "read")
    assert "readable: src, docs" in str(err.value)
    with pytest.raises(AccessDenied) as err:
        resolve_agent_path(acl_rtws, "README.md", Acl(write_dirs=("out",)), "write")
    assert "writable: out" in str(err.value)


def test_symlink_cannot_launder_a_denied_directory(acl_rtws: Path) -> None:
    # `pub` -> src/secret: denied through the resolved path even though `pub` is not listed.
    acl = Acl(no_read_dirs=("src/secret",))
    with pytest.raises(AccessDenied):
        resolve_agent_path(acl_rtws, "pub/key.txt", acl, "read")
    # And a symlink named like a denied scope is denied by its literal name too.
    (acl_rtws / "blocked").symlink_to(acl_rtws / "docs")
    with pytest.raises(AccessDenied):
        resolve_agent_path(acl_rtws, "blocked/a.md", Acl(no_read_dirs=("blocked",)), "read")


def test_acl_is_checked_after_encapsulation(acl_rtws: Path) -> None:
    (acl_rtws / "t.tsk").mkdir()
    with pytest.raises(AccessDenied, match="recall_taskdoc"):
        resolve_agent_path(acl_rtws, "t.tsk", Acl(read_dirs=("**",)), "list")


@pytest.mark.parametrize(
    ("patterns", "rel", "inside"),
    [
        (("new/**",), "new", True),
        (("new/**",), "new/x", True),
        (("new/**",), "other/new", False),  # a directory's own name elsewhere is not it
        (("new/**",), "other/new/x", False),
        (("notes/**",), "a/notes/b", False),
        (("src/app/**",), "src/app", True),
        (("src/app/**",), "x/src/app", False),
        (("**/build/**",), "a/build/x", True),  # a pattern that says "anywhere" still does
        (("*.key",), "work/id.key", True),
    ],
)
def test_a_directory_scope_covers_that_directory_only(
    patterns: tuple[str, ...], rel: str, inside: bool
) -> None:
    """`dir/**` covers the rtws's `dir` itself and what is below it, not a same-named
    directory elsewhere (found by the fs property test: `write_dirs: [new/**]` let a member
    write `private/new`)."""
    from mindloop.tools.pathguard import acl_allows

    assert acl_allows(rel, Acl(write_dirs=patterns), "write") is inside
    assert acl_allows(rel, Acl(no_write_dirs=patterns), "write") is not inside
