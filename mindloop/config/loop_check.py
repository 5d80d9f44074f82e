"""`loop.check:` in team.yaml — what the CHECK phase's shell may run (agent-loop §3: CHECK
verifies and must not fix anything, so its shell runs "test runners only"):

    loop:
      check:
        test_runners: [pytest, python -m pytest, npm test, go test, cargo test, make test, …]
        pipe_filters: [head, tail, grep, …]   # a runner's output may be piped into these
        refused_args: [--fix, --write, …]     # these turn a checker into a fixer

A pattern is a command's leading words; each word is a glob (`*`, `?`, `[…]`), and a first
word without a `/` is compared with the program's base name (`.venv/bin/pytest` is
`pytest`). How a command line is judged against them is `mindloop.loop.runners`. Strict,
like every other key: a pattern that is not plain words is a `file:line` error.
"""

from __future__ import annotations

import shlex
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

STRICT = ConfigDict(extra="forbid", strict=True)

# Shell syntax a pattern may not hold: it names a command, not a command line.
OPERATOR_CHARS = frozenset(";&|<>()`")

DEFAULT_TEST_RUNNERS: tuple[str, ...] = (
    # Python
    "pytest",
    "python -m pytest",
    "python3 -m pytest",
    "python -m unittest",
    "tox",
    "nox",
    "ruff check",
    "ruff format --check",
    "mypy",
    "pyright",
    "lint-imports",
    # JavaScript / TypeScript
    "npm test",
    "npm run test",
    "npm run lint",
    "yarn test",
    "pnpm test",
    "npx jest",
    "npx vitest",
    "npx eslint",
    "npx tsc --noEmit",
    # Go, Rust, JVM, .NET, Ruby, C and make
    "go test",
    "go vet",
    "cargo test",
    "cargo check",
    "cargo clippy",
    "mvn test",
    "gradle test",
    "./gradlew test",
    "dotnet test",
    "bundle exec rspec",
    "ctest",
    "make test",
    "make check",
)
DEFAULT_PIPE_FILTERS: tuple[str, ...] = (
    "head",
    "tail",
    "grep",
    "sort",
    "uniq",
    "wc",
    "cut",
    "tr",
    "cat",
)
DEFAULT_REFUSED_ARGS: tuple[str, ...] = (
    "--fix",
    "--fix-only",
    "--unsafe-fixes",
    "--write",
    "--in-place",
    "--update-snapshots",
    "--updateSnapshot",
    "--snapshot-update",
)


def command_words(pattern: str) -> list[str]:
    """A pattern's words (shell quoting honoured); a `ValueError` naming what is wrong
    when it is not a command's leading words."""
    if OPERATOR_CHARS & set(pattern) or "$(" in pattern:
        raise ValueError(
            "shell operators (; & | < > ( ) ` $( ) are not allowed in a pattern",
        )
    try:
        words = shlex.split(pattern)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    return words


def _pattern(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("config", "a pattern must name a command")
    try:
        command_words(value)
    except ValueError as exc:
        raise PydanticCustomError(
            "config",
            "{pattern} is not a command's leading words: {why}",
            {"pattern": repr(value), "why": str(exc)},
        ) from None
    return value


def _arg(value: str) -> str:
    if not value.strip() or value != value.strip() or " " in value:
        raise PydanticCustomError(
            "config", "an argument is one word, got {value}", {"value": repr(value)}
        )
    return value


CommandPattern = Annotated[str, AfterValidator(_pattern)]
Argument = Annotated[str, AfterValidator(_arg)]


class CheckConfig(BaseModel):
    """`loop.check`: the commands CHECK's shell may run (agent-loop §3)."""

    model_config = STRICT

    test_runners: list[CommandPattern] = Field(default_factory=lambda: list(DEFAULT_TEST_RUNNERS))
    pipe_filters: list[CommandPattern] = Field(default_factory=lambda: list(DEFAULT_PIPE_FILTERS))
    refused_args: list[Argument] = Field(default_factory=lambda: list(DEFAULT_REFUSED_ARGS))
