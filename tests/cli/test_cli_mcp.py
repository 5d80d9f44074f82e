"""MCP servers and Python tools from the command line: `mindloop chat` on the mock provider
where a member calls tools of two real MCP servers (`mcp-server-time`, `mcp-server-git`)
and of a Python tool module, its spans exported over OTLP to a collector on 127.0.0.1 (the
"Done means" of issue 13); `check` and `check --probe`; failures that name their line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.events.otlp_collector import attribute, otlp_collector, received_spans
from tests.scenario_util import ml, write_script

PY = sys.executable
ASK = "what time is it in Paris, what happened in the repo, and shout done"

TEAM_TOOLS = """\
from mindloop.toolsets.python import tool


@tool
def shout(text: str) -> str:
    '''Say `text` loudly.

    Args:
        text: What to say.
    '''
    return text.upper() + "!"
"""


TIME = {"command": PY, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


def project(tmp_path: Path, toolsets: list[str], servers: dict[str, Any] | None = None) -> Path:
    rtws = tmp_path / "proj"
    assert ml("init", str(rtws)).returncode == 0
    team = {
        "member_defaults": {"provider": "mock", "model": "mock-model"},
        "default_responder": "dev",
        "python_tools": ["teamtools"],
        "members": {"dev": {"toolsets": toolsets}},
    }
    (rtws / ".minds" / "team.yaml").write_text(yaml.safe_dump(team, sort_keys=False))
    (rtws / "teamtools.py").write_text(TEAM_TOOLS)
    if servers is None:
        servers = {
            "time": TIME,
            "git": {
                "command": PY,
                "args": ["-m", "mcp_server_git", "--repository", "."],
                "tools": ["git_log", "git_status"],
                "prefix": "repo_",
            },
        }
    (rtws / ".minds" / "mcp.yaml").write_text(yaml.safe_dump({"servers": servers}, sort_keys=False))
    git = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "."], cwd=rtws, check=True)
    subprocess.run([*git, "add", "README.md"], cwd=rtws, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "add the readme"], cwd=rtws, check=True)
    return rtws


def test_a_member_calls_tools_of_two_real_mcp_servers_and_a_python_tool(tmp_path: Path) -> None:
    """One `mindloop chat`, traced: the member's three tool calls (two MCP servers, one
    Python tool) run, and the collector receives one trace in which each is an
    `execute_tool` span under the drive's `invoke_agent` span."""
    rtws = project(tmp_path, ["fs", "mcp:time", "mcp:git", "teamtools"])
    write_script(
        rtws,
        [
            {
                "match": ASK,
                "response": "Checking.",
                "tool_calls": [
                    {"name": "get_current_time", "arguments": {"timezone": "Europe/Paris"}},
                    {"name": "repo_git_log", "arguments": {"repo_path": ".", "max_count": 1}},
                    {"name": "shout", "arguments": {"text": "done"}},
                ],
            },
            {"role": "tool", "contains": "DONE!", "response": "Paris time noted; one commit."},
        ],
    )
    with otlp_collector() as (endpoint, received):
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "done-means"}
        out = ml("chat", "-C", str(rtws), "--task", "tasks/example.tsk", ASK, env=env)
        assert out.returncode == 0, out.stdout + out.stderr
        spans = [span for span, _ in received_spans(received)]  # flushed before chat exits
    assert "Paris time noted; one commit." in out.stdout
    (listed,) = json.loads(ml("dialogs", "list", "-C", str(rtws), "--json").stdout)
    shown = json.loads(ml("dialogs", "show", "-C", str(rtws), listed["id"], "--json").stdout)
    results = {
        m["data"]["name"]: m["data"] for m in shown["messages"] if m["kind"] == "tool_result"
    }
    assert set(results) == {"get_current_time", "repo_git_log", "shout"}
    assert json.loads(results["get_current_time"]["content"])["timezone"] == "Europe/Paris"
    assert "add the readme" in results["repo_git_log"]["content"]
    assert results["shout"]["content"] == "DONE!"
    assert not any(r.get("is_error") for r in results.values())

    (drive,) = [span for span in spans if span.name == "invoke_agent dev"]
    assert {span.trace_id for span in spans} == {drive.trace_id}  # the chat is one trace
    tools = {
        attribute(span, "gen_ai.tool.name"): span
        for span in spans
        if span.name.startswith("execute_tool ")
    }
    assert set(tools) == {"get_current_time", "repo_git_log", "shout"}
    for name, span in tools.items():
        assert span.name == f"execute_tool {name}"
        assert span.parent_span_id == drive.span_id, name
        assert attribute(span, "mindloop.dialog.id") == listed["id"], name
    assert sorted(span.name for span in spans) == [
        "chat mock-model",
        "chat mock-model",
        "execute_tool get_current_time",
        "execute_tool repo_git_log",
        "execute_tool shout",
        "invoke_agent dev",
    ]


def test_an_mcp_tool_under_approval_waits_and_runs_once_approved(tmp_path: Path) -> None:
    """`approval_required: ['mcp:time']`: the real server's tool is not called until the
    human approves; `approve` then runs exactly that call and the model gets its result."""
    rtws = project(tmp_path, ["mcp:time"], servers={"time": TIME})
    team_file = rtws / ".minds" / "team.yaml"
    team = yaml.safe_load(team_file.read_text())
    team["members"]["dev"]["approval_required"] = ["mcp:time"]
    team_file.write_text(yaml.safe_dump(team, sort_keys=False))
    paris = {"name": "get_current_time", "arguments": {"timezone": "Europe/Paris"}}
    write_script(
        rtws,
        [
            {
                "match": "what is the time in Paris",
                "response": "Asking the clock.",
                "tool_calls": [paris],
            },
            {"contains": "day_of_week", "response": "Paris time noted."},
        ],
    )
    c = ("-C", str(rtws))
    asked = ml("chat", *c, "--task", "tasks/example.tsk", "what is the time in Paris")
    assert asked.returncode == 4, asked.stdout + asked.stderr
    assert "approve with: mindloop approve" in asked.stdout
    [item] = json.loads(ml("questions", *c, "--json").stdout)
    assert (item["kind"], item["tool"], item["toolset"]) == (
        "approval",
        "get_current_time",
        "mcp:time",
    )
    assert json.loads(item["arguments"]) == {"timezone": "Europe/Paris"}

    def dialog_text() -> str:
        (listed,) = json.loads(ml("dialogs", "list", *c, "--json").stdout)
        shown = json.loads(ml("dialogs", "show", *c, listed["id"], "--json").stdout)
        return json.dumps(shown["messages"])

    assert "day_of_week" not in dialog_text()  # the server was not called
    approved = ml("approve", *c, item["id"], "--json")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert json.loads(approved.stdout)["answer"] == "Paris time noted."
    text = dialog_text()
    assert "The human approved get_current_time" in text and "day_of_week" in text
    assert json.loads(ml("questions", *c, "--json").stdout) == []


def test_check_knows_mcp_toolsets_without_starting_them_and_probe_lists_tools(
    tmp_path: Path,
) -> None:
    rtws = project(tmp_path, ["fs", "mcp:time", "mcp:git", "teamtools"])
    ok = ml("check", "-C", str(rtws))
    assert ok.returncode == 0 and "configuration OK" in ok.stdout, ok.stdout + ok.stderr
    assert "mcp:time" not in ok.stdout  # nothing started, nothing listed
    probed = ml("check", "--probe", "-C", str(rtws))
    assert probed.returncode == 0, probed.stdout + probed.stderr
    lines = probed.stdout.splitlines()
    assert "mcp:time: 2 tool(s)" in lines and "mcp:git: 2 tool(s)" in lines
    assert any(line.strip().startswith("repo_git_log") for line in lines)
    assert any(line.strip().startswith("convert_time") for line in lines)


def test_an_unknown_mcp_toolset_is_a_file_line_error_everywhere(tmp_path: Path) -> None:
    rtws = project(tmp_path, ["fs", "mcp:tiem"])
    team = (rtws / ".minds" / "team.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(team, 1) if "mcp:tiem" in text)
    expected = (
        f".minds/team.yaml:{line}: members.dev.toolsets.1: unknown toolset 'mcp:tiem' "
        "(did you mean mcp:time?)"
    )
    checked = ml("check", "-C", str(rtws))
    assert checked.returncode == 1 and expected in checked.stderr
    chat = ml("chat", "-C", str(rtws), "--task", "tasks/example.tsk", "hi")
    assert chat.returncode == 1 and expected in chat.stdout + chat.stderr
    assert not (rtws / ".mindloop" / "state.sqlite").exists()


def test_a_server_that_cannot_start_stops_chat_before_anything_is_written(
    tmp_path: Path,
) -> None:
    hang = {"command": PY, "args": ["-c", "import time; time.sleep(600)"], "startup_timeout": 2}
    crash = {"command": PY, "args": ["-c", "import sys; sys.exit('cannot open the database')"]}
    rtws = project(
        tmp_path, ["fs", "mcp:slow", "mcp:broken"], servers={"slow": hang, "broken": crash}
    )
    started = time.monotonic()
    out = ml("chat", "-C", str(rtws), "--task", "tasks/example.tsk", "hi")
    assert time.monotonic() - started < 60
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    mcp_lines = (rtws / ".minds" / "mcp.yaml").read_text().splitlines()
    broken = next(i for i, line in enumerate(mcp_lines, 1) if line.startswith("  broken:"))
    assert (
        ".minds/mcp.yaml:2: servers.slow: could not be started: it did not answer within 2 s"
        in text
    )
    assert (
        f".minds/mcp.yaml:{broken}: servers.broken: could not be started: its process exited; its stderr ends with:\n    cannot open the database"
        in text
    )
    assert "Traceback" not in text
    assert not (rtws / ".mindloop" / "state.sqlite").exists()
    probed = ml("check", "--probe", "-C", str(rtws))
    assert probed.returncode == 1 and "mcp:slow: not started" in probed.stdout


def test_check_reports_a_module_that_does_not_import_once(tmp_path: Path) -> None:
    rtws = project(tmp_path, ["fs", "teamtools"], servers={})
    (rtws / "teamtools.py").write_text("import no_such_dependency\n")
    out = ml("check", "-C", str(rtws))
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        ".minds/team.yaml:6: python_tools.0: cannot import teamtools: ModuleNotFoundError: "
        "No module named 'no_such_dependency'",
        "1 problem(s) found",
    ]
