"""Loading and checking `.minds/team.yaml` + `.minds/llm.yaml`.

`check_config` collects every problem it can find in one pass — YAML syntax, unknown keys,
wrong types, missing files, broken cross references — so `mindloop check` can list them
all; `load_config` raises `ConfigError` with that list, or returns a resolved `Config`.
Each part (a member, a provider) is also validated on its own, so one bad entry does not
hide the cross-reference problems of the others.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from mindloop.config.config import Config
from mindloop.config.llm import LlmConfig, ProviderConfig
from mindloop.config.mcp import MCP_FILE, McpConfig
from mindloop.config.nulls import NULL_MESSAGE, null_keys
from mindloop.config.problems import (
    UNKNOWN_KEY_HINTS,
    ConfigError,
    ConfigProblem,
    KeyPath,
    dotted,
    looks_like_secret,
    problems_from_validation,
)
from mindloop.config.team import (
    REQUIRED_MEMBER_KEYS,
    MemberConfig,
    MemberSpec,
    TeamConfig,
    TeamSpec,
    merged_member,
    resolve_team,
    source_path,
)
from mindloop.config.yaml_lines import YamlDoc, decode_text, load_yaml

TEAM_FILE = ".minds/team.yaml"
LLM_FILE = ".minds/llm.yaml"
FILE_ORDER = {TEAM_FILE: 0, LLM_FILE: 1, MCP_FILE: 2}

# Member ids are tellask targets (`!?@id`); these targets mean something else.
RESERVED_MEMBER_IDS: dict[str, str] = {
    "self": "@self starts Fresh Boots Reasoning",
    "human": "@human asks the human (Q4H)",
    "tellasker": "@tellasker asks back the dialog that asked",
}


@dataclass
class _Check:
    """Accumulates problems while the two files are checked."""

    rtws: Path
    problems: list[ConfigProblem] = field(default_factory=list)

    def add(self, doc: YamlDoc, path: KeyPath, message: str) -> None:
        self.problems.append(
            ConfigProblem(
                file=doc.file, line=doc.line_for(path), path=dotted(path), message=message
            )
        )

    def validate(
        self, doc: YamlDoc, model: type[BaseModel], data: Any, prefix: KeyPath = ()
    ) -> Any:
        """`model.model_validate(data)`, or None with the errors recorded as problems.

        Explicit nulls of keys that may only be left out are problems too (see `nulls`):
        validation alone would let the default replace them silently."""
        for path in null_keys(model, data):
            self.add(doc, (*prefix, *path), NULL_MESSAGE)
        try:
            return model.model_validate(data)
        except ValidationError as err:
            self.problems.extend(
                problems_from_validation(
                    err, file=doc.file, lines=doc.lines, model=model, data=data, prefix=prefix
                )
            )
            return None


def _read(check: _Check, rel: str) -> YamlDoc | None:
    path = check.rtws / rel
    if not path.is_file():
        what = "is missing" if not path.exists() else "is not a file"
        check.problems.append(
            ConfigProblem(
                file=rel, message=f"{what} (run `mindloop init` to create a starting config)"
            )
        )
        return None
    try:
        raw = path.read_bytes()
    except OSError as err:
        check.problems.append(ConfigProblem(file=rel, message=f"cannot be read: {err}"))
        return None
    text = decode_text(raw, rel)
    if isinstance(text, ConfigProblem):
        check.problems.append(text)
        return None
    doc = load_yaml(text, rel)
    check.problems.extend(doc.problems)
    return doc


def _root(check: _Check, doc: YamlDoc | None) -> dict[str, Any] | None:
    """The top-level mapping of a parsed file (an empty file is an empty mapping)."""
    if doc is None or (doc.data is None and doc.problems):
        return None  # unparseable: the syntax error is already reported
    if doc.data is None:
        return {}  # an empty file
    if not isinstance(doc.data, dict):
        check.problems.append(
            ConfigProblem(file=doc.file, line=1, message="the top level must be a mapping of keys")
        )
        return None
    return doc.data


def _walk(data: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    yield path, data
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _walk(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _walk(value, (*path, i))


_KEY_ADVICE = (
    "this looks like an API key; keep keys out of config files: set api_key_env in "
    ".minds/llm.yaml to the NAME of the environment variable that holds it"
)
_MCP_SECRET_ADVICE = (
    "this looks like a secret; keep secrets out of config files: write ${NAME} to use the "
    "environment variable NAME (or headers_env for a whole header)"
)


def _secrets(check: _Check, doc: YamlDoc, data: dict[str, Any], advice: str = _KEY_ADVICE) -> None:
    """Key-shaped literals anywhere in a config file are refused (and never echoed)."""
    for path, value in _walk(data):
        if not looks_like_secret(value) or not path:
            continue
        key = next((p for p in reversed(path) if isinstance(p, str)), "")
        if key == "api_key_env" or key in UNKNOWN_KEY_HINTS:
            continue  # reported by validation with a more specific message
        check.add(doc, path, advice)


# ---------------------------------------------------------------- llm.yaml


@dataclass
class _Llm:
    config: LlmConfig | None
    valid: dict[str, ProviderConfig]
    known: set[str]  # every provider name written, valid or not


def _check_llm(check: _Check, doc: YamlDoc | None) -> _Llm | None:
    data = _root(check, doc)
    if doc is None or data is None:
        return None
    _secrets(check, doc, data)
    providers = data.get("providers")
    if isinstance(providers, dict):
        for key, entry in providers.items():
            if isinstance(entry, dict) and "name" in entry:
                check.add(
                    doc,
                    ("providers", key, "name"),
                    "unknown key: a provider's name is its key under providers",
                )
                entry.pop("name")
    config = check.validate(doc, LlmConfig, data)
    valid: dict[str, ProviderConfig] = {}
    known: set[str] = set()
    if isinstance(providers, dict):
        known = set(providers)
        for key, entry in providers.items():
            try:  # quietly: the whole-file validation above already reported errors
                valid[key] = ProviderConfig.model_validate(
                    {"name": key, **entry} if isinstance(entry, dict) else entry
                )
            except ValidationError:
                continue
    return _Llm(config=config, valid=valid, known=known)


# ---------------------------------------------------------------- mcp.yaml


def _check_mcp(check: _Check) -> McpConfig | None:
    """mcp.yaml is optional: no file, no MCP servers."""
    if not (check.rtws / MCP_FILE).exists():
        return McpConfig()
    doc = _read(check, MCP_FILE)
    data = _root(check, doc)
    if doc is None or data is None:
        return None
    _secrets(check, doc, data, _MCP_SECRET_ADVICE)
    config: McpConfig | None = check.validate(doc, McpConfig, data)
    return config


# ---------------------------------------------------------------- team.yaml


def _quiet(model: type[BaseModel], data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def _check_member_ids(check: _Check, doc: YamlDoc, members: dict[str, Any]) -> None:
    for member_id in members:
        why = RESERVED_MEMBER_IDS.get(member_id.casefold())
        if why:
            check.add(doc, ("members", member_id), f"member id {member_id!r} is reserved: {why}")
        elif not member_id[:1].isalnum() or any(not (c.isalnum() or c in "_-.") for c in member_id):
            check.add(
                doc,
                ("members", member_id),
                "a member id must start with a letter or digit and use only letters, digits, "
                "'_', '-' and '.' (it is written as @id in tellasks)",
            )


def _check_team(check: _Check, doc: YamlDoc | None) -> tuple[TeamSpec, TeamConfig | None] | None:
    data = _root(check, doc)
    if doc is None or data is None:
        return None
    _secrets(check, doc, data)
    members_raw = data.get("members")
    if isinstance(members_raw, dict):
        _check_member_ids(check, doc, members_raw)
    spec = check.validate(doc, TeamSpec, data)
    if spec is None:
        # Resolve what is valid on its own, to still find its cross-reference problems.
        defaults = _quiet(MemberSpec, data.get("member_defaults") or {})
        members = {}
        if isinstance(members_raw, dict):
            for mid, raw in members_raw.items():
                own = _quiet(MemberSpec, raw or {})
                if own is not None:
                    members[mid] = own
        responder = data.get("default_responder")
        spec = TeamSpec.model_construct(
            member_defaults=defaults or MemberSpec.model_validate({}),
            members=members,
            default_responder=responder if isinstance(responder, str) else None,
        )
        known = list(members_raw) if isinstance(members_raw, dict) else []
        _, issues = resolve_team(spec, known_ids=known, report_missing=defaults is not None)
        for path, message in issues:
            check.add(doc, path, message)
        return spec, None
    team, issues = resolve_team(spec)
    for path, message in issues:
        check.add(doc, path, message)
    return spec, team


def _resolved_members(spec: TeamSpec) -> Iterator[tuple[str, MemberSpec, MemberConfig]]:
    """Every member that resolves on its own, even when the team as a whole does not."""
    for mid, own in spec.members.items():
        own = own or MemberSpec.model_validate({})
        data = merged_member(mid, spec.member_defaults, own)
        if all(data.get(k) is not None for k in REQUIRED_MEMBER_KEYS):
            yield mid, own, MemberConfig.model_validate(data)


def _cross_check(check: _Check, doc: YamlDoc, spec: TeamSpec, llm: _Llm | None) -> None:
    reported: set[tuple[str, str]] = set()

    def once(path: KeyPath, message: str) -> None:
        # A key inherited from member_defaults is wrong once, not once per member.
        if (dotted(path), message) not in reported:
            reported.add((dotted(path), message))
            check.add(doc, path, message)

    for mid, own, member in _resolved_members(spec):
        explicit = "persona" in own.set_keys().keys() | spec.member_defaults.set_keys().keys()
        if explicit and not (check.rtws / member.persona).is_file():
            once(
                source_path(mid, own, "persona"),
                f"persona file {member.persona} does not exist",
            )
        if llm is None:
            continue
        if member.provider not in llm.known:
            names = ", ".join(sorted(llm.known)) or "(none)"
            once(
                source_path(mid, own, "provider"),
                f"provider {member.provider!r} is not defined in {LLM_FILE} (providers: {names})",
            )
            continue
        provider = llm.valid.get(member.provider)
        if provider is not None and member.model not in provider.models:
            names = ", ".join(provider.models) or "(none)"
            once(
                source_path(mid, own, "model"),
                f"model {member.model!r} is not listed under providers.{member.provider}.models "
                f"in {LLM_FILE} (models: {names})",
            )


def _collect(rtws: Path) -> tuple[list[ConfigProblem], Callable[[], Config] | None]:
    rtws = Path(rtws)
    check = _Check(rtws=rtws)
    team_doc = _read(check, TEAM_FILE)
    llm_doc = _read(check, LLM_FILE)
    llm = _check_llm(check, llm_doc)
    mcp = _check_mcp(check)
    team = _check_team(check, team_doc)
    if team is not None and team_doc is not None:
        _cross_check(check, team_doc, team[0], llm)
    check.problems.sort(key=lambda p: (FILE_ORDER.get(p.file, 9), p.line or 0))
    if (
        check.problems
        or team is None
        or team[1] is None
        or llm is None
        or llm.config is None
        or mcp is None
    ):
        return check.problems, None
    team_config, llm_config, mcp_config = team[1], llm.config, mcp
    return [], lambda: Config(rtws=rtws, team=team_config, llm=llm_config, mcp=mcp_config)


def check_config(rtws: Path) -> list[ConfigProblem]:
    """Every problem of the rtws configuration, in file order per file; [] when valid."""
    problems, _ = _collect(rtws)
    return problems


def load_config(rtws: Path) -> Config:
    """The resolved configuration of `rtws`; raises ConfigError listing every problem."""
    problems, build = _collect(rtws)
    if build is None:
        raise ConfigError(problems or [ConfigProblem(file=TEAM_FILE, message="invalid config")])
    return build()


# ---------------------------------------------------------------- tool selection


def _unknown_name(kind: str, name: str, known: Collection[str], extra: str = "") -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"did you mean {close[0]}?" if close else f"{kind}s: {', '.join(known) or '(none)'}"
    return f"unknown {kind} {name!r} ({hint}){extra}"


def _doc(rtws: Path, rel: str) -> YamlDoc | None:
    try:
        text = (Path(rtws) / rel).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # reported by check_config
    return load_yaml(text, rel)


def located_problem(rtws: Path, rel: str, path: KeyPath, message: str) -> ConfigProblem:
    """A problem about the key at `path` of the config file `rel`, with the line it was
    written on (for problems found after loading: a module that does not import, an MCP
    server that does not start)."""
    doc = _doc(rtws, rel)
    line = doc.line_for(path) if doc is not None else None
    return ConfigProblem(file=rel, line=line, path=dotted(path), message=message)


def tool_selection_problems(
    rtws: Path, toolsets: Collection[str], tools: Collection[str], *, open_tools: bool = False
) -> list[ConfigProblem]:
    """`toolsets`/`tools` entries of team.yaml that name no toolset or tool of the registry
    the runtime will use (`toolsets`, `tools`: its names). The schema cannot know these
    names (a program may run the team with its own registry), so they are checked against
    one: `mindloop check` and the CLI commands use the registry the config describes.

    `open_tools`: the registry does not know every tool name yet (MCP servers not started
    by `check` without `--probe`), so names of single tools are not judged."""
    doc = _doc(rtws, TEAM_FILE)
    if doc is None:
        return []
    data = doc.data if isinstance(doc.data, dict) else {}
    scopes: list[tuple[KeyPath, Any]] = [(("member_defaults",), data.get("member_defaults"))]
    members = data.get("members")
    if isinstance(members, dict):
        scopes += [(("members", mid), spec) for mid, spec in members.items()]
    problems: list[ConfigProblem] = []
    for prefix, spec in scopes:
        if not isinstance(spec, dict):
            continue
        for key in ("toolsets", "tools"):
            entries = spec.get(key)
            for i, entry in enumerate(entries if isinstance(entries, list) else []):
                if not isinstance(entry, str):
                    continue  # a type error, reported by check_config
                name = entry.strip()
                excluded = name.startswith("!")
                target = name[1:].strip() if excluded else name
                if key == "toolsets":
                    if name == "*" or target in toolsets or (excluded and target in tools):
                        continue
                    if excluded and open_tools:
                        continue
                    message = _unknown_name(
                        "toolset",
                        target,
                        toolsets,
                        "; '*' selects all, '!name' excludes a toolset or one tool",
                    )
                else:
                    if target in tools or open_tools:
                        continue
                    message = _unknown_name("tool", target, tools, "; toolsets go under toolsets")
                path = (*prefix, key, i)
                problems.append(
                    ConfigProblem(
                        file=TEAM_FILE, line=doc.line_for(path), path=dotted(path), message=message
                    )
                )
        entries = spec.get("approval_required")
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            if not isinstance(entry, str) or entry in toolsets or entry in tools or open_tools:
                continue  # a type error is check_config's; a known name is fine
            path = (*prefix, "approval_required", i)
            message = _unknown_name("tool or toolset", entry, [*toolsets, *tools])
            problems.append(
                ConfigProblem(
                    file=TEAM_FILE, line=doc.line_for(path), path=dotted(path), message=message
                )
            )
    return problems
