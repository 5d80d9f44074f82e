"""DO self-repair, L2 of the retry ladder (agent-loop §8.1–8.3): the runtime sees DO's
self-check fail and holds the entry to "N repair attempts, each ending in a full
self-check, each recorded".

The rule, exactly:

- A **self-check** is a `run_shell` call of the DO entry whose command is test runners
  only (`loop.check`, judged as CHECK's shell is: tests, lint, type checks, builds) or
  exactly the `verify` command of a criterion of the entry's node. It **fails** when it
  exits non-zero, times out or is killed; a call refused before it ran is no self-check.
- A failed self-check is a **VERIFY_FAIL** when the entry changed something before it —
  since the entry began, or since its last accepted repair attempt: a file-writing tool
  (the WRITE class of the tool matrix) that succeeded, or a shell command that is not a
  self-check. A failing run before any change is the baseline (what there is to fix).
- After a VERIFY_FAIL, until `retry_propose` records the repair attempt (an accepted L2
  RetryRecord with its reflection and change kind, §8.3) or a later self-check passes,
  the entry changes nothing: file-writing tools, shell commands other than self-checks
  and `node_transition` to COMPLETE are refused with `REPAIR_NOT_PROPOSED` (nothing
  runs; a FORMAT failure of L0, so a model that ignores it ends the phase). Reads,
  self-checks, notes, questions and `phase_end` stay allowed. The calls of one step are
  checked before any of them runs: propose in one step, change in the next.
- A VERIFY_FAIL once the entry's accepted attempts reach `loop.retries.do_repairs` (2)
  ends the entry after its step: the node goes to CHECK_FAILED(DO_EXHAUSTED), for ADJUST
  to analyse (`retry_propose` past the limit ends it the same way).

An attempt's fingerprint (`retry_tool`) is the workspace ref when it is proposed: the
state the failed self-check saw, so a proposal is refused as a repeat when the attempt
before it changed nothing.

Everything is read from the entry's own messages (since its phase input), so it survives
a restart and needs no store writes. The cost stays in DO: `goes_on` looks at the latest
step and walks the entry only when a shell call of it failed (or a change was refused);
`check_arguments` only for calls that could change something, once per step (the state
is kept by history length).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from mindloop.config.loop import LoopConfig
from mindloop.config.loop_check import CheckConfig
from mindloop.dialogs.policy import Refusal
from mindloop.loop.ladder import FailureClass, Outcome
from mindloop.loop.phase_calls import SHELL_TOOLS, EntryLookup, call_arguments
from mindloop.loop.phase_texts import INPUT_HEADER
from mindloop.loop.phases import Phase, ToolClass, tool_class
from mindloop.loop.retry_tool import L2_ACCEPTED, RETRY_TOOL
from mindloop.loop.runners import Runners, same_command
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

REPAIR_NOT_PROPOSED = "REPAIR_NOT_PROPOSED"
TRANSITION = "node_transition"
MANUAL = "MANUAL:"
_SHOWN = 200  # characters of a command quoted in a refusal or a reason
_KEEP = 1_000  # dialogs whose state is kept

# how a phase input of DO begins, in every work language (the entry starts after it)
_DO_MARKS = tuple(h.split("{phase}")[0] + Phase.DO.value for h in INPUT_HEADER.values())


class VerifyFail(BaseModel):
    """A failed self-check that counts (VERIFY_FAIL): the command and how it ended."""

    model_config = ConfigDict(frozen=True)

    command: str
    status: str  # the result's first line: "exit code 1", "timed out after 60s; …"

    def text(self) -> str:
        cmd = self.command if len(self.command) <= _SHOWN else self.command[: _SHOWN - 1] + "…"
        return f"`{cmd}` → {self.status}"


class RepairState(BaseModel):
    """Where a DO entry stands on L2: the unanswered VERIFY_FAIL, if any, and the repair
    attempts accepted in the entry."""

    model_config = ConfigDict(frozen=True)

    pending: VerifyFail | None = None
    attempts: int = 0


class DoExhausted(BaseModel):
    """A VERIFY_FAIL with no repair attempt left: the entry ends, its node CHECK_FAILED."""

    model_config = ConfigDict(frozen=True)

    failure: VerifyFail
    attempts: int
    limit: int

    def reason(self) -> str:
        return (
            f"{Outcome.DO_EXHAUSTED}: the self-check failed ({FailureClass.VERIFY_FAIL}: "
            f"{self.failure.text()}) with {self.attempts} of {self.limit} self-repair "
            "attempts of this DO entry used (loop.retries.do_repairs)"
        )


def shell_passed(content: str) -> bool | None:
    """How a `run_shell` result ended: True (exit code 0), False (non-zero, timed out,
    killed), None (it did not run: refused, a bad cwd, interrupted)."""
    first = content.split("\n", 1)[0]
    if first.startswith("exit code "):
        return first == "exit code 0"
    if first.startswith(("timed out after ", "killed by signal ")):
        return False
    return None


def entry_start(messages: Sequence[ChatMessage]) -> int:
    """Where the current DO entry's messages begin: after its phase input (0: not seen,
    e.g. a history cleared since)."""
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, UserMessage) and any(mark in msg.text for mark in _DO_MARKS):
            return i + 1
    return 0


def repair_state(
    messages: Sequence[ChatMessage], is_check: Callable[[str], bool], start: int | None = None
) -> RepairState:
    """The entry's L2 state, from its messages (see the module doc): `is_check(command)`
    says whether a shell command is a self-check; `start`: where the entry begins, if
    known (`entry_start`)."""
    calls: dict[str, ToolCall] = {}
    changed = False
    pending: VerifyFail | None = None
    attempts = 0
    for msg in messages[entry_start(messages) if start is None else start :]:
        if isinstance(msg, AssistantMessage):
            for c in msg.tool_calls:
                calls[c.id] = c
            continue
        if not isinstance(msg, ToolResultMessage):
            continue
        call = calls.get(msg.call_id)
        if call is None:
            continue
        if call.name == RETRY_TOOL:
            if msg.content.startswith(L2_ACCEPTED):
                attempts, pending, changed = attempts + 1, None, False
        elif call.name in SHELL_TOOLS:
            passed = shell_passed(msg.content)
            command = (call_arguments(call.arguments) or {}).get(SHELL_TOOLS[call.name])
            if passed is None or not isinstance(command, str):
                continue
            if not is_check(command):
                changed = True  # any other command may have changed files
            elif passed:
                pending = None
            elif changed:
                pending = VerifyFail(command=command, status=msg.content.split("\n", 1)[0])
        elif tool_class(call.name) is ToolClass.WRITE and not msg.is_error:
            changed = True
    return RepairState(pending=pending, attempts=attempts)


def _last_step_failed(messages: Sequence[ChatMessage]) -> bool:
    """Whether the latest step has a failed shell call or a refused change (the only
    steps after which the entry may have to end)."""
    prefix = f"Error [{REPAIR_NOT_PROPOSED}]"
    for msg in reversed(messages):
        if isinstance(msg, ToolResultMessage):
            if msg.content.startswith(prefix):
                return True
            if msg.name in SHELL_TOOLS and shell_passed(msg.content) is False:
                return True
        elif isinstance(msg, AssistantMessage):
            return False
    return False


class SelfRepair:
    """L2 for the DO phase's turn policy: the refusal of changes after a VERIFY_FAIL
    (`refusal`) and the end of the entry when no attempt is left (`exhausted`)."""

    def __init__(self, entry_of: EntryLookup | None) -> None:
        self._entry_of = entry_of
        # `loop.check` compiled, and whether a command is test runners only, per command
        self._runners: tuple[CheckConfig, Runners, dict[str, bool]] | None = None
        # dialog id -> (the history list, its length, the state then)
        self._held: dict[str, tuple[int, int, RepairState]] = {}
        # dialog id -> (the history list, where its entry starts, the node's verify commands)
        self._verify: dict[str, tuple[int, int, list[str]]] = {}

    def state(
        self, dialog_id: str, messages: Sequence[ChatMessage], check: CheckConfig
    ) -> RepairState:
        key = (id(messages), len(messages))
        held = self._held.get(dialog_id)
        if held is not None and held[:2] == key:
            return held[2]
        start = entry_start(messages)
        found = repair_state(messages, self._checker(dialog_id, check, messages, start), start)
        if len(self._held) >= _KEEP:
            self._held.clear()
        self._held[dialog_id] = (*key, found)
        return found

    def refusal(
        self,
        dialog_id: str,
        messages: Sequence[ChatMessage],
        call: ToolCall,
        loop: LoopConfig,
    ) -> Refusal | None:
        """A call that would change something while a VERIFY_FAIL is unanswered."""
        name = call.name
        command: str | None = None
        if name in SHELL_TOOLS:
            found = (call_arguments(call.arguments) or {}).get(SHELL_TOOLS[name])
            command = found if isinstance(found, str) else None
            what = "a shell command that is not a self-check"
        elif name == TRANSITION:
            if (call_arguments(call.arguments) or {}).get("to") != "COMPLETE":
                return None
            what = "COMPLETE (it needs a self-check that passes)"
        elif tool_class(name) is ToolClass.WRITE:
            what = f"{name} (a change)"
        else:
            return None
        st = self.state(dialog_id, messages, loop.check)
        if st.pending is None:
            return None
        if command is not None and self._checker(
            dialog_id, loop.check, messages, entry_start(messages)
        )(command):
            return None  # running the self-check again changes nothing
        limit = loop.retries.do_repairs
        return Refusal(
            REPAIR_NOT_PROPOSED,
            f"the self-check failed ({FailureClass.VERIFY_FAIL}: {st.pending.text()}) and "
            f"no repair attempt is recorded since, so {what} is not allowed. Before "
            f"changing anything, propose repair attempt {st.attempts + 1} of {limit} "
            "(loop.retries.do_repairs) with retry_propose (failure_class VERIFY_FAIL, the "
            "failing output as evidence, a reflection, the change you will make), in a step "
            "of its own; reads and the self-check may run meanwhile. Nothing was run",
        )

    def exhausted(
        self, dialog_id: str, messages: Sequence[ChatMessage], loop: LoopConfig
    ) -> DoExhausted | None:
        """The entry must end: a VERIFY_FAIL with the repair attempts used up."""
        if not _last_step_failed(messages):
            return None
        st = self.state(dialog_id, messages, loop.check)
        limit = loop.retries.do_repairs
        if st.pending is None or st.attempts < limit:
            return None
        return DoExhausted(failure=st.pending, attempts=st.attempts, limit=limit)

    # ------------------------------------------------------------------ helpers

    def _checker(
        self, dialog_id: str, check: CheckConfig, messages: Sequence[ChatMessage], start: int
    ) -> Callable[[str], bool]:
        """Whether a command is a self-check: test runners only (judged once per command),
        or a `verify` command of the entry's node (read once per entry, and only for a
        command no runner pattern names)."""
        runner_only = self._runner_only(check)
        verifies: list[str] | None = None

        def is_check(command: str) -> bool:
            nonlocal verifies
            if runner_only(command):
                return True
            if verifies is None:
                verifies = self._verifies(dialog_id, messages, start)
            return any(same_command(v, command) for v in verifies)

        return is_check

    def _verifies(self, dialog_id: str, messages: Sequence[ChatMessage], start: int) -> list[str]:
        held = self._verify.get(dialog_id)
        if held is not None and held[:2] == (id(messages), start):
            return held[2]
        entry = self._entry_of(dialog_id) if self._entry_of is not None else None
        node = None
        if entry is not None and entry.node_id is not None:
            node = entry.workspace().nodes.get(entry.node_id)
        found = [
            c.verify
            for c in (node.acceptance_criteria if node is not None else ())
            if c.verify and not c.verify.startswith(MANUAL)
        ]
        if len(self._verify) >= _KEEP:
            self._verify.clear()
        self._verify[dialog_id] = (id(messages), start, found)
        return found

    def _runner_only(self, check: CheckConfig) -> Callable[[str], bool]:
        held = self._runners
        if held is None or held[0] is not check:
            held = self._runners = (check, Runners(check), {})
        _, runners, seen = held

        def judge(command: str) -> bool:
            found = seen.get(command)
            if found is None:
                if len(seen) >= _KEEP:
                    seen.clear()
                found = seen[command] = runners.refusal(command) is None
            return found

        return judge
