"""The one gate every agent-supplied path passes before a file tool touches the disk.

Agents name paths freely (relative, absolute, with `..`, through symlinks, in any letter
case); this module turns such a name into an absolute path strictly inside the rtws, or
refuses it with a text the model can act on. Encapsulated state — `.minds/` (human-owned
configuration), `.mindloop/` (runtime state) and every `*.tsk` Taskdoc package — is refused
for every mode whatever the member's ACLs say, because those have dedicated tools and a
general file tool touching them would bypass their rules and audit.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

import pathspec

from mindloop.errors import MindloopError
from mindloop.tools.base import Acl, ToolContext, printable

Mode = Literal["read", "write", "list", "search"]

_DENIED = "ACCESS_DENIED"


class AccessDenied(MindloopError):
    """A path an agent may not use; `str(err)` starts with "ACCESS_DENIED:"."""


@dataclass(frozen=True)
class _EncapsulationRule:
    """One kind of encapsulated state: how to recognise a path component, and what to say."""

    kind: str
    matches_suffix: str | None
    matches_name: str | None
    why: str
    instead: str

    def matches(self, component: str) -> bool:
        # Trailing dots/spaces are ignored so Windows-style aliases (`a.tsk.`) cannot slip by.
        name = component.lower().rstrip(" .")
        if not name:
            return False
        if self.matches_name is not None and name == self.matches_name:
            return True
        return self.matches_suffix is not None and name.endswith(self.matches_suffix)


# Order matters only for which explanation wins when a path hits several rules.
ENCAPSULATION_RULES: tuple[_EncapsulationRule, ...] = (
    _EncapsulationRule(
        kind="taskdoc",
        matches_suffix=".tsk",
        matches_name=None,
        why="it is inside an encapsulated Taskdoc package (`*.tsk`), which general file tools "
        "may not read, write, list or search",
        instead="Use `change_mind` to update a Taskdoc section and `recall_taskdoc` to read an "
        "extra section (bearinmind/* or <category>/<selector>); goals, constraints and progress "
        "are already injected into your context.",
    ),
    _EncapsulationRule(
        kind="minds",
        matches_suffix=None,
        matches_name=".minds",
        why="`.minds/` is human-owned team configuration, not reachable by agent file tools",
        instead="Ask a human to change team configuration; use the memory tools to read or "
        "write memory.",
    ),
    _EncapsulationRule(
        kind="mindloop",
        matches_suffix=None,
        matches_name=".mindloop",
        why="`.mindloop/` holds the runtime's own state, not reachable by agent file tools",
        instead="Use the dialog and Taskdoc tools; runtime state is managed by mindloop itself.",
    ),
)


def _split_components(path: str) -> list[str]:
    """Components of an rtws-relative path. `/` is the only separator: agent paths with a
    `\\` are refused, and on disk a `\\` is an ordinary character of a name (as the file
    system sees it), never a separator."""
    return [c for c in path.split("/") if c]


def _encapsulation_hit(components: list[str]) -> tuple[_EncapsulationRule, str] | None:
    for rule in ENCAPSULATION_RULES:
        for component in components:
            if rule.matches(component):
                return rule, component
    return None


def is_encapsulated(rel_path: str) -> bool:
    """True if any component of an rtws-relative path is encapsulated state.

    Listings and search use this to hide package contents without raising.
    """
    return _encapsulation_hit(_split_components(rel_path)) is not None


def _deny(raw: str, why: str, instead: str) -> AccessDenied:
    shown = raw if len(raw) <= 200 else raw[:200] + "…"
    return AccessDenied(f"{_DENIED}: `{shown}`: {why}. {instead}")


def _deny_encapsulated(raw: str, hit: tuple[_EncapsulationRule, str]) -> AccessDenied:
    rule, component = hit
    return _deny(raw, f"{rule.why} (component `{component}`)", rule.instead)


# ---------------------------------------------------------------------------------------
# ACLs


@lru_cache(maxsize=256)
def _spec(patterns: tuple[str, ...]) -> pathspec.PathSpec:
    """Compile ACL globs; `dir` and `dir/**` both cover the directory itself and below.
    The directory line added for `dir/**` keeps the pattern's anchoring: `new/**` is
    anchored at the rtws (gitignore: a slash before the end), and so is its `new` (alone,
    gitignore would match a `new` at any depth)."""
    lines: list[str] = []
    for pattern in patterns:
        p = pattern.strip().replace("\\", "/")
        if not p:
            continue
        lines.append(p)
        base = p.removesuffix("/**").rstrip("/")
        if base and base != p:
            anchored = "/" in p.rstrip("/")
            lines.append(f"/{base}" if anchored and "/" not in base else base)
    return pathspec.PathSpec.from_lines("gitignore", lines)


def _matches(patterns: tuple[str, ...], rel: str) -> bool:
    if not patterns:
        return False
    spec = _spec(patterns)
    return spec.match_file(rel) or spec.match_file(rel + "/")


def _literal_prefix(pattern: str) -> str:
    """The directory part of a glob before its first wildcard (`src/a/*.py` → `src/a`)."""
    parts: list[str] = []
    for part in _split_components(pattern.replace("\\", "/")):  # as `_spec` reads it
        if any(ch in part for ch in "*?["):
            break
        parts.append(part)
    return "/".join(parts)


def is_ancestor_of_readable(rel: str, acl: Acl) -> bool:
    """True if `rel` is a directory on the way to some `read_dirs` scope.

    Lets a member restricted to `src/**` still list `.` to find `src/`.
    """
    if rel in ("", "."):
        return bool(acl.read_dirs)
    prefix = rel.rstrip("/") + "/"
    return any(_literal_prefix(p).startswith(prefix) for p in acl.read_dirs)


def acl_allows(rel: str, acl: Acl, mode: Mode) -> bool:
    """Whether the member's ACLs allow `mode` on an rtws-relative path (encapsulation aside)."""
    rel = rel.strip("/") or "."
    if mode == "write":
        if _matches(acl.no_write_dirs, rel):
            return False
        return not acl.write_dirs or _matches(acl.write_dirs, rel)
    if _matches(acl.no_read_dirs, rel):
        return False
    if not acl.read_dirs or _matches(acl.read_dirs, rel):
        return True
    return mode in ("list", "search") and is_ancestor_of_readable(rel, acl)


def is_visible(rel: str, acl: Acl) -> bool:
    """Whether a listing or search may show this rtws-relative entry at all."""
    return not is_encapsulated(rel) and acl_allows(rel, acl, "list")


def _scopes(acl: Acl, mode: Mode) -> str:
    """The member's scopes for `mode`, as shown in refusals."""
    if mode == "write":
        allowed, denied, verb = acl.write_dirs, acl.no_write_dirs, "writable"
    else:
        allowed, denied, verb = acl.read_dirs, acl.no_read_dirs, "readable"
    scope = f"{verb}: {', '.join(allowed)}" if allowed else f"{verb}: everything"
    return scope + (f"; never {verb}: {', '.join(denied)}" if denied else "")


def _acl_scope(acl: Acl, mode: Mode) -> str:
    """Why an ACL refuses `mode` on an entry (`may not be written by you (…)`)."""
    verb = "written" if mode == "write" else "read"
    return f"may not be {verb} by you ({_scopes(acl, mode)})"


def _acl_denial(raw: str, acl: Acl, mode: Mode) -> AccessDenied:
    if mode == "write":
        return _deny(
            raw,
            f"your directory ACLs do not allow writing here ({_scopes(acl, mode)})",
            "Write inside your writable directories or ask a teammate who may.",
        )
    return _deny(
        raw,
        f"your directory ACLs do not allow reading here ({_scopes(acl, mode)})",
        "Stay inside your readable directories or ask a teammate who may.",
    )


# ---------------------------------------------------------------------------------------
# Resolution


def rtws_root(ctx_or_rtws: ToolContext | Path | str) -> Path:
    """The symlink-free absolute rtws path everything is compared against."""
    base = ctx_or_rtws.rtws if isinstance(ctx_or_rtws, ToolContext) else Path(ctx_or_rtws)
    return Path(os.path.realpath(base))


def relative_to_rtws(root: Path, path: Path) -> str:
    """Posix rtws-relative form of an absolute path known to be inside `root`."""
    rel = path.relative_to(root).as_posix()
    return rel or "."


def _literal_components(raw: str, candidates: tuple[str, ...]) -> list[str] | None:
    """Components of `raw` below the rtws as written (before any `..` is folded).

    Returns None if an absolute path does not start inside the rtws even after lexical
    normalisation.
    """
    if not os.path.isabs(raw):
        return _split_components(raw)
    for attempt in (raw, os.path.normpath(raw)):
        for base in candidates:
            if attempt == base or attempt.startswith(base.rstrip(os.sep) + os.sep):
                return _split_components(attempt[len(base) :])
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class _TextRule:
    """One thing an agent path may not contain, and why."""

    refuses: Callable[[str], bool]
    why: str


_PLAIN_PATH = "Write a plain rtws-relative path, with `/` between names."

# What the text of every component below the rtws must not be. Each refusal closes a gap
# between what the guard checks and what the file system does: a `\\` is a separator to an
# ACL glob but a name character to the file system; whitespace around a name names a
# different entry than it seems (` link` is not `link`); a lone surrogate is no text at all.
_COMPONENT_RULES: tuple[_TextRule, ...] = (
    _TextRule(
        lambda c: "\\" in c,
        "the path contains a backslash (`\\`): mindloop paths separate names with `/` only, "
        "and a name may not contain `\\`",
    ),
    _TextRule(
        lambda c: c != c.strip(),
        "a name in the path has leading or trailing whitespace, which would name a "
        "different entry than it seems",
    ),
    _TextRule(
        lambda c: _SURROGATE.search(c) is not None,
        "the path contains a lone surrogate (text that is not valid Unicode)",
    ),
)


@dataclass(frozen=True)
class _Named:
    """An agent path parsed: the rtws, the components as written, and how to show it."""

    root: Path
    shown: str
    literal: list[str]


def _parse(ctx_or_rtws: ToolContext | Path | str, raw: str) -> _Named:
    given = ctx_or_rtws.rtws if isinstance(ctx_or_rtws, ToolContext) else Path(ctx_or_rtws)
    shown = printable(scrub_rtws(raw, given))
    if "\x00" in raw:
        raise _deny(shown, "the path contains a NUL byte", _PLAIN_PATH)
    raw = raw or "."
    root = rtws_root(ctx_or_rtws)
    literal = _literal_components(raw, _root_forms(given))
    if literal is None:
        raise _deny(
            shown, "absolute paths must point inside the rtws", "Use a path relative to the rtws."
        )
    # Encapsulation first, with `\\` read as a separator too: the path is refused either
    # way, and `tasks\\x.tsk\\goals.md` clearly means the package, so say what to use.
    hit = _encapsulation_hit([p for c in literal for p in c.split("\\") if p])
    if hit is not None:
        raise _deny_encapsulated(shown, hit)
    for rule in _COMPONENT_RULES:
        if any(rule.refuses(c) for c in literal):
            raise _deny(shown, rule.why, _PLAIN_PATH)
    return _Named(root, shown, literal)


def _guard(named: _Named, path: Path, acl: Acl, mode: Mode) -> str:
    """Refuse `path` (absolute, symlink-free up to its last component) unless it is inside
    the rtws, not encapsulated and allowed by the ACLs; returns it rtws-relative."""
    root = named.root
    if path != root and root not in path.parents:
        raise _deny(
            named.shown,
            "the path resolves outside the rtws (through `..`, an absolute path or a symlink)",
            "Only paths inside the rtws are reachable.",
        )
    rel = relative_to_rtws(root, path)
    hit = _encapsulation_hit(_split_components(rel))
    if hit is not None:
        raise _deny_encapsulated(named.shown, hit)
    if not acl_allows(rel, acl, mode):
        raise _acl_denial(named.shown, acl, mode)
    return rel


def _resolve(
    ctx_or_rtws: ToolContext | Path | str, raw: str, acl: Acl, mode: Mode
) -> tuple[_Named, Path]:
    named = _parse(ctx_or_rtws, raw)
    # realpath resolves every existing component (symlinks included) and keeps the
    # not-yet-existing tail, so a file about to be created is judged by where it would land.
    resolved = Path(os.path.realpath(os.path.join(named.root, *named.literal)))
    _guard(named, resolved, acl, mode)
    # Deny lists also apply to the name as written, so a symlink cannot launder a path
    # the member was explicitly kept out of.
    lexical_rel = os.path.normpath("/".join(named.literal)) if named.literal else "."
    deny = acl.no_write_dirs if mode == "write" else acl.no_read_dirs
    if not lexical_rel.startswith("..") and _matches(deny, lexical_rel):
        raise _acl_denial(named.shown, acl, mode)
    return named, resolved


def resolve_agent_path(
    ctx_or_rtws: ToolContext | Path | str, raw: str, acl: Acl, mode: Mode
) -> Path:
    """Resolve an agent-supplied path to an absolute, symlink-free path inside the rtws.

    Raises AccessDenied (text starting "ACCESS_DENIED:") when the path escapes the rtws,
    contains a NUL byte, a backslash, a lone surrogate or a name with surrounding
    whitespace, names encapsulated state (checked on the path as written and on the
    symlink-resolved path, case-insensitively), or is outside the member's ACLs.
    """
    return _resolve(ctx_or_rtws, raw, acl, mode)[1]


def resolve_entry(ctx_or_rtws: ToolContext | Path | str, raw: str, acl: Acl, mode: Mode) -> Path:
    """The directory entry `raw` names, for acting on the entry itself (move, delete).

    Its parent is resolved and its last component kept, so a final symlink is moved or
    deleted itself, never followed to its target. Both the entry and what it leads to pass
    the guard for `mode` (a link may not be removed from a directory the member may not
    write, nor stand in for a target it may not touch).
    """
    named, resolved = _resolve(ctx_or_rtws, raw, acl, mode)
    if not named.literal or named.literal[-1] in (".", ".."):
        return resolved
    parent = Path(os.path.realpath(os.path.join(named.root, *named.literal[:-1])))
    entry = parent / named.literal[-1]
    if entry == resolved or not os.path.islink(entry):
        return resolved
    _guard(named, entry, acl, mode)
    return entry


def guard_subtree(
    ctx_or_rtws: ToolContext | Path | str,
    raw: str,
    directory: Path,
    acl: Acl,
    modes: tuple[Mode, ...],
    *,
    action: str,
    landing: Path | None = None,
) -> None:
    """Refuse to act on `directory` as a whole (a move or a delete, named `action`) when
    anything beneath it is encapsulated state or denied to the member for one of `modes`;
    with `landing` (a move's destination), also when an entry would land where the member
    may not write. Acting through a parent must not reach what acting on the entry
    directly would be refused (issue: `delete notes` removing a never-writable
    `notes/private`, `move notes` carrying a never-readable file to a readable place).
    """
    root = rtws_root(ctx_or_rtws)
    given = ctx_or_rtws.rtws if isinstance(ctx_or_rtws, ToolContext) else Path(ctx_or_rtws)
    shown = printable(scrub_rtws(raw, given))

    def refuse(rel: str, why: str) -> AccessDenied:
        return _deny(
            shown,
            f"`{printable(rel)}` beneath it {why}, so it cannot be {action} as a whole",
            "Act on the entries you may, one by one; leave the rest to who may.",
        )

    def walk_error(err: OSError) -> None:  # what cannot be checked is not acted on
        raise err

    for dirpath, dirnames, filenames in os.walk(directory, onerror=walk_error):
        for name in sorted([*dirnames, *filenames]):
            path = Path(dirpath) / name
            rel = relative_to_rtws(root, path)
            if is_encapsulated(name):
                raise _deny(
                    shown,
                    f"it contains encapsulated state (`{printable(rel)}`), which general file "
                    f"tools may not move or delete",
                    "Use `change_mind` / `recall_taskdoc` for Taskdoc packages; leave "
                    "`.minds/` and `.mindloop/` to humans and the runtime.",
                )
            for mode in modes:
                if not acl_allows(rel, acl, mode):
                    raise refuse(rel, _acl_scope(acl, mode))
            if landing is not None:
                dest = relative_to_rtws(root, landing / path.relative_to(directory))
                if not acl_allows(dest, acl, "write"):
                    raise refuse(
                        rel, f"would land at `{printable(dest)}`, " + _acl_scope(acl, "write")
                    )


# ---------------------------------------------------------------------------------------
# Errors the model sees


def _root_forms(rtws: Path | str) -> tuple[str, ...]:
    """Every spelling of the rtws an OS message may carry (symlink-free and as given),
    longest first."""
    forms = {os.path.realpath(rtws), os.path.abspath(rtws)}
    return tuple(sorted(forms, key=len, reverse=True))


def shown_path(name: str | bytes | int | None, rtws: Path | str) -> str:
    """A file name from an OS error as the model may see it: rtws-relative, shortened;
    never a host path outside the rtws."""
    if name is None or isinstance(name, int):
        return ""
    text = os.fsdecode(name)
    for form in _root_forms(rtws):
        if text == form:
            text = "."
            break
        if text.startswith(form.rstrip(os.sep) + os.sep):
            text = text[len(form.rstrip(os.sep)) + 1 :]
            break
    else:
        if os.path.isabs(text):
            return "(a path outside the rtws)"
    text = printable(text)
    return text if len(text) <= 200 else text[:200] + "…"


def os_error_text(err: OSError, rtws: Path | str) -> str:
    """The one rendering of a file-system error for a tool result: the reason and the
    rtws-relative names involved (`File name too long: \\`a/…\\``), never the host path."""
    reason = err.strerror or scrub_rtws(str(err), rtws) or type(err).__name__
    names = [shown_path(n, rtws) for n in (err.filename, err.filename2)]
    names = [f"`{n}`" for n in names if n]
    return f"{reason}: {' -> '.join(names)}" if names else reason


def scrub_rtws(text: str, rtws: Path | str) -> str:
    """`text` with every spelling of the rtws path replaced by rtws-relative names."""
    for form in _root_forms(rtws):
        if form == os.sep:  # an rtws at `/` leaves nothing to hide
            continue
        text = text.replace(form.rstrip(os.sep) + os.sep, "").replace(form, ".")
    return text
