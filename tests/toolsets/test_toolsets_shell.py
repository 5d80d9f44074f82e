"""Toolset shell: exit codes, timeout killing the whole process group, caps, secret filtering."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from mindloop.toolsets.shell import filtered_env

Call = Callable[..., Any]


async def test_exit_code_and_combined_output(rtws: Path, call: Call) -> None:
    out = await call("run_shell", command="echo out; echo err >&2; exit 3")
    assert not out.is_error
    lines = out.text.splitlines()
    assert lines[0] == "exit code 3"
    assert sorted(lines[1:]) == ["err", "out"]


async def test_runs_in_rtws_and_guarded_cwd(rtws: Path, call: Call) -> None:
    out = await call("run_shell", command="pwd", cwd="src")
    assert out.text.splitlines() == ["exit code 0", os.path.realpath(rtws / "src")]
    for cwd in ("tasks/login.tsk", "links/pkg", ".minds"):
        denied = await call("run_shell", command="touch pwned", cwd=cwd)
        assert denied.is_error and "ACCESS_DENIED" in denied.text
    assert not (rtws / "tasks/login.tsk/pwned").exists()
    outside = await call("run_shell", command="pwd", cwd="..")
    assert outside.is_error and "ACCESS_DENIED" in outside.text
    missing = await call("run_shell", command="pwd", cwd="nope")
    assert missing.is_error and "cwd `nope` is not an existing directory" in missing.text


async def test_no_output(rtws: Path, call: Call) -> None:
    assert (await call("run_shell", command="true")).text == "exit code 0\n(no output)"


async def test_timeout_kills_the_whole_process_group(rtws: Path, call: Call) -> None:
    # The shell records its process group id, starts a background child that would write a
    # marker much later, and blocks. After the timeout no process of the group may be alive,
    # so the marker can never appear.
    command = "echo $$ > pgid; (sleep 30; touch marker) & sleep 60"
    out = await call("run_shell", command=command, timeout_s=1.5)
    assert out.is_error
    assert out.text.startswith("timed out after 1.5s; process group killed")
    pgid = int((rtws / "pgid").read_text())

    def alive() -> list[int]:
        found = []
        for proc in psutil.process_iter(["status"]):
            try:
                if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                    found.append(proc.pid)
            except (ProcessLookupError, psutil.NoSuchProcess):
                continue
        return found

    # SIGKILL went to the whole group; a loaded machine may take a moment to schedule the
    # deaths, so wait (bounded) for the group to be empty rather than sample it once.
    deadline = time.monotonic() + 10
    while alive() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert alive() == []
    assert not (rtws / "marker").exists()


async def test_background_child_holding_output_counts_as_running(rtws: Path, call: Call) -> None:
    out = await call("run_shell", command="echo started; sleep 60 &", timeout_s=1)
    assert out.text.startswith("timed out after 1s")
    assert "started" in out.text


async def test_output_cap_keeps_head_and_tail(rtws: Path, call: Call) -> None:
    command = "echo FIRST; head -c 300000 /dev/zero | tr '\\0' a; echo; echo LAST"
    out = await call("run_shell", ctx_fields={"output_cap": 5000}, command=command)
    assert not out.is_error
    assert len(out.text) <= 5000
    assert out.text.startswith("exit code 0\nFIRST\n")
    assert out.text.rstrip().endswith("LAST")
    assert "[output truncated:" in out.text and "bytes omitted from the middle" in out.text


@pytest.mark.parametrize(
    "secret", ["OPENAI_API_KEY", "GH_TOKEN", "APP_SECRET", "my_api_key", "CUSTOM_CRED"]
)
async def test_secret_env_is_not_passed(
    rtws: Path, call: Call, monkeypatch: pytest.MonkeyPatch, secret: str
) -> None:
    monkeypatch.setenv(secret, "s3cr3t-value")
    monkeypatch.setenv("PLAIN_SETTING", "visible-value")
    out = await call("run_shell", ctx_fields={"secret_env_names": ("CUSTOM_CRED",)}, command="env")
    assert "s3cr3t-value" not in out.text
    assert "PLAIN_SETTING=visible-value" in out.text


def test_filtered_env_table() -> None:
    env = {"A_API_KEY": "1", "B_TOKEN": "2", "C_SECRET": "3", "TOKENIZER": "4", "PATH": "/bin"}
    assert filtered_env(env) == {"TOKENIZER": "4", "PATH": "/bin"}
    assert filtered_env(env, ("path",)) == {"TOKENIZER": "4"}


async def test_timeout_bounds_are_validated(rtws: Path, call: Call) -> None:
    out = await call("run_shell", command="true", timeout_s=601)
    assert out.is_error and "timeout_s: input should be less than or equal to 600" in out.text
    zero = await call("run_shell", command="true", timeout_s=0)
    assert zero.is_error and "timeout_s: input should be greater than 0" in zero.text


async def test_a_key_named_by_api_key_env_never_reaches_a_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the runtime, as a team runs it: the key variable of llm.yaml is withheld
    from run_shell even when its name does not look like a secret."""
    from mindloop.dialogs.runtime import DialogRuntime
    from mindloop.dialogs.scheduler import Scheduler
    from mindloop.rtws import init_rtws
    from tests.scenario_util import write_script

    init_rtws(tmp_path, provider="mock")
    llm = tmp_path / ".minds" / "llm.yaml"
    llm.write_text(llm.read_text().replace("OPENAI_API_KEY", "LLM_ACCESS"), "utf-8")
    monkeypatch.setenv("LLM_ACCESS", "sk-live-very-secret")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    write_script(
        tmp_path,
        [
            {"match": "go", "tool_calls": [{"name": "run_shell", "arguments": {"command": "env"}}]},
            {"role": "tool", "contains": "exit code 0", "response": "done"},
        ],
    )
    rt = DialogRuntime(tmp_path)
    try:
        rec = rt.create_root_dialog("tasks/example.tsk")
        rt.post_user_message(rec.id, "go")
        await Scheduler(rt).run()
        [result] = [m for m in rt.store.load_history(rec.id) if m.kind == "tool_result"]
    finally:
        await rt.aclose()
    assert "HARMLESS_SETTING=visible" in result.data["content"]
    assert "LLM_ACCESS" not in result.data["content"]
    assert "sk-live-very-secret" not in result.data["content"]


_INTERRUPTED_SHELL = """
import asyncio, json, sys
from mindloop.tools import ToolContext
from mindloop.toolsets import standard_registry

async def main():
    registry = standard_registry()
    ctx = ToolContext.for_test(sys.argv[1])
    task = asyncio.create_task(
        registry.execute("run_shell", json.dumps({"command": "sleep 30"}), ctx)
    )
    await asyncio.sleep(0.5)
    print("running", flush=True)
    await task

try:
    asyncio.run(main())
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_during_run_shell_leaves_no_unretrieved_future(rtws: Path) -> None:
    """Issue 10, item 22: Ctrl-C while a command runs ends it cleanly, without asyncio's
    `_GatheringFuture exception was never retrieved ... CancelledError` on stderr."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTED_SHELL, str(rtws)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "running"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert out.strip() == "interrupted"
    assert "never retrieved" not in err and "CancelledError" not in err, err
