"""`.minds/mcp.yaml` and team.yaml's `python_tools`: strict, every problem at its line."""

from __future__ import annotations

import string
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from mindloop.config import MissingEnvVar, expand_env, load_config
from mindloop.config.mcp import env_references
from tests.config.config_testutil import SAMPLE_TEAM, problem_lines, write_config

MCP = ".minds/mcp.yaml"
TEAM = ".minds/team.yaml"


def write_mcp(rtws: Path, text: str) -> None:
    write_config(rtws)
    (rtws / MCP).write_text(text)


def test_no_mcp_yaml_means_no_servers(tmp_path: Path) -> None:
    write_config(tmp_path)
    assert load_config(tmp_path).mcp.servers == {}


def test_a_valid_file_loads_with_defaults(tmp_path: Path) -> None:
    write_mcp(
        tmp_path,
        """\
servers:
  git:
    command: uvx
    args: [mcp-server-git, --repository, "${REPO}"]
    env: {GIT_TOKEN: "${GIT_TOKEN}"}
    cwd: work
    tools: [git_status]
    prefix: git_
  remote:
    url: "https://mcp.example.invalid/${TENANT}/mcp"
    headers: {Authorization: "Bearer ${REMOTE_TOKEN}"}
    headers_env: {X-Api-Key: REMOTE_KEY}
    exclude: [delete_everything]
    call_timeout: 10
""",
    )
    servers = load_config(tmp_path).mcp.servers
    git, remote = servers["git"], servers["remote"]
    assert git.transport == "stdio" and remote.transport == "http"
    assert git.startup_timeout == 30 and git.call_timeout == 120 and remote.call_timeout == 10
    assert git.env_names() == ["REPO", "GIT_TOKEN"]
    assert remote.env_names() == ["REMOTE_TOKEN", "TENANT", "REMOTE_KEY"]


def test_every_problem_is_reported_at_its_line(tmp_path: Path) -> None:
    write_mcp(
        tmp_path,
        """\
servers:
  git:
    command: python
    headers: {A: b}
    prefix: "g."
  both:
    command: x
    url: http://127.0.0.1:9/mcp
  nothing:
    prefix: x_
  web:
    url: ftp://example.invalid
    headers: {Authorization: "Bearer ${TOKEN"}
    headers_env: {X-Key: not-a-name}
    tools: [a]
    exclude: [b]
    startup_timeout: 0
    colour: blue
  "bad name":
    url: http://127.0.0.1:9/mcp
  stdio-http:
    url: http://127.0.0.1:9/mcp
    args: [a]
    cwd: here
  leaky:
    url: http://127.0.0.1:9/mcp
    headers: {Authorization: "ghp_abcdefghijklmnop1234"}
  typed:
    command: [python]
    args: python
    call_timeout: soon
""",
    )
    assert problem_lines(tmp_path) == [
        f"{MCP}:4: servers.git.headers: headers applies only to HTTP servers (url); this "
        "server has command",
        f"{MCP}:5: servers.git.prefix: a prefix uses only letters, digits, '_' and '-' (it "
        'starts every tool name of the server), got "g."',
        f"{MCP}:8: servers.both.url: a server has either command (stdio) or url (streamable "
        "HTTP), not both",
        f"{MCP}:9: servers.nothing: a server needs command (started by mindloop, over stdio) "
        "or url (a streamable HTTP endpoint)",
        f"{MCP}:12: servers.web.url: must be an http:// or https:// URL of a streamable HTTP "
        'endpoint, got "ftp://example.invalid"',
        f"{MCP}:13: servers.web.headers.Authorization: unterminated ${{: write ${{NAME}} to use "
        "the environment variable NAME",
        f"{MCP}:14: servers.web.headers_env.X-Key: must be the NAME of an environment variable "
        "(letters, digits, '_'), got \"not-a-name\"",
        f"{MCP}:16: servers.web.exclude: use tools (offer only these) or exclude (offer all "
        "but these), not both",
        f"{MCP}:17: servers.web.startup_timeout: must be > 0, got 0",
        f"{MCP}:18: servers.web.colour: unknown key (allowed: command, url, args, env, cwd, "
        "headers, headers_env, tools, exclude, prefix, startup_timeout, call_timeout)",
        f"{MCP}:19: servers.bad name: a server name starts with a letter or digit and uses "
        "only letters, digits, '_', '-' and '.' (it is written as the toolset mcp:<name>), "
        'got "bad name"',
        f"{MCP}:23: servers.stdio-http.args: args applies only to stdio servers (command); "
        "this server has url",
        f"{MCP}:24: servers.stdio-http.cwd: cwd applies only to stdio servers (command); this "
        "server has url",
        f"{MCP}:27: servers.leaky.headers.Authorization: this looks like a secret; keep "
        "secrets out of config files: write ${NAME} to use the environment variable NAME (or "
        "headers_env for a whole header)",
        f"{MCP}:29: servers.typed.command: must be a string, got a list",
        f'{MCP}:30: servers.typed.args: must be a list, got "python"',
        f'{MCP}:31: servers.typed.call_timeout: must be a number, got "soon"',
    ]


def test_an_unparseable_or_odd_file_is_reported(tmp_path: Path) -> None:
    write_mcp(tmp_path, "servers: [a, b]\n")
    assert problem_lines(tmp_path) == [f"{MCP}:1: servers: must be a mapping, got a list"]
    (tmp_path / MCP).write_text("servers:\n  a: {url: http://x\n")
    (line,) = problem_lines(tmp_path)
    assert line.startswith(f"{MCP}:")


def test_python_tools_are_dotted_module_names(tmp_path: Path) -> None:
    write_config(tmp_path, team=SAMPLE_TEAM + "python_tools: [myproject.tools, 'my-tools', 3]\n")
    assert problem_lines(tmp_path) == [
        f"{TEAM}:13: python_tools.1: must be a dotted Python module name such as "
        'myproject.tools, got "my-tools"',
        f"{TEAM}:13: python_tools.2: must be a string, got 3",
    ]
    write_config(tmp_path, team=SAMPLE_TEAM + "python_tools: myproject.tools\n")
    assert problem_lines(tmp_path) == [
        f'{TEAM}:13: python_tools: must be a list, got "myproject.tools"'
    ]
    write_config(tmp_path, team=SAMPLE_TEAM + "python_tools: [myproject.tools, pkg]\n")
    assert load_config(tmp_path).team.python_tools == ["myproject.tools", "pkg"]


# ---------------------------------------------------------------- ${NAME} expansion

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
LITERALS = st.text(alphabet=string.printable.replace("$", ""), max_size=12)


@given(st.lists(st.tuples(LITERALS, NAMES), max_size=5), LITERALS, st.data())
def test_expansion_replaces_exactly_the_references(
    parts: list[tuple[str, str]], tail: str, data: st.DataObject
) -> None:
    text = "".join(f"{lit}${{{name}}}" for lit, name in parts) + tail
    values = {name: data.draw(LITERALS) for _, name in parts}
    expected = "".join(lit + values[name] for lit, name in parts) + tail
    assert expand_env(text, values) == expected
    assert env_references(text) == [name for _, name in parts]


@given(LITERALS, NAMES, LITERALS)
def test_an_unset_variable_is_named_never_empty(before: str, name: str, after: str) -> None:
    try:
        expand_env(f"{before}${{{name}}}{after}", {})
    except MissingEnvVar as err:
        assert err.name == name and name in str(err)
    else:
        raise AssertionError("an unset variable expanded")


@given(st.text(max_size=30))
def test_text_without_references_is_left_alone(text: str) -> None:
    if "${" not in text:
        assert expand_env(text, {}) == text
