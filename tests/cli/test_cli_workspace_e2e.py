"""Issue 11's "done means", end to end with real `mindloop` processes on the mock
provider: a member in `mindloop chat` builds a three-level tree with deps, dispatches a
node to a teammate with two docs (whose request provably holds those two and no other),
expires a doc (gone from the next prompt, still listed), splits a node, and the CLI
shows it all. Then kills at commits: after `mindloop run` the store and the projections
agree and every invariant holds."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from mindloop.store import Store
from mindloop.store.crash_points import CRASH_ENV
from mindloop.workspace import projection, repo
from mindloop.workspace.invariants import problems
from mindloop.workspace.models import NodeStatus
from tests.scenario_util import ml, write_script, write_team

TASK = "tasks/login.tsk"
BODIES = {
    "docs/auth.md": "AUTH_BODY_e1: JWT, 15 minute tokens.\n",
    "docs/api.md": "API_BODY_e2: POST /login returns a token.\n",
    "docs/db.md": "DB_BODY_e3: a users table.\n",
    "docs/notes.md": "NOTES_BODY_e4: old meeting notes.\n",
}
INTERRUPTED = "interrupted by a runtime restart"


def _create(parent: str, kind: str, title: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "node_create",
        "arguments": {
            "parent_id": parent,
            "kind": kind,
            "title": title,
            "requirement": f"{title}: do it well.",
            **extra,
        },
    }


def _call(name: str, **arguments: Any) -> list[dict[str, Any]]:
    return [{"name": name, "arguments": arguments}]


def _leaks(member: str, needles: list[str]) -> list[dict[str, Any]]:
    """Entries that answer first, and tell, if a request holds what it must not."""
    return [{"member": member, "context_contains": n, "response": f"LEAKED {n}"} for n in needles]


SCRIPT: list[dict[str, Any]] = [
    # ---- chat 1: plan a three-level tree with deps
    {
        "member": "lead",
        "match": "plan the login",
        "response": "Planning.",
        "tool_calls": [
            _create("root", "PLANNING", "Backend"),
            _create("root", "PLANNING", "Frontend"),
        ],
    },
    {
        "member": "lead",
        "role": "tool",
        "contains": "created n2 [",
        "tool_calls": [
            _create(
                "n1",
                "EXECUTION",
                "API",
                assignee="MEMBER:bob",
                docs=[
                    {"path": "docs/auth.md", "description": "auth design"},
                    {"path": "docs/api.md"},
                ],
                acceptance_criteria=[{"when": "POST /login", "then": "200 and a token"}],
            ),
            _create(
                "n1",
                "EXECUTION",
                "Schema",
                assignee="MEMBER:carol",
                docs=[{"path": "docs/db.md"}, {"path": "docs/notes.md", "description": "notes"}],
            ),
        ],
    },
    {
        "member": "lead",
        "role": "tool",
        "contains": "created n4 [",
        "tool_calls": [_create("n2", "EXECUTION", "Login form", deps=["n3"])],
    },
    {
        "member": "lead",
        "role": "tool",
        "contains": "created n5 [",
        "response": "Planned: three levels.",
    },
    # ---- chat 2: dispatch the API to bob (with its two docs)
    {
        "member": "lead",
        "match": "dispatch the API",
        "tool_calls": _call("node_dispatch", node_id="n3"),
    },
    {
        "member": "lead",
        "role": "tool",
        "contains": INTERRUPTED,
        "tool_calls": _call("node_dispatch", node_id="n3"),
    },
    {
        "member": "lead",
        "role": "tool",
        "contains": "dispatched n3 to @bob",
        "response": "Waiting for bob.",
    },
    {
        "member": "lead",
        "contains": "WAIT → COMPLETE (reply of @bob)",
        "response": "Noted: the API is done.",
    },
    *_leaks("bob", ["docs/db.md", "DB_BODY_e3", "docs/notes.md", "NOTES_BODY_e4"]),
    {
        "member": "bob",
        "context_contains": ["docs/auth.md", "AUTH_BODY_e1", "docs/api.md", "API_BODY_e2"],
        "response": "Implemented POST /login; AC1 passes.\nARTIFACT: src/api.py",
    },
    # ---- chat 3: expire a doc, then dispatch the schema to carol
    {
        "member": "lead",
        "match": "expire the notes and dispatch the schema",
        "tool_calls": _call(
            "node_reference", node_id="n4", target="docs/notes.md", action="expire"
        ),
    },
    {
        "member": "lead",
        "role": "tool",
        "contains": "expire: docs/notes.md on n4",
        "tool_calls": _call("node_dispatch", node_id="n4"),
    },
    {
        "member": "lead",
        "role": "tool",
        "contains": "dispatched n4 to @carol",
        "response": "Waiting for carol.",
    },
    {
        "member": "lead",
        "contains": "WAIT → COMPLETE (reply of @carol)",
        "response": "Noted: the schema is done.",
    },
    *_leaks(
        "carol", ["docs/notes.md", "NOTES_BODY_e4", "docs/auth.md", "AUTH_BODY_e1", "docs/api.md"]
    ),
    {
        "member": "carol",
        "context_contains": ["docs/db.md", "DB_BODY_e3"],
        "response": "Schema written.\nARTIFACT: migrations/001.sql",
    },
    # ---- chat 4: check the API, start the form and split it
    {
        "member": "lead",
        "match": "check the API and split the form",
        "tool_calls": _call(
            "node_transition",
            node_id="n3",
            to="DONE",
            reason="checked",
            conclusion="API verified",
            evidence="pytest green",
        ),
    },
    {
        "member": "lead",
        "role": "tool",
        "contains": "n3: COMPLETE → DONE",
        "tool_calls": _call(
            "node_transition", node_id="n5", to="IN_PROGRESS", reason="start the form"
        ),
    },
    {
        "member": "lead",
        "role": "tool",
        "contains": "n5: NEW → IN_PROGRESS",
        "tool_calls": _call(
            "node_split",
            parent_id="n5",
            title="Password field",
            requirement="Add the password field.",
            docs=[{"path": "docs/auth.md"}],
            inherit_context=False,
        ),
    },
    {"member": "lead", "role": "tool", "contains": "split n5", "response": "Split the form."},
]


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj)).returncode == 0
    assert (
        ml("task", "new", "-C", str(proj), "login", "--goal", "Users can log in.").returncode == 0
    )
    write_team(
        proj,
        {
            "lead": {"toolsets": ["fs", "control", "workspace"]},
            "bob": {"toolsets": ["fs"]},
            "carol": {"toolsets": ["fs"]},
        },
    )
    write_script(proj, SCRIPT)
    for rel, text in BODIES.items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(text)
    return proj


def _chat(
    proj: Path, message: str, dialog: str | None = None, env: dict[str, str] | None = None
) -> Any:
    where = ["--dialog", dialog] if dialog else ["-t", TASK]
    return ml("chat", "-C", str(proj), *where, message, "--json", env=env)


def _side(proj: Path, member: str) -> dict[str, Any]:
    listed = json.loads(ml("dialogs", "list", "-C", str(proj), "--json").stdout)
    [side] = [d for d in listed if d["member"] == member]
    return json.loads(ml("dialogs", "show", "-C", str(proj), side["id"], "--json").stdout)


def _consistent(proj: Path) -> list[str]:
    store = Store.for_rtws(proj)
    try:
        state = repo.load(store, TASK)
        return problems(state) + projection.problems(store, proj, TASK)
    finally:
        store.close()


def test_done_means_a_member_plans_dispatches_expires_splits_and_the_cli_shows_it(
    tmp_path: Path,
) -> None:
    proj = _project(tmp_path)
    first = _chat(proj, "plan the login")
    assert first.returncode == 0, first.stdout + first.stderr
    root = json.loads(first.stdout)["root_id"]
    for message in (
        "dispatch the API",
        "expire the notes and dispatch the schema",
        "check the API and split the form",
    ):
        out = _chat(proj, message, root)
        assert out.returncode == 0, out.stdout + out.stderr

    # bob's request held exactly the two docs dispatched to his node
    bob = _side(proj, "bob")
    first_message = bob["messages"][0]["data"]["text"]
    assert "AUTH_BODY_e1" in first_message and "API_BODY_e2" in first_message
    for absent in ("docs/db.md", "DB_BODY_e3", "docs/notes.md", "NOTES_BODY_e4", "README.md"):
        assert absent not in first_message, absent
    bob_said = [m["data"]["text"] for m in bob["messages"] if m["kind"] == "assistant"]
    assert bob_said == ["Implemented POST /login; AC1 passes.\nARTIFACT: src/api.py"]  # no LEAK
    # the expired doc left carol's prompt and stays listed
    carol_said = [
        m["data"]["text"] for m in _side(proj, "carol")["messages"] if m["kind"] == "assistant"
    ]
    assert carol_said == ["Schema written.\nARTIFACT: migrations/001.sql"]
    docs = json.loads(ml("docs", "list", "-C", str(proj), TASK, "--json").stdout)
    assert [d["path"] for d in docs] == [
        "docs/auth.md",
        "docs/api.md",
        "docs/db.md",
        "docs/notes.md",
    ]
    n4 = json.loads(ml("node", "show", "-C", str(proj), TASK, "n4", "--json").stdout)["node"]
    assert [(d["path"], d["status"]) for d in n4["docs"]] == [
        ("docs/db.md", "active"),
        ("docs/notes.md", "expired"),
    ]
    assert (
        "- [notes.md](docs/notes.md) - notes (expired)"
        in (proj / TASK / "workspace/nodes/Schema_n4/Info.md").read_text()
    )

    view = json.loads(ml("workspace", "show", "-C", str(proj), TASK, "--json").stdout)
    shape = {
        v["node"]["id"]: (v["depth"], v["node"]["status"], v["node"]["kind"]) for v in view["nodes"]
    }
    assert shape == {
        "root": (0, "IN_PROGRESS", "PLANNING"),
        "n1": (1, "IN_PROGRESS", "PLANNING"),
        "n3": (2, "DONE", "EXECUTION"),
        "n4": (2, "COMPLETE", "EXECUTION"),
        "n2": (1, "IN_PROGRESS", "PLANNING"),
        "n5": (2, "IN_PROGRESS", "PLANNING"),  # split while in progress
        "n6": (3, "NEW", "EXECUTION"),
        "n7": (3, "NEW", "EXECUTION"),
    }
    nodes = {v["node"]["id"]: v["node"] for v in view["nodes"]}
    assert nodes["n6"]["isolate"] and nodes["n7"]["deps"] == ["n6"] and view["focus"] == "n6"
    assert nodes["n3"]["conclusion"] == "API verified" and nodes["n4"]["artifacts"] == [
        "migrations/001.sql"
    ]
    tree = ml("workspace", "show", "-C", str(proj), TASK).stdout
    assert "✓ DONE n3 API TASK @bob" in tree and "◉ COMPLETE n4 Schema TASK @carol" in tree
    assert "○ NEW n6 Password field TASK" in tree and "◀ focus" in tree
    assert "○ NEW n7 Login form TASK deps: n6" in tree
    listed = json.loads(ml("dialogs", "show", "-C", str(proj), root, "--json").stdout)
    notes = [
        m["data"]["text"]
        for m in listed["messages"]
        if "[workspace] Node" in str(m["data"].get("text"))
    ]
    assert len(notes) == 2  # one per reply, in the root
    assert ml("check", "-C", str(proj)).returncode == 0
    assert _consistent(proj) == []


SAMPLE = int(os.environ.get("MINDLOOP_WORKSPACE_CRASH_POINTS", "6"))


@pytest.mark.sqlite_only  # a copied rtws per trial: its state must live in it
def test_a_kill_at_a_commit_leaves_store_and_projections_consistent_after_run(
    tmp_path: Path,
) -> None:
    """`dispatch the API` (tool effects, a detached reply with its sink, projections),
    killed at a sample of its commits; `mindloop run` resumes; the end state is the
    uninterrupted one and the files agree with the store."""
    template = _project(tmp_path / "template")
    assert _chat(template, "plan the login").returncode == 0
    root = json.loads(ml("dialogs", "list", "-C", str(template), "--json").stdout)[0]["id"]
    counted = tmp_path / "counted"
    shutil.copytree(template, counted, symlinks=True)
    log = tmp_path / "points.log"
    out = _chat(counted, "dispatch the API", root, env={CRASH_ENV: f"count:{log}"})
    assert out.returncode == 0, out.stdout + out.stderr
    points = [ln.split(" ", 2) for ln in log.read_text().splitlines() if ln.startswith("commit.")]
    assert points, "no commit was counted"
    # Always the commits of the workspace's own writes: the dispatch's tool step (its
    # effect and result) and the member's reply (the turn that runs the node sink);
    # then a sample of the others (MINDLOOP_WORKSPACE_CRASH_POINTS=<k>; 0 = all).
    key = [i for i, (_, _, where) in enumerate(points) if where == "dialogs.tool_step.run"]
    key += [  # every turn just after its commit: bob's reply (with the sink) is one
        i
        for i, (point, _, where) in enumerate(points)
        if where == "dialogs.turn.commit_turn" and point == "commit.after"
    ]
    rest = [i for i in range(len(points)) if i not in key]
    rng = random.Random(11)
    extra = rest if SAMPLE == 0 else rng.sample(rest, min(max(SAMPLE - len(key), 0), len(rest)))
    chosen = sorted({*key, *extra})
    # the dispatch's tool step (before, after: its generation commits with it, its calls
    # being store-only) and the three turns after it (bob's reply with the sink, the
    # root's answers)
    assert len(key) == 5, points
    for i in chosen:
        point, n, where = points[i]
        trial = tmp_path / f"t{i}"
        shutil.copytree(template, trial, symlinks=True)
        killed = _chat(trial, "dispatch the API", root, env={CRASH_ENV: f"{point}:{n}"})
        assert killed.returncode == 86, (point, n, where, killed.stdout, killed.stderr)
        resumed = ml("run", "-C", str(trial), "--json")
        assert resumed.returncode in (0, 4), (point, n, where, resumed.stdout, resumed.stderr)
        assert _consistent(trial) == [], (point, n, where)
        store = Store.for_rtws(trial)
        try:
            state = repo.load(store, TASK)
            history = store.load_history(root)
            sides = [d for d in store.list_dialogs(root_id=root) if d.member == "bob"]
        finally:
            store.close()
        node = state.nodes["n3"]
        if node.status is NodeStatus.COMPLETE:  # the dispatch had committed, or was redone
            assert node.artifacts == ["src/api.py"] and len(sides) == 1, (point, n, where)
            notes = [m for m in history if "[workspace] Node n3" in str(m.data.get("text"))]
            assert len(notes) == 1, (point, n, where)
        else:  # killed before the dispatch committed: the message was never answered
            assert node.status is NodeStatus.NEW and sides == [], (point, n, where, node.status)
