"""A phase's input: the message the runtime posts to the loop root when a phase starts.

It fills the phase's input template (`phase_texts.INPUT_SECTIONS`, in the work language):
the runtime's notes (a dropped hint, why a BENCH waits), the current node (DO, ADJUST) or
the nodes to check (CHECK) as the workspace's node-context function renders them, the
waits resolved since the last phase, a compact tree of the workspace, and the last step
summary (the ended phase's `phase_end.summary`); PLAN's also names the docs the task's
start scan offered that no node has yet. Everything is read from the store by the
caller; this module only writes text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from mindloop.i18n import Lang
from mindloop.loop.phase_texts import (
    INPUT_HEADER,
    INPUT_SECTIONS,
    NO_BATCH,
    NO_NODE,
    NO_TREE,
    SUMMARY_LABELS,
)
from mindloop.loop.phases import Phase
from mindloop.loop.request_tree import TreeParts, node_line
from mindloop.store import MessageRecord
from mindloop.store.loop_state import Summary
from mindloop.workspace.context import node_context
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.texts import ctx_text

TREE_LINES = 60  # nodes listed at most (the rest are counted)

# PLAN's input names the start scan's docs no node has yet (however the workspace was
# first touched: a tool's first result names them, a CLI command shows no agent).
OFFERED: dict[Lang, str] = {
    "en": "## Docs found at the task's start (offered, not dispatched: give a node the ones "
    "it needs with `docs` or node_reference)",
    "zh": "## 任务启动时发现的文档（已提供，未分派：用 `docs` 或 node_reference 交给需要它们的节点）",
}


# SELF_IMPROVE's input lists the KB requests the dispatcher gave up on (agent-loop §9.2).
DEAD_KB: dict[Lang, str] = {
    "en": "## KB requests never delivered (the dispatcher gave up: send one again with "
    "kb_request if it is still needed)",
    "zh": "## 未送达的知识库请求（分发器已放弃：如仍需要，请用 kb_request 重新发送）",
}


@dataclass
class PhaseInput:
    phase: Phase
    entry: int
    lang: Lang
    workspace: WorkspaceState
    rtws: Path
    node: str | None = None
    targets: Sequence[str] = ()
    notes: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    last_summary: Summary | None = None
    workspace_ref: str | None = None
    batch: Sequence[MessageRecord] = ()  # SELF_IMPROVE: the root's messages to review
    dead_kb: Sequence[str] = ()  # SELF_IMPROVE: KB requests never delivered, one line each
    reflections: Sequence[str] = ()  # the node's last retry reflections (agent-loop §8.3)
    tree: TreeParts | None = None  # the task's tree as last built (`request_tree.tree_parts`)


def tree_text(state: WorkspaceState, lang: Lang, parts: TreeParts | None = None) -> str:
    """The workspace as a compact tree: the first `TREE_LINES` nodes of its walk, one
    line each (`node_line`), the rest counted. `parts`: the task's tree as last built
    (`request_tree.tree_parts`), to build this one from (only changed nodes' lines are
    made again)."""
    if not state.exists:
        return NO_TREE[lang]
    lines: list[str] = []
    if parts is not None:
        built = parts.current(state)
        lines += [p.text for p in built[:TREE_LINES]]
        if len(built) > TREE_LINES:
            lines.append(f"… {len(state.nodes) - TREE_LINES} more")
        return "\n".join(lines)
    for n, depth in state.walk():
        if len(lines) >= TREE_LINES:
            lines.append(f"… {len(state.nodes) - TREE_LINES} more")
            break
        lines.append(f"{'  ' * depth}- {node_line(state, n)}")
    return "\n".join(lines)


def node_text(state: WorkspaceState, node_id: str, rtws: Path, lang: Lang) -> str:
    """The node as the work loop shows it: its requirement, criteria, rules, docs and
    deps' conclusions (the workspace's node-context function), plus its loop counters."""
    n = state.nodes[node_id]
    counters = (
        f"status {n.status.value}; attempt {n.attempt}; adjusted {n.adjust_count}×; "
        f"DO steps used {n.steps_used} of its step budget {n.step_budget} this attempt"
    )
    extra = []
    if n.notes:
        extra.append("Notes: " + n.notes)
    if n.conclusion:
        extra.append("Conclusion so far: " + n.conclusion)
    body = node_context(state, node_id, rtws=rtws, lang=lang, reply_protocol=False)
    return "\n".join([body, "", counters, *extra])


BATCH_LINE = 240  # characters of one message shown in SELF_IMPROVE's batch


def batch_line(m: MessageRecord) -> str:
    """One message of the batch SELF_IMPROVE reviews: its id, kind and opening."""
    d = m.data
    loop = d.get("loop")
    if isinstance(loop, dict):  # a phase input of the loop: named, not repeated
        return f"- #{m.id} phase input: {loop.get('phase')} (entry {loop.get('entry')})"
    if m.kind == "tool_call":
        text = f"{d.get('name')}({d.get('arguments', '')})"
    elif m.kind == "tool_result":
        text = f"{d.get('name')} → {'error: ' if d.get('is_error') else ''}{d.get('content', '')}"
    else:
        text = str(d.get("text", ""))
    flat = " ".join(text.split())
    if len(flat) > BATCH_LINE:
        flat = flat[: BATCH_LINE - 1] + "…"
    return f"- #{m.id} {m.kind}: {flat}"


def summary_text(summary: Summary, lang: Lang) -> str:
    progress, decisions, pending, risks = SUMMARY_LABELS[lang]
    out = [f"{progress}: {summary.progress or '-'}"]
    for label, items in (
        (decisions, summary.key_decisions),
        (pending, summary.pending),
        (risks, summary.risks),
    ):
        if items:
            out.append(f"{label}: " + "; ".join(items))
    return "\n".join(out)


class InputBlock(NamedTuple):
    """One block of a phase input, as posted: what it is (`key`: head, notes, offered,
    node, reflections, targets, target, batch, dead_kb, resolved_waits, messages, tree,
    last_summary), its text (its heading first) and the node it shows, if one (the
    model reads it whole with `node_get`). A tuple: each entry makes a few."""

    key: str
    text: str
    node: str | None = None


def blocks(inp: PhaseInput) -> list[InputBlock]:
    """The input's blocks, in the order `render` writes them."""
    lang = inp.lang
    h = _marks(lang).heading

    def block(key: str, lines: Sequence[str], node: str | None = None) -> InputBlock:
        return InputBlock(key, "\n".join(lines), node)

    out = [InputBlock("head", INPUT_HEADER[lang].format(phase=inp.phase.value, entry=inp.entry))]
    if inp.notes:
        out.append(block("notes", [h["notes"], *(f"- {n}" for n in inp.notes)]))
    if inp.phase is Phase.PLAN:
        offered = inp.workspace.pending_offers()
        if offered:
            out.append(block("offered", [OFFERED[lang], ", ".join(d.path for d in offered)]))
    if inp.phase in (Phase.DO, Phase.ADJUST):
        if inp.node is not None and inp.node in inp.workspace.nodes:
            text = node_text(inp.workspace, inp.node, inp.rtws, lang)
            out.append(block("node", [h["node"], text], inp.node))
            if inp.reflections:
                out.append(
                    block("reflections", [h["reflections"], *(f"- {r}" for r in inp.reflections)])
                )
        else:
            out.append(block("node", [h["node"], NO_NODE[lang]]))
    if inp.phase is Phase.CHECK:
        head = [h["targets"]]
        if inp.workspace_ref:
            head.append(f"workspace ref: {inp.workspace_ref}")
        out.append(block("targets", head))
        for nid in inp.targets:
            out.append(InputBlock("target", node_text(inp.workspace, nid, inp.rtws, lang), nid))
    if inp.phase is Phase.SELF_IMPROVE:
        out.append(
            block("batch", [h["batch"], *([batch_line(m) for m in inp.batch] or [NO_BATCH[lang]])])
        )
        if inp.dead_kb:
            out.append(block("dead_kb", [DEAD_KB[lang], *(f"- {line}" for line in inp.dead_kb)]))
    if inp.resolved:
        out.append(
            block("resolved_waits", [h["resolved_waits"], *(f"- {r}" for r in inp.resolved)])
        )
    out.append(block("tree", [h["tree"], tree_text(inp.workspace, lang, inp.tree)]))
    if inp.last_summary is not None:
        out.append(block("last_summary", [h["last_summary"], summary_text(inp.last_summary, lang)]))
    return out


# The blocks of the inputs this process rendered lately, by the text's identity (the
# loop hands the text it posted to the request's sections: no hash of a long text), the
# text held with them: `posted_blocks` reads an input it finds here from its blocks
# (`_as_posted`) instead of parsing its text.
_RENDERED: dict[int, tuple[str, tuple[InputBlock, ...]]] = {}
RENDERED_KEPT = 64  # inputs kept (emptied when full)


def render(inp: PhaseInput) -> str:
    out = tuple(blocks(inp))
    text = "\n\n".join(b.text for b in out)
    if len(_RENDERED) >= RENDERED_KEPT:
        _RENDERED.clear()
    _RENDERED[id(text)] = (text, out)
    return text


@dataclass(frozen=True)
class _Marks:
    """What splits a posted input of one language into blocks, built once: the headings
    of the blocks `posted_blocks` keeps (by key) and the regex of the break before one
    (a blank line, then the heading as a whole line)."""

    heading: dict[str, str]  # the input's headings by key (INPUT_SECTIONS)
    keys: dict[str, str]  # key by heading, for the blocks kept
    breaks: re.Pattern[str]
    tree_head: str  # how the tree block starts
    tree_cut: str  # where the parse cuts the tree off (its last occurrence)


_MARKS: dict[Lang, _Marks] = {}


def _marks(lang: Lang) -> _Marks:
    found = _MARKS.get(lang)
    if found is None:
        h = {k: v[lang] for k, v in INPUT_SECTIONS.items()}
        keys = {h[k]: k for k in INPUT_SECTIONS if k not in ("tree", "last_summary")}
        keys |= {OFFERED[lang]: "offered", DEAD_KB[lang]: "dead_kb"}
        assert not any("\n" in k for k in keys)  # see `_breaks` and `_as_posted`
        marks = [re.escape(k) + "(?:\n|$)" for k in keys]
        found = _MARKS[lang] = _Marks(
            h,
            keys,
            re.compile("\n\n(?=" + "|".join(marks) + ")"),
            h["tree"] + "\n",
            f"\n\n{h['tree']}\n",
        )
    return found


def _breaks(text: str, marks: _Marks, heads: Sequence[str]) -> list[int]:
    """Where each block after the first starts: after every blank line that a kept
    heading or a target node's head follows. Found as one scan for the headings and
    one `find` per head: as the alternation of them all would find them (no heading or
    head starts with a line break, so no two breaks found overlap)."""
    at = {m.end() for m in marks.breaks.finditer(text)}
    for head in heads:
        needle = "\n\n" + head
        i = text.find(needle)
        while i >= 0:
            at.add(i + 2)
            i = text.find(needle, i + 1)
    return sorted(at)


def posted_blocks(
    text: str,
    lang: Lang,
    *,
    last_summary: Summary | None = None,
    node: str | None = None,
    targets: Sequence[str] = (),
) -> list[InputBlock]:
    """The blocks of an input as `render` posted it, without its workspace tree and last
    step summary (a loop request shows both as sections of their own, as they are now):
    what the request's pinned INPUT section is made of. `last_summary`, `node` and
    `targets` are the entry's (its loop state).

    Nothing of the input is lost however its texts read: the last step summary is cut
    only where it is exactly what `render` wrote from `last_summary`, the tree only at
    the last tree heading before it (a tree's lines never hold one). A heading a model
    wrote into a node's requirement can only split a block in two.

    The text is what `parse_blocks` reads; an input this process rendered lately (the
    very text `render` returned) is read from the blocks it joined instead, when that
    gives the same blocks (`_as_posted`): no parse at each entry of the loop that just
    posted it."""
    held = _RENDERED.get(id(text))
    if held is not None and held[0] is text:
        found = _as_posted(held[1], lang, last_summary, node, targets)
        if found is not None:
            return found
    return parse_blocks(text, lang, last_summary=last_summary, node=node, targets=targets)


def parse_blocks(
    text: str,
    lang: Lang,
    *,
    last_summary: Summary | None = None,
    node: str | None = None,
    targets: Sequence[str] = (),
) -> list[InputBlock]:
    """`posted_blocks` read from the text alone: the definition (see there)."""
    marks = _marks(lang)
    h = marks.heading
    if last_summary is not None:
        tail = f"\n\n{h['last_summary']}\n{summary_text(last_summary, lang)}"
        text = text.removesuffix(tail)
    at = text.rfind(marks.tree_cut)
    if at >= 0:
        text = text[:at]
    keys = marks.keys
    heads = {node_head(t, lang): t for t in targets}
    starts = [0, *_breaks(text, marks, list(heads))]
    out: list[InputBlock] = []
    for i, start in enumerate(starts):
        chunk = text[start : starts[i + 1] - 2] if i + 1 < len(starts) else text[start:]
        if i == 0:
            out.append(InputBlock("head", chunk))
            continue
        key = keys.get(chunk.split("\n", 1)[0])
        if key is not None:
            out.append(InputBlock(key, chunk, node if key == "node" else None))
        else:
            target = next(t for head, t in heads.items() if chunk.startswith(head))
            out.append(InputBlock("target", chunk, target))
    return out


def _as_posted(
    held: Sequence[InputBlock],
    lang: Lang,
    last_summary: Summary | None,
    node: str | None,
    targets: Sequence[str],
) -> list[InputBlock] | None:
    """What `parse_blocks` reads from the text `render` joined from `held`, taken from
    `held` itself: its blocks but the tree and the last step summary, when no text
    of them would make the parse cut otherwise (a heading or a target's head after a
    blank line inside a block, a tree heading in the summary not cut with it, a block
    the parse would name otherwise); else None (the text is parsed)."""
    marks = _marks(lang)
    h = marks.heading
    out = list(held)
    if out and out[-1].key == "last_summary":
        tail = out.pop().text
        if marks.tree_cut in tail and (
            last_summary is None
            or tail != f"{h['last_summary']}\n{summary_text(last_summary, lang)}"
        ):
            return None  # the parse may cut at the summary's tree heading
    if not out or out[-1].key != "tree":
        return None
    tree = out.pop().text
    if not tree.startswith(marks.tree_head) or marks.tree_cut in tree:
        return None  # the parse cuts at the tree's start, as its last tree heading
    if not out or out[0].key != "head" or out[0].node is not None:
        return None
    heads = {node_head(t, lang): t for t in targets} if targets else {}
    keys, breaks = marks.keys, marks.breaks
    for i, b in enumerate(out):
        text = b.text
        if "\n\n" in text and (
            breaks.search(text) is not None or any("\n\n" + head in text for head in heads)
        ):
            return None  # the parse would split it
        if i == 0:
            continue
        end = text.find("\n")
        key = keys.get(text if end < 0 else text[:end])
        if key is not None:
            if key != b.key or b.node != (node if key == "node" else None):
                return None
        elif b.key != "target" or b.node != next(
            (t for head, t in heads.items() if text.startswith(head)), None
        ):
            return None
    return out


def node_head(node_id: str, lang: Lang) -> str:
    """How a node's context starts (`workspace.context.node_context`), up to its title."""
    return ctx_text(lang, "head").format(id=node_id, title="")
