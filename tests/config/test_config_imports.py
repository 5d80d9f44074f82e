"""The config package's modules import one another one way only (no import circles).

Read from the source (every `import`, including ones inside functions), so a circle
hidden behind a function-level import is found too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mindloop.config

PACKAGE = "mindloop.config"


def _imports(path: Path) -> set[str]:
    """The `mindloop.config.*` modules a source file imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found.update(n for n in names if n.startswith(PACKAGE + "."))
    return found


def _graph() -> dict[str, set[str]]:
    pkg_dir = Path(mindloop.config.__file__).parent
    modules = {f"{PACKAGE}.{p.stem}": p for p in pkg_dir.glob("*.py") if p.stem != "__init__"}
    return {name: _imports(path) & set(modules) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph`, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_config_modules_have_no_import_circle() -> None:
    graph = _graph()
    assert f"{PACKAGE}.problems" in graph and f"{PACKAGE}.yaml_lines" in graph
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
