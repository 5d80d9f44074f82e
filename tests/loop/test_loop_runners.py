"""CHECK's shell guard (`mindloop.loop.runners`): test runners pass, piped into read-only
filters; anything that could write or run another program is refused."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mindloop.config.loop_check import CheckConfig
from mindloop.loop.runners import Runners, same_command

RUNNERS = Runners(CheckConfig())

ALLOWED = [
    "pytest",
    "pytest -q tests/loop/test_x.py::test_y",
    ".venv/bin/python -m pytest tests -q -x",
    "python3 -m pytest -k 'parser and not slow'",
    "pytest -q 2>&1 | tail -n 30",
    "pytest >/dev/null 2>&1",
    "npm test -- --watch=false",
    "go test ./... && go vet ./...",
    "cargo test; cargo clippy",
    "make test | grep -c FAIL",
    "ruff check . && ruff format --check .",
    "mypy mindloop |& tail -5",
]

REFUSED = [
    ("touch x.txt", "not one of loop.check.test_runners"),
    ("cd sub && pytest", "not one of loop.check.test_runners"),
    ("pytest > report.txt", "redirecting output to 'report.txt'"),
    ("pytest >> log", "redirecting output to 'log'"),
    ("pytest | tee out.txt", "'tee out.txt' is not one of"),
    ("tail -n 5 log.txt", "not one of loop.check.test_runners"),  # a filter, not after a pipe
    ("pytest; rm -rf src", "'rm -rf src' is not one of"),
    ("pytest\nrm -rf src", "'rm -rf src' is not one of"),
    ("pytest $(rm -rf src)", "command substitution"),
    ("pytest `rm -rf src`", "command substitution"),
    ("(cd src && pytest)", "'(' is not allowed"),
    ("pytest < input.txt", "'<' is not allowed"),
    ("ruff check --fix .", "--fix makes 'ruff' change files"),
    ("ruff format .", "'ruff format .' is not one of"),
    ("npx eslint --fix=true src", "--fix makes 'npx' change files"),
    ("pytest -k 'x", "does not parse"),
    ("| pytest", "with no command before it"),
    ("pytest |", "a pipe into nothing"),
    ("", "no command to run"),
]


@pytest.mark.parametrize("command", ALLOWED)
def test_test_runners_are_allowed(command: str) -> None:
    assert RUNNERS.refusal(command) is None


@pytest.mark.parametrize(("command", "why"), REFUSED)
def test_anything_else_is_refused_saying_why(command: str, why: str) -> None:
    found = RUNNERS.refusal(command)
    assert found is not None and why in found, found


def test_patterns_come_from_the_config() -> None:
    mine = Runners(CheckConfig(test_runners=["./check.sh", "bin/*-test"], pipe_filters=[]))
    assert mine.refusal("./check.sh --all") is None
    assert mine.refusal("bin/unit-test") is None
    assert mine.refusal("check.sh") is not None  # a path pattern is compared whole
    assert mine.refusal("pytest") is not None
    assert mine.refusal("./check.sh | tail") is not None  # no filters configured


_WORD = st.text(
    alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="-_./=:"),
    min_size=1,
    max_size=12,
)
_DANGER = st.sampled_from(
    [
        "; rm -rf x",
        " && touch x",
        " || touch x",
        " > x",
        " >> x",
        " | tee x",
        " $(touch x)",
        " `touch x`",
        "\ntouch x",
        " & touch x",
        " | sh",
        " <(touch x)",
        " ; (touch x)",
        " --fix",
    ]
)


@given(st.sampled_from(ALLOWED), st.lists(_WORD, max_size=4), _DANGER)
@example("pytest", [], "; rm -rf x")
def test_a_runner_followed_by_anything_that_writes_is_refused(
    runner: str, args: list[str], danger: str
) -> None:
    command = " ".join([runner, *args]) + danger
    assert RUNNERS.refusal(command) is not None, command


@given(st.sampled_from(["pytest", "go test", "npm test", "cargo test"]), st.lists(_WORD))
def test_a_runner_with_plain_arguments_is_allowed(runner: str, args: list[str]) -> None:
    if any(a.startswith(("--fix", "--write", "--in-place", "--update")) for a in args):
        return
    assert RUNNERS.refusal(" ".join([runner, *args])) is None


@given(st.text(max_size=80))
def test_any_text_gets_a_verdict(command: str) -> None:
    found = RUNNERS.refusal(command)
    assert found is None or isinstance(found, str)


def test_a_verify_command_is_compared_as_written() -> None:
    assert same_command("test -f a.txt", "  test  -f a.txt ")
    assert not same_command("test -f a.txt", "test -f b.txt")
