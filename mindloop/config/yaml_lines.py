"""YAML loading that remembers where every key was written.

`yaml.safe_load` throws away positions, but every config error must name the file and the
line. So we `compose` the node graph (SafeLoader) and walk it ourselves, building plain
python objects plus an index from key path to 1-based line. Duplicate keys, which PyYAML
silently resolves to the last one, are reported as problems here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from mindloop.config.problems import ConfigProblem, KeyPath, dotted, line_for

MERGE_TAG = "tag:yaml.org,2002:merge"
# Aliases can make a small file expand enormously ("billion laughs"); config files are
# small, so a generous cap on visited nodes stops that without limiting real configs.
MAX_NODES = 100_000


class _Unloadable(Exception):
    """The document cannot be turned into data; carries the line and the reason."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass
class YamlDoc:
    """A parsed YAML file: plain data, key path → line, and the problems found so far."""

    file: str
    data: Any = None
    lines: dict[KeyPath, int] = field(default_factory=dict)
    problems: list[ConfigProblem] = field(default_factory=list)

    def line_for(self, path: KeyPath) -> int | None:
        """The line of `path`, or of its nearest ancestor that was written in the file."""
        return line_for(self.lines, path)


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


class _Walker:
    """Turns a composed node graph into python objects, recording key lines."""

    def __init__(self, doc: YamlDoc) -> None:
        self.doc = doc
        self.constructor = SafeConstructor()
        self.active: set[int] = set()  # ids of collection nodes being walked (alias loops)
        self.visited = 0

    def problem(self, path: KeyPath, line: int, message: str) -> None:
        self.doc.problems.append(
            ConfigProblem(file=self.doc.file, line=line, path=dotted(path), message=message)
        )

    def value(self, node: Node, path: KeyPath) -> Any:
        self.visited += 1
        if self.visited > MAX_NODES:
            raise _Unloadable(_line(node), f"too large: more than {MAX_NODES} values")
        if isinstance(node, ScalarNode):
            return self.scalar(node)
        if id(node) in self.active:
            raise _Unloadable(_line(node), "an alias refers to a value that contains it")
        self.active.add(id(node))
        try:
            if isinstance(node, MappingNode):
                return self.mapping(node, path)
            items = []
            for i, item in enumerate(node.value):
                self.doc.lines.setdefault((*path, i), _line(item))
                items.append(self.value(item, (*path, i)))
            return items
        finally:
            self.active.discard(id(node))

    def scalar(self, node: Node) -> Any:
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as err:  # e.g. an unknown tag such as !python/object
            raise _Unloadable(_line(node), f"YAML error: {err.problem or err}") from None
        except (ValueError, OverflowError) as err:  # e.g. a date like 2001-13-45
            raise _Unloadable(_line(node), f"invalid value {node.value!r}: {err}") from None

    def key(self, node: Node, path: KeyPath) -> str | None:
        if not isinstance(node, ScalarNode):
            self.problem(path, _line(node), "a mapping key must be a plain value")
            return None
        raw = self.scalar(node)
        if raw is None or isinstance(raw, bool):
            # `null:` / `yes:` as keys are almost always a typo; keep the source text.
            return str(node.value)
        return str(raw)

    def mapping(self, node: MappingNode, path: KeyPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        merged: list[tuple[Node, Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                merged.extend(self._merge_sources(value_node, path))
                continue
            key = self.key(key_node, path)
            if key is None:
                continue
            kpath = (*path, key)
            if key in first_line:
                self.problem(
                    kpath,
                    _line(key_node),
                    f"duplicate key {key!r} (first written at line {first_line[key]})",
                )
            first_line.setdefault(key, _line(key_node))
            self.doc.lines[kpath] = _line(key_node)
            out[key] = self.value(value_node, kpath)
        # `<<: *anchor` fills in keys the mapping did not set itself.
        for key_node, value_node in merged:
            key = self.key(key_node, path)
            if key is None or key in out:
                continue
            self.doc.lines[(*path, key)] = _line(key_node)
            out[key] = self.value(value_node, (*path, key))
        return out

    def _merge_sources(self, node: Node, path: KeyPath) -> list[tuple[Node, Node]]:
        sources = node.value if isinstance(node, SequenceNode) else [node]
        pairs: list[tuple[Node, Node]] = []
        for src in sources:
            if not isinstance(src, MappingNode):
                self.problem(path, _line(src), "'<<' must merge a mapping or a list of mappings")
                continue
            pairs.extend(src.value)
        return pairs


def decode_text(raw: bytes, file: str) -> str | ConfigProblem:
    """The text of a config file, or a problem at the line and column of its first byte
    that is not UTF-8 (the position an editor shows, so the user can find it).

    Lines are counted at `\n`; the column counts the characters before the bad byte on
    its line, plus one."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        good = raw[: err.start].decode("utf-8")  # everything before `start` decoded
        line_start = good.rfind("\n") + 1
        if err.reason == "unexpected end of data":
            why = "the file ends inside a multi-byte character"
        else:
            why = f"byte 0x{raw[err.start]:02x} does not begin a valid UTF-8 character"
        return ConfigProblem(
            file=file,
            line=good.count("\n") + 1,
            column=len(good) - line_start + 1,
            message=f"is not UTF-8 text ({why}): save it as UTF-8",
        )


def load_yaml(text: str, file: str) -> YamlDoc:
    """Parse `text` (the contents of `file`, an rtws-relative name used in problems).

    Never raises for bad YAML: a syntax error becomes a problem with the line of the
    error mark, and `data` stays None.
    """
    doc = YamlDoc(file=file)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        parts = [p for p in (err.context, err.problem) if p]
        doc.problems.append(
            ConfigProblem(
                file=file,
                line=int(mark.line) + 1 if mark is not None else None,
                path="",
                message="YAML syntax error: " + "; ".join(parts),
            )
        )
        return doc
    except yaml.YAMLError as err:
        doc.problems.append(
            ConfigProblem(file=file, line=None, path="", message=f"YAML error: {err}")
        )
        return doc
    if root is None:
        return doc
    walker = _Walker(doc)
    doc.lines[()] = _line(root)
    try:
        doc.data = walker.value(root, ())
    except _Unloadable as err:
        doc.problems.append(ConfigProblem(file=file, line=err.line, path="", message=err.message))
        doc.data = None
    return doc
