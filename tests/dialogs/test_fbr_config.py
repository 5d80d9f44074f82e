"""The FBR settings of `.minds/team.yaml` as the seed writes them, through `mindloop check`
and the loaded config: `fbr-effort` per member and in `member_defaults`, and
`fbr_model_params` with the same schema as `model_params`, deep-merged for FBR only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mindloop.config import load_config

# The seed's own example (扪心自问 FBR 设计文档, "`.minds/team.yaml` 配置示例").
SEED_EXAMPLE = """\
member_defaults:
  provider: mock
  model: mock-model
  # 默认每次 `!?@self` 并发创建 3 条无工具 FBR 支线对话（“三个臭皮匠，顶个诸葛亮”）。
  fbr-effort: 3

members:
  ux:
    # 每次 `!?@self` 并发创建 5 条独立的 FBR 支线对话。
    fbr-effort: 5

    # 让 FBR 更“发散”，但不影响主线对话。
    fbr_model_params:
      {namespace}:
        temperature: 0.9
        reasoning_effort: medium
      general:
        max_tokens: 1200
  dev:
    model_params:
      max_tokens: 300
      openai: {{temperature: 0.2, top_p: 0.5}}
"""


def check(rtws: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mindloop.cli.app", "check", "-C", str(rtws)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(rtws)},
    )


def _write_team(rtws: Path, text: str) -> None:
    (rtws / ".minds" / "team.yaml").write_text(text, "utf-8")


def test_seed_example_loads_with_the_openai_namespace(rtws: Path) -> None:
    _write_team(rtws, SEED_EXAMPLE.format(namespace="openai"))
    done = check(rtws)
    assert done.returncode == 0 and "configuration OK" in done.stdout, done.stderr
    team = load_config(rtws).team
    assert (team.members["ux"].fbr_effort, team.members["dev"].fbr_effort) == (5, 3)
    ux = team.members["ux"]
    assert ux.model_params.as_request_params()["openai"] == {}  # normal drives unaffected
    assert ux.fbr_params().as_request_params() == {
        "max_tokens": 1200,
        "general": {"max_tokens": 1200},
        "openai": {"temperature": 0.9, "reasoning_effort": "medium"},
        "anthropic": {},
    }


def test_seed_example_codex_namespace_is_a_located_error_saying_where_it_belongs(
    rtws: Path,
) -> None:
    text = SEED_EXAMPLE.format(namespace="codex")
    _write_team(rtws, text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if s.strip() == "codex:")
    done = check(rtws)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert (
        f".minds/team.yaml:{line}: members.ux.fbr_model_params.codex: mindloop has no codex "
        "provider kind; put these parameters under openai" in done.stderr
    )


@pytest.mark.parametrize("key", ["model_params", "fbr_model_params"])
def test_model_params_and_fbr_model_params_share_one_schema(rtws: Path, key: str) -> None:
    """Same keys, same checks: an error in one is reported in the other alike."""
    _write_team(
        rtws,
        "member_defaults: {provider: mock, model: mock-model}\nmembers:\n  ux:\n"
        f"    {key}:\n      max_tokens: 10\n      general: {{max_tokens: 20}}\n"
        "      openai: {temperature: 5}\n",
    )
    done = check(rtws)
    assert done.returncode == 1
    assert f".minds/team.yaml:6: members.ux.{key}.general.max_tokens: do not set both" in (
        done.stderr
    )
    assert f".minds/team.yaml:7: members.ux.{key}.openai.temperature: must be <= 2" in done.stderr


def test_fbr_model_params_deep_merge_defaults_member_and_model_params(rtws: Path) -> None:
    _write_team(
        rtws,
        """\
member_defaults:
  provider: mock
  model: mock-model
  model_params: {max_tokens: 300, anthropic: {temperature: 0.1, top_k: 5}}
  fbr_model_params: {anthropic: {temperature: 0.8}}
members:
  ux:
    fbr_model_params: {general: {max_tokens: 900}, openai: {seed: 7}}
""",
    )
    ux = load_config(rtws).member("ux")
    assert ux.fbr_params().as_request_params() == {
        "max_tokens": 900,
        "general": {"max_tokens": 900},
        "openai": {"seed": 7},
        "anthropic": {"temperature": 0.8, "top_k": 5},
    }
    assert ux.model_params.as_request_params()["anthropic"] == {"temperature": 0.1, "top_k": 5}
    assert ux.model_params.effective_max_tokens() == 300
