"""Helpers for the config tests: write a sample rtws config, check it, render problems."""

from __future__ import annotations

from pathlib import Path

from mindloop.config import check_config

SAMPLE_LLM = """\
providers:
  mock:
    kind: mock
    models:
      mock-model: {context_length: 128000}
  openai:
    kind: openai-compatible
    base_url: https://api.openai.com/v1
    api_key_env: OPENAI_API_KEY
    models:
      gpt-4o-mini: {context_length: 128000, max_output_tokens: 16384}
"""

SAMPLE_TEAM = """\
member_defaults:
  provider: mock
  model: mock-model
  fbr-effort: 3
default_responder: alice
members:
  alice:
    name: Alice
    toolsets: ['*']
  bob:
    toolsets: ['fs', '!shell']
    fbr_model_params: {general: {max_tokens: 1200}, openai: {temperature: 0.9}}
"""


def write_config(rtws: Path, team: str | None = SAMPLE_TEAM, llm: str | None = SAMPLE_LLM) -> Path:
    """Write `.minds/team.yaml` and `.minds/llm.yaml` (None leaves a file out)."""
    minds = rtws / ".minds"
    minds.mkdir(parents=True, exist_ok=True)
    if team is not None:
        (minds / "team.yaml").write_text(team, encoding="utf-8")
    if llm is not None:
        (minds / "llm.yaml").write_text(llm, encoding="utf-8")
    return rtws


def problem_lines(rtws: Path) -> list[str]:
    """`check_config` as the strings `mindloop check` prints."""
    return [str(p) for p in check_config(rtws)]


def team_with_members(members: str, defaults: str = "provider: mock\n  model: mock-model") -> str:
    """A team.yaml whose `members:` block is `members` (already indented by 2)."""
    return f"member_defaults:\n  {defaults}\nmembers:\n{members}"
