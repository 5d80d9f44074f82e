"""Config problems: what is wrong, in which file, on which line, at which key path.

pydantic's errors speak in `loc` tuples and developer prose ("Extra inputs are not
permitted"). The user edits YAML, so each error is turned into a `ConfigProblem` whose
text names the file, the line and the dotted key path, in words a user can act on. The
rewording is a table keyed by pydantic error type.
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from mindloop.errors import MindloopError

KeyPath = tuple[str | int, ...]


def dotted(path: KeyPath) -> str:
    return ".".join(str(part) for part in path)


def line_for(lines: Mapping[KeyPath, int], path: KeyPath) -> int | None:
    """Look `path` up in a line index (as `yaml_lines` builds it), falling back to the
    nearest ancestor that was written in the file."""
    for end in range(len(path), -1, -1):
        line = lines.get(tuple(path[:end]))
        if line is not None:
            return line
    return None


class ConfigProblem(BaseModel):
    """One thing wrong with the configuration."""

    file: str  # rtws-relative, e.g. ".minds/team.yaml"
    line: int | None = None
    column: int | None = None  # 1-based, in characters; only where a key path cannot point
    path: str = ""  # dotted key path, e.g. "members.ux.fbr-effort"
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.line is not None and self.column is not None:
            where += f":{self.column}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ConfigError(MindloopError):
    """The configuration is invalid; `problems` lists every problem found."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


# ---------------------------------------------------------------- rendering values

_SECRET = re.compile(r"^(sk-|sk_|sk-ant-|xai-|gsk_|AIza|ghp_|github_pat_|hf_)[A-Za-z0-9_\-]{8,}")


def looks_like_secret(value: object) -> bool:
    """True for strings shaped like a vendor API key (those must never be echoed)."""
    return isinstance(value, str) and bool(_SECRET.match(value.strip()))


def render_value(value: object) -> str:
    """Show a user's value the way they wrote it in YAML (101, 1.5, "3", true, null)."""
    if looks_like_secret(value):
        return "<a value that looks like an API key, not shown>"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


# ---------------------------------------------------------------- model introspection


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel inside `X`, `X | None`, `dict[str, X]` element, etc."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) is typing.Annotated:
        return model_in(get_args(annotation)[0])
    for arg in get_args(annotation):
        found = model_in(arg)
        if found is not None:
            return found
    return None


def container_of(annotation: Any) -> Any:
    """`dict`/`list` when the annotation (minus Optional) is one, else None."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            if arg is not type(None):
                return container_of(arg)
    return origin if origin in (dict, list) else None


def field_keys(model: type[BaseModel]) -> dict[str, str]:
    """YAML spelling → python field name, including validation aliases."""
    keys: dict[str, str] = {}
    for name, info in model.model_fields.items():
        alias = info.validation_alias
        choices = getattr(alias, "choices", None)
        if choices:
            for choice in choices:
                if isinstance(choice, str):
                    keys[choice] = name
        elif isinstance(alias, str):
            keys[alias] = name
        elif info.alias:
            keys[info.alias] = name
        keys.setdefault(name, name)
    return keys


def allowed_keys(root: type[BaseModel], parent: KeyPath) -> list[str]:
    """The keys a mapping at `parent` (relative to `root`) accepts, for "did you mean"."""
    model: type[BaseModel] | None = root
    container: Any = None  # a dict/list annotation whose next path part is a key/index
    for part in parent:
        if container is not None:
            model, container = model_in(container), None
            continue
        if model is None:
            return []
        name = field_keys(model).get(str(part))
        if name is None:
            return []
        annotation = model.model_fields[name].annotation
        if container_of(annotation) is not None:
            container = annotation
        else:
            model = model_in(annotation)
    if container is not None or model is None:
        return []
    dashed = _dash_spelled(model)
    return [k for k in field_keys(model) if "-" in k or k not in dashed]


def _dash_spelled(model: type[BaseModel]) -> set[str]:
    """Field names that users should write with a dash (their dashed alias exists)."""
    keys = field_keys(model)
    return {name for key, name in keys.items() if "-" in key}


# ---------------------------------------------------------------- pydantic error → problem

# Extra explanations for keys users commonly write by mistake (dominds spellings, secrets).
UNKNOWN_KEY_HINTS: dict[str, str] = {
    "api_key": "never put an API key in llm.yaml; set api_key_env to the NAME of the "
    "environment variable that holds it",
    "apiKey": "never put an API key in llm.yaml; set api_key_env to the NAME of the "
    "environment variable that holds it",
    "key": "never put an API key in llm.yaml; set api_key_env to the NAME of the "
    "environment variable that holds it",
    "apiKeyEnvVar": "use api_key_env",
    "apiType": "use kind (openai-compatible, anthropic or mock)",
    "baseUrl": "use base_url",
    "fbr_effort": "both fbr-effort and fbr_effort are set; use only fbr-effort",
    # removed from loop.memory.compaction: the loop never enforced it
    "idle_task_end": "no longer a key: an idle task does not end by itself; SELF_IMPROVE "
    "runs once every node is terminal (remove the line)",
}


def _got(err: ErrorDetails) -> str:
    return render_value(err.get("input"))


def _ctx(err: ErrorDetails, name: str) -> Any:
    return (err.get("ctx") or {}).get(name)


def _literal(err: ErrorDetails) -> str:
    return f"must be one of {_ctx(err, 'expected')}, got {_got(err)}"


def _bound(err: ErrorDetails, name: str) -> str:
    value = _ctx(err, name)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


MESSAGES: dict[str, Callable[[ErrorDetails], str]] = {
    "missing": lambda e: "missing required key",
    "int_type": lambda e: f"must be an integer, got {_got(e)}",
    "int_from_float": lambda e: f"must be an integer, got {_got(e)}",
    "float_type": lambda e: f"must be a number, got {_got(e)}",
    "string_type": lambda e: f"must be a string, got {_got(e)}",
    "bool_type": lambda e: f"must be true or false, got {_got(e)}",
    "list_type": lambda e: f"must be a list, got {_got(e)}",
    "dict_type": lambda e: f"must be a mapping, got {_got(e)}",
    "model_type": lambda e: f"must be a mapping, got {_got(e)}",
    "model_attributes_type": lambda e: f"must be a mapping, got {_got(e)}",
    "literal_error": _literal,
    "greater_than_equal": lambda e: f"must be >= {_bound(e, 'ge')}, got {_got(e)}",
    "greater_than": lambda e: f"must be > {_bound(e, 'gt')}, got {_got(e)}",
    "less_than_equal": lambda e: f"must be <= {_bound(e, 'le')}, got {_got(e)}",
    "less_than": lambda e: f"must be < {_bound(e, 'lt')}, got {_got(e)}",
    "string_too_short": lambda e: "must not be empty",
    "too_short": lambda e: f"must have at least {_ctx(e, 'min_length')} item(s)",
}


def _clean_loc(loc: tuple[Any, ...], data: Any) -> tuple[KeyPath, bool]:
    """Keep the parts of `loc` that are real keys/indexes of `data`.

    pydantic inserts union-branch tags ('str', 'list[str]', 'function-after[...]') into
    `loc`; they are not in the user's data. The last part is kept even when absent (a
    missing key). Returns the cleaned path and whether a tag was dropped.
    """
    out: list[str | int] = []
    dropped = False
    current = data
    for i, part in enumerate(loc):
        if part == "[key]":
            continue  # pydantic's marker of an error in a mapping's key: the key is the path
        is_key = isinstance(current, dict) and part in current
        is_index = isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        if is_key or is_index:
            current = current[part]
        elif i == len(loc) - 1 and isinstance(current, dict):
            current = None  # a missing key: keep it, it is what the user must add
        else:
            dropped = True
            continue
        out.append(part)
    return tuple(out), dropped


def _key_parts(key: str) -> KeyPath:
    return tuple(int(p) if p.isdigit() else p for p in key.split("."))


def _merge_union(first: str, second: str) -> str:
    """'must be a string, got 5' + 'must be a list, got 5' → 'must be a string or a list, got 5'."""
    a, sep_a, got = first.partition(", got ")
    b, sep_b, _ = second.partition(", got ")
    if not (sep_a and sep_b and b.startswith("must be ")):
        return first
    return f"{a} or {b.removeprefix('must be ')}, got {got}"


def problems_from_validation(
    err: ValidationError,
    *,
    file: str,
    lines: Mapping[KeyPath, int],
    model: type[BaseModel],
    data: Any,
    prefix: KeyPath = (),
) -> list[ConfigProblem]:
    """Translate a pydantic ValidationError on `model` validating `data`, which sits at
    `prefix` inside `file`, into located, reworded problems."""
    found: list[tuple[KeyPath, str, bool]] = []
    union_at: dict[KeyPath, int] = {}  # path → index in `found` of its union error
    for e in err.errors():
        loc, in_union = _clean_loc(e["loc"], data)
        extra_key = _ctx(e, "key")
        if isinstance(extra_key, str):
            loc = (*loc, *_key_parts(extra_key))
        kind = e["type"]
        if kind == "extra_forbidden":
            message = _unknown_key_message(model, loc)
        elif kind in MESSAGES:
            message = MESSAGES[kind](e)
        else:
            message = e["msg"]
            message = message[:1].lower() + message[1:]
            message = message.removeprefix("value error, ")
        path = (*prefix, *loc)
        if in_union and path in union_at:
            i = union_at[path]
            if message not in found[i][1]:
                found[i] = (path, _merge_union(found[i][1], message), True)
            continue
        if in_union:
            union_at[path] = len(found)
        found.append((path, message, in_union))
    return [
        ConfigProblem(file=file, line=line_for(lines, path), path=dotted(path), message=message)
        for path, message, _ in found
    ]


def _unknown_key_message(model: type[BaseModel], loc: KeyPath) -> str:
    key = str(loc[-1]) if loc else ""
    if key in UNKNOWN_KEY_HINTS:
        hint = UNKNOWN_KEY_HINTS[key]
        return hint if key == "fbr_effort" else f"unknown key: {hint}"
    allowed = allowed_keys(model, loc[:-1])
    if not allowed:
        return "unknown key"
    close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f"unknown key (did you mean {close[0]}?)"
    return "unknown key (allowed: " + ", ".join(allowed) + ")"
