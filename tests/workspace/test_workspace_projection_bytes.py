"""The projection files are byte-identical to what they were when this test was written
(`projection_golden.json`): rendering may get faster, never different. Two workspaces (an
English and a Chinese one) are built through every kind of command with fixed times, their
files written after each commit (`write_changed`, the incremental path) and in one go
(`write`, what `mindloop run` does at start); both must be the golden bytes.

To regenerate after an intended change of the format: `GOLDEN_WRITE=1 pytest <this file>`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.store import Store
from mindloop.taskdoc.fsio import read_text_or_none
from mindloop.workspace import projection, repo
from mindloop.workspace.api import execute
from mindloop.workspace.commands import CriterionInput, DocInput, Session
from mindloop.workspace.models import (
    DocStatus,
    NodeKind,
    NodeStatus,
    NodeType,
    RefAction,
    SelfCheck,
)
from mindloop.workspace.transitions import Actor, Authority

GOLDEN = Path(__file__).with_name("projection_golden.json")
CHAT = Authority.chat("@dev")
CHECK = Authority.phase(Actor.CHECK, "@checker")
USER = Authority.user("alice")
T0 = 1_700_000_000.25


def _rtws(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    (root / ".minds").mkdir(parents=True)
    (root / "docs").mkdir()
    for doc in ("auth.md", "api.md", "my file (v2).md", "ops.md"):
        (root / "docs" / doc).write_text(f"# {doc}\n")
    (root / "README.md").write_text("# proj\n")
    return root


def _steps() -> list[tuple[Authority, object]]:
    """Commands, each committed on its own (a later one sees the earlier ones)."""
    ac = [CriterionInput("the form posts", "200 | ok", "pytest -k login")]

    def plan(s: Session) -> None:
        s.create_node(parent_id="root", kind=NodeKind.PLANNING, title="Backend", requirement="b")
        s.create_node(
            parent_id="n1",
            kind=NodeKind.EXECUTION,
            title="API – login & logout (v2)",
            requirement="Build it.\n\n### Constraints\n- JWT | cookies\n- `x\\y`",
            docs=[DocInput("docs/auth.md", "auth design"), DocInput("docs/my file (v2).md", "")],
            acceptance_criteria=ac,
            skills=["python"],
        )
        s.create_node(parent_id="n1", kind=NodeKind.EXECUTION, title="Schema", requirement="s")
        s.create_node(
            parent_id="root",
            kind=NodeKind.EXECUTION,
            title="E2E",
            type=NodeType.BENCH,
            requirement="test it all",
            acceptance_criteria=[CriterionInput("run", "green", "make e2e")],
            deps=["n2", "n3"],
        )

    def start(s: Session) -> None:
        s.transition(node_id="n2", to=NodeStatus.IN_PROGRESS, reason="start")

    def work(s: Session) -> None:
        s.update(node_id="n2", notes="half way:\n- a | b", artifacts=["src/api.py"])
        s.reference(node_id="n2", target="docs/api.md", action=RefAction.ADD, description="API")
        s.reference(node_id="n2", target="docs/auth.md", action=RefAction.EXPIRE)

    def finish(s: Session) -> None:
        s.transition(
            node_id="n2",
            to=NodeStatus.COMPLETE,
            reason="self-check passed",
            self_check=[SelfCheck(criterion="AC1", passed=True, evidence="ran\nit")],
        )

    def checked(s: Session) -> None:
        s.transition(node_id="n2", to=NodeStatus.DONE, reason="checked", conclusion="works | well")

    def rules(s: Session) -> None:
        s.add_rule("Use type hints everywhere", {"by": "alice", "via": "test"})
        s.add_rule("No `print` | use logging", {"by": "alice"})
        s.index_add("docs/ops.md", "runbook")
        s.index_status("docs/auth.md", DocStatus.EXPIRED, "old auth")
        s.record(None, "note", "a note with | pipes\nand lines")

    def split(s: Session) -> None:
        s.transition(node_id="n3", to=NodeStatus.IN_PROGRESS, reason="start")
        s.split_node(parent_id="n3", title="Tables", requirement="t", inherit_context=False)

    return [
        (CHAT, plan),
        (CHAT, start),
        (CHAT, work),
        (CHAT, finish),
        (CHECK, checked),
        (USER, rules),
        (CHAT, split),
    ]


def _build(rtws: Path, task: str, lang: str) -> Store:
    (rtws / task).mkdir(parents=True)
    store = Store.for_rtws(rtws, durable=False)
    for i, (authority, step) in enumerate(_steps()):
        execute(store, rtws, task, authority, step, lang=lang, now=T0 + 61.5 * i)  # type: ignore[arg-type]
    return store


def _files(directory: Path) -> dict[str, str]:
    return {
        p.relative_to(directory).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_files_are_the_golden_bytes_written_per_commit_and_at_once(
    tmp_path: Path, lang: str
) -> None:
    rtws = _rtws(tmp_path, f"proj-{lang}")
    task = f"tasks/login-{lang}.tsk"
    store = _build(rtws, task, lang)
    directory = projection.workspace_dir(rtws, task)
    incremental = _files(directory)
    rendered = projection.render(repo.load(store, task, cached=False), repo.log(store, task))
    for p in directory.rglob("*"):
        if p.is_file() and not p.name.startswith("."):
            p.unlink()
    projection.write(store, rtws, task)
    at_once = _files(directory)
    assert projection.problems(store, rtws, task) == []
    golden = json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.exists() else {}
    if os.environ.get("GOLDEN_WRITE"):
        golden[lang] = at_once
        GOLDEN.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", "utf-8")
    assert at_once == golden[lang]
    assert incremental == golden[lang]
    assert rendered == golden[lang]
    store.close()


json_values = st.recursive(
    st.one_of(st.text(), st.integers(), st.booleans(), st.none()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_graph_json_is_what_json_dumps_with_an_indent_writes(value: object) -> None:
    assert projection._pretty(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_what_orjson_refuses_is_written_by_json_dumps() -> None:
    for value in ({1: "a"}, [2**70], {"k": "\ud800 lone"}, {"k": [{"n": -(2**64)}]}):
        assert projection._pretty(value) == json.dumps(value, indent=2, ensure_ascii=False)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=100).map(str.encode)))
def test_a_file_is_read_back_as_read_text_or_none_reads_it(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "Info.md"
        path.write_bytes(data + b"\r\n\r" + data[:3])
        assert projection._read(str(path)) == read_text_or_none(path)


def test_a_missing_file_a_directory_and_a_link_read_as_none(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "file")
    for name in ("missing", "dir", "link"):
        assert projection._read(str(tmp_path / name)) is None
        assert read_text_or_none(tmp_path / name) is None
