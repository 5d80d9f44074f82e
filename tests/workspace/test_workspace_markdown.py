"""The projection serializer: every file reads back as what was written (hypothesis), in
either heading language (statement 71), with doc statuses and empty descriptions intact
(statements 49, 66; flaws 1, 5, 7)."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.workspace import fields, markdown
from mindloop.workspace.models import (
    Criterion,
    DocRef,
    DocStatus,
    LogEntry,
    Node,
    NodeKind,
    SelfCheck,
)
from mindloop.workspace.texts import HEADINGS

# single-line text without control characters (what fields.line accepts)
line_chars = st.characters(
    blacklist_categories=["Cc", "Cs"], blacklist_characters="\u2028\u2029\x85"
)
one_line = st.text(line_chars, max_size=40)
word_chars = st.characters(
    whitelist_categories=["Ll", "Lu", "Nd", "Lo"], whitelist_characters=" ()-_.[]#!'"
)
segment = st.text(word_chars, min_size=1, max_size=12).filter(
    lambda s: s.strip(" .") == s and s not in (".", "..")
)
paths = st.one_of(
    st.lists(segment, min_size=1, max_size=4).map("/".join),
    st.builds(lambda s: f"https://example.com/{s}", st.text("abcxyz0123/-_.?=&%", max_size=20)),
)
docs = st.builds(DocRef, path=paths, description=one_line, status=st.sampled_from(list(DocStatus)))


@settings(max_examples=300, deadline=None)
@given(docs)
def test_a_doc_line_round_trips_exactly(doc: DocRef) -> None:
    line = markdown.doc_line(doc)
    assert "\n" not in line
    assert markdown.parse_doc_line(line) == doc


def test_the_tricky_doc_lines() -> None:
    cases = [
        DocRef(path="docs/a.md", description=""),  # flaw 5: empty descriptions survive
        DocRef(path="docs/a.md", description="old (expired)"),  # status-like description
        DocRef(path="docs/a.md", description="x (expired)", status=DocStatus.EXPIRED),
        DocRef(path="https://example.com/a(b)", description="url"),
        DocRef(path="my docs/spec (v2).md", description=" - dash"),
        DocRef(path="a]b/[c].md", description="brackets ] ["),
    ]
    for doc in cases:
        assert markdown.parse_doc_line(markdown.doc_line(doc)) == doc
    # upstream forms read too: no status is active; the link text is the description
    assert markdown.parse_doc_line("- [auth design](docs/auth.md)") == DocRef(
        path="docs/auth.md", description="auth design"
    )
    assert markdown.parse_doc_line("- [auth.md](docs/auth.md) - d") == DocRef(
        path="docs/auth.md", description="d"
    )


rules = st.lists(one_line.map(str.strip).filter(bool), max_size=5)


@settings(max_examples=100, deadline=None)
@given(rules, st.lists(docs, max_size=5), st.lists(docs, max_size=3), st.sampled_from(["en", "zh"]))
def test_workspace_md_round_trips(
    r: list[str], index: list[DocRef], found: list[DocRef], lang: str
) -> None:
    text = markdown.workspace_md(task="tasks/x.tsk", lang=lang, rules=r, index=index, found=found)  # type: ignore[arg-type]
    assert markdown.parse_workspace_md(text) == (r, index, found)


body_chars = st.characters(
    blacklist_categories=["Cs"], blacklist_characters="\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
)


def _field(raw: str) -> str | None:
    """What the commands would store for `raw` (None: they refuse it)."""
    try:
        return fields.text("f", raw, "requirement")
    except Exception:
        return None


bodies = st.text(body_chars, max_size=120).map(_field).filter(lambda v: v is not None)


@settings(max_examples=200, deadline=None)
@given(
    bodies,
    bodies,
    bodies,
    st.lists(docs, max_size=4),
    st.lists(st.tuples(one_line, one_line, st.one_of(st.none(), one_line)), max_size=3),
    st.sampled_from(["en", "zh"]),
    one_line,
)
def test_info_md_round_trips(
    req: str, notes: str, concl: str, refs: list[DocRef], crit: list, lang: str, evidence: str
) -> None:
    node = Node(
        id="n7",
        parent_id="root",
        kind=NodeKind.EXECUTION,
        title="Login: API",
        requirement=req,
        notes=notes,
        conclusion=concl,
        docs=refs,
        acceptance_criteria=[
            Criterion(id=f"AC{i}", when=w, then=t, verify=v or None)
            for i, (w, t, v) in enumerate(crit)
        ],
        self_check=[SelfCheck(criterion="AC0", passed=True, evidence=evidence)],
        deps=["n2", "n3"],
        artifacts=["src/a.py"],
        blockers=["the schema | is missing"],
    )
    text = markdown.info_md(node, lang)  # type: ignore[arg-type]
    back = markdown.parse_info_md(text)
    assert back["requirement"] == req and back["notes"] == notes and back["conclusion"] == concl
    assert back["docs"] == refs
    assert back["acceptance_criteria"] == node.acceptance_criteria
    rebuilt = Node.model_validate({**back, "kind": node.kind, "docs": refs})
    assert rebuilt == node


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(one_line, st.text(body_chars, max_size=60)),
        max_size=6,
    ),
    st.sampled_from(["en", "zh"]),
)
def test_log_md_round_trips_every_row(rows: list[tuple[str, str]], lang: str) -> None:
    entries = [LogEntry(at=1_700_000_000 + i, actor=a, text=t) for i, (a, t) in enumerate(rows)]
    parsed = markdown.parse_log_md(markdown.log_md(entries, lang))  # type: ignore[arg-type]
    assert [(a, t) for _, a, t in parsed] == rows
    assert [p[0] for p in parsed] == [markdown.stamp(e.at) for e in entries]


def test_flaw_7_no_log_row_is_skipped_for_its_content() -> None:
    entries = [
        LogEntry(at=1.0, actor="AI", text="Time | 时间 | Actor"),
        LogEntry(at=2.0, actor="Time", text="时间"),
    ]
    for lang in ("en", "zh"):
        assert [(a, t) for _, a, t in markdown.parse_log_md(markdown.log_md(entries, lang))] == [
            ("AI", "Time | 时间 | Actor"),
            ("Time", "时间"),
        ]


def test_english_files_use_english_headings_and_both_parse_alike() -> None:
    node = Node(
        id="n1",
        kind=NodeKind.EXECUTION,
        title="t",
        requirement="Use JWT.\n\n### Constraints\n- no third party",
        docs=[DocRef(path="docs/a.md", description="", status=DocStatus.EXPIRED)],
        acceptance_criteria=[Criterion(id="AC1", when="w", then="t")],
        conclusion="done",
    )
    en, zh = markdown.info_md(node, "en"), markdown.info_md(node, "zh")
    for key, name in HEADINGS["en"].items():
        if key in ("rules", "docs", "found", "log"):
            continue
        assert f"## {name}" in en and f"## {name}" not in zh
        assert f"## {HEADINGS['zh'][key]}" in zh
    assert markdown.parse_info_md(en) == markdown.parse_info_md(zh)
    ws_en = markdown.workspace_md(task="t.tsk", lang="en", rules=["r"], index=node.docs, found=[])
    ws_zh = markdown.workspace_md(task="t.tsk", lang="zh", rules=["r"], index=node.docs, found=[])
    assert "## Rules" in ws_en and "## Docs" in ws_en and "## 规则" in ws_zh and "## 文档" in ws_zh
    assert markdown.parse_workspace_md(ws_en) == markdown.parse_workspace_md(ws_zh)


def _datetime_stamp(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.floats(min_value=-1e9, max_value=4e9, allow_nan=False),
        # the edge of a second: datetime rounds .9999995 and up into the next one
        st.builds(
            lambda s, f: s + f,
            st.integers(0, 4_000_000_000),
            st.sampled_from([0.0, 0.5, 0.999998, 0.999999, 0.9999994, 0.9999995, 0.9999999]),
        ),
    )
)
def test_a_log_time_is_what_datetime_writes(at: float) -> None:
    """The log's time column is formatted once per second (`stamp`'s cache): always the
    text `datetime` gives, asked twice (the second answer from the cache)."""
    assert markdown.stamp(at) == _datetime_stamp(at)
    assert markdown.stamp(at) == _datetime_stamp(at)
