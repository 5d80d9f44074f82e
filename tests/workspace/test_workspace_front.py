"""The YAML front matter of the workspace files is built as a node graph straight from the
JSON-like data (no Python-level representer pass); its bytes must stay exactly what
`yaml.dump` wrote, for any data (hypothesis), so no file is rewritten after the change."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any
from unittest.mock import patch

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.workspace import markdown
from mindloop.workspace.models import Criterion, DocRef, Node, NodeKind, SelfCheck


def _dumped(data: Any) -> str:
    """What the front matter was before: one `yaml.dump` of the data."""
    dumped = yaml.dump(
        data, Dumper=markdown._DUMPER, sort_keys=False, allow_unicode=True, width=1000
    )
    return f"---\n{dumped}---\n"


def _same(data: dict[str, Any]) -> None:
    try:
        expected: str | type[BaseException] = _dumped(data)
    except Exception as exc:  # the old path refused it: the new one must refuse it alike
        expected = type(exc)
    if isinstance(expected, str):
        assert markdown._front(data) == expected
    else:
        with pytest.raises(expected):
            markdown._front(data)


tricky = st.sampled_from(
    [
        "",
        " ",
        " lead",
        "trail ",
        "a: b",
        "key:",
        "- item",
        "# hash",
        "a # b",
        "x#y",
        "'single'",
        '"double"',
        "it's",
        "yes",
        "no",
        "on",
        "off",
        "Yes",
        "NO",
        "y",
        "n",
        "null",
        "Null",
        "~",
        "true",
        "False",
        "TRUE",
        "0",
        "-1",
        "1.5",
        "1e3",
        ".inf",
        "-.inf",
        ".nan",
        "0x1F",
        "0o17",
        "017",
        "1_000",
        "12:30:00",
        "2024-01-02",
        "2024-01-02 10:00:00Z",
        "<<",
        "=",
        "---",
        "...",
        "&anchor",
        "*alias",
        "!tag",
        "%percent",
        "@at",
        "`tick",
        "{a: 1}",
        "[1, 2]",
        "|",
        ">",
        "?",
        "line\nbreak",
        "trailing newline\n",
        "\n",
        "tab\there",
        "crlf\r\n",
        "\x00nul",
        "\x85nel",
        "\u2028ls",
        "\ufeffbom",
        "caf\u00e9",
        "登录：API",
        "emoji \U0001f600",
        "x" * 1200,
        "word " * 250,
    ]
)
texts = st.one_of(tricky, st.text(max_size=40), st.text("ab :#'\"\n -~", max_size=12))
scalars = st.one_of(
    texts,
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.floats(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(texts, values, max_size=8))
def test_front_matter_bytes_equal_yaml_dump(data: dict[str, Any]) -> None:
    _same(data)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(texts, values, max_size=6))
def test_the_pure_python_emitter_too(data: dict[str, Any]) -> None:
    # where PyYAML was built without libyaml, `_DUMPER` is its pure-Python SafeDumper
    with patch.object(markdown, "_DUMPER", yaml.SafeDumper), patch.object(markdown, "_entries", {}):
        _same(data)
        _same(data)  # the second time from the kept entries


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.one_of(st.integers(), st.booleans(), st.none(), st.floats()), values))
def test_non_text_keys_too(data: dict[Any, Any]) -> None:
    _same(data)


def test_equal_values_of_other_types_are_not_taken_for_each_other() -> None:
    # 1 == True == 1.0 and 0.0 == -0.0, yet each is written its own way
    kept: list[Any] = [1, True, 1.0, "1", 0, False, 0.0, -0.0, None, "null", "", []]
    kept += [{}, [1], [True], [1.0], {"a": 1}, {"a": True}, {1: "a"}, {True: "a"}, {"1": "a"}]
    for value in kept:
        _same({"k": value})
        _same({"first": "x", "k": value})


def test_floats_shared_lists_recursion_and_foreign_types() -> None:
    for x in (0.0, -0.0, 1.0, 1e17, 1.5e-300, math.inf, -math.inf, math.nan, 1000.0, 0.1):
        _same({"f": x, "l": [x]})
    shared: list[Any] = ["a", {"b": None}]
    inner = {"k": shared}
    _same({"one": shared, "two": shared, "three": inner, "four": inner, "e": [], "d": {}})
    loop: dict[str, Any] = {"name": "me"}
    loop["self"] = loop
    _same({"loop": loop})
    ring: list[Any] = [1]
    ring.append(ring)
    _same({"ring": ring})

    class Colour(StrEnum):
        RED = "red"

    class Count(int):
        pass

    for foreign in (Colour.RED, Count(3), (1, 2), b"bytes", {1, 2}):
        _same({"x": foreign})
    _same({"nested": [{"deep": [Colour.RED]}], "before": "ok"})


def test_info_md_front_matter_is_the_dumped_fields() -> None:
    node = Node(
        id="n7",
        parent_id="root",
        kind=NodeKind.EXECUTION,
        title="Login: API # yes",
        requirement="r",
        docs=[DocRef(path="docs/a.md", description="")],
        acceptance_criteria=[Criterion(id="AC1", when="w", then="t")],
        self_check=[SelfCheck(criterion="AC1", passed=True, evidence="no")],
        deps=["n2", "null"],
        created_by="@dev",
        created_at=1_700_000_000.25,
        updated_at=1e17,
    )
    data = node.model_dump(mode="json")
    front = {k: data[k] for k in markdown._FRONT_FIELDS}
    assert markdown.info_md(node, "en").startswith(_dumped(front) + "\n# Login: API # yes\n")


plain_floats = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=400, deadline=None)
@given(texts, plain_floats, plain_floats)
def test_a_float_after_a_key_written_plain_before_is_written_as_the_emitter_writes_it(
    key: str, first: float, second: float
) -> None:
    # the first float teaches the key (when the emitter writes `key: 1.5` as is); the
    # second skips the emitter
    _same({key: first})
    _same({key: second})
    _same({"before": 1, key: second, "after": [second]})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(texts, values, max_size=5), max_size=6))
def test_a_batch_is_each_front_matter_on_its_own(datas: list[dict[str, Any]]) -> None:
    wanted: list[str] = []
    for data in datas:
        try:
            wanted.append(_dumped(data))
        except Exception:  # the old path refused it: not a batch to compare
            return
    with patch.object(markdown, "_entries", {}), patch.object(markdown, "_plain_keys", set()):
        assert markdown._fronts(datas) == wanted
        assert markdown._fronts(datas) == wanted  # from the kept entries
