"""The one node-context function (decision 2): the node's own requirement, criteria, the
rules, its active dispatched docs, its deps' results, its ancestors for orientation —
never an ancestor's docs, the index, or an expired doc (upstream flaw 2; statements 53,
56, 67, 70)."""

from __future__ import annotations

from pathlib import Path

from mindloop.workspace.commands import CriterionInput, DocInput, Session
from mindloop.workspace.context import node_context
from mindloop.workspace.models import DocStatus, NodeKind, NodeStatus, RefAction
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.transitions import Authority
from tests.workspace.ws_util import apply, done, fresh


def _rtws(tmp_path: Path) -> Path:
    for name in ("a", "b", "c", "d", "big"):
        path = tmp_path / "docs" / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"BODY_{name.upper()}\n" * (5000 if name == "big" else 1))
    return tmp_path


def _state() -> WorkspaceState:
    def build(s: Session) -> None:
        s.add_rule("RULE_ONE", {})
        s.create_node(
            parent_id="root",
            kind=NodeKind.PLANNING,
            title="P",
            requirement="PARENT_REQ",
            docs=[DocInput("docs/a.md"), DocInput("docs/b.md"), DocInput("docs/c.md")],
        )
        s.create_node(
            parent_id="n1",
            kind=NodeKind.EXECUTION,
            title="Child",
            requirement="CHILD_REQ",
            docs=[DocInput("docs/a.md", "the a"), DocInput("docs/b.md")],
            acceptance_criteria=[CriterionInput("w", "t", "make test")],
        )
        s.create_node(parent_id="n1", kind=NodeKind.EXECUTION, title="Dep", requirement="x")
        s.index_add("docs/d.md", "only indexed")

    return apply(fresh(), build)


def test_flaw_2_a_child_sees_its_own_docs_and_no_ancestors_or_index(tmp_path: Path) -> None:
    rtws = _rtws(tmp_path)
    text = node_context(_state(), "n2", rtws=rtws)
    assert "CHILD_REQ" in text and "BODY_A" in text and "BODY_B" in text
    assert "docs/c.md" not in text and "BODY_C" not in text  # the parent's third doc
    assert "docs/d.md" not in text and "BODY_D" not in text  # only in the index
    assert "PARENT_REQ" in text  # the chain gives orientation, without its docs
    assert "RULE_ONE" in text and "AC1: WHEN w THEN t (verify: make test)" in text


def test_statement_67_expired_docs_leave_every_prompt(tmp_path: Path) -> None:
    rtws = _rtws(tmp_path)
    state = apply(
        _state(), lambda s: s.reference(node_id="n2", target="docs/b.md", action=RefAction.EXPIRE)
    )
    text = node_context(state, "n2", rtws=rtws)
    assert "BODY_A" in text and "docs/b.md" not in text and "BODY_B" not in text
    # an index expiry retires a doc everywhere, whatever a node's reference says
    state = apply(state, lambda s: s.index_status("docs/a.md", DocStatus.EXPIRED))
    text = node_context(state, "n2", rtws=rtws)
    assert "docs/a.md" not in text and "None were dispatched" in text
    assert state.nodes["n2"].doc("docs/a.md").status is DocStatus.ACTIVE  # type: ignore[union-attr]


def test_statement_70_isolation_cuts_the_chain_but_never_adds_docs(tmp_path: Path) -> None:
    rtws = _rtws(tmp_path)
    state = apply(
        _state(), lambda s: s.transition(node_id="n2", to=NodeStatus.IN_PROGRESS, reason="go")
    )
    isolated = apply(
        state,
        lambda s: s.split_node(
            parent_id="n2", title="Sub", requirement="SUB_REQ", inherit_context=False
        ),
    )
    text = node_context(isolated, "n4", rtws=rtws)
    assert "SUB_REQ" in text and "PARENT_REQ" not in text and "CHILD_REQ" not in text
    inherited = apply(
        state,
        lambda s: s.split_node(
            parent_id="n2", title="Sub", requirement="SUB_REQ", inherit_context=True
        ),
    )
    text = node_context(inherited, "n4", rtws=rtws)
    assert "PARENT_REQ" in text and "CHILD_REQ" in text  # root → … → parent
    assert "BODY_A" not in text and "BODY_B" not in text  # no ancestor docs


def test_statement_53_the_chain_starts_at_the_nearest_isolated_ancestor(tmp_path: Path) -> None:
    rtws = _rtws(tmp_path)
    state = apply(
        _state(), lambda s: s.transition(node_id="n2", to=NodeStatus.IN_PROGRESS, reason="go")
    )
    state = apply(
        state,
        lambda s: s.split_node(
            parent_id="n2", title="Sub", requirement="SUB_REQ", inherit_context=False
        ),
    )
    state = apply(
        state, lambda s: s.transition(node_id="n4", to=NodeStatus.IN_PROGRESS, reason="go")
    )
    state = apply(state, lambda s: s.split_node(parent_id="n4", title="Leaf", requirement="LEAF"))
    text = node_context(state, "n6", rtws=rtws)
    assert "SUB_REQ" in text and "CHILD_REQ" not in text and "PARENT_REQ" not in text


def test_deps_results_and_blockers_are_given_no_rules_no_section(tmp_path: Path) -> None:
    rtws = _rtws(tmp_path)
    state = apply(
        fresh(),
        lambda s: [
            s.create_node(parent_id="root", kind=NodeKind.EXECUTION, title="Dep", requirement="x"),
            s.create_node(
                parent_id="root", kind=NodeKind.EXECUTION, title="Use", requirement="y", deps=["n1"]
            ),
        ],
    )
    state = done(state, "n1")
    text = node_context(state, "n2", rtws=rtws)
    assert "- n1 Dep (DONE): ok" in text
    assert "Rules" not in text  # statement 56: no rules, no rules section


def test_docs_inline_within_the_budget_else_listed_with_how_to_read_them(tmp_path: Path) -> None:
    rtws = _rtws(tmp_path)
    state = apply(
        fresh(),
        lambda s: s.create_node(
            parent_id="root",
            kind=NodeKind.EXECUTION,
            title="T",
            requirement="r",
            docs=[
                DocInput("docs/big.md", "huge"),
                DocInput("docs/a.md"),
                DocInput("https://example.com/spec", "spec"),
            ],
        ),
    )
    (rtws / "docs" / "a.md").unlink()
    text = node_context(state, "n1", rtws=rtws)
    assert "BODY_BIG" not in text
    assert (
        "- docs/big.md — huge (not inlined: over the inline budget; read it with `read_file`)"
        in text
    )
    assert "- docs/a.md — - (not inlined: cannot be read now" in text
    assert "- https://example.com/spec — spec (a URL)" in text
    text = node_context(state, "n1", rtws=rtws, budget=10**6, lang="zh")
    assert "## 需求" in text and "BODY_BIG" not in text  # one doc never above its own cap


def test_a_context_reads_a_sessions_value_without_taking_its_nodes(tmp_path: Path) -> None:
    """A session's value (a command's result, which the loop shows next) is read, not
    taken: building a node's context copies none of its nodes, and says the same as on
    the value as stored."""
    rtws = _rtws(tmp_path)
    stored = _state()
    s = Session(stored, Authority.runtime())
    text = node_context(s.state, "n2", rtws=rtws)
    assert s.state.touched() == []
    assert text == node_context(stored, "n2", rtws=rtws)
    assert [n.id for n in s.state.ancestors("n2")] == ["n1", "root"] and s.state.touched() == []
