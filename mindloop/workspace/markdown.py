"""The Markdown of the workspace's files, written and read back by one serializer.

Every rewrite path (a transition, a conclusion, a reference edit, an index change) renders
the whole file from the store with these functions, so a doc's status is written
everywhere or nowhere (upstream's flaw 1: two writers, one status-unaware). Each doc line
round-trips `{path, description, status}` exactly, including an empty description (flaw
5), a description that itself ends in `(expired)`, URLs, and paths with spaces or
parentheses:

    - [auth.md](docs/auth.md) - auth design (active)
    - [my file.md](<docs/my file.md>) (expired)

Sections run from `## <heading>` to the next line starting `## ` (the commands refuse
such a line inside a field); headings and hints come in the work language and are read in
either. Log tables escape `\\`, `|` and newlines, and a row is never skipped for its
content (flaw 7).
"""

from __future__ import annotations

import datetime as dt
import posixpath
import re
from collections.abc import Iterable, Sequence
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.nodes import Node as YamlNode
from yaml.representer import SafeRepresenter

from mindloop.i18n import Lang
from mindloop.workspace.models import Criterion, DocRef, DocStatus, LogEntry, Node, NodeKind
from mindloop.workspace.texts import HINTS_OF, heading, heading_key, hint, word

# ---------------------------------------------------------------------- doc lines

_STATUS_SUFFIX = re.compile(r" \((active|expired)\)$")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def doc_line(doc: DocRef) -> str:
    label = posixpath.basename(doc.path.rstrip("/")) or doc.path
    target = doc.path
    if any(c in target for c in " ()<>") or not target:
        target = f"<{target}>"
    desc = f" - {doc.description}" if doc.description else ""
    return f"- [{_escape_label(label)}]({target}){desc} ({doc.status.value})"


class ParseError(ValueError):
    pass


def parse_doc_line(line: str) -> DocRef:
    """A doc line as `doc_line` writes it; also the forms of hand edits and upstream files
    (no status suffix: active; `- [description](path)`: the link text as description)."""
    if not line.startswith("- ["):
        raise ParseError(f"not a doc line: {line!r}")
    i, label = 3, []
    while i < len(line) and line[i] != "]":
        if line[i] == "\\" and i + 1 < len(line):
            i += 1
        label.append(line[i])
        i += 1
    if line[i : i + 2] != "](":
        raise ParseError(f"not a doc line: {line!r}")
    i += 2
    if line[i : i + 1] == "<":
        end = line.find(">)", i)
        if end < 0:
            raise ParseError(f"unclosed <path>: {line!r}")
        path, i = line[i + 1 : end], end + 2
    else:
        end = line.find(")", i)
        if end < 0:
            raise ParseError(f"unclosed (path): {line!r}")
        path, i = line[i:end], end + 1
    rest = line[i:]
    status = DocStatus.ACTIVE
    m = _STATUS_SUFFIX.search(rest)
    if m:
        status = DocStatus(m.group(1))
        rest = rest[: m.start()]
    if rest.startswith(" - "):
        desc = rest[3:]
    elif rest == "":
        text = "".join(label)
        desc = "" if text == posixpath.basename(path.rstrip("/")) else text
    else:
        raise ParseError(f"unexpected text after the link: {line!r}")
    return DocRef(path=path, description=desc, status=status)


# ---------------------------------------------------------------------- sections


def _section(lang: Lang, key: str, body: str) -> str:
    parts = [heading(lang, key), ""]
    h = hint(lang, key)
    if h:
        parts += [h, ""]
    if body:
        parts += [body, ""]
    return "\n".join(parts)


def split_sections(text: str) -> tuple[dict[str, Any], str, dict[str, str]]:
    """(frontmatter, the text before the first section, section key → body). Unknown
    headings are kept under their own text."""
    front: dict[str, Any] = {}
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end < 0:
            raise ParseError("frontmatter without its closing '---'")
        loaded = yaml.safe_load(text[4:end])
        front = loaded if isinstance(loaded, dict) else {}
        text = text[end + 5 :]
    lines = text.split("\n")
    sections: dict[str, list[str]] = {}
    head: list[str] = []
    current: list[str] | None = None
    for ln in lines:
        if ln.startswith("## "):
            name = ln[3:]
            current = sections[heading_key(name) or name] = []
            continue
        (head if current is None else current).append(ln)
    bodies = {}
    for key, body in sections.items():
        if body and body[0] == "":
            body = body[1:]
        if body and body[0] in HINTS_OF.get(key, ()):
            body = body[2:] if len(body) > 1 and body[1] == "" else body[1:]
        while body and body[-1] == "":
            body.pop()
        bodies[key] = "\n".join(body)
    return front, "\n".join(head), bodies


# libyaml's emitter when PyYAML has it (about five times faster: an Info.md is rendered
# for every node a commit changes); the pure-Python one otherwise. Both write YAML that
# reads back the same; they may escape rare characters differently, which at most makes a
# file be rewritten once (its old text is still recorded as mindloop's, not a hand edit).
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


# The front matter is emitted from a YAML node graph built here from the JSON-like data,
# the way SafeRepresenter builds it under `yaml.dump(..., sort_keys=False)` (same tags,
# plain scalar style, block collections), skipping the representer's Python-level
# dispatch; the emitter still decides every quote and escape. On top of that each
# top-level `key: value` entry is emitted once and kept: in a root block mapping an
# entry's text depends on nothing but its own key and value (it starts on a line of its
# own at column 0; the document adds nothing between entries), so the file is the entries
# joined. Renders repeat most entries (kinds, statuses, empty lists, nulls, a node's id
# and title across its versions), and the emitter's round trips to the Python resolver
# were most of what remained; the entries not kept yet are emitted in one stream. A
# shared or recursive list/dict (it would need anchors), an empty document or a type
# other than str/int/bool/None/float/list/dict takes the old `yaml.dump` path whole.
# tests/workspace/test_workspace_front.py holds the bytes to `yaml.dump`'s.
_STR, _INT, _BOOL, _NULL, _SEQ, _MAP = (
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "bool", "null", "seq", "map")
)
_FLOATS = SafeRepresenter(default_flow_style=False, sort_keys=False)  # floats ignore aliases
_ENTRIES_KEPT = 8192
_entries: dict[tuple[Any, Any], str] = {}


class _Foreign(Exception):
    """Data the entry-wise path does not take: left to `yaml.dump`."""


def _frozen(data: Any, seen: set[int]) -> Any:
    """A hashable key that is equal only for data the emitter writes alike (types kept:
    1, True and 1.0 differ; floats by repr: 0.0 and -0.0 differ)."""
    kind = type(data)
    if kind is str or kind is int or kind is bool or data is None:
        return (kind, data)
    if kind is float:
        return (kind, repr(data))
    if (kind is not list and kind is not dict) or id(data) in seen:
        raise _Foreign
    seen.add(id(data))
    if kind is list:
        return (kind, tuple([_frozen(item, seen) for item in data]))
    return (kind, tuple([(_frozen(k, seen), _frozen(v, seen)) for k, v in data.items()]))


def _node(data: Any) -> YamlNode:
    """The node SafeRepresenter makes of `data` (no shared lists/dicts: `_frozen` saw)."""
    kind = type(data)
    if kind is str:
        return ScalarNode(_STR, data)
    if kind is int:
        return ScalarNode(_INT, str(data))
    if kind is bool:
        return ScalarNode(_BOOL, "true" if data else "false")
    if data is None:
        return ScalarNode(_NULL, "null")
    if kind is float:
        node: YamlNode = _FLOATS.represent_data(data)
        return node
    if kind is list:
        return SequenceNode(_SEQ, [_node(item) for item in data], flow_style=False)
    pairs = [(_node(k), _node(v)) for k, v in data.items()]
    return MappingNode(_MAP, pairs, flow_style=False)


class _Chunks:
    """The stream `_emitted` hands the emitter: text (it has an `encoding`), kept in chunks."""

    encoding = None

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.write = self.chunks.append


def _emitted(entries: Sequence[YamlNode]) -> list[str]:
    """Each one-entry mapping's text as a document of its own: written as the successive
    documents of one stream (one emitter set-up for all), each explicitly started with a
    `---` line that is cut off; any other start raises _Foreign."""
    stream = _Chunks()
    dumper = _DUMPER(stream, allow_unicode=True, width=1000, explicit_start=True)
    texts = []
    try:
        dumper.open()
        for entry in entries:
            dumper.serialize(entry)  # the emitter flushes at each document's end
            text = "".join(stream.chunks)
            stream.chunks.clear()
            if not text.startswith("---\n"):
                raise _Foreign
            texts.append(text[4:])
        dumper.close()
    finally:
        dumper.dispose()
    return texts


# A float whose `repr` is digits, a point and digits is written as that `repr`, plain,
# after its key (the emitter resolves it back to a float; no quote, no exponent to fix), so
# `key: <float>` is the key's text, ": ", the repr: `_plain_keys` holds the keys the emitter
# was seen to write so (`key: 1.5` came out as that), whose floats then skip it (a node's
# `created_at` and `updated_at` differ in every file, the kept entries never hold them).
_PLAIN_FLOAT = re.compile(r"-?[0-9]+\.[0-9]+")
_plain_keys: set[str] = set()


def _entry_key(k: Any, v: Any, seen: set[int]) -> tuple[Any, ...]:
    """The key of `k: v` among the kept entries: equal only for entries written alike (a
    text key and a scalar value, the usual entry, in one flat tuple)."""
    kind = type(v)
    if type(k) is str:
        if kind is str or kind is int or kind is bool or v is None:
            return (k, kind, v)
        if kind is float:
            return (k, kind, repr(v))
        if kind is list and id(v) not in seen and all(type(item) is str for item in v):
            seen.add(id(v))  # a list of texts (children, deps, skills ...)
            return (k, kind, tuple(v))
    return (_frozen(k, seen), _frozen(v, seen))


def _plain_float(key: tuple[Any, ...]) -> str | None:
    """The text of a `key: <float>` entry whose key and float need no emitter."""
    if (
        len(key) == 3
        and key[1] is float
        and key[0] in _plain_keys
        and _PLAIN_FLOAT.fullmatch(key[2])
    ):
        return f"{key[0]}: {key[2]}\n"
    return None


def _learn(key: tuple[Any, ...], text: str) -> None:
    plain = len(key) == 3 and key[1] is float and _PLAIN_FLOAT.fullmatch(key[2])
    if plain and text == f"{key[0]}: {key[2]}\n":
        if len(_plain_keys) >= _ENTRIES_KEPT:
            _plain_keys.clear()
        _plain_keys.add(key[0])


def _front(data: dict[str, Any]) -> str:
    return _fronts([data])[0]


def _fronts(datas: Sequence[dict[str, Any]]) -> list[str]:
    """`_front` of each: the entries none of them has kept yet emitted in one stream for
    all (a projection write renders every node it touched at once)."""
    out: list[str] = []
    todo: dict[tuple[Any, ...], tuple[Any, Any]] = {}  # entries to emit, by key
    waiting: list[tuple[list[str], list[tuple[int, tuple[Any, ...]]]]] = []
    for data in datas:
        try:
            if not data:
                raise _Foreign
            seen: set[int] = {id(data)}
            keys = [_entry_key(k, v, seen) for k, v in data.items()]
        except _Foreign:
            out.append(_dumped(data))
            continue
        body: list[str] = []
        missing: list[tuple[int, tuple[Any, ...]]] = []
        for key, item in zip(keys, data.items(), strict=True):
            text = _entries.get(key) or _plain_float(key)
            if text is None:
                missing.append((len(body), key))
                todo.setdefault(key, item)
                text = ""
            body.append(text)
        out.append("")
        if missing:
            waiting.append((body, missing))
        else:
            out[-1] = "---\n" + "".join(body) + "---\n"
    if not todo:
        return out
    try:
        texts = _emitted(
            [MappingNode(_MAP, [(_node(k), _node(v))], flow_style=False) for k, v in todo.values()]
        )
    except _Foreign:
        if len(datas) > 1:  # which one the emitter wrote otherwise: each on its own
            return [_front(data) for data in datas]
        return [_dumped(datas[0])]
    if len(_entries) + len(texts) > _ENTRIES_KEPT:
        _entries.clear()
    made = dict(zip(todo, texts, strict=True))
    for key, text in made.items():
        _entries[key] = text
        _learn(key, text)
    filled = iter(waiting)
    for i, text in enumerate(out):
        if not text:
            body, missing = next(filled)
            for at, key in missing:
                body[at] = made[key]
            out[i] = "---\n" + "".join(body) + "---\n"
    return out


def _dumped(data: dict[str, Any]) -> str:
    dumped = yaml.dump(data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{dumped}---\n"


# ---------------------------------------------------------------------- Workspace.md


def workspace_md(
    *, task: str, lang: Lang, rules: Sequence[str], index: Sequence[DocRef], found: Sequence[DocRef]
) -> str:
    name = task.rsplit("/", 1)[-1].removesuffix(".tsk")
    out = [_front({"task": task, "language": lang}), f"# {word(lang, 'title')}: {name}", ""]
    out.append(_section(lang, "rules", "\n".join(f"- {r}" for r in rules)))
    out.append(_section(lang, "docs", "\n".join(doc_line(d) for d in index)))
    if found:
        out.append(_section(lang, "found", "\n".join(doc_line(d) for d in found)))
    return "\n".join(out).rstrip("\n") + "\n"


def parse_workspace_md(text: str) -> tuple[list[str], list[DocRef], list[DocRef]]:
    """(rules, doc index, docs found at start)."""
    _, _, sections = split_sections(text)
    rules = [ln[2:] for ln in sections.get("rules", "").split("\n") if ln.startswith("- ")]
    index = [parse_doc_line(ln) for ln in sections.get("docs", "").split("\n") if ln.strip()]
    found = [parse_doc_line(ln) for ln in sections.get("found", "").split("\n") if ln.strip()]
    return rules, index, found


# ---------------------------------------------------------------------- Info.md

_FRONT_FIELDS = (
    "id",
    "title",
    "kind",
    "type",
    "status",
    "assignee",
    "parent_id",
    "children",
    "deps",
    "skills",
    "can_start_immediately",
    "isolate",
    "artifacts",
    "no_artifacts_reason",
    "blockers",
    "self_check",
    "attempt",
    "adjust_count",
    "steps_used",
    "step_budget",
    "checkpoint_ref",
    "checked_ref",
    "check_report_ref",
    "supersedes",
    "dispatch",
    "version",
    "created_by",
    "created_at",
    "updated_at",
)


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "\\n")


def _uncell(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append("\n" if nxt == "n" else nxt)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _cells(line: str) -> list[str]:
    """Split a table row on unescaped `|`."""
    inner = line.strip()
    if not (inner.startswith("|") and inner.endswith("|")):
        raise ParseError(f"not a table row: {line!r}")
    inner = inner[1:-1]
    cells, cur, i = [], [], 0
    while i < len(inner):
        c = inner[i]
        if c == "\\" and i + 1 < len(inner):
            cur.append(inner[i : i + 2])
            i += 2
            continue
        if c == "|":
            cells.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    cells.append("".join(cur))
    return [_uncell(c) for c in _strip_pad(cells)]


def _strip_pad(cells: list[str]) -> list[str]:
    """Cells as written by `_row`: one space of padding each side."""
    out = []
    for c in cells:
        if c.startswith(" "):
            c = c[1:]
        if c.endswith(" "):
            c = c[:-1]
        out.append(c)
    return out


# Rendered Info.md by (language, the node as JSON): the projections are rewritten after
# every workspace commit, and re-rendering every node's YAML front matter each time made a
# change cost grow with the tree. A node's JSON is cheap to make and decides its text.
_INFO_KEPT = 4096
_info_cache: dict[tuple[str, str], str] = {}


def info_md(node: Node, lang: Lang) -> str:
    return info_mds([node], lang)[0]


def info_mds(nodes: Sequence[Node], lang: Lang) -> list[str]:
    """`info_md` of each node; the front matter of those not kept yet in one emitter pass."""
    keys = [(lang, node.model_dump_json()) for node in nodes]
    out = [_info_cache.get(key, "") for key in keys]
    missing = [i for i, text in enumerate(out) if not text]
    if missing:
        datas = [nodes[i].model_dump(mode="json") for i in missing]
        fronts = _fronts([{k: data[k] for k in _FRONT_FIELDS} for data in datas])
        for i, front in zip(missing, fronts, strict=True):
            if len(_info_cache) >= _INFO_KEPT:
                _info_cache.clear()
            out[i] = _info_cache[keys[i]] = _render_info(nodes[i], lang, front)
    return out


def _render_info(node: Node, lang: Lang, front: str) -> str:
    kind = word(lang, "planning" if node.kind is NodeKind.PLANNING else "execution")
    if node.kind is NodeKind.EXECUTION:
        kind += f" ({node.type.value})"
    out = [front, f"# {node.title}", ""]
    out.append(_section(lang, "node_type", kind))
    out.append(_section(lang, "requirement", node.requirement))
    if node.acceptance_criteria:
        rows = [word(lang, "criteria_head"), "|---|---|---|---|"]
        rows += [_row([c.id, c.when, c.then, c.verify or ""]) for c in node.acceptance_criteria]
        out.append(_section(lang, "criteria", "\n".join(rows)))
    out.append(_section(lang, "doc_refs", "\n".join(doc_line(d) for d in node.docs)))
    out.append(_section(lang, "notes", node.notes))
    out.append(_section(lang, "conclusion", node.conclusion))
    return "\n".join(out).rstrip("\n") + "\n"


def parse_info_md(text: str) -> dict[str, Any]:
    """The node's fields as `info_md` wrote them (frontmatter plus sections)."""
    front, _, sections = split_sections(text)
    out = dict(front)
    out["requirement"] = sections.get("requirement", "")
    out["notes"] = sections.get("notes", "")
    out["conclusion"] = sections.get("conclusion", "")
    out["docs"] = [
        parse_doc_line(ln) for ln in sections.get("doc_refs", "").split("\n") if ln.strip()
    ]
    criteria = []
    for ln in sections.get("criteria", "").split("\n")[2:]:
        if ln.strip():
            cid, when, then, verify = ([*_cells(ln), "", "", "", ""])[:4]
            criteria.append(Criterion(id=cid, when=when, then=then, verify=verify or None))
    out["acceptance_criteria"] = criteria
    return out


# ---------------------------------------------------------------------- Log.md


# A log row's time to the second, by the second: a run's rows fall in a few seconds, and a
# whole projection write formats every row of the log. The second is `at`'s whole part
# unless `datetime` would round its microseconds up into the next one (a fraction from
# .999999 on, and times before 1970, are formatted by `datetime` itself, uncached).
_SECONDS_KEPT = 4096
_seconds: dict[int, str] = {}


def stamp(at: float) -> str:
    whole = int(at)
    if at >= 0 and at - whole < 0.999999:
        text = _seconds.get(whole)
        if text is None:
            if len(_seconds) >= _SECONDS_KEPT:
                _seconds.clear()
            text = _seconds[whole] = _formatted(float(whole))
        return text
    return _formatted(at)


def _formatted(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def log_md(entries: Sequence[LogEntry], lang: Lang) -> str:
    return log_lines_md([(e.at, e.actor, e.text) for e in entries], lang)


def log_lines_md(lines: Iterable[tuple[float, str, str]], lang: Lang) -> str:
    """`log_md` of (at, actor, text) rows (what the projections read of the log)."""
    stamps: dict[float, str] = {}  # a command's rows share their time
    rows = [word(lang, "log_head"), "|---|---|---|"]
    for at, actor, text in lines:
        when = stamps.get(at)
        if when is None:
            when = stamps[at] = stamp(at)
        rows.append(f"| {_cell(when)} | {_cell(actor)} | {_cell(text)} |")
    return _section(lang, "log", "\n".join(rows)).rstrip("\n") + "\n"


def parse_log_md(text: str) -> list[tuple[str, str, str]]:
    """(time, actor, event) per row; the header is the first two lines, whatever they say."""
    _, _, sections = split_sections(text)
    lines = sections.get("log", "").split("\n")[2:]
    out = []
    for ln in lines:
        if ln.strip():
            cells = _cells(ln)
            if len(cells) != 3:
                raise ParseError(f"a log row has {len(cells)} cells: {ln!r}")
            out.append((cells[0], cells[1], cells[2]))
    return out
