"""The CLI as a shell tool: `--help` answers at once (the engine, the store, pydantic and
the provider SDKs are not even imported for it; for a subcommand's help, all but pydantic,
which Typer imports), `--version`, shell completion, and the
global options (`-C`, `--debug`, `--verbose`) in the help of every subcommand."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from mindloop.cli.app import build_command
from tests.scenario_util import ml

# What `mindloop --help` takes is measured by bench/run.py (a time is never asserted in
# a test); what keeps it fast is asserted here: the heavy modules stay unimported.
HEAVY = (
    "sqlalchemy",
    "pydantic",
    "openai",
    "anthropic",
    "mcp",
    "opentelemetry",
    "mindloop.service",
    "mindloop.store",
    "mindloop.config",
    "mindloop.providers",
    "mindloop.dialogs",
    "mindloop.loop",
)
# A subcommand's help is printed after the root's options are parsed, and Typer (0.29)
# coerces every option that is not a flag (the root's `-C`) with a pydantic TypeAdapter:
# pydantic itself is Typer's import there, not ours; everything else stays out.
TYPER_IMPORTS = ("pydantic",)  # and pydantic_core


def _heavy_imports(args: list[str]) -> list[str]:
    code = (
        "import sys\n"
        "from mindloop.cli.app import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} "
        f"or m.startswith({HEAVY!r}))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    (line,) = [line for line in out.stderr.splitlines() if line.startswith("HEAVY ")]
    heavy: list[str] = ast.literal_eval(line.removeprefix("HEAVY "))
    return heavy


def test_help_imports_neither_the_engine_nor_the_store() -> None:
    assert _heavy_imports(["--help"]) == []


@pytest.mark.parametrize(
    "args", [["chat", "--help"], ["run", "--help"], ["-C", ".", "run", "--help"]]
)
def test_subcommand_help_imports_neither_the_engine_nor_the_store(args: list[str]) -> None:
    heavy = _heavy_imports(args)
    assert [m for m in heavy if not m.startswith(TYPER_IMPORTS)] == []


def test_version() -> None:
    out = ml("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"mindloop {version('mindloop')}"


def test_shell_completion_completes_commands_and_options(tmp_path: Path) -> None:
    env = {"_MINDLOOP_COMPLETE": "complete_bash", "COMP_WORDS": "mindloop dia", "COMP_CWORD": "1"}
    out = ml(env=env, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.split() == ["dialogs"]
    env |= {"COMP_WORDS": "mindloop dialogs tree --j", "COMP_CWORD": "3"}
    assert ml(env=env, cwd=tmp_path).stdout.split() == ["--json"]
    # `--show-completion` is a flag: Typer finds the shell among the process's ancestors
    # (shellingham), so it is asked from a bash, as a user would (`; exit` keeps bash from
    # replacing itself by the command: it stays the parent)
    cmd = f"{sys.executable} -m mindloop.cli.app --show-completion; exit $?"
    script = subprocess.run(
        ["bash", "-c", cmd],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert script.returncode == 0, script.stderr
    assert "_MINDLOOP_COMPLETE=complete_bash" in script.stdout


def _leaves(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    subs = getattr(cmd, "commands", None)
    if not subs:
        return [(path, cmd)]
    out = [(path, cmd)] if path else []
    for name, sub in subs.items():
        out += _leaves(sub, (*path, name))
    return out


def test_every_subcommand_takes_and_shows_the_global_options() -> None:
    commands = _leaves(build_command())
    assert len(commands) > 15
    for path, cmd in commands:
        opts = {o for p in cmd.params if not getattr(p, "hidden", False) for o in p.opts}
        assert {"-C", "--rtws", "--debug", "--verbose"} <= opts, path


@pytest.mark.parametrize("args", [["chat"], ["dialogs", "tree"], ["taskdoc", "edit"]])
def test_subcommand_help_lists_minus_c(args: list[str]) -> None:
    out = ml(*args, "--help")
    assert out.returncode == 0
    lines = [line for line in out.stdout.splitlines() if "--rtws" in line]
    assert lines and "-C" in lines[0] and "runtime workspace" in lines[0]


def test_minus_c_after_the_subcommand_works_without_hoisting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The subcommand's own copy of `-C` sets the rtws too (for callers of the click
    command that do not hoist the global options, e.g. tests and completion)."""
    ml("init", str(tmp_path / "p"))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        build_command().main(
            args=["tasks", "-C", str(tmp_path / "p"), "--json"],
            prog_name="mindloop",
            standalone_mode=False,
        )
    finally:
        os.chdir(cwd)
    assert '"path": "tasks/example.tsk"' in capsys.readouterr().out
