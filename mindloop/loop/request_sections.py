"""The sections a loop root's request is compiled from (agent-loop §7.1), built at each
step of a phase and handed to the budgeted compilation (`dialogs.budgeted`) with the
recent history and the dialog summary it builds itself:

- **input** (P0, pinned): the phase's input as it was posted at the entry (its node with
  requirement and criteria, the nodes to check, the batch to review, the resolved waits,
  the runtime's notes, and the texts that arrived with it), read from the stored entry
  message and shown at every step of the entry, so it never falls out of the request
  however many turns the entry takes. Its message is left out of the history, and the
  input (after the last step summary) stands where it happened among the turns, or
  before them all once it is older than those kept (`CompiledContext.anchor`). Over its
  budget each block is cut to what fits, the note naming `node_get` for a node's block;
- **last step summary** (P0): the ended phase's `phase_end` summary (the loop state);
- **workspace tree** (P4): the tree as it is now (the input's tree was the entry's), one
  part per node — the current node, its ancestors and deps, the nodes to check and every
  open node pinned, terminal ones folded to `id status title` first; in DO only the
  current node and its deps (the reference's DO override, with its 600-token budget);
- **workspace summary** (P3): the task's newest, written on PLAN entry and on a CHECK
  pass (`memory.workspace_summary`);
- **member memory** (P1): what SELF_IMPROVE remembered (`memory.member`);
- in SELF_IMPROVE the history is the entry's own turns: the batch it reviews replaces
  the rest (§7.1, §9.3).

Retrieved context (P6) has no producer in mindloop: no section is built for it.

Cost per step: the entry's message, input blocks, last summary and workspace summary are
read and built once per entry (the loop hands the entry's state and text over when it
enters a phase; a root no loop of this process drives has its state read at each step);
the tree is rebuilt only when the workspace's stamp moved (the stamp the step's system
prompt read for the workspace rules: no read of its own), and then from the task's last
tree (the request's or the phase input's), building parts only for what changed
(`request_tree`); the memory file is re-read
and its section rebuilt only when its stat changed, and the workspace summary's section
only when the summary did. Dialogs that are not loop roots never get here.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from mindloop.config.loop_memory import MemoryConfig
from mindloop.dialogs.history import History
from mindloop.dialogs.live import LiveDialog
from mindloop.i18n import Lang
from mindloop.loop.inputs import InputBlock, posted_blocks, summary_text
from mindloop.loop.phase_texts import INPUT_SECTIONS, NO_TREE
from mindloop.loop.phases import Phase
from mindloop.loop.request_tree import tree_parts, tree_section
from mindloop.memory.member import MemberMemory
from mindloop.memory.sections import Part, Section, SectionKind
from mindloop.memory.workspace_summary import WorkspaceSummary, workspace_summary
from mindloop.providers.base import UserMessage
from mindloop.store import Store
from mindloop.store import loop_state as ls
from mindloop.store import workspace as ws_rows
from mindloop.store.messages import message_by_id
from mindloop.workspace import repo

KEPT = 1024  # roots whose entry is remembered (a fixed amount of memory)
_NOTHING: tuple[Part | None, Part | None] = (None, None)  # no text around the input


class RequestSections(NamedTuple):
    """What a loop root's step adds to its budgeted request: its sections, the index of
    the input's message in the live history (left out of the history, the input shown
    at its place; -1: not in it, shown before every turn), and where the history starts
    (SELF_IMPROVE: after its input). A tuple: one is built per step."""

    sections: tuple[Section, ...]
    skip: int = -1
    since: int = 0


@dataclass
class _Entry:
    """One phase entry of one root: what its sections need, built once."""

    state: ls.LoopState
    text: str | None  # the input as posted (None: not read yet)
    blocks: tuple[Part, ...] = ()
    last_summary: Section | None = None
    ws_summary: Section | None = None
    # Where its message sits in the live history: the view, how far it was searched,
    # the index found and the message there when it was split.
    history: History | None = None
    searched: int = 0
    index: int | None = None
    message: UserMessage | None = None
    around: tuple[Part | None, Part | None] = _NOTHING  # texts in the same message
    # the input section as last built, and the texts around it it was built with
    input: tuple[tuple[Part | None, Part | None], Section] | None = None
    built: bool = False
    handed: bool = True  # by this process's loop (else its state is read at each step)


@dataclass
class _Tree:
    """A root's tree section as last built (for its key); its whole tree as last built is
    the task's `request_tree.tree_parts` (the next one is built from it)."""

    key: tuple[object, ...]
    section: Section


class LoopSections:
    """One per loop runtime (`LoopPolicies.bind`)."""

    def __init__(
        self,
        store: Store,
        rtws: Path,
        config: MemoryConfig,
        lang: Lang,
        stamp: Callable[[str], str | None] | None = None,
    ) -> None:
        self.store = store
        self.rtws = rtws
        self.config = config
        self.lang: Lang = lang
        # The workspace's stamp as this step's system prompt just read it (its rules
        # are cached on it), else one read of its own.
        self._stamp = stamp or (lambda task: ws_rows.stamp(store, task))
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._trees: dict[str, _Tree] = {}
        self._memories: dict[str, MemberMemory] = {}  # by member (each keeps its section)
        self._summaries: dict[str, tuple[WorkspaceSummary, Section]] = {}  # by task

    def _memory(self, member: str) -> MemberMemory:
        found = self._memories.get(member)
        if found is None:
            found = self._memories[member] = MemberMemory(
                self.rtws, member, min_confidence=self.config.min_confidence
            )
        return found

    def entered(self, state: ls.LoopState, text: str | None = None) -> None:
        """The loop entered (or resumes) a phase of `state.root_id`: its state, and the
        input it posted when it has it at hand (else it is read once)."""
        held = self._entries.get(state.root_id)
        if held is not None and held.state.entry_message_id == state.entry_message_id:
            held.state, held.handed = state, True
            if held.text is None:
                held.text = text
            self._entries.move_to_end(state.root_id)
        else:
            self._keep(_Entry(state=state, text=text))

    def build(self, live: LiveDialog, phase: Phase) -> RequestSections | None:
        """The sections of `live`'s next request in `phase`; None when the root is in no
        phase the store knows of (the request is then compiled from its history)."""
        entry = self._entry(live.id)
        if entry is None or entry.state.phase is not phase:
            return None
        self._prepare(live, entry)
        skip, around = self._locate(live.history, entry)
        memory = self._memory(live.member.id).section()
        held = entry.input
        if held is None or held[0] is not around:  # (the same at every step of an entry)
            before, after = around
            parts = (*_some(before), *entry.blocks, *_some(after))
            held = entry.input = (around, Section(kind=SectionKind.INPUT, parts=parts))
        sections = [
            held[1],
            self._tree(live.id, entry.state, phase),
            memory,
        ]
        sections += [s for s in (entry.last_summary, entry.ws_summary) if s is not None]
        since = skip + 1 if phase is Phase.SELF_IMPROVE and skip is not None else 0
        # not in this course's history (clear_mind since): before every turn shown
        return RequestSections(tuple(sections), -1 if skip is None else skip, since)

    # ------------------------------------------------------------------ the entry

    def _entry(self, root_id: str) -> _Entry | None:
        """The root's current entry: as the loop handed it over, else (a root this
        process's loop does not drive) its state read at each step, and the entry built
        once all the same."""
        held = self._entries.get(root_id)
        if held is not None and held.handed:
            return held
        state = ls.by_root(self.store, root_id)
        if state is None or not state.in_phase:
            return None
        if held is None or held.state.entry_message_id != state.entry_message_id:
            held = self._keep(_Entry(state=state, text=None, handed=False))
        held.state = state
        return held

    def _keep(self, entry: _Entry) -> _Entry:
        root_id = entry.state.root_id
        self._entries[root_id] = entry
        self._entries.move_to_end(root_id)
        if len(self._entries) > KEPT:
            old, _ = self._entries.popitem(last=False)
            self._trees.pop(old, None)
        return entry

    def _prepare(self, live: LiveDialog, entry: _Entry) -> None:
        if entry.built:
            return
        state = entry.state
        if entry.text is None:
            found = message_by_id(self.store, state.root_id, state.entry_message_id)
            entry.text = str(found.data.get("text", "")) if found is not None else ""
        lang = self.lang
        blocks = posted_blocks(
            entry.text,
            lang,
            last_summary=state.last_summary,
            node=state.node_id,
            targets=state.targets,
        )
        # the blocks as posted, a blank line between them (a section joins its parts
        # with a line break)
        entry.blocks = tuple(_input_part(b, lead=i > 0) for i, b in enumerate(blocks))
        if state.last_summary is not None:
            text = summary_text(state.last_summary, lang)
            entry.last_summary = Section.text(SectionKind.LAST_STEP_SUMMARY, text)
        found_summary = workspace_summary(self.store, state.task_path)
        if found_summary is not None:
            entry.ws_summary = self._summary_section(state.task_path, found_summary)
        entry.built = True

    def _summary_section(self, task: str, summary: WorkspaceSummary) -> Section:
        """The summary's section, built again only when the summary changed (it changes
        on a CHECK pass and a PLAN entry, not at every entry). The store hands the same
        value back while no summary was written (`workspace_summary`): compared by
        identity first, by value only when it was read again."""
        held = self._summaries.get(task)
        if held is None or (held[0] is not summary and held[0] != summary):
            held = self._summaries[task] = (summary, summary.section())
        return held[1]

    def _locate(
        self, history: History, entry: _Entry
    ) -> tuple[int | None, tuple[Part | None, Part | None]]:
        """The index of the entry's input message in `history` (None: not in this course,
        e.g. after clear_mind), and the texts that arrived in the same message (merged
        with it: before it, after it). Searched from the end once, then only what was
        appended; split again only if the message there changed."""
        text = entry.text or ""
        if entry.history is not history:
            entry.history, entry.searched, entry.index, entry.message = history, 0, None, None
        messages = history.messages
        if entry.index is None and text:
            for i in range(len(messages) - 1, entry.searched - 1, -1):
                msg = messages[i]
                # (the message the loop posted holds the very text it handed over)
                if isinstance(msg, UserMessage) and (msg.text is text or text in msg.text):
                    entry.index = i
                    break
            entry.searched = len(messages)
        if entry.index is None:
            return None, _NOTHING
        msg = messages[entry.index]
        if msg is not entry.message:
            assert isinstance(msg, UserMessage)
            entry.message, entry.around = msg, _around(msg.text, text, self.lang)
        return entry.index, entry.around

    # ------------------------------------------------------------------ the tree

    def _tree(self, root_id: str, state: ls.LoopState, phase: Phase) -> Section:
        """The tree section, built again only when the workspace's stamp moved (or the
        entry's node or targets did); then only the nodes that changed get a new part."""
        stamp = self._stamp(state.task_path)
        focus = (phase, state.node_id, tuple(state.targets))
        held = self._trees.get(root_id)
        if held is not None and held.key == (stamp, *focus):
            return held.section
        # at the stamp just read (no read of its own): the value held at it, else read now
        ws = repo.load(self.store, state.task_path, stamp=stamp) if stamp is not None else None
        if ws is None or not ws.exists:
            section = Section.text(SectionKind.WORKSPACE_TREE, NO_TREE[self.lang], id="tree")
        else:
            parts = tree_parts(self.store, state.task_path)
            section = tree_section(ws, phase, state.node_id, state.targets, self.lang, parts)
        key = (ws.stamp if ws is not None and ws.exists else None, *focus)
        self._trees[root_id] = _Tree(key, section)
        return section


def _some(part: Part | None) -> tuple[Part, ...]:
    return () if part is None else (part,)


def _input_part(block: InputBlock, *, lead: bool) -> Part:
    node = block.node
    whole = f'node_get {{"node_id": "{node}"}}' if node is not None else None
    text = "\n" + block.text if lead else block.text
    return Part(id=node or block.key, text=text, pinned=True, whole=whole)


def _around(message: str, text: str, lang: Lang) -> tuple[Part | None, Part | None]:
    """The texts merged into the input's message before and after the input (None where
    there is none), as parts under the "new messages" heading."""
    if message == text:  # nothing merged with it (the usual case)
        return _NOTHING
    at = message.find(text)
    if at < 0:
        return _NOTHING
    heading = INPUT_SECTIONS["messages"][lang]

    def part(id: str, chunk: str, template: str) -> Part | None:
        chunk = chunk.strip("\n")
        return Part(id=id, text=template.format(chunk), pinned=True) if chunk else None

    before = part("messages-before", message[:at], heading + "\n{}\n")
    return before, part("messages-after", message[at + len(text) :], "\n" + heading + "\n{}")
