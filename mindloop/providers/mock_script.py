"""Mock provider scripts: the YAML format, its validation and its matching rules.

A script (`<script_dir>/<model>.yaml`) is a list of `responses` entries; the first entry
whose conditions hold for a request answers it. Scripts are written by people, so every
problem is reported as `<file>:<line>: <key path>: <what is wrong>`, and everything the
provider needs per call (normalised match text, compiled regexes, pre-split chunks,
serialised tool arguments) is computed once here, at load time, so a scripted answer costs
next to nothing at run time.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from mindloop.errors import MindloopError
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    GenerationRequest,
    ToolResultMessage,
    UserMessage,
)

# ---------------------------------------------------------------- text helpers


def normalize(text: str) -> str:
    """Case-insensitive, whitespace-collapsed form used by `match`, `contains` and
    `context_contains`. `casefold` maps character by character, so the normalised form of
    a prefix is a prefix of the normalised form (the unmatched-snippet relies on this)."""
    return " ".join(text.split()).casefold()


_CHUNK_RE = re.compile(r"\s*\S+\s*|\s+")


def split_chunks(text: str) -> list[str]:
    """Split text into word-sized chunks on whitespace boundaries.

    Every character is either whitespace or not, and each chunk takes a word with the
    whitespace around it, so `"".join(split_chunks(t)) == t` for every `t`."""
    return _CHUNK_RE.findall(text)


def message_text(message: ChatMessage) -> str:
    """The text a script matches against for one message."""
    if isinstance(message, UserMessage):
        return message.text
    if isinstance(message, ToolResultMessage):
        return message.content
    return message.text


# ---------------------------------------------------------------- the script schema


def _one_or_many(value: Any) -> Any:
    """`contains: "x"` is shorthand for `contains: ["x"]`."""
    return [value] if isinstance(value, str) else value


def _none_is_empty(value: Any) -> Any:
    """A bare `responses:` (null) is an empty list: a fresh file can start that way."""
    return [] if value is None else value


StrList = Annotated[list[str], BeforeValidator(_one_or_many), Field(min_length=1)]


class _Strict(BaseModel):
    """Script models: unknown keys are errors and YAML types are taken literally
    (`delay_ms: "5"` is a mistake worth reporting, not something to coerce)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ToolCallScript(_Strict):
    """A function call the mock model requests."""

    name: str = Field(min_length=1)
    arguments: Any = Field(default_factory=dict)

    @field_validator("arguments")
    @classmethod
    def _mapping_or_string(cls, value: Any) -> Any:
        if isinstance(value, dict | str):
            return value
        raise ValueError(
            "must be a mapping (sent as JSON) or a string (sent verbatim, e.g. invalid "
            f"JSON), got {type(value).__name__}"
        )

    def arguments_text(self) -> str:
        """The raw `arguments` text of the resulting ToolCall. Mappings are serialised to
        JSON; YAML-only values such as dates become strings."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False, default=str)


class UsageScript(_Strict):
    """Usage figures to report; an omitted figure is estimated (characters / 4)."""

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)


class ErrorScript(_Strict):
    """An injected failure. 429, 5xx and `timeout` are retriable (the retry layer retries
    them); other 4xx are not. `retry_after` (seconds) is what a real 429/5xx sends as
    `Retry-After`."""

    status: Any
    message: str = "injected mock error"
    times: int | None = Field(default=None, ge=1)
    retry_after: float | None = Field(default=None, ge=0)

    @field_validator("status")
    @classmethod
    def _status(cls, value: Any) -> Any:
        if value == "timeout" or (
            isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599
        ):
            return value
        raise ValueError(f"must be an HTTP status 400..599 or 'timeout', got {value!r}")

    @model_validator(mode="after")
    def _retry_after_with_a_retried_status(self) -> ErrorScript:
        if self.retry_after is not None and (self.status == "timeout" or not self.retriable):
            raise ValueError(
                "retry_after applies only to a status that is retried (429, 5xx), "
                f"got {self.status!r}"
            )
        return self

    @property
    def retriable(self) -> bool:
        return self.status == "timeout" or self.status == 429 or self.status >= 500

    @property
    def http_status(self) -> int | None:
        return None if self.status == "timeout" else int(self.status)


MATCHERS = ("match", "contains", "regex")
FILTERS = ("member", "role", "context_contains", "offers_tool")
OUTPUTS = ("thinking", "response", "tool_calls", "error")


class ResponseEntry(_Strict):
    """One scripted answer: conditions (a matcher and filters) and what it produces."""

    match: str | None = None
    contains: StrList | None = None
    regex: str | None = None
    default: bool = False

    member: str | None = None
    role: Literal["user", "tool", "assistant"] | None = None
    context_contains: StrList | None = None
    # The request offers this function tool: tells a standalone call that offers exactly
    # one tool (the Router's `route_message`) apart from a dialog's generation.
    offers_tool: str | None = Field(default=None, min_length=1)

    thinking: str | None = None
    response: str | None = None
    tool_calls: list[ToolCallScript] = Field(default_factory=list)
    usage: UsageScript | None = None
    delay_ms: float = Field(default=0, ge=0)
    chunk_delay_ms: float = Field(default=0, ge=0)
    error: ErrorScript | None = None
    after_chunks: int | None = Field(default=None, ge=0)

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value, re.DOTALL)
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _coherent(self) -> ResponseEntry:
        used = [key for key in MATCHERS if getattr(self, key) is not None]
        if len(used) > 1:
            raise ValueError(f"use exactly one of match, contains, regex (got {', '.join(used)})")
        if self.default and used:
            raise ValueError(f"`default: true` is a catch-all; remove `{used[0]}`")
        has_filter = any(getattr(self, key) is not None for key in FILTERS)
        if not used and not self.default and not has_filter:
            raise ValueError(
                "needs a condition: one of match, contains, regex; or a filter (member, "
                "role, context_contains, offers_tool); or `default: true` for a catch-all"
            )
        if self.after_chunks is not None and self.error is None:
            raise ValueError("`after_chunks` only applies together with `error`")
        produces = self.thinking is not None or self.response is not None or self.tool_calls
        if not produces and self.error is None:
            raise ValueError("produces nothing: add response, thinking, tool_calls or error")
        return self


class ScriptFile(_Strict):
    """The whole file: `responses:` and nothing else."""

    responses: Annotated[list[ResponseEntry], BeforeValidator(_none_is_empty)]


# Which model describes the mapping found under a key: used to suggest the intended
# key when a key is unknown.
_CHILD_MODELS: dict[type[BaseModel], dict[str, type[BaseModel]]] = {
    ScriptFile: {"responses": ResponseEntry},
    ResponseEntry: {"tool_calls": ToolCallScript, "usage": UsageScript, "error": ErrorScript},
}

# Plain-words messages for the pydantic error types a script author meets most.
_ERROR_MESSAGES: dict[str, str] = {
    "model_type": "expected a mapping, got {got}",
    "dict_type": "expected a mapping, got {got}",
    "list_type": "expected a list, got {got}",
    "string_type": "expected a string, got {got}",
    "int_type": "expected an integer, got {got}",
    "float_type": "expected a number, got {got}",
    "bool_type": "expected true or false, got {got}",
    "literal_error": "{msg}",
    "too_short": "must not be empty",
}


# ---------------------------------------------------------------- compiled entries


class RequestView:
    """The parts of a request the matchers look at, computed only when an entry asks."""

    def __init__(self, request: GenerationRequest) -> None:
        self.request = request
        last = request.messages[-1] if request.messages else None
        self.role: str | None = last.role if last is not None else None
        self.text: str = message_text(last) if last is not None else ""
        self.member = request.member

    @cached_property
    def tool_names(self) -> frozenset[str]:
        return frozenset(tool.name for tool in self.request.tools)

    @cached_property
    def normalized(self) -> str:
        return normalize(self.text)

    @cached_property
    def context(self) -> str:
        """System prompt and every message (including tool call names and arguments)."""
        parts = [self.request.system]
        for message in self.request.messages:
            parts.append(message_text(message))
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    parts.append(f"{call.name} {call.arguments}")
        return normalize("\n".join(parts))


@dataclass(frozen=True, slots=True)
class CompiledEntry:
    """A validated entry with everything precomputed for the hot path."""

    index: int
    line: int
    spec: ResponseEntry
    exact: str | None
    needles: tuple[str, ...]
    pattern: re.Pattern[str] | None
    context_needles: tuple[str, ...]
    thinking_chunks: tuple[str, ...]
    response_chunks: tuple[str, ...]
    tool_calls: tuple[tuple[str, str], ...]
    output_chars: int

    @classmethod
    def build(cls, index: int, line: int, spec: ResponseEntry) -> CompiledEntry:
        calls = tuple((call.name, call.arguments_text()) for call in spec.tool_calls)
        thinking = spec.thinking or ""
        response = spec.response or ""
        return cls(
            index=index,
            line=line,
            spec=spec,
            exact=normalize(spec.match) if spec.match is not None else None,
            needles=tuple(normalize(n) for n in spec.contains or ()),
            pattern=re.compile(spec.regex, re.DOTALL) if spec.regex is not None else None,
            context_needles=tuple(normalize(n) for n in spec.context_contains or ()),
            thinking_chunks=tuple(split_chunks(thinking)),
            response_chunks=tuple(split_chunks(response)),
            tool_calls=calls,
            output_chars=len(thinking) + len(response) + sum(len(n) + len(a) for n, a in calls),
        )

    def matches(self, view: RequestView) -> bool:
        """Cheap filters first, then the matcher, then the context scan."""
        spec = self.spec
        if spec.member is not None and spec.member != view.member:
            return False
        if spec.role is not None and spec.role != view.role:
            return False
        if spec.offers_tool is not None and spec.offers_tool not in view.tool_names:
            return False
        if self.exact is not None and self.exact != view.normalized:
            return False
        if self.needles:
            text = view.normalized
            if not all(needle in text for needle in self.needles):
                return False
        if self.pattern is not None and self.pattern.search(view.text) is None:
            return False
        if self.context_needles:
            context = view.context
            if not all(needle in context for needle in self.context_needles):
                return False
        return True


# ---------------------------------------------------------------- loading


class MockScriptError(MindloopError):
    """A script file cannot be used; `problems` holds one `file:line: ...` line each."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


# libyaml's loader when PyYAML was built with it (about ten times faster, same nodes and
# line marks): a fresh runtime parses its scripts on its first generation.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class MockScript:
    """A loaded, validated and compiled script file."""

    def __init__(self, path: Path, entries: Sequence[CompiledEntry]) -> None:
        self.path = path
        self.entries = tuple(entries)

    @classmethod
    def load(cls, path: Path) -> MockScript:
        """Read and validate `path`; raises MockScriptError listing every problem."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise MockScriptError([f"{path}: file not found"]) from None
        except OSError as exc:
            raise MockScriptError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MockScriptError([f"{path}:1: not valid UTF-8 ({exc.reason})"]) from None
        return cls.parse(text, path)

    @classmethod
    def parse(cls, text: str, path: Path) -> MockScript:
        """Validate script text; `path` is only used in messages and kept for display."""
        loader = _SafeLoader(text)
        try:
            node = loader.get_single_node()
            value = loader.construct_document(node) if node is not None else None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else 1
            what = exc.problem or exc.context or "invalid YAML"
            raise MockScriptError([f"{path}:{line}: YAML syntax error: {what}"]) from None
        except yaml.YAMLError as exc:
            raise MockScriptError([f"{path}:1: YAML error: {exc}"]) from None
        finally:
            loader.dispose()
        if node is None:
            raise MockScriptError(
                [f"{path}:1: the script is empty; expected `responses:` with a list of entries"]
            )
        problems = _duplicate_keys(node, path)
        try:
            script = ScriptFile.model_validate(value)
        except ValidationError as exc:
            problems.extend(_describe(err, node, path) for err in exc.errors())
        if problems:
            prefix = len(f"{path}:")
            problems.sort(key=lambda p: int(p[prefix:].split(":", 1)[0]))
            raise MockScriptError(problems)
        lines = _entry_lines(node)
        return cls(
            path,
            [
                CompiledEntry.build(i, lines[i] if i < len(lines) else 1, entry)
                for i, entry in enumerate(script.responses)
            ],
        )


def validate_script(path: Path) -> list[str]:
    """Problems of one script file as `<file>:<line>: <key path>: <message>` lines;
    an empty list when the file is usable (for `mindloop check`)."""
    try:
        MockScript.load(path)
    except MockScriptError as exc:
        return exc.problems
    return []


def validate_script_dir(script_dir: Path) -> list[str]:
    """Problems of every `*.yaml` script under `script_dir` (models with a `/` in their
    name live in subdirectories); a missing directory has none: it may not be used."""
    problems: list[str] = []
    if script_dir.is_dir():
        for path in sorted(script_dir.rglob("*.yaml")):
            problems.extend(validate_script(path))
    return problems


# ---------------------------------------------------------------- locating problems


def _format_loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_of(root: yaml.Node, loc: Sequence[int | str]) -> int:
    """1-based line of the YAML node at `loc` (the key's line for a mapping member), or of
    the deepest node that exists on the way there."""
    node = root
    for position, part in enumerate(loc):
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, child in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    if position == len(loc) - 1:
                        return int(key.start_mark.line) + 1
                    node = child
                    break
            else:
                break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
        else:
            break
    return int(node.start_mark.line) + 1


def _model_at(loc: Sequence[int | str]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = ScriptFile
    for part in loc:
        if isinstance(part, str):
            model = _CHILD_MODELS.get(model, {}).get(part) if model is not None else None
    return model


def _describe(err: Any, root: yaml.Node, path: Path) -> str:
    """One pydantic error as `file:line: key.path: message`."""
    loc = tuple(p for p in err["loc"] if isinstance(p, int | str))
    kind = err["type"]
    if kind == "extra_forbidden":
        key = loc[-1]
        message = f"unknown key '{key}'"
        model = _model_at(loc[:-1])
        if model is not None:
            close = difflib.get_close_matches(str(key), list(model.model_fields), n=1)
            if close:
                message += f" (did you mean '{close[0]}'?)"
        return f"{path}:{_line_of(root, loc)}: {_format_loc(loc[:-1]) or '<top>'}: {message}"
    if kind == "missing":
        owner = loc[:-1]
        line = _line_of(root, owner)
        return f"{path}:{line}: {_format_loc(owner) or '<top>'}: missing required key '{loc[-1]}'"
    got = type(err.get("input")).__name__
    if err.get("input") is None:
        got = "null"
    template = _ERROR_MESSAGES.get(kind)
    msg = str(err["msg"]).removeprefix("Value error, ")
    message = template.format(got=got, msg=msg) if template else msg
    if kind == "string_type" and isinstance(err.get("input"), bool):
        message += " (YAML reads unquoted yes/no/on/off/true/false as booleans: quote the text)"
    return f"{path}:{_line_of(root, loc)}: {_format_loc(loc) or '<top>'}: {message}"


def _duplicate_keys(root: yaml.Node, path: Path) -> list[str]:
    """YAML silently keeps the last of two equal keys; in a script that hides a mistake."""
    problems: list[str] = []
    seen_nodes: set[int] = set()

    def walk(node: yaml.Node, loc: tuple[int | str, ...]) -> None:
        if id(node) in seen_nodes:
            return
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for key, child in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else None
                if isinstance(name, str):
                    if name in keys:
                        line = key.start_mark.line + 1
                        problems.append(
                            f"{path}:{line}: {_format_loc(loc) or '<top>'}: duplicate key '{name}'"
                        )
                    keys.add(name)
                    walk(child, (*loc, name))
        elif isinstance(node, yaml.SequenceNode):
            for i, child in enumerate(node.value):
                walk(child, (*loc, i))

    walk(root, ())
    return problems


def _entry_lines(root: yaml.Node) -> list[int]:
    """1-based start line of each `responses` entry, for messages that point at one."""
    if isinstance(root, yaml.MappingNode):
        for key, child in root.value:
            if (
                isinstance(key, yaml.ScalarNode)
                and key.value == "responses"
                and isinstance(child, yaml.SequenceNode)
            ):
                return [int(item.start_mark.line) + 1 for item in child.value]
    return []
