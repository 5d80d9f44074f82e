"""Decides what each parsed tellask does: the routing rules of the anchor, as data.

`route_message` takes the calls parsed from one assistant message and returns one
`Route` per call. It creates nothing: the engine carries routes out in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from mindloop.dialogs.fbr import fbr_session
from mindloop.dialogs.tellask import TellaskCall

RUNTIME_ID = "mindloop"  # responder id on runtime notes
RESERVED = frozenset({"self", "tellasker", "human", RUNTIME_ID})


class RouteKind(StrEnum):
    FAIL = "fail"  # nothing is created; the caller gets a failed tellask_result
    HUMAN = "human"  # Q4H: register a question, suspend
    TELLASK_BACK = "tellask_back"  # ask the direct caller of this side dialog
    FBR = "fbr"  # !?@self: N tool-less side dialogs of the same member
    FRESH = "fresh"  # a new side dialog per target
    SESSION = "session"  # resume or create the registered side dialog member!slug


@dataclass
class Route:
    kind: RouteKind
    call_index: int
    targets: list[str] = field(default_factory=list)
    # The registry session: the `!tellaskSession` slug, except for FBR, whose sessions
    # live in their own namespace (`fbr.fbr_session`) so they never meet a normal one.
    session: str | None = None
    code: str | None = None  # stable error code for FAIL
    message: str = ""  # the note shown to the caller (FAIL) or an extra note
    collective: bool = False


# Error codes and their texts. `{…}` fields are filled from the call.
ERRORS = {
    "ERR_UNKNOWN_TELLASK_TARGET": (
        "Error: tellask is reserved for teammate tellasks (`!?@<teammate>`); `@{target}` is "
        "not a member of this team. Members: {members}."
    ),
    "ERR_INVALID_MULTI_TEAMMATE_TARGETS": (
        "Error: collective tellask names unknown target(s) {unknown}; nothing was sent. "
        "Members: {members}."
    ),
    "ERR_TELLASKER_FROM_ROOT": (
        "Error: `!?@tellasker` is only valid inside a side dialog (to ask back the dialog "
        "that asked you); this is a root dialog."
    ),
    "ERR_TELLASKER_SESSION": (
        "Error: `!?@tellasker` does not accept `!tellaskSession`; ask back without it."
    ),
    "ERR_MULTIPLE_HUMAN_QUESTIONS": (
        "Error: at most one `!?@human` question per message; {n} were written, so none was "
        "asked. Merge them into one question and ask again."
    ),
    "ERR_FBR_DISABLED": (
        "Error: `!?@self` Fresh Boots Reasoning (FBR) is disabled by your team configuration "
        "(fbr-effort: 0 for @{member} in .minds/team.yaml)."
    ),
}

SELF_CALL_NOTE = (
    "Note: you addressed yourself as `@{member}`, which opens a normal side dialog with your "
    "tools. For tool-less Fresh Boots Reasoning use `!?@self`."
)


def _fail(index: int, code: str, **fmt: object) -> Route:
    return Route(RouteKind.FAIL, index, code=code, message=ERRORS[code].format(**fmt))


def route_call(
    call: TellaskCall,
    *,
    caller_member: str,
    caller_is_root: bool,
    members: list[str],
    fbr_effort: int,
) -> Route:
    """Route one parsed call (a `TellaskCall`)."""
    idx = call.index
    err = call.error
    if err is not None:
        return Route(RouteKind.FAIL, idx, code=err.code, message=f"{err.code}: {err.message}")
    mention = call.mention
    session = call.session
    known = ", ".join(f"@{m}" for m in members)
    if mention in members:
        mentioned = [m for m in call.mentions if m not in RESERVED]
        if len(mentioned) >= 2:
            unknown = [m for m in mentioned if m not in members]
            if unknown:
                return _fail(
                    idx,
                    "ERR_INVALID_MULTI_TEAMMATE_TARGETS",
                    unknown=", ".join(f"@{u}" for u in unknown),
                    members=known,
                )
            kind = RouteKind.SESSION if session else RouteKind.FRESH
            return Route(kind, idx, targets=mentioned, session=session, collective=True)
    if mention == "human":
        return Route(RouteKind.HUMAN, idx)
    if mention == "tellasker":
        if caller_is_root:
            return _fail(idx, "ERR_TELLASKER_FROM_ROOT")
        if session:
            return _fail(idx, "ERR_TELLASKER_SESSION")
        return Route(RouteKind.TELLASK_BACK, idx)
    if mention == "self":
        if fbr_effort <= 0:
            return _fail(idx, "ERR_FBR_DISABLED", member=caller_member)
        return Route(RouteKind.FBR, idx, targets=[caller_member], session=fbr_session(session))
    if mention not in members:
        return _fail(idx, "ERR_UNKNOWN_TELLASK_TARGET", target=mention, members=known)
    kind = RouteKind.SESSION if session else RouteKind.FRESH
    note = SELF_CALL_NOTE.format(member=caller_member) if mention == caller_member else ""
    return Route(kind, idx, targets=[mention], session=session, message=note)


def route_message(
    calls: Sequence[TellaskCall],
    *,
    caller_member: str,
    caller_is_root: bool,
    members: list[str],
    fbr_effort: int,
) -> list[Route]:
    """Route every call of one message, applying the message-level rules: at most one
    `@human` question (a second fails them all)."""
    routes = [
        route_call(
            c,
            caller_member=caller_member,
            caller_is_root=caller_is_root,
            members=members,
            fbr_effort=fbr_effort,
        )
        for c in calls
    ]
    humans = [r for r in routes if r.kind is RouteKind.HUMAN]
    if len(humans) > 1:
        for r in humans:
            failed = _fail(r.call_index, "ERR_MULTIPLE_HUMAN_QUESTIONS", n=len(humans))
            r.kind, r.code, r.message = failed.kind, failed.code, failed.message
    return routes


def refuse_route(route: Route, code: str, message: str) -> Route:
    """A route a turn policy does not allow, as a failed route: the model gets a note
    with the code and nothing is created."""
    return Route(RouteKind.FAIL, route.call_index, code=code, message=f"{code}: {message}")
