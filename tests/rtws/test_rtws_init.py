"""`mindloop init` says precisely what it did: on an existing project it lists what it
kept, names the provider the kept team.yaml uses (never one it did not configure) and the
options it could not apply. A local OpenAI-compatible server needs no key variable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from mindloop import service
from mindloop.rtws import init_rtws
from mindloop.rtws.checks import rtws_warnings
from mindloop.rtws.scaffold import is_local_url
from tests.scenario_util import ml


def _llm(rtws: Path) -> dict[str, dict[str, object]]:
    data = yaml.safe_load((rtws / ".minds" / "llm.yaml").read_text())
    return dict(data["providers"])


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8080/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://gpu-box.local:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://llm.example.com/v1", False),
        ("http://8.8.8.8/v1", False),
    ],
)
def test_local_urls(url: str, local: bool) -> None:
    assert is_local_url(url) is local


async def test_a_local_server_needs_no_key_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    report = init_rtws(
        tmp_path, provider="openai", base_url="http://127.0.0.1:8000/v1", model="qwen"
    )
    assert report.provider == "openai"
    openai = _llm(tmp_path)["openai"]
    assert "api_key_env" not in openai and openai["base_url"] == "http://127.0.0.1:8000/v1"
    assert rtws_warnings(tmp_path) == []  # no "OPENAI_API_KEY is not set" warning
    async with service.open_project(tmp_path) as project:
        project.check_member("dev")  # builds the provider: no key asked for


def test_a_remote_server_keeps_its_key_variable_unless_told(tmp_path: Path) -> None:
    init_rtws(tmp_path / "a", provider="openai", base_url="https://llm.example.com/v1")
    assert _llm(tmp_path / "a")["openai"]["api_key_env"] == "OPENAI_API_KEY"
    init_rtws(
        tmp_path / "b", provider="openai", base_url="http://127.0.0.1:1/v1", api_key_env="VLLM_KEY"
    )
    assert _llm(tmp_path / "b")["openai"]["api_key_env"] == "VLLM_KEY"
    init_rtws(tmp_path / "c", provider="openai", api_key_env="")
    assert "api_key_env" not in _llm(tmp_path / "c")["openai"]


def test_init_on_an_existing_project_reports_what_it_kept(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    assert ml("init", str(proj), env=env).returncode == 0  # mock
    again = ml("init", str(proj), "--provider", "openai", "--model", "gpt-x", env=env)
    assert again.returncode == 0, again.stderr
    out = again.stdout
    assert "created" not in out
    for rel in (".minds/team.yaml", ".minds/llm.yaml", "README.md", "tasks/example.tsk/goals.md"):
        assert f"kept    {rel} (exists; --force to overwrite)" in out
    assert "not applied: --provider, --model" in out
    assert "provider unchanged: mock (from the kept .minds/team.yaml)" in out
    assert "provider: openai" not in out
    team = yaml.safe_load((proj / ".minds" / "team.yaml").read_text())
    assert team["member_defaults"]["provider"] == "mock"

    (proj / ".minds" / "team.yaml").unlink()  # only team.yaml is written anew
    partly = ml("init", str(proj), "--provider", "openai", env=env).stdout
    assert "created .minds/team.yaml" in partly and "provider: openai" in partly
    assert "not applied" not in partly


def test_refused_key_variable_names(tmp_path: Path) -> None:
    out = ml("init", str(tmp_path / "p"), "--provider", "openai", "--api-key-env", "sk-abc def")
    assert out.returncode == 1 and "--api-key-env must be the NAME" in out.stderr
    assert not (tmp_path / "p").exists()
