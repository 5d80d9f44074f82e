"""A task's work loop in a real browser (headless Chromium), against a real `mindloop web`
on the mock provider: started, watched and steered from the task's page.

- the demo played by a new user in the browser only: `mindloop demo --init` makes the
  project; the task is started with the task page's composer, the page follows the loop
  live (phase, node tree, Taskdoc) while the server drives it, the question is answered
  and the approval given in the inbox, until the task is DONE; its nodes' pages lead to
  the dialogs that worked them;
- the composer refuses an empty message with an error read with its field, takes a
  message with the keyboard, and a task that ended DONE takes a new one as new scope
  (PLAN again) — all on one page that is never reloaded;
- a node's own page shows its requirement, criteria, doc references (an expired one
  marked), relations, log and context, and follows changes live.

Every wait is on something observable (the page, the store, a process's output).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mindloop.config.caps import format_usd
from mindloop.store import Store
from tests.dialogs.procs import Procs, read_store
from tests.scenario_util import ml, write_script, write_team
from tests.web.webproc import connected, fits, open_page, plan_login, start_web

TIMEOUT_MS = 90_000  # a whole loop under load
TASK = "tasks/example.tsk"

# A loop that plans twice, each time after a question: PLAN parks on the human, so the
# page can be seen in PLAN whatever the machine's speed.
LOOP_SCRIPT: list[dict[str, Any]] = [
    {"contains": "Phase SELF_IMPROVE", "response": "Nothing to improve."},
    {"contains": ["answer from the human", "Anything else?"], "response": "Second scope planned."},
    {"contains": "answer from the human", "response": "Planned: nothing to execute."},
    {
        "contains": ["Phase PLAN", "entry 3"],
        "response": "One more decision.\n!?@human Anything else?\n",
    },
    {"contains": "Phase PLAN", "response": "One decision first.\n!?@human Which scope?\n"},
]


@pytest.fixture
def procs(rtws: Path, tmp_path: Path) -> Iterator[Procs]:
    write_team(rtws, {"dev": {"toolsets": ["*"]}})
    write_script(rtws, LOOP_SCRIPT)
    procs = Procs(rtws, tmp_path / "logs")
    try:
        yield procs
    finally:
        procs.close()


def _keep(page: Any) -> None:
    """Mark the page: `_kept` says later that it was never reloaded or left."""
    page.evaluate("window.mindloopKept = true")


def _kept(page: Any) -> bool:
    return bool(page.evaluate("window.mindloopKept === true"))


def _loop_is(page: Any, status: str, phase: str | None = None) -> None:
    loop = page.locator("[data-loop]")
    loop.locator("[data-loop-status]", has_text=re.compile(f"^{status}$")).wait_for(
        timeout=TIMEOUT_MS
    )
    if phase is not None:
        assert loop.locator("[data-loop-phase]").inner_text() == phase


def _user_texts(store: Store, task: str) -> list[str]:
    found = store.task_by_path(task)
    assert found is not None
    return [
        str(m.data.get("text", "")).split("\n")[0]
        for m in store.load_history(found.root_id)
        if m.kind == "user"
    ]


# ---------------------------------------------------------------------------- the demo


def test_the_demo_is_started_watched_answered_and_approved_in_the_browser_until_done(
    tmp_path: Path, page: Any
) -> None:
    """`mindloop demo --init` and `mindloop web`, then the browser only."""
    from mindloop.demo import DEMO_PROMPT, DEMO_TASK, HUMAN_ANSWER
    from mindloop.demo.script import PROGRESS_TEXT

    rtws = tmp_path / "demo"
    made = ml("demo", "--init", "--dir", str(rtws))
    assert made.returncode == 0, made.stdout + made.stderr
    _price(rtws)
    procs = Procs(rtws, tmp_path / "logs")
    try:
        web = start_web(procs)
        open_page(page, web)
        page.get_by_role("link", name=DEMO_TASK).click()  # from the task list
        page.wait_for_url(f"{web.base}/task/{DEMO_TASK}")
        connected(page)
        page.locator("[data-no-loop]").wait_for()  # nothing started yet
        page.locator("[data-no-workspace]").wait_for()
        _keep(page)

        # Start the task: a message to its work loop, from the task's page.
        page.get_by_label("Message to the work loop").fill(DEMO_PROMPT)
        page.get_by_role("button", name="Send to the loop").click()
        # The page follows the loop live: planning, stopped on the human's question.
        page.locator("#pane-questions [data-question]", has_text="Keep a Changelog").wait_for(
            timeout=TIMEOUT_MS
        )
        _loop_is(page, "WAITING", "PLAN")
        assert page.get_by_label("Message to the work loop").input_value() == ""
        assert page.url == f"{web.base}/task/{DEMO_TASK}"

        # The inbox (another tab): answer the question …
        inbox = page.context.new_page()
        inbox.goto(web.base + "/inbox")
        connected(inbox)
        question = inbox.locator("[data-question]")
        assert "Keep a Changelog" in question.inner_text()
        question.get_by_label("Your answer to @dev").fill(HUMAN_ANSWER)
        question.get_by_role("button", name="Answer").click()
        inbox.locator("[data-no-questions]").wait_for()
        # … and, once the team wants to publish the release notes, approve the move.
        item = inbox.locator("[data-approval]")
        item.wait_for(timeout=TIMEOUT_MS)  # it arrives live
        assert item.locator("[data-approval-tool]").inner_text() == "move"
        assert "RELEASE_NOTES.md" in item.locator("[data-approval-arguments]").inner_text()
        # Meanwhile the task page drew the plan live (four nodes under the root) and shows
        # what the loop waits for.
        page.locator('[data-node="n4"]').wait_for()
        page.locator("#pane-questions [data-approval]").wait_for()
        item.get_by_role("button", name="Approve").click()
        inbox.locator("[data-no-approvals]").wait_for()
        inbox.locator('[data-inbox-count="0"]').wait_for()
        page.locator("#pane-questions [data-no-approvals]").wait_for()

        # The task page, never reloaded, follows the loop to DONE.
        _loop_is(page, "DONE")
        assert _kept(page)
        # The node tree is its own fragment: it may follow the loop's status a moment later.
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-node] [data-node-status]')]"
            ".every(e => e.textContent.trim() === 'DONE')"
        )
        nodes = page.locator("[data-node] [data-node-status]").all_inner_texts()
        assert nodes == ["DONE"] * 5
        progress = page.locator('[data-section="progress"]')
        assert progress.locator("[data-actor]").inner_text() == "dev"
        assert PROGRESS_TEXT.strip("- ") in progress.locator("[data-content]").inner_text()

        # A node's page: the contributing guide, worked by the reviewer in a side dialog.
        page.locator('[data-node="n2"] [data-node-link]').click()
        page.wait_for_url(f"{web.base}/task/{DEMO_TASK}/node/n2")
        connected(page)
        assert page.locator("h1").inner_text() == "Node n2 Contributing guide"
        assert "CONTRIBUTING.md" in page.locator("[data-node-requirement]").inner_text()
        assert page.locator("[data-node-status]").inner_text() == "DONE"
        assert page.locator("[data-node-assignee]").inner_text() == "@reviewer"
        assert page.locator('[data-node-dep="n1"]').inner_text().startswith("n1 Changelog")
        assert page.locator("[data-node-conclusion]").inner_text() != ""
        assert "self-check passed" in page.locator('[data-criterion="AC1"]').inner_text()
        assert "dispatched to @reviewer" in page.locator(".node-log").inner_text()
        worked = page.locator("[data-node-dialog]")
        assert worked.count() == 1 and "@reviewer" in worked.inner_text()
        worked.get_by_role("link").click()
        page.wait_for_url(re.compile(r"/dialogs/\w+$"))
        side = page.url.rsplit("/", 1)[1]
        page.locator(".entry.k-assistant").first.wait_for()
        assert read_store(rtws, lambda s: s.get_dialog(side).member) == "reviewer"
        # The loop root's tree: the teammate and the three FBR samples.
        tree = page.locator(".tree-list")
        assert tree.locator("text=FBR").count() == 3
        assert tree.locator("text=@reviewer").count() == 1

        # The loop root's transcript: its tool calls and their results, the reviewer's
        # reply (a dispatched node's side dialog reports back in a note), the FBR samples.
        done = read_store(rtws, lambda s: s.task_by_path(DEMO_TASK))
        assert done is not None and done.status == "DONE"
        page.goto(f"{web.base}/dialogs/{done.root_id}")
        connected(page)
        calls = page.locator('.entry[data-kind="tool_call"]')
        move = calls.filter(has=page.locator("code", has_text=re.compile("^move$")))
        assert move.count() == 1 and "RELEASE_NOTES.md" in move.locator("pre.args").inner_text()
        assert calls.filter(has=page.locator("code", has_text="node_create")).count() == 4
        results = page.locator('.entry[data-kind="tool_result"]')
        assert results.count() == calls.count()
        held = results.filter(has=page.locator("code", has_text=re.compile("^move$")))
        assert "needs the human's approval before it runs" in held.inner_text()
        approved = page.locator('.entry[data-kind="note"]', has_text="The human approved move")
        assert "moved `drafts/RELEASE_NOTES.md` to `RELEASE_NOTES.md`" in approved.inner_text()
        written = results.filter(has_text="created `CHANGELOG.md`")
        assert written.count() == 1 and "write_file" in written.locator(".who").inner_text()
        reply = page.locator('.entry[data-kind="note"]', has_text="[detached] @reviewer")
        assert "Written CONTRIBUTING.md." in reply.inner_text()
        samples = page.locator('.entry[data-kind="tellask_result"]')
        assert samples.count() == 3
        assert samples.locator(".label").all_inner_texts() == ["FBR sample"] * 3
        fbr = read_store(rtws, lambda s: [d.id for d in s.list_dialogs(root_id=done.root_id)])
        linked = samples.locator(".who a").evaluate_all("els => els.map(a => a.textContent)")
        assert len(set(linked)) == 3 and set(linked) <= set(fbr)
        assert "Conclusion: add a '## [0.1.0] - <date>' heading." in samples.first.inner_text()
        # Its cost (the mock model is priced in llm.yaml): the root's, and the task's.
        shown = web.call("GET", f"/api/dialogs/{done.root_id}")
        assert shown["usage"]["cost_usd"] > 0 and shown["usage"]["unpriced"] == 0
        dialog_cost = page.locator("[data-dialog-cost]").inner_text()
        assert dialog_cost == format_usd(shown["usage"]["cost_usd"])
        page.goto(web.base + "/")
        [row] = [r for r in web.call("GET", "/api/tasks") if r["path"] == DEMO_TASK]
        task_cost = page.locator(f'tr[data-task="{DEMO_TASK}"] [data-task-cost]').inner_text()
        assert task_cost == format_usd(row["usage"]["cost_usd"])
        assert float(task_cost.removeprefix("$")) > float(dialog_cost.removeprefix("$")) > 0

        assert [p.args[0] for p in procs.started] == ["web"]  # no other command ran
        assert (rtws / "RELEASE_NOTES.md").is_file()  # the approved move ran
        assert _user_texts_of(rtws, DEMO_TASK)[0] == DEMO_PROMPT
    finally:
        procs.close()


def _price(rtws: Path) -> None:
    """Price the mock model in llm.yaml (it has no price of its own), so cost is shown."""
    path = rtws / ".minds" / "llm.yaml"
    llm = yaml.safe_load(path.read_text("utf-8"))
    llm["providers"]["mock"]["models"]["mock-model"]["price"] = {
        "input_per_mtok": 3,
        "output_per_mtok": 15,
    }
    path.write_text(yaml.safe_dump(llm, sort_keys=False), "utf-8")


def _user_texts_of(rtws: Path, task: str) -> list[str]:
    return read_store(rtws, lambda s: _user_texts(s, task))


# ---------------------------------------------------------------------------- the composer


def test_the_composer_refuses_an_empty_message_and_a_done_task_takes_new_scope(
    procs: Procs, page: Any
) -> None:
    web = start_web(procs)
    open_page(page, web, f"/task/{TASK}")
    page.locator("[data-no-loop]").wait_for()
    _keep(page)
    box = page.get_by_label("Message to the work loop")
    send = page.get_by_role("button", name="Send to the loop")
    error = page.locator("#loop-message-error")

    # Empty: the browser does not send it; blank: the server refuses it, said by an
    # alert that the field is described by, the field marked invalid and focused.
    send.click()
    assert box.evaluate("el => el.validity.valueMissing")
    box.fill("   \n ")
    send.click()
    error.filter(has_text="the message is empty").wait_for()
    assert error.get_attribute("role") == "alert"
    assert "loop-message-error" in (box.get_attribute("aria-describedby") or "")
    assert box.get_attribute("aria-invalid") == "true"
    assert box.evaluate("el => el === document.activeElement")
    assert read_store(procs.rtws, lambda s: s.task_by_path(TASK)) is None  # nothing posted

    # With the keyboard: type, Tab to the button, Enter.
    box.fill("first scope")
    box.press("Tab")
    assert send.evaluate("el => el === document.activeElement")
    page.keyboard.press("Enter")
    question = page.locator("#pane-questions [data-question]", has_text="Which scope?")
    question.wait_for(timeout=TIMEOUT_MS)
    _loop_is(page, "WAITING", "PLAN")
    assert error.inner_text() == "" and box.get_attribute("aria-invalid") is None
    question.get_by_label("Your answer to @dev").fill("Only the first.")
    question.get_by_role("button", name="Answer").click()
    _loop_is(page, "DONE")

    # DONE takes a new message as new scope: planned again (and asked again).
    box.fill("second scope")
    send.click()
    again = page.locator("#pane-questions [data-question]", has_text="Anything else?")
    again.wait_for(timeout=TIMEOUT_MS)
    _loop_is(page, "WAITING", "PLAN")
    again.get_by_label("Your answer to @dev").fill("No.")
    again.get_by_role("button", name="Answer").click()
    _loop_is(page, "DONE")
    assert _kept(page)
    assert page.url == f"{web.base}/task/{TASK}"

    texts = _user_texts_of(procs.rtws, TASK)
    assert texts.count("first scope") == 1 and texts.count("second scope") == 1
    plans = [t for t in texts if t.startswith("[work loop] Phase PLAN")]
    assert plans == ["[work loop] Phase PLAN (entry 1).", "[work loop] Phase PLAN (entry 3)."]

    # The same for programs; refusals in the use case's words.
    status, _, body = web.request("POST", "/run", {"task": TASK, "message": " "})
    assert status == 400 and b"the message is empty" in body
    status, _, body = web.request("POST", "/run", {"task": "tasks/nope.tsk", "message": "hi"})
    assert status == 400 and b"tasks/nope.tsk does not exist" in body


# ---------------------------------------------------------------------------- a node's page


def test_a_nodes_page_shows_its_work_and_follows_it_live(procs: Procs, page: Any) -> None:
    from mindloop.workspace.api import WorkspaceApi
    from mindloop.workspace.commands import CriterionInput
    from mindloop.workspace.models import RefAction
    from mindloop.workspace.transitions import Authority

    (procs.rtws / "docs").mkdir()
    (procs.rtws / "docs" / "auth.md").write_text("# Auth\nSessions in cookies.\n", "utf-8")
    (procs.rtws / "docs" / "old.md").write_text("# Old\n", "utf-8")
    form_id = plan_login(
        procs.rtws, TASK, [CriterionInput("the form is sent", "the user is in", "true")]
    )
    web = start_web(procs)
    open_page(page, web, f"/task/{TASK}")
    page.locator(f'[data-node="{form_id}"] [data-node-link]').click()  # from the node tree
    page.wait_for_url(f"{web.base}/task/{TASK}/node/{form_id}")
    connected(page)
    _keep(page)

    assert page.locator("h1").inner_text() == f"Node {form_id} Write the form"
    assert (
        page.locator("[data-node-requirement]").inner_text() == "A form with e-mail and password."
    )
    criterion = page.locator('[data-criterion="AC1"]').inner_text()
    assert "when the form is sent, then the user is in" in criterion and "verify: true" in criterion
    old = page.locator('[data-node-docs] [data-doc="docs/old.md"]')
    assert old.get_attribute("data-doc-status") == "expired"
    assert old.locator("del").inner_text() == "docs/old.md" and "expired" in old.inner_text()
    auth = page.locator('[data-node-docs] [data-doc="docs/auth.md"]')
    assert auth.get_attribute("data-doc-status") == "active"
    assert "the design" in auth.inner_text()
    assert page.locator("[data-node-assignee]").inner_text() == "@dev"
    page.locator("[data-no-node-dialog]").wait_for()  # not dispatched yet
    assert "expire reference: docs/old.md" in page.locator(".node-log").inner_text()
    page.locator("[data-no-conclusion]").wait_for()  # none yet
    page.get_by_text("What @dev reads of it").click()
    context = page.locator("[data-node-context]").inner_text()
    assert "Keep every change small" in context and "Sessions in cookies." in context
    assert "# Old" not in context  # an expired doc never reaches a prompt
    # Its parent's page lists it among its children.
    page.get_by_role("link", name="n1 Log-in").click()
    page.wait_for_url(f"{web.base}/task/{TASK}/node/n1")
    assert page.get_by_role("link", name=f"{form_id} Write the form").count() == 1
    page.goto(f"{web.base}/task/{TASK}/node/{form_id}")
    connected(page)
    _keep(page)
    page.get_by_text("What @dev reads of it").click()

    # Another process changes the node: the page follows, without a reload.
    with WorkspaceApi(procs.rtws, TASK) as api:
        api.command(
            lambda s: s.reference(node_id=form_id, target="docs/old.md", action=RefAction.ACTIVATE),
            authority=Authority.chat(),
        )
    page.locator('[data-node-docs] [data-doc="docs/old.md"][data-doc-status="active"]').wait_for()
    assert old.locator("del").count() == 0
    assert "activate reference: docs/old.md" in page.locator(".node-log").inner_text()
    assert _kept(page)
    assert page.locator("#node-context").evaluate("d => d.open")  # what was open stays so

    # At phone width it fits, as does the task page with its composer.
    page.set_viewport_size({"width": 390, "height": 844})
    assert fits(page)
    page.goto(f"{web.base}/task/{TASK}")
    connected(page)
    assert fits(page)
    assert page.get_by_label("Message to the work loop").is_visible()

    status, _, body = web.request("GET", f"/task/{TASK}/node/n9", headers={"Accept": "text/html"})
    assert status == 404 and b"no node &#39;n9&#39;" in body
    shown = web.call("GET", f"/api/task/{TASK}/node/{form_id}")
    assert shown["view"]["node"]["title"] == "Write the form"
    assert [e["kind"] for e in shown["view"]["log"]][:2] == ["create", "transition"]
