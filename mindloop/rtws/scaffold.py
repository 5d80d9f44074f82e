"""`mindloop init`: scaffolds `.minds/` and an example task, never clobbering user files.

The provider is chosen from the environment: an OpenAI key (or an explicit base URL for a
local OpenAI-compatible server) → openai-compatible; an Anthropic key → anthropic;
otherwise the scripted mock provider, so a fresh project runs offline. A server on this
machine or the local network (vLLM, llama.cpp, Ollama) usually takes no key, so its entry
names no key variable unless asked to (`api_key_env`).

Files that exist are kept (unless `force`), and the report says so file by file: the
provider it names is the one the kept team.yaml uses, and options that only shape a kept
file are listed as not applied, never claimed.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

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


def _phase_end(hint: str, progress: str) -> dict[str, object]:
    return {
        "name": "phase_end",
        "arguments": {"next_behavior": hint, "summary": {"progress": progress}, "reason": progress},
    }


_CONSTRAINTS = "- MUST NOT delete user files.\n- MUST keep answers short.\n"

LOOP = "[work loop] Phase "  # how the work loop's phase inputs start
EXAMPLE_NODE = "Summarise README.md"

# `mindloop run tasks/example.tsk` on the mock: the example task's work loop plans one node,
# works it (reads README.md), checks it and ends; every entry is one step of that run.
_LOOP_ENTRIES: list[dict[str, object]] = [
    # first: SELF_IMPROVE's input quotes earlier messages of the dialog
    {"contains": LOOP + "SELF_IMPROVE", "tool_calls": [_phase_end("END", "nothing to keep")]},
    {
        "contains": LOOP + "PLAN",
        "tool_calls": [
            {
                "name": "node_create",
                "arguments": {
                    "parent_id": "root",
                    "kind": "EXECUTION",
                    "title": EXAMPLE_NODE,
                    "requirement": "Read README.md and say in a few sentences what it holds.",
                    "acceptance_criteria": [
                        {"when": "README.md is read", "then": "its summary is given"}
                    ],
                },
            }
        ],
    },
    {"role": "tool", "contains": "created n1", "tool_calls": [_phase_end("DO", "planned")]},
    {
        "contains": LOOP + "DO",
        "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}],
    },
    {
        "role": "tool",
        "contains": "README.md (lines",
        "context_contains": [LOOP + "DO"],
        "response": "README.md describes a small example project created by `mindloop init`.",
        "tool_calls": [
            {
                "name": "node_transition",
                "arguments": {
                    "node_id": "n1",
                    "to": "COMPLETE",
                    "reason": "README.md read and summarised",
                    "self_check": [
                        {"criterion": "AC1", "passed": True, "evidence": "read README.md"}
                    ],
                    "no_artifacts_reason": "the summary is the answer",
                },
            }
        ],
    },
    {"role": "tool", "contains": "→ COMPLETE", "tool_calls": [_phase_end("CHECK", "summarised")]},
    {
        "contains": LOOP + "CHECK",
        "tool_calls": [
            {
                "name": "node_transition",
                "arguments": {
                    "node_id": "n1",
                    "to": "DONE",
                    "reason": "the summary matches README.md",
                    "conclusion": "README.md summarised",
                },
            },
            _phase_end("END", "checked"),
        ],
    },
]

# The mock script answers the README's example chat and the example task's work loop
# offline, with real tool calls (edit it to script your own). The first matching entry
# wins, so the most specific entries come first.
_MOCK_SCRIPT = {
    "responses": [
        *_LOOP_ENTRIES,
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


TEAM_REL = ".minds/team.yaml"
LLM_REL = ".minds/llm.yaml"


@dataclass
class InitReport:
    """What `init_rtws` did. `provider` is what the members of team.yaml use now: the one
    configured here, or the kept file's (None when it cannot be read). `not_applied`
    names options that shaped only files that were kept."""

    rtws: Path
    provider: str | None
    created: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    not_applied: list[str] = field(default_factory=list)

    @property
    def team_kept(self) -> bool:
        return TEAM_REL in self.skipped


def is_local_url(url: str) -> bool:
    """Whether a base URL points at this machine or the local network (loopback, private
    or link-local addresses, `localhost`, `*.local`), where servers rarely want a key."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.is_loopback or addr.is_private or addr.is_link_local


def _openai_key_env(base_url: str | None, api_key_env: str | None) -> str | None:
    if api_key_env is not None:
        return api_key_env or None  # "" asks for no key variable
    if base_url and is_local_url(base_url):
        return None
    return "OPENAI_API_KEY"


def _provider_choice(provider: str, base_url: str | None) -> str:
    if provider != "auto":
        return provider
    if base_url or os.environ.get("OPENAI_API_KEY"):
        return "openai"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    return "mock"


def _llm_yaml(
    base_url: str | None, model: str | None, api_key_env: str | None = None
) -> dict[str, object]:
    openai: dict[str, object] = {
        "kind": "openai-compatible",
        "base_url": base_url or "https://api.openai.com/v1",
    }
    key_env = _openai_key_env(base_url, api_key_env)
    if key_env:
        openai["api_key_env"] = key_env
    openai["models"] = {
        (model or "gpt-4o-mini"): {"context_length": 128000, "max_output_tokens": 16384}
    }
    return {
        "providers": {
            "mock": {
                "kind": "mock",
                "script_dir": ".minds/mock",
                "models": {MOCK_MODEL: {"context_length": 128000}},
            },
            "openai": openai,
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


def _kept_provider(rtws: Path) -> str | None:
    """The provider the members of an existing team.yaml use by default, if readable."""
    try:
        data = yaml.safe_load((rtws / TEAM_REL).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    defaults = data.get("member_defaults") if isinstance(data, dict) else None
    provider = defaults.get("provider") if isinstance(defaults, dict) else None
    return provider if isinstance(provider, str) else None


def init_rtws(
    rtws: Path,
    *,
    force: bool = False,
    provider: str = "auto",
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
) -> InitReport:
    """Create the layout; existing files are kept unless `force` (then overwritten).
    `api_key_env`: the key variable of the openai entry (default: OPENAI_API_KEY, none
    for a local `base_url`; "" for none)."""
    if provider not in {"auto", "mock", "openai", "anthropic"}:
        raise MindloopError(
            f"--provider must be one of auto, mock, openai, anthropic (got {provider!r})"
        )
    if api_key_env and not _ENV_NAME.fullmatch(api_key_env):
        raise MindloopError(
            f"--api-key-env must be the NAME of an environment variable, got {api_key_env!r}"
        )
    rtws = Path(rtws)
    if rtws.exists() and not rtws.is_dir():
        raise MindloopError(f"{rtws} exists and is not a directory")
    chosen = _provider_choice(provider, base_url)
    files: dict[str, str] = {
        LLM_REL: _dump(_llm_yaml(base_url, model, api_key_env)),
        TEAM_REL: _dump(_team_yaml(chosen, model)),
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
    if report.team_kept:
        report.provider = _kept_provider(rtws)
    _not_applied(report, provider, base_url, model, api_key_env)
    return report


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _not_applied(
    report: InitReport,
    provider: str,
    base_url: str | None,
    model: str | None,
    api_key_env: str | None,
) -> None:
    """The options given that shape only files that were kept."""
    llm_kept = LLM_REL in report.skipped
    shaped = {
        "--provider": (provider != "auto", report.team_kept),
        "--model": (model is not None, report.team_kept),
        "--base-url": (base_url is not None, llm_kept),
        "--api-key-env": (api_key_env is not None, llm_kept),
    }
    report.not_applied = [opt for opt, (given, kept) in shaped.items() if given and kept]
