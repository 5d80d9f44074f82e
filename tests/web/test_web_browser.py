"""The web UI in a real browser (headless Chromium), against a real `mindloop web` on the
mock provider: what a person sees and does.

- a chat started from the composer streams in live (thinking and text while the model
  generates) and is answered, and the dialog page takes a second message in place;
- a question (`!?@human`) is answered in the inbox, and the dialog goes on;
- a call waiting for approval is listed in the inbox and approved with its button; the
  call runs and its result appears in the transcript;
- a Taskdoc section edited in its pane is recorded with the human as its author, and the
  section's last-updated line changes — live, also when an agent's `change_mind` changes
  a section; an edit started from a stale text is refused and the draft kept;
- an event stream cut off while the team works resumes from `Last-Event-ID`: what was
  committed meanwhile appears once;
- the UI works while a separate `mindloop run --watch` drives the dialogs;
- a browser without the token gets the page telling what to open; the printed address
  lets it in (cookie set, token gone from the address bar);
- a teammate's reply, a tool call and its result show in the transcript, and the task
  list, the inbox and a dialog fit a phone's width; the Taskdoc's views are tabs that
  follow the arrow keys.

A task's work loop in the browser (the demo played there, the task page's composer, a
node's page) is in `test_web_task_loop.py`.

Every wait is on something observable (the page, the store, a process's output).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mindloop.store import Store
from tests.dialogs.procs import Procs, read_store, wait_until
from tests.loop.router_util import route
from tests.scenario_util import write_script, write_team
from tests.web.webproc import connected as _connected
from tests.web.webproc import fits, plan_login, start_web
from tests.web.webproc import open_page as _open

TIMEOUT = 60.0
TASK = "tasks/example.tsk"

SCRIPT: list[dict[str, Any]] = [
    # The Router's decision for `ask`, then the new task's loop root answering.
    route(
        match="a login page",
        create_new_task=True,
        new_task_slug="login",
        new_task_topic="Users can log in",
        quick_reply="Starting a login task.",
    ),
    {"contains": "a login page", "response": "Login form drafted."},
    # A streamed answer, slow enough to be watched.
    {
        "contains": "hello web",
        "thinking": "The human says hello; greet back.",
        "response": "Hello from the mock provider, streamed word by word to your browser.",
        # Seconds of streaming, so the live text can be seen before the answer commits.
        "delay_ms": 500,
        "chunk_delay_ms": 250,
    },
    {"contains": "and again", "response": "Answered again."},
    # A question for the human, then the answer to it.
    {"contains": "answer from the human", "response": "Using SQLite, as you said."},
    {
        "contains": "pick a database",
        "response": "One decision is yours.\n!?@human Which database should we use?\n"
        "!?Postgres or SQLite?\n",
    },
    # An agent's change of the Taskdoc.
    {"role": "tool", "contains": "replaced", "response": "Progress recorded."},
    {
        "contains": "record progress",
        "tool_calls": [
            {
                "name": "change_mind",
                "arguments": {"selector": "progress", "content": "- Recorded by the agent."},
            }
        ],
    },
    {"regex": "^msg \\d+$", "response": "Ack."},
]


@pytest.fixture
def procs(rtws: Path, tmp_path: Path) -> Iterator[Procs]:
    write_team(rtws, {"dev": {"toolsets": ["*"]}})
    write_script(rtws, SCRIPT)
    procs = Procs(rtws, tmp_path / "logs")
    try:
        yield procs
    finally:
        procs.close()


def _store(procs: Procs) -> Any:
    return lambda read: read_store(procs.rtws, read)


def _assistant_texts(store: Store, dialog_id: str) -> list[str]:
    return [m.data["text"] for m in store.load_history(dialog_id) if m.kind == "assistant"]


# ---------------------------------------------------------------------------- the token


def test_a_browser_without_the_token_is_refused_until_it_opens_the_printed_address(
    procs: Procs, page: Any
) -> None:
    """A fresh browser (no cookie) gets the 401 page telling what to open; the printed
    address lets it in: the cookie is set (HttpOnly, SameSite=Strict) and the token leaves
    the address bar, and the cookie alone opens the other pages."""
    web = start_web(procs)
    for path in ("/", "/inbox", f"/task/{TASK}"):
        refused = page.goto(web.base + path)
        assert refused is not None and refused.status == 401, path
        assert page.locator("h1").inner_text() == "This page needs the server's token"
        assert "?token=" in page.locator("main").inner_text()
    assert page.context.cookies() == []

    shown = page.goto(web.url)
    assert shown is not None and shown.status == 200
    assert page.url == web.base + "/"  # the token is gone from the address bar
    assert web.token not in page.url
    [cookie] = page.context.cookies()
    assert (cookie["name"], cookie["value"]) == ("mindloop_token", web.token)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.locator(f'tr[data-task="{TASK}"]').count() == 1  # the task list
    assert page.evaluate("document.cookie") == ""  # out of scripts' reach
    _connected(page)  # the event stream rides the cookie too
    inbox = page.goto(web.base + "/inbox")
    assert inbox is not None and inbox.status == 200
    assert page.locator("h1").inner_text() == "Inbox"


# ---------------------------------------------------------------------------- chat


def test_a_chat_from_the_composer_streams_in_live_and_is_answered(procs: Procs, page: Any) -> None:
    web = start_web(procs)
    _open(page, web)
    page.get_by_label("Message to a member").fill("and again")
    page.get_by_label("Task", exact=True).select_option(TASK)
    page.get_by_role("button", name="Start the dialog").click()
    page.wait_for_url(re.compile(r"/dialogs/\w+$"))
    dialog_id = page.url.rsplit("/", 1)[1]
    page.locator(".entry.k-assistant", has_text="Answered again.").wait_for()

    # A message from the dialog page's composer: no navigation, it streams in live.
    page.get_by_label("Message to @dev").fill("hello web")
    page.get_by_role("button", name="Send").click()
    # While the model generates, its thinking and text stream into the live box …
    live = page.locator(f'[data-live="{dialog_id}"]')
    live.locator("[data-live-text]", has_text="streamed").wait_for()
    assert "greet back" in live.locator("[data-live-thinking]").inner_text()
    assert page.get_by_label("Message to @dev").input_value() == ""
    assert page.locator(".entry.k-assistant").count() == 1  # not committed yet
    # … then the committed answer replaces it.
    answer = page.locator(".entry.k-assistant", has_text="streamed word by word to your browser")
    answer.wait_for()
    assert live.is_hidden()
    assert page.url.endswith(dialog_id)
    assert page.locator(".entry.k-thinking", has_text="greet back").count() == 1
    assert page.locator(".entry.k-user", has_text="hello web").count() == 1
    assert page.locator(".entry.k-assistant").count() == 2
    assert page.locator(".entry.k-user").count() == 2
    # Usage of the dialog is shown (and refreshed with its state).
    page.locator("[data-dialog-usage]", has_text=" in / ").wait_for()
    texts = read_store(procs.rtws, lambda s: _assistant_texts(s, dialog_id))
    assert texts == [
        "Answered again.",
        "Hello from the mock provider, streamed word by word to your browser.",
    ]

    # The task list shows the task's dialogs and cost.
    page.goto(web.base + "/")
    row = page.locator(f'tr[data-task="{TASK}"]')
    assert row.locator("[data-task-status]").inner_text() == "idle"
    assert row.locator("[data-task-dialogs]").inner_text() == "1"
    assert row.locator("[data-task-loop]").inner_text() == "-"  # a free dialog: no work loop


def test_ask_routes_the_message_to_a_task_and_its_work_loop_answers(
    procs: Procs, page: Any
) -> None:
    web = start_web(procs)
    _open(page, web)
    page.get_by_label("Message", exact=True).fill("Please build a login page")
    page.get_by_role("button", name="Ask", exact=True).click()
    page.wait_for_url(re.compile(r"/dialogs/\w+$"))
    page.locator(".entry.k-assistant", has_text="Login form drafted.").first.wait_for()
    root = page.url.rsplit("/", 1)[1]
    task = read_store(procs.rtws, lambda s: s.task_by_root(root))
    assert task is not None and task.task_path == "tasks/login.tsk"

    # the task's work loop ran on its loop root: PLAN found nothing to execute, it ends
    def done() -> bool:
        found = read_store(procs.rtws, lambda s: s.task_by_root(root))
        return found is not None and found.status == "DONE"

    wait_until(done, TIMEOUT, "the task's loop to end")
    page.goto(f"{web.base}/task/tasks/login.tsk")
    loop = page.locator("[data-loop]")
    assert root in loop.inner_text()
    assert loop.locator("[data-loop-status]").inner_text() == "DONE"
    assert _section(page, "goals").locator("[data-actor]").inner_text() == "router"
    page.goto(web.base + "/")
    assert "DONE" in page.locator('tr[data-task="tasks/login.tsk"] [data-task-loop]').inner_text()


# ---------------------------------------------------------------------------- questions


def test_a_question_is_answered_in_the_inbox_and_the_dialog_goes_on(
    procs: Procs, page: Any
) -> None:
    web = start_web(procs)
    started = web.call("POST", "/chat", {"message": "pick a database", "task": TASK})
    dialog_id = started["dialog"]["id"]
    wait_until(lambda: web.call("GET", "/api/questions"), TIMEOUT, "the question")

    _open(page, web, "/inbox")
    assert page.locator("[data-inbox-count]").get_attribute("data-inbox-count") == "1"
    question = page.locator("[data-question]")
    assert "Which database should we use?" in question.inner_text()
    assert "Postgres or SQLite?" in question.inner_text()
    question.get_by_label("Your answer to @dev").fill("SQLite")
    question.get_by_role("button", name="Answer").click()

    page.locator("[data-no-questions]").wait_for()  # gone from the inbox, live
    page.locator('[data-inbox-count="0"]').wait_for()
    assert page.url.endswith("/inbox")

    page.goto(f"{web.base}/dialogs/{dialog_id}")
    page.locator(".entry.k-assistant", has_text="Using SQLite, as you said.").wait_for()
    tellask = page.locator(".tellask", has_text="Which database should we use?")
    assert "@human" in tellask.inner_text()
    assert page.locator(".entry.k-user", has_text="SQLite").count() == 1  # the answer, once


def test_a_call_is_approved_with_its_button_and_its_result_appears_in_the_transcript(
    procs: Procs, page: Any
) -> None:
    write_team(procs.rtws, {"dev": {"toolsets": ["fs"], "approval_required": ["write_file"]}})
    write = {"name": "write_file", "arguments": {"path": "out.txt", "content": "hello\n"}}
    write_script(
        procs.rtws,
        [
            {"contains": "The human approved", "response": "Written, as approved."},
            {"contains": "write it", "response": "Writing.", "tool_calls": [write]},
        ],
    )
    web = start_web(procs)
    started = web.call("POST", "/chat", {"message": "write it", "task": TASK})
    dialog_id = started["dialog"]["id"]
    wait_until(lambda: web.call("GET", "/api/approvals"), TIMEOUT, "the approval")

    # The inbox lists it beside the questions: member, tool, arguments, digest; no text box
    # answers it.
    _open(page, web, "/inbox")
    assert page.locator("[data-inbox-count]").get_attribute("data-inbox-count") == "1"
    item = page.locator("[data-approval]")
    assert "@dev" in item.inner_text()
    assert item.locator("[data-approval-tool]").inner_text() == "write_file"
    assert '"path": "out.txt"' in item.locator("[data-approval-arguments]").inner_text()
    assert item.locator("[data-approval-digest]").inner_text().endswith("…")
    assert item.locator("textarea").count() == 0
    assert not (procs.rtws / "out.txt").exists()

    # Approved in its dialog's page: the call runs, its result streams into the transcript.
    page.goto(f"{web.base}/dialogs/{dialog_id}")
    _connected(page)
    page.locator("[data-approval]").get_by_role("button", name="Approve").click()
    note = page.locator(".entry.k-note", has_text="The human approved")
    note.wait_for()
    assert "exactly the approved arguments" in note.inner_text()
    page.locator(".entry.k-assistant", has_text="Written, as approved.").wait_for()
    page.locator("[data-no-approvals]").wait_for()  # gone from the page, live
    page.locator('[data-inbox-count="0"]').wait_for()
    assert (procs.rtws / "out.txt").read_text() == "hello\n"


# ---------------------------------------------------------------------------- the Taskdoc


def _section(page: Any, name: str) -> Any:
    return page.locator(f'[data-section="{name}"]')


def test_a_section_edit_is_recorded_with_the_human_as_actor(procs: Procs, page: Any) -> None:
    web = start_web(procs)
    _open(page, web, f"/task/{TASK}")
    goals, progress = _section(page, "goals"), _section(page, "progress")
    assert goals.locator("[data-actor]").inner_text() == "human/unknown"  # written by init
    before = float(goals.locator("[data-updated-at]").get_attribute("data-updated-at"))

    # An agent's change_mind shows up live, with the agent as its author.
    web.call("POST", "/chat", {"message": "record progress", "task": TASK})
    progress.locator("[data-actor]", has_text=re.compile("^dev$")).wait_for()
    assert "Recorded by the agent." in progress.locator("[data-content]").inner_text()

    # The human replaces the goals, explicitly one section.
    goals.get_by_text("Edit Goals").click()
    box = goals.get_by_label("New text of goals.md (replaces the whole section)")
    box.fill("Ship the web UI.\n- Tested in a real browser.")
    goals.get_by_role("button", name="Replace goals.md").click()
    goals.locator("[data-actor]", has_text=re.compile("^human$")).wait_for()
    assert "Ship the web UI." in goals.locator("[data-content]").inner_text()
    after = float(goals.locator("[data-updated-at]").get_attribute("data-updated-at"))
    assert after > before
    assert "changed outside" not in goals.locator("[data-updated]").inner_text()
    # The combined view is the effective Taskdoc, with the new goals in it.
    page.get_by_role("tab", name="Combined (effective)").click()
    assert "Ship the web UI." in page.locator("[data-effective]").inner_text()
    page.get_by_role("tab", name="Sections").click()

    history = read_store(procs.rtws, lambda s: s.taskdoc_history(TASK, "goals.md"))
    last = history[-1]
    assert (last.actor_member, last.actor_dialog) == ("human", None)
    assert last.content_after == "Ship the web UI.\n- Tested in a real browser.\n"

    # An edit started from a text that changed meanwhile is refused; the draft is kept.
    progress.get_by_text("Edit Progress").click()
    draft = progress.get_by_label("New text of progress.md (replaces the whole section)")
    draft.fill("- My stale rewrite.")
    web.call(
        "POST",
        "/taskdoc/edit",
        {"task": TASK, "section": "progress", "content": "- Changed by someone else."},
    )
    progress.get_by_role("button", name="Replace progress.md").click()
    error = progress.locator("[data-form-error]")
    error.wait_for()
    assert "changed since this edit started" in error.inner_text()
    assert draft.input_value() == "- My stale rewrite."
    content = read_store(procs.rtws, lambda s: s.taskdoc_history(TASK, "progress.md")[-1])
    assert content.content_after == "- Changed by someone else.\n"


# ---------------------------------------------------------------------------- the node tree


def test_the_node_tree_updates_live_while_another_process_plans(procs: Procs, page: Any) -> None:
    """The task's workspace written by another process (as the work loop's planner
    writes it): nodes with their status, assignee, deps and doc references — an expired
    one marked — the rules and the doc index appear on the open task page."""

    (procs.rtws / "docs").mkdir()
    (procs.rtws / "docs" / "auth.md").write_text("# Auth\n", "utf-8")
    (procs.rtws / "docs" / "old.md").write_text("# Old\n", "utf-8")
    web = start_web(procs)
    _open(page, web, f"/task/{TASK}")
    page.locator("[data-no-workspace]").wait_for()

    form_id = plan_login(procs.rtws, TASK)

    node = page.locator(f'[data-node="{form_id}"]')
    # The last write (the expired reference) has arrived; the page shows them all.
    node.locator('[data-doc="docs/old.md"][data-doc-status="expired"]').wait_for(state="attached")
    assert "Write the form" in node.inner_text() and "@dev" in node.inner_text()
    assert node.locator("[data-node-status]").inner_text() == "NEW"
    node.locator("summary").click()
    assert node.locator('[data-doc="docs/old.md"]').inner_text().startswith("docs/old.md expired")
    assert node.locator('[data-doc="docs/auth.md"]').get_attribute("data-doc-status") == "active"
    assert "expire reference: docs/old.md" in node.locator(".node-log").inner_text()
    assert f"after {form_id}" in page.locator('[data-node="n3"]').inner_text()
    assert page.locator("[data-rule]").inner_text() == "Keep every change small"
    assert page.locator('.docs [data-doc="docs/auth.md"]').count() == 1


# ---------------------------------------------------------------------------- phone, keyboard

PROGRESS = {"name": "change_mind", "arguments": {"selector": "progress", "content": "- Counting."}}
TEAMMATE_SCRIPT: list[dict[str, Any]] = [
    {"member": "helper", "contains": "Count the files", "response": "Three files, all small."},
    {
        "member": "dev",
        "contains": "Three files",
        "response": "The helper counted three files.\n!?@human Which database should we use?\n",
    },
    {
        "member": "dev",
        "role": "tool",
        "contains": "replaced",
        "response": "Asking the helper.\n!?@helper Count the files.\n",
    },
    {"member": "dev", "contains": "count with the helper", "tool_calls": [PROGRESS]},
]


def test_a_teammates_reply_shows_and_the_main_pages_fit_a_phone(procs: Procs, page: Any) -> None:
    """A dialog with a tool call, its result and a teammate's reply (linked to the side
    dialog that wrote it), then a question: the task list, the inbox and the dialog page
    fit a 390 px wide screen."""
    write_team(procs.rtws, {"dev": {"toolsets": ["*"]}, "helper": {}})
    write_script(procs.rtws, TEAMMATE_SCRIPT)
    web = start_web(procs)
    started = web.call("POST", "/chat", {"message": "count with the helper", "task": TASK})
    root = started["dialog"]["id"]
    wait_until(lambda: web.call("GET", "/api/questions"), TIMEOUT, "the question")
    [side] = [
        d.id for d in read_store(procs.rtws, lambda s: s.list_dialogs(root_id=root)) if d.id != root
    ]

    page.set_viewport_size({"width": 390, "height": 844})
    _open(page, web, f"/dialogs/{root}")
    page.locator(".entry.k-assistant", has_text="The helper counted three files.").wait_for()
    call = page.locator('.entry[data-kind="tool_call"]')
    assert call.locator(".who code").inner_text() == "change_mind"
    assert '"selector": "progress"' in call.locator("pre.args").inner_text()
    result = page.locator('.entry[data-kind="tool_result"]')
    assert result.locator(".who code").inner_text() == "change_mind"
    assert "replaced" in result.locator("pre.result").inner_text()
    reply = page.locator('.entry[data-kind="tellask_result"]')
    assert reply.locator(".label").inner_text() == "reply"
    assert "Three files, all small." in reply.locator(".text").inner_text()
    assert reply.locator(f'.who a[href="/dialogs/{side}"]').inner_text() == side
    assert "@helper" in page.locator(".tellask", has_text="Count the files.").inner_text()
    assert fits(page)
    for path, heading in (("/inbox", "Inbox"), ("/", "Tasks")):
        page.goto(web.base + path)
        _connected(page)
        assert page.locator("h1").inner_text() == heading
        assert fits(page), path
    page.goto(web.base + "/inbox")
    assert "Which database should we use?" in page.locator("[data-question]").inner_text()
    assert page.get_by_label("Your answer to @dev").is_visible()


def test_the_taskdoc_views_are_tabs_that_follow_the_arrow_keys(procs: Procs, page: Any) -> None:
    web = start_web(procs)
    _open(page, web, f"/task/{TASK}")
    sections = page.get_by_role("tab", name="Sections")
    combined = page.get_by_role("tab", name="Combined (effective)")
    sections_view, combined_view = page.locator("#view-sections"), page.locator("#view-combined")

    def shown(tab: Any, view: Any, other: Any, hidden: Any) -> None:
        assert tab.get_attribute("aria-selected") == "true"
        assert other.get_attribute("aria-selected") == "false"
        assert tab.evaluate("el => el === document.activeElement")
        assert (tab.get_attribute("tabindex"), other.get_attribute("tabindex")) == ("0", "-1")
        assert view.is_visible() and hidden.is_hidden()

    assert sections.get_attribute("aria-selected") == "true" and combined_view.is_hidden()
    sections.focus()
    for key, on in (
        ("ArrowRight", "combined"),
        ("ArrowRight", "sections"),  # wraps around
        ("ArrowLeft", "combined"),  # wraps around
        ("ArrowLeft", "sections"),
        ("End", "combined"),
        ("Home", "sections"),
    ):
        page.keyboard.press(key)
        if on == "combined":
            shown(combined, combined_view, sections, sections_view)
        else:
            shown(sections, sections_view, combined, combined_view)
    page.keyboard.press("End")
    assert "## Goals" in combined_view.locator("[data-effective]").inner_text()
    # Tab leaves the tab list for the shown panel (only the selected tab is a stop).
    page.keyboard.press("Tab")
    assert combined_view.evaluate("el => el === document.activeElement")


# ---------------------------------------------------------------------------- resume


def test_a_stream_cut_off_while_the_team_works_resumes_from_last_event_id(
    procs: Procs, page: Any
) -> None:
    """The stream ends (its lifetime is short here); the browser's reconnect is held
    back while the question is answered and the team replies; let through, it carries
    `Last-Event-ID`, and what was committed meanwhile appears once."""
    web = start_web(procs, "--stream-lifetime", "3")
    started = web.call("POST", "/chat", {"message": "pick a database", "task": TASK})
    dialog_id = started["dialog"]["id"]
    questions = wait_until(lambda: web.call("GET", "/api/questions"), TIMEOUT, "the question")
    _open(page, web, f"/dialogs/{dialog_id}")
    page.locator(".entry.k-assistant", has_text="One decision is yours.").wait_for()

    body = page.locator("body")
    held: list[Any] = []
    page.route("**/events?*", lambda route: held.append(route))
    page.locator('[data-connection-state][data-state="retry"]').wait_for()  # it ended
    for _ in range(600):  # the browser reconnects after the retry delay (1 s)
        if held:
            break
        page.wait_for_timeout(50)  # lets Playwright take the intercepted request
    assert held, "the browser did not reconnect"
    position = body.get_attribute("data-stream-seen")  # what it will send back
    assert position is not None and re.fullmatch(r"m\d+\.e\d+\.c\d+", position)

    question_id = questions[0]["question"]["id"]
    web.call("POST", f"/questions/{question_id}/answer", {"answer": "SQLite"})
    wait_until(
        lambda: (
            "Using SQLite, as you said."
            in read_store(procs.rtws, lambda s: _assistant_texts(s, dialog_id))
        ),
        TIMEOUT,
        "the reply in the store",
    )
    reply = page.locator(".entry.k-assistant", has_text="Using SQLite, as you said.")
    assert reply.count() == 0  # the stream is held: nothing could arrive

    held[0].continue_()
    reply.wait_for()
    page.unroute("**/events?*")
    _connected(page)
    # The stream resumed from what the browser had seen, sent as Last-Event-ID.
    assert body.get_attribute("data-stream-from") == "last-event-id"
    assert body.get_attribute("data-stream-position") == position
    assert page.locator(".entry.k-user", has_text="SQLite").count() == 1
    assert reply.count() == 1
    shown = page.locator("[data-entry]").evaluate_all("els => els.map(e => e.id)")
    assert len(shown) == len(set(shown))  # nothing twice
    stored = read_store(procs.rtws, lambda s: [f"m{m.id}" for m in s.load_history(dialog_id)])
    assert shown == stored  # every message of the dialog, in order


# ---------------------------------------------------------------------------- run --watch


def test_the_ui_works_while_a_separate_run_watch_drives(procs: Procs, page: Any) -> None:
    """With `--no-drive` the server drives nothing: the `run --watch` beside it answers
    the chat and the question started in the browser, and the page shows it from the
    store."""
    watcher = procs.start("run", "--watch")
    web = start_web(procs, "--no-drive")
    _open(page, web)
    page.get_by_label("Message to a member").fill("pick a database")
    page.get_by_label("Task", exact=True).select_option(TASK)
    page.get_by_role("button", name="Start the dialog").click()
    page.wait_for_url(re.compile(r"/dialogs/\w+$"))
    dialog_id = page.url.rsplit("/", 1)[1]

    question = page.locator("[data-question]")
    question.wait_for()
    question.get_by_label("Your answer to @dev").fill("SQLite")
    question.get_by_role("button", name="Answer").click()
    page.locator(".entry.k-assistant", has_text="Using SQLite, as you said.").wait_for()
    assert dialog_id in watcher.output()  # the watcher drove it
    gens = read_store(procs.rtws, lambda s: s.generations(dialog_id))
    assert len(gens) == 2  # the question, then the reply: each driven once


def test_what_is_typed_while_a_message_is_being_sent_is_kept(procs: Procs, page: Any) -> None:
    """The composer is cleared once its message was accepted, but not of the next one
    typed meanwhile: the answer may stream in before the post's own response, and a quick
    user (or test) already writes on."""
    web = start_web(procs)
    started = web.call("POST", "/chat", {"message": "msg 0", "task": TASK})
    dialog_id = started["dialog"]["id"]
    _open(page, web, f"/dialogs/{dialog_id}")
    page.locator(".entry.k-assistant").first.wait_for()
    held: list[Any] = []

    def hold(route: Any) -> None:  # the post waits until the test lets it go
        held.append(route)

    page.route(f"**/dialogs/{dialog_id}/messages", hold)
    composer = page.get_by_label("Message to @dev")
    composer.fill("msg 1")
    page.get_by_role("button", name="Send").click()
    page.wait_for_function("() => document.querySelector('form.composer[aria-busy]')")
    composer.fill("msg 2")  # typed while msg 1 is being sent
    assert len(held) == 1
    held[0].continue_()
    page.unroute(f"**/dialogs/{dialog_id}/messages", hold)
    page.wait_for_function("() => !document.querySelector('form.composer[aria-busy]')")
    assert composer.input_value() == "msg 2"
    page.locator(".entry.k-assistant").nth(1).wait_for()  # msg 1 went through
    page.get_by_role("button", name="Send").click()
    page.locator(".entry.k-assistant").nth(2).wait_for()
    page.wait_for_function("() => !document.querySelector('form.composer[aria-busy]')")
    assert composer.input_value() == ""  # sent, nothing typed meanwhile: cleared


def test_with_both_driving_each_message_gets_one_generation(procs: Procs, page: Any) -> None:
    """The server and a `run --watch` both drive: the claim gives each drive to one of
    them, never both; each message is answered once and shown once."""
    procs.start("run", "--watch")
    web = start_web(procs)
    started = web.call("POST", "/chat", {"message": "msg 0", "task": TASK})
    dialog_id = started["dialog"]["id"]
    _open(page, web, f"/dialogs/{dialog_id}")
    composer = page.get_by_label("Message to @dev")
    for n in range(1, 4):
        page.locator(".entry.k-assistant").nth(n - 1).wait_for()
        composer.fill(f"msg {n}")
        page.get_by_role("button", name="Send").click()
    page.locator(".entry.k-assistant").nth(3).wait_for()
    wait_until(
        lambda: read_store(procs.rtws, lambda s: s.get_dialog(dialog_id).status.value) == "idle",
        TIMEOUT,
        "the dialog to settle",
    )
    texts = read_store(procs.rtws, lambda s: _assistant_texts(s, dialog_id))
    assert texts == ["Ack."] * 4
    assert len(read_store(procs.rtws, lambda s: s.generations(dialog_id))) == 4
    assert page.locator(".entry.k-assistant").count() == 4
    assert page.locator(".entry.k-user").count() == 4
