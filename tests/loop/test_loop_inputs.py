"""A phase's input (`loop/inputs.py`): what the runtime posts to the loop root when a
phase starts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mindloop.i18n import Lang
from mindloop.loop import phase_ops
from mindloop.loop.driver import TaskLoop
from mindloop.loop.inputs import (
    PhaseInput,
    blocks,
    node_head,
    parse_blocks,
    posted_blocks,
    render,
    tree_text,
)
from mindloop.loop.phase_texts import INPUT_SECTIONS
from mindloop.loop.phases import Phase
from mindloop.store import loop_state as ls
from mindloop.store.loop_state import Summary
from mindloop.testing import ScriptedModel
from mindloop.workspace import api
from mindloop.workspace.api import WorkspaceApi
from mindloop.workspace.commands import CriterionInput, Session
from mindloop.workspace.models import NodeKind, NodeStatus
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.transitions import Actor, Authority
from tests.loop.loop_util import runtime
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


def test_plan_input_offers_the_start_scans_docs_and_other_phases_do_not(rtws: Path) -> None:
    """A workspace first touched from the CLI: the planner still learns what the start
    scan found (offered, not dispatched), in PLAN's input only."""
    (rtws / "README.md").write_text("# proj\n")
    (rtws / "docs").mkdir()
    (rtws / "docs" / "design.md").write_text("# design\n")
    with WorkspaceApi(rtws, TASK) as api:
        api.add_rule("Use type hints everywhere")
        state = api.state()
    plan = render(PhaseInput(Phase.PLAN, 1, "en", state, rtws))
    offered = [line for line in plan.splitlines() if "README.md" in line]
    assert offered and "docs/design.md" in offered[0]
    assert "offered" in plan.lower()
    for phase in (Phase.DO, Phase.CHECK, Phase.ADJUST):
        assert "README.md" not in render(PhaseInput(phase, 1, "en", state, rtws))


# ---------------------------------------------------------------- posted input → blocks

_TEXT = st.text(
    alphabet=st.sampled_from(["a", "b", " ", "\n", "#", "-", "*", "é", "节"]), max_size=60
)


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, WorkspaceState]:
    from tests.conftest import init_rtws

    rtws = tmp_path_factory.mktemp("inputs") / "proj"
    init_rtws(rtws, provider="mock")

    def build(s: Session) -> None:
        for title in ("first", "second"):
            s.create_node(
                parent_id="root",
                kind=NodeKind.EXECUTION,
                title=title,
                requirement=f"REQ {title}\n\n{INPUT_SECTIONS['reflections']['en']}\n(a model wrote it)",
                acceptance_criteria=[CriterionInput("run", "works", "pytest")],
            )

    with WorkspaceApi(rtws, TASK) as api:
        api.command(build, authority=Authority.chat("@lead"))
        return rtws, api.state()


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    phase=st.sampled_from(list(Phase)),
    notes=st.lists(_TEXT, max_size=3),
    resolved=st.lists(_TEXT, max_size=3),
    reflections=st.lists(_TEXT, max_size=2),
    summary=st.none() | st.builds(Summary, progress=_TEXT, pending=st.lists(_TEXT, max_size=2)),
    lang=st.sampled_from(["en", "zh"]),
)
def test_an_input_as_posted_gives_back_its_blocks_but_the_tree_and_the_summary(
    two_nodes: tuple[Path, WorkspaceState],
    phase: Phase,
    notes: list[str],
    resolved: list[str],
    reflections: list[str],
    summary: Summary | None,
    lang: Lang,
) -> None:
    """Whatever its texts hold (a heading the model wrote into a requirement, a summary
    of headings and blank lines), nothing of the input is lost: the blocks read back
    from the posted text are its blocks without the tree and the last step summary
    (at worst one split in two), each node's block naming its node."""
    rtws, state = two_nodes
    inp = PhaseInput(
        phase,
        3,
        lang,
        state,
        rtws,
        node="n1",
        targets=["n1", "n2"] if phase is Phase.CHECK else [],
        notes=notes,
        resolved=resolved,
        last_summary=summary,
        workspace_ref="abc123",
        reflections=reflections,
    )
    want = [b for b in blocks(inp) if b.key not in ("tree", "last_summary")]
    got = posted_blocks(render(inp), lang, last_summary=summary, node=inp.node, targets=inp.targets)
    assert "\n\n".join(b.text for b in got) == "\n\n".join(b.text for b in want)
    assert {b.node for b in got if b.node} == {b.node for b in want if b.node}
    for b in got:
        if b.node is not None:
            assert b.text.startswith(want[[w.node for w in want].index(b.node)].text[:40])
    assert not any(b.text.startswith(INPUT_SECTIONS["tree"][lang]) for b in got)


# What a model may write that reads like the input's own structure after a blank line:
# a heading the parse cuts at, a node's head, the tree's heading (in a summary too).
_TRAPS = st.sampled_from(
    [
        "\n\n" + INPUT_SECTIONS["notes"]["en"] + "\nx",
        "\n\n" + INPUT_SECTIONS["resolved_waits"]["zh"],
        "\n\n" + INPUT_SECTIONS["tree"]["en"] + "\n- n9",
        "\n\n" + INPUT_SECTIONS["last_summary"]["en"] + "\n",
        "\n\n" + node_head("n2", "en") + "x",
        "\n\n" + node_head("n1", "zh"),
        "\n\n",
        "",
    ]
)
_TRAPPED = st.builds(lambda a, b, c: a + b + c, _TEXT, _TRAPS, _TEXT)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    phase=st.sampled_from(list(Phase)),
    notes=st.lists(_TRAPPED, max_size=2),
    resolved=st.lists(_TRAPPED, max_size=2),
    reflections=st.lists(_TRAPPED, max_size=2),
    summary=st.none()
    | st.builds(Summary, progress=_TRAPPED, pending=st.lists(_TRAPPED, max_size=2)),
    other=st.none() | st.builds(Summary, progress=_TRAPPED),
    node=st.sampled_from(["n1", "n2", None]),
    lang=st.sampled_from(["en", "zh"]),
    read_in=st.sampled_from(["en", "zh"]),
)
@example(  # a node's head in a note, in CHECK (the parse cuts the note there)
    phase=Phase.CHECK,
    notes=["a\n\n" + node_head("n2", "en") + "b"],
    resolved=[],
    reflections=[],
    summary=None,
    other=None,
    node=None,
    lang="en",
    read_in="en",
)
def test_an_input_this_process_rendered_reads_back_as_its_text_parses(
    two_nodes: tuple[Path, WorkspaceState],
    phase: Phase,
    notes: list[str],
    resolved: list[str],
    reflections: list[str],
    summary: Summary | None,
    other: Summary | None,
    node: str | None,
    lang: Lang,
    read_in: Lang,
) -> None:
    """`posted_blocks` takes an input `render` just wrote from its blocks instead of
    parsing the text: the very blocks the parse gives (a heading or a node's head after
    a blank line in any text, a tree heading in the summary, the entry's summary, node
    or language not the rendered ones), and for a text it did not render, the parse."""
    rtws, state = two_nodes
    inp = PhaseInput(
        phase,
        3,
        lang,
        state,
        rtws,
        node=node,
        targets=["n1", "n2"] if phase is Phase.CHECK else [],
        notes=notes,
        resolved=resolved,
        last_summary=summary,
        workspace_ref="abc123",
        reflections=reflections,
    )
    text = render(inp)
    for last, at, targets in (
        (summary, node, inp.targets),
        (other, node, inp.targets),
        (summary, "n2" if node != "n2" else None, inp.targets),
        (summary, node, list(reversed(inp.targets))),
    ):
        got = posted_blocks(text, read_in, last_summary=last, node=at, targets=targets)
        want = parse_blocks(text, read_in, last_summary=last, node=at, targets=targets)
        assert got == want
    fresh = text + "\n"  # not rendered: parsed
    assert posted_blocks(fresh, lang, last_summary=summary, node=node) == parse_blocks(
        fresh, lang, last_summary=summary, node=node
    )


# ---------------------------------------------------------------- the tree between entries


async def test_the_next_input_shows_what_another_process_changed_in_the_tree(rtws: Path) -> None:
    """The input's tree is built from the task's last tree (`request_tree.tree_parts`):
    a change made meanwhile through another store (another process, the CLI) shows in
    the next input, as a tree written from scratch has it."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    rt, policies = runtime(rtws, ScriptedModel([]))
    try:
        loop = TaskLoop(rt, policies, TASK)

        def plan(s: Session) -> None:
            for title in ("api", "db", "ui"):
                s.create_node(
                    parent_id="root", kind=NodeKind.EXECUTION, title=title, requirement="r"
                )

        api.execute(rt.store, rt.rtws, TASK, Authority.phase(Actor.PLAN, "@dev"), plan)
        state, text = phase_ops.enter_phase(rt, loop.state, Phase.DO)
        assert "- n2 [NEW ready] TASK 'db'" in text

        def elsewhere(s: Session) -> None:  # a node cancelled, one added
            s.transition(
                node_id="n2", to=NodeStatus.CANCELLED, reason="not needed", conclusion="dropped"
            )
            s.create_node(parent_id="root", kind=NodeKind.EXECUTION, title="docs", requirement="r")

        with WorkspaceApi(rtws, TASK) as other:  # a store of its own
            other.command(elsewhere, authority=Authority.chat("@lead"))
        end = ls.PhaseEnd(by=ls.EndedBy.STEP_CAP, reason="the cap", at=time.time())
        state, _ = phase_ops.close(rt, state, end)
        state, text = phase_ops.enter_phase(rt, state, Phase.PLAN)
        with WorkspaceApi(rtws, TASK) as fresh:
            tree = tree_text(fresh.state(), "en")
        assert "- n2 [CANCELLED] TASK 'db'" in tree and "- n4 [NEW ready] TASK 'docs'" in tree
        assert f"{INPUT_SECTIONS['tree']['en']}\n{tree}\n\n" in text
    finally:
        await rt.aclose()
