"""CHECK's shell: test runners only (agent-loop §3). CHECK verifies; it must not fix
anything nor write anything but its report, so its shell may run only what tests.

`Runners.refusal(command)` judges a command line against `loop.check`: it is allowed when
every simple command in it is a test runner (`test_runners`), or, after a pipe, a
read-only filter (`pipe_filters`), and none carries an argument that makes a checker a
fixer (`refused_args`, e.g. `--fix`). The caller also allows, verbatim, the `verify`
command of a criterion of a node under check: by definition that is the node's test.

The line is split as the shell would (`shlex`, punctuation as operators): at newlines,
`;`, `&&`, `||`, `|`, `|&` and `&` into simple commands. Anything that could run or write
something no pattern names is refused outright: command substitution (`$( )`, backticks),
subshells and groups (parentheses), process substitution, here-documents, and
redirections other than to `/dev/null` or between descriptors (`2>&1`). A pattern matches
a simple command when its words match the command's first words (globs, `fnmatch`); a
pattern's first word without a `/` is compared with the program's base name. Quoted
operators (`-k ";"`) are refused too: the split does not see quotes, and a false refusal
only costs the model a repair, where a false acceptance would let CHECK write.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from mindloop.config.loop_check import CheckConfig, command_words

SEPARATORS = frozenset({";", "&&", "||", "|", "|&", "&"})
PIPES = frozenset({"|", "|&"})
TO_NULL = frozenset({">", ">>", "&>", "&>>", ">|"})  # allowed only into /dev/null
DUP = frozenset({">&", "<&"})  # allowed only between descriptors (`2>&1`, `>&-`)
_PUNCT = frozenset("();<>|&")
_FD = re.compile(r"^(\d+|-)$")


def _is_operator(token: str) -> bool:
    return bool(token) and all(c in _PUNCT for c in token)


@dataclass(frozen=True)
class Segment:
    words: tuple[str, ...]
    piped: bool  # it reads a pipe (a filter may stand here)


class Refused(ValueError):
    """Why a command line is not test runners only."""


def segments(command: str) -> list[Segment]:
    """The simple commands of `command`, or `Refused` for syntax that could run or write
    something no pattern names (see the module doc)."""
    if "`" in command or "$(" in command:
        raise Refused("command substitution ($( ) or backticks) is not allowed")
    out: list[Segment] = []
    for line in command.splitlines():
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        lex.commenters = ""
        try:
            tokens = list(lex)
        except ValueError as exc:
            raise Refused(f"the command line does not parse: {exc}") from None
        words: list[str] = []
        piped = False
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if not _is_operator(token):  # `#` too: a quoted one looks the same, and
                words.append(token)  # a word more only ever makes a refusal likelier
            elif token in SEPARATORS:
                if not words:
                    raise Refused(f"{token!r} with no command before it")
                out.append(Segment(tuple(words), piped))
                words, piped = [], token in PIPES
            elif token in TO_NULL or token in DUP:
                target = tokens[i + 1] if i + 1 < len(tokens) else ""
                ok = target == "/dev/null" or (token in DUP and bool(_FD.match(target)))
                if not ok:
                    raise Refused(
                        f"redirecting output to {target or 'nothing'!r} is not allowed "
                        "(only to /dev/null or another descriptor, as in 2>&1)"
                    )
                if words and words[-1].isdigit():  # `2>`: the descriptor, not an argument
                    words.pop()
                i += 1
            else:
                raise Refused(
                    f"{token!r} is not allowed (no subshells, groups, input redirections "
                    "or here-documents)"
                )
            i += 1
        if words:
            out.append(Segment(tuple(words), piped))
        elif piped:
            raise Refused("a pipe into nothing")
    return out


@dataclass(frozen=True)
class Pattern:
    text: str
    words: tuple[str, ...]

    def matches(self, words: Sequence[str]) -> bool:
        if len(words) < len(self.words):
            return False
        first, *rest = self.words
        program = words[0] if "/" in first else words[0].rsplit("/", 1)[-1]
        if not fnmatchcase(program, first):
            return False
        return all(fnmatchcase(w, p) for w, p in zip(words[1:], rest, strict=False))


def _patterns(texts: Sequence[str]) -> tuple[Pattern, ...]:
    return tuple(Pattern(t, tuple(command_words(t))) for t in texts)


class Runners:
    """`loop.check` compiled: judges command lines (pure)."""

    def __init__(self, config: CheckConfig) -> None:
        self.config = config
        self.runners = _patterns(config.test_runners)
        self.filters = _patterns(config.pipe_filters)
        self.refused_args = tuple(config.refused_args)

    def refusal(self, command: str) -> str | None:
        """Why `command` is not test runners only (None: it is)."""
        try:
            parts = segments(command)
        except Refused as exc:
            return str(exc)
        if not parts:
            return "no command to run"
        for seg in parts:
            fixing = next((a for a in self.refused_args if _has_arg(seg.words, a)), None)
            if fixing is not None:
                return f"{fixing} makes {seg.words[0]!r} change files (loop.check.refused_args)"
            if any(p.matches(seg.words) for p in self.runners):
                continue
            if seg.piped and any(p.matches(seg.words) for p in self.filters):
                continue
            where = " (or loop.check.pipe_filters after a pipe)" if self.filters else ""
            return f"{' '.join(seg.words[:3])!r} is not one of loop.check.test_runners{where}"
        return None

    def hint(self, limit: int = 8) -> str:
        """The first patterns, as a refusal names them."""
        shown = ", ".join(p.text for p in self.runners[:limit]) or "none"
        return shown + (", …" if len(self.runners) > limit else "")


def _has_arg(words: Sequence[str], arg: str) -> bool:
    return any(w == arg or w.startswith(arg + "=") for w in words[1:])


def same_command(a: str, b: str) -> bool:
    """Two command lines equal but for spacing (a `verify` command run as written)."""
    return a.split() == b.split()
