"""The tool matrix's cells that depend on a call's arguments (agent-loop §3, §4), checked
before the call runs: the turn policy's `check_arguments` asks `PhaseCalls.refusal`.

- `phase_end`: a `next_behavior` the ended phase may not give (§4's table of legal hints)
  is refused with `HINT_ILLEGAL`: the hint is dropped, the phase goes on, and the error
  is the model's repair prompt, a FORMAT failure counted toward L0 (§8.2) — the third in
  a row ends the phase with FORMAT_EXHAUSTED like any format failure. (WAIT without a
  registered wait, and PLAN after a spent re-plan, depend on what the step registers and
  on the task; routing drops those, `routing.hint_problem`.)
- the shell in a phase whose row says "test runners only" (CHECK): `runners.Runners`
  over `loop.check`, or verbatim a `verify` command of a node under check;
- node tools (`NODE_ARGS`) in a phase whose row limits the nodes (`PhaseSpec.node_scope`:
  DO its own node, CHECK the nodes under check) or the fields `node_update` may set
  (`PhaseSpec.node_fields`).

Everything else is refused with `TOOL_NOT_ALLOWED_IN_PHASE`, counted like the tool-level
refusals. Only these calls are looked at, so the check costs nothing for the others; the
entry (its node, its targets) is read from the store only for a call that needs it.
Arguments that do not parse are left to the tool, whose own error names them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mindloop.config.loop_check import CheckConfig
from mindloop.dialogs.policy import Refusal
from mindloop.loop.phases import (
    PHASE_END,
    TOOL_NOT_ALLOWED_IN_PHASE,
    UPDATE_FIELDS,
    Hint,
    NodeScope,
    PhaseSpec,
    ShellScope,
)
from mindloop.loop.routing import HINT_ILLEGAL
from mindloop.loop.runners import Runners, same_command
from mindloop.store import Store
from mindloop.store import loop_state as ls
from mindloop.workspace import repo
from mindloop.workspace.state import WorkspaceState

SHELL_TOOLS: dict[str, str] = {"run_shell": "command"}  # tool -> its command argument
# Tools that act on one node, and the argument naming it.
NODE_ARGS: dict[str, str] = {
    "node_update": "node_id",
    "node_transition": "node_id",
    "node_dispatch": "node_id",
    "node_reference": "node_id",
    "node_add_deps": "node_id",
    "node_split": "parent_id",
    "doc_lookup": "node_id",  # optional: it then references the docs found on the node
}


@dataclass(frozen=True)
class Entry:
    """The phase entry a call belongs to, as the checks need it."""

    node_id: str | None  # DO's node
    targets: tuple[str, ...]  # CHECK's nodes
    workspace: Callable[[], WorkspaceState]  # read only when a check needs it


_HINTS = frozenset(h.value for h in Hint)
EntryLookup = Callable[[str], "Entry | None"]  # loop root id -> its current entry


def store_entries(store_of: Callable[[], Store | None]) -> EntryLookup:
    """Entries as the store holds them (one indexed read of the loop state per call that
    needs one; the workspace, cached, only for a shell command no runner pattern names)."""

    def entry_of(root_id: str) -> Entry | None:
        store = store_of()
        state = ls.by_root(store, root_id) if store is not None else None
        if store is None or state is None or not state.in_phase:
            return None
        task = state.task_path
        return Entry(state.node_id, tuple(state.targets), lambda: repo.load(store, task))

    return entry_of


def call_arguments(raw: str) -> dict[str, Any] | None:
    """A call's arguments as an object, or None when they are not one."""
    try:
        found = json.loads(raw or "{}")
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


class PhaseCalls:
    """The argument-level checks of one phase's row."""

    def __init__(self, spec: PhaseSpec) -> None:
        self.spec = spec
        self.phase = spec.phase
        self._runners: tuple[CheckConfig, Runners] | None = None
        watched = {PHASE_END}
        if spec.shell is not ShellScope.ANY:
            watched |= set(SHELL_TOOLS)
        if spec.node_scope is not NodeScope.ANY or spec.node_fields != UPDATE_FIELDS:
            watched |= set(NODE_ARGS)
        self.watched = frozenset(watched)

    def refusal(
        self,
        root_id: str,
        name: str,
        raw_args: str,
        check: CheckConfig,
        entry_of: EntryLookup | None,
    ) -> Refusal | None:
        if name not in self.watched:
            return None
        args = call_arguments(raw_args)
        if args is None:
            return None
        if name == PHASE_END:
            return self._hint(args)
        if name in SHELL_TOOLS:
            return self._shell(root_id, args.get(SHELL_TOOLS[name]), check, entry_of)
        return self._node(root_id, name, args, entry_of)

    # ------------------------------------------------------------------ the checks

    def _hint(self, args: dict[str, Any]) -> Refusal | None:
        hint = args.get("next_behavior")
        legal = self.spec.hints
        if not isinstance(hint, str) or hint in legal:
            return None
        if hint not in _HINTS:
            return None  # not a hint at all: the schema's error says so
        return Refusal(
            HINT_ILLEGAL,
            f"{hint} is not a legal hint after {self.phase} (legal: {', '.join(legal)}); "
            "the hint is dropped and the phase has not ended: call phase_end again with a "
            "legal hint",
        )

    def _shell(
        self, root_id: str, command: object, check: CheckConfig, entry_of: EntryLookup | None
    ) -> Refusal | None:
        if not isinstance(command, str):
            return None
        runners = self._runners_for(check)
        why = runners.refusal(command)
        if why is None:
            return None
        entry = entry_of(root_id) if entry_of is not None else None
        if entry is not None and entry.targets:
            ws = entry.workspace()
            for node_id in entry.targets:
                node = ws.nodes.get(node_id)
                for c in node.acceptance_criteria if node is not None else ():
                    if c.verify and same_command(c.verify, command):
                        return None
        return Refusal(
            TOOL_NOT_ALLOWED_IN_PHASE,
            f"in phase {self.phase} the shell runs test runners only (agent-loop §3): {why}. "
            f"Allowed: commands of loop.check.test_runners ({runners.hint()}), piped into "
            "loop.check.pipe_filters, or exactly the verify command of a criterion of a node "
            "under check; nothing was run",
        )

    def _node(
        self, root_id: str, name: str, args: dict[str, Any], entry_of: EntryLookup | None
    ) -> Refusal | None:
        spec = self.spec
        if name == "node_update":
            given = sorted(f for f in UPDATE_FIELDS if args.get(f) is not None)
            barred = [f for f in given if f not in spec.node_fields]
            if barred:
                may = ", ".join(sorted(spec.node_fields))
                return Refusal(
                    TOOL_NOT_ALLOWED_IN_PHASE,
                    f"in phase {self.phase} node_update may set {may} only, not "
                    f"{', '.join(barred)} (agent-loop §3); nothing was changed",
                )
        node_id = args.get(NODE_ARGS[name])
        if spec.node_scope is NodeScope.ANY or not isinstance(node_id, str):
            return None
        entry = entry_of(root_id) if entry_of is not None else None
        if entry is None:  # not a running loop entry (a test's bare policy): no scope
            return None
        mine: tuple[str, ...]
        if spec.node_scope is NodeScope.OWN:
            mine = (entry.node_id,) if entry.node_id else ()
            what = f"the node being worked ({entry.node_id or 'none'})"
            elsewhere = "; other nodes are PLAN's and ADJUST's"
        else:
            mine = entry.targets
            what = f"the nodes under check ({', '.join(mine) or 'none'})"
            elsewhere = "; the others are checked when they are COMPLETE"
        if node_id in mine:
            return None
        return Refusal(
            TOOL_NOT_ALLOWED_IN_PHASE,
            f"in phase {self.phase} {name} acts only on {what}, not on {node_id} "
            f"(agent-loop §3){elsewhere}; nothing was changed",
        )

    def _runners_for(self, check: CheckConfig) -> Runners:
        held = self._runners
        if held is None or held[0] is not check:
            held = self._runners = (check, Runners(check))
        return held[1]
