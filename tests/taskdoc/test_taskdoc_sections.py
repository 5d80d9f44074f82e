"""Section rules: resolve_section accepts exactly the defined set, with the anchor's errors."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindloop.taskdoc.sections import (
    BEARINMIND,
    IDENTIFIER_PATTERN,
    TOP_LEVEL,
    SectionError,
    is_identifier,
    parse_section_ref,
    resolve_section,
)

PAT = IDENTIFIER_PATTERN


@pytest.mark.parametrize(
    ("selector", "category", "expected"),
    [
        ("goals", None, "goals.md"),
        ("  constraints ", "", "constraints.md"),
        ("!progress", None, "progress.md"),
        ("risks", "bearinmind", "bearinmind/risks.md"),
        ("contracts", " bearinmind ", "bearinmind/contracts.md"),
        ("checklist", "ux", "ux/checklist.md"),
        ("a.b-c_d", "ux.checklists", "ux.checklists/a.b-c_d.md"),
    ],
)
def test_valid_targets(selector: str, category: str | None, expected: str) -> None:
    assert resolve_section(selector, category) == expected


# Acceptance 33: each rejection case with the exact error text of dominds.md §12.
@pytest.mark.parametrize(
    ("selector", "category", "text"),
    [
        (
            "goals",
            "bearinmind",
            "Error: Selector 'goals' is reserved for top-level sections "
            "(goals/constraints/progress) and must not be used with category='bearinmind'.",
        ),
        (
            "grants",
            None,
            "Error: Invalid selector 'grants'. Use: top-level goals|constraints|progress; "
            "under bearinmind: contracts|acceptance|grants|runbook|decisions|risks; "
            "or any identifier (e.g. `ux.checklist`).",
        ),
        (
            "risks",
            "ux",
            "Error: Selector 'risks' is only valid under category='bearinmind' "
            "(got category='ux').",
        ),
        ("x", "9bad", f"Error: Invalid category '9bad'. Must match `{PAT}`."),
        (
            "bad selector",
            "ux",
            f"Error: Invalid category selector 'bad selector'. Must match `{PAT}`.",
        ),
        ("", None, "Error: selector is required."),
        ("  ", "ux", "Error: selector is required."),
        ("!", None, "Error: selector is required."),
        (
            "extra",
            "bearinmind",
            "Error: Invalid selector 'extra'. Use: top-level goals|constraints|progress; "
            "under bearinmind: contracts|acceptance|grants|runbook|decisions|risks; "
            "or any identifier (e.g. `ux.checklist`).",
        ),
        (
            "progress",
            "ux",
            "Error: Selector 'progress' is reserved for top-level sections "
            "(goals/constraints/progress) and must not be used with category='ux'.",
        ),
    ],
)
def test_rejections_have_exact_texts(selector: str, category: str | None, text: str) -> None:
    with pytest.raises(SectionError) as info:
        resolve_section(selector, category)
    assert info.value.text == text
    assert str(info.value) == text


@pytest.mark.parametrize("category", ["workspace", "Workspace", "BearInMind", "nested.tsk"])
def test_runtime_managed_and_aliasing_categories_are_reserved(category: str) -> None:
    with pytest.raises(SectionError) as info:
        resolve_section("notes", category)
    assert info.value.code == "reserved_category"


@pytest.mark.parametrize("category", ["../x", "a/b", ".hidden", "x\ny", "ux/../.."])
def test_path_like_categories_are_invalid(category: str) -> None:
    with pytest.raises(SectionError):
        resolve_section("notes", category)


def test_identifier_rejects_trailing_newline_and_non_ascii() -> None:
    assert is_identifier("ux.check-list_1")
    assert not is_identifier("ux\n")
    assert not is_identifier("üx")
    assert not is_identifier("ux.")
    assert not is_identifier("1ux")


def test_zh_messages() -> None:
    with pytest.raises(SectionError) as info:
        resolve_section("", None, "zh")
    assert "selector" in info.value.text and info.value.text.startswith("错误")


def test_parse_section_ref_for_cli() -> None:
    assert parse_section_ref("constraints") == "constraints.md"
    assert parse_section_ref("bearinmind/risks.md") == "bearinmind/risks.md"
    assert parse_section_ref("ux/checklist") == "ux/checklist.md"
    with pytest.raises(SectionError):
        parse_section_ref("ux/goals")


@given(selector=st.one_of(st.none(), st.text()), category=st.one_of(st.none(), st.text()))
def test_any_input_resolves_inside_the_package_or_errors(
    selector: str | None, category: str | None
) -> None:
    try:
        rel = resolve_section(selector, category)
    except SectionError as exc:
        assert exc.text
        return
    assert not rel.startswith("/") and posixpath.normpath(rel) == rel
    assert ".." not in rel.split("/")
    parts = rel.split("/")
    assert rel.endswith(".md")
    stem = parts[-1][: -len(".md")]
    if len(parts) == 1:
        assert stem in TOP_LEVEL
    else:
        assert len(parts) == 2
        cat = parts[0]
        if cat == "bearinmind":
            assert stem in BEARINMIND
        else:
            assert is_identifier(cat) and is_identifier(stem)
            assert stem not in TOP_LEVEL and stem not in BEARINMIND
            assert cat.casefold() not in {"bearinmind", "workspace"}


@given(
    category=st.from_regex(
        r"[a-zA-Z][a-zA-Z0-9_-]{0,8}(\.[a-zA-Z0-9_-]{1,4}){0,2}", fullmatch=True
    ),
    selector=st.from_regex(
        r"[a-zA-Z][a-zA-Z0-9_-]{0,8}(\.[a-zA-Z0-9_-]{1,4}){0,2}", fullmatch=True
    ),
)
def test_identifier_pairs_resolve_unless_reserved(category: str, selector: str) -> None:
    reserved = (
        category.casefold() in {"bearinmind", "workspace"}
        or category.casefold().endswith(".tsk")
        or selector in TOP_LEVEL
        or selector in BEARINMIND
    )
    if reserved:
        return
    assert resolve_section(selector, category) == f"{category}/{selector}.md"
