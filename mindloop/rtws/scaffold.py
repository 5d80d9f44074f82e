"""`mindloop init`: scaffolds `.minds/` and an example task, never clobbering user files.

The provider is chosen from the environment: an OpenAI key (or an explicit base URL for a
local OpenAI-compatible server) → openai-compatible; an Anthropic key → anthropic;
otherwise the scripted mock provider, so a fresh project runs offline.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from mindloop.errors import MindloopError

DEFAULT_MEMBER = "dev"
MOCK_MODEL = "mock-model"

EXAMPLE_PROMPT = "list the files and summarise README.md"

_PERSONA = """\
You are Dev, a pragmatic software engineer. You read before you write, keep changes small,
and report what you did in a few clear sentences.
"""

_README = """\
# My project

A small example project created by `mindloop init`. Replace it with your own work.
"""

_GOALS = "Keep this project's README accurate and useful.\n"
_CONSTRAINTS = "- MUST NOT delete user files.\n- MUST keep answers short.\n"

# The mock script answers the README's example chat offline, with real tool calls.
# The first matching entry wins, so the most specific entries come first.
_MOCK_SCRIPT = {
    "responses": [
        {
            "match": EXAMPLE_PROMPT,
            "response": "Let me look at the files first.",
            "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}],
        },
        {
            "role": "tool",
            "contains": "# My project",
            "response": "The project has a README.md and a tasks/ folder. README.md describes "
            "a small example project created by `mindloop init` and asks you to replace it "
            "with your own work.",
        },
        {
            # The listing of the rtws root (only it shows the encapsulated dirs), not any
            # result that mentions README.md: a read of an edited README must not loop.
            "role": "tool",
            "contains": ["README.md", "[encapsulated: not listable]"],
            "context_contains": [EXAMPLE_PROMPT],
            "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}],
        },
        {
            "role": "tool",
            "contains": "README.md (lines",
            "context_contains": [EXAMPLE_PROMPT],
            "response": "I read README.md; its text is in the tool result above. (This answer "
            "comes from .minds/mock/mock-model.yaml: edit it to script your own.)",
        },
    ]
}


@dataclass
class InitReport:
    rtws: Path
    provider: str
    created: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _provider_choice(provider: str, base_url: str | None) -> str:
    if provider != "auto":
        return provider
    if base_url or os.environ.get("OPENAI_API_KEY"):
        return "openai"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    return "mock"


def _llm_yaml(base_url: str | None, model: str | None) -> dict[str, object]:
    return {
        "providers": {
            "mock": {
                "kind": "mock",
                "script_dir": ".minds/mock",
                "models": {MOCK_MODEL: {"context_length": 128000}},
            },
            "openai": {
                "kind": "openai-compatible",
                "base_url": base_url or "https://api.openai.com/v1",
                "api_key_env": "OPENAI_API_KEY",
                "models": {
                    (model or "gpt-4o-mini"): {"context_length": 128000, "max_output_tokens": 16384}
                },
            },
            "anthropic": {
                "kind": "anthropic",
                "api_key_env": "ANTHROPIC_API_KEY",
                "models": {
                    (model or "claude-sonnet-4-5"): {
                        "context_length": 200000,
                        "max_output_tokens": 8192,
                    }
                },
            },
        }
    }


def _team_yaml(provider: str, model: str | None) -> dict[str, object]:
    default_model = {
        "mock": MOCK_MODEL,
        "openai": model or "gpt-4o-mini",
        "anthropic": model or "claude-sonnet-4-5",
    }[provider]
    return {
        "member_defaults": {"provider": provider, "model": default_model, "fbr-effort": 3},
        "default_responder": DEFAULT_MEMBER,
        "members": {
            DEFAULT_MEMBER: {"name": "Dev", "gofor": "general engineering", "toolsets": ["*"]}
        },
    }


class _IndentedDumper(yaml.SafeDumper):
    """Indents list items under their key (`responses:\n  - match: …`), the style the
    docs use, so an entry copied from a "Mock Response Not Found" error or from the README
    can be appended to a scaffolded file as is."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def dump_yaml(data: object) -> str:
    """YAML as mindloop writes it for humans: keys in order, lists indented."""
    return yaml.dump(data, Dumper=_IndentedDumper, sort_keys=False, allow_unicode=True)


_dump = dump_yaml


def init_rtws(
    rtws: Path,
    *,
    force: bool = False,
    provider: str = "auto",
    base_url: str | None = None,
    model: str | None = None,
) -> InitReport:
    """Create the layout; existing files are kept unless `force` (then overwritten)."""
    if provider not in {"auto", "mock", "openai", "anthropic"}:
        raise MindloopError(
            f"--provider must be one of auto, mock, openai, anthropic (got {provider!r})"
        )
    rtws = Path(rtws)
    if rtws.exists() and not rtws.is_dir():
        raise MindloopError(f"{rtws} exists and is not a directory")
    chosen = _provider_choice(provider, base_url)
    files: dict[str, str] = {
        ".minds/llm.yaml": _dump(_llm_yaml(base_url, model)),
        ".minds/team.yaml": _dump(_team_yaml(chosen, model)),
        f".minds/team/{DEFAULT_MEMBER}/persona.md": _PERSONA,
        f".minds/mock/{MOCK_MODEL}.yaml": _dump(_MOCK_SCRIPT),
        "tasks/example.tsk/goals.md": _GOALS,
        "tasks/example.tsk/constraints.md": _CONSTRAINTS,
        "tasks/example.tsk/progress.md": "",
        "README.md": _README,
        ".gitignore": ".mindloop/\n",
    }
    report = InitReport(rtws=rtws.resolve(), provider=chosen)
    for rel, content in files.items():
        path = rtws / rel
        if path.exists() and not force:
            report.skipped.append(rel)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        report.created.append(rel)
    return report
