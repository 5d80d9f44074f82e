"""`mindloop web` over plain HTTP: the token on every request, the address it serves on,
the JSON face of its use cases, and an event stream that resumes from `Last-Event-ID`
without losing or repeating anything.

Each test starts a real server (`mindloop web --port 0`) on the test's own rtws and the
mock provider, and stops it as a user does (Ctrl-C).
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mindloop.store import STATE_DIR, STATE_FILE
from mindloop.web.server import is_loopback, remote_warning
from tests.dialogs.procs import Procs, child_env, read_store, wait_until
from tests.scenario_util import ml, write_script, write_team
from tests.web.webproc import Web, start_web, stop_web

TIMEOUT = 60.0
CLI = [sys.executable, "-m", "mindloop.cli.app"]


@pytest.fixture
def procs(rtws: Path, tmp_path: Path) -> Iterator[Procs]:
    write_team(rtws, {"dev": {}})
    write_script(
        rtws,
        [
            {"contains": "second question", "response": "Second answer."},
            {"default": True, "response": "First answer."},
        ],
    )
    procs = Procs(rtws, tmp_path / "logs")
    try:
        yield procs
    finally:
        procs.close()


@pytest.fixture
def web(procs: Procs) -> Web:
    return start_web(procs)


def _answered(web: Web, dialog_id: str, n: int) -> bool:
    shown = web.call("GET", f"/api/dialogs/{dialog_id}")
    return len([m for m in shown["messages"] if m["kind"] == "assistant"]) >= n


# ---------------------------------------------------------------------------- the token


def test_every_request_without_the_token_is_refused(web: Web) -> None:
    for path in ("/", "/inbox", "/api/tasks", "/events", "/static/app.js", "/fragments/tasks"):
        status, headers, body = web.request("GET", path, bearer=False)
        assert status == 401, path
        assert "unauthorized" in json.loads(body)["error"]
        assert headers["www-authenticate"].startswith("Bearer")
    status, _, body = web.request("GET", "/", bearer=False, headers={"Accept": "text/html"})
    assert status == 401 and b"?token=" in body  # a person is told what to open
    status, _, _ = web.request(
        "GET", "/", bearer=False, headers={"Authorization": "Bearer not-the-token"}
    )
    assert status == 401
    status, _, _ = web.request("GET", "/?token=not-the-token", bearer=False)
    assert status == 401
    status, _, _ = web.request("POST", "/chat", {"message": "hi"}, bearer=False)
    assert status == 401
    assert not _dialogs(web)  # nothing was started


def _dialogs(web: Web) -> list[object]:
    return [r for r in web.call("GET", "/api/tasks") if r["dialogs"]]


def test_the_printed_address_sets_a_cookie_and_drops_the_token(web: Web) -> None:
    status, headers, _ = web.request("GET", f"/inbox?token={web.token}", bearer=False)
    assert status == 303
    assert headers["location"] == "/inbox"  # the token leaves the address
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    pair = cookie.split(";")[0]
    status, headers, body = web.request(
        "GET", "/inbox", bearer=False, headers={"Cookie": pair, "Accept": "text/html"}
    )
    assert status == 200 and b"<h1>Inbox</h1>" in body
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    # A form posted from another site's page, riding the cookie, is refused.
    status, _, _ = web.request(
        "POST",
        "/chat",
        {"message": "from elsewhere"},
        bearer=False,
        headers={"Cookie": pair, "Origin": "http://evil.example"},
    )
    assert status == 403
    assert not _dialogs(web)


def test_what_cannot_be_served_is_refused_before_anything_is_written(rtws: Path) -> None:
    out = ml("-C", str(rtws), "web", "--host", "0.0.0.0", cwd=rtws)
    assert out.returncode == 1
    assert "not a loopback address" in out.stderr and "--allow-remote" in out.stderr
    assert not (rtws / STATE_DIR).exists()  # refused before anything was written
    missing = ml("-C", str(rtws / "nope"), "web", cwd=rtws)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        busy = ml("-C", str(rtws), "web", "--port", str(port), cwd=rtws)
    assert busy.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in busy.stderr
    assert not (rtws / STATE_DIR).exists()  # not even a log
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.10")


def _addresses_of_this_machine() -> list[str]:
    """The IPv4 addresses of this machine's interfaces other than loopback (Linux:
    SIOCGIFADDR per interface); none on a machine with only `lo`."""
    import fcntl
    import struct

    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
            except OSError:  # an interface without an IPv4 address
                continue
            addr = socket.inet_ntoa(packed[20:24])
            if not is_loopback(addr):
                found.append(addr)
    return found


def test_another_interface_is_served_only_when_allowed_and_with_a_warning(
    procs: Procs, rtws: Path, tmp_path: Path
) -> None:
    """`--host <an address of this machine> --allow-remote` serves there, and says on
    stderr, before the address, that anyone who can reach it may steer the agents."""
    assert remote_warning("127.0.0.1") is None and remote_warning("::1") is None
    assert remote_warning("localhost") is None
    said = remote_warning("0.0.0.0")
    assert said is not None and "warning: serving on 0.0.0.0" in said
    assert "read and steer your agents" in said
    addresses = _addresses_of_this_machine()
    if not addresses:  # only loopback here: the decision above is what can be checked
        return
    host = addresses[0]
    out, err = tmp_path / "web.out", tmp_path / "web.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(
            [*CLI, "-C", str(rtws), "web", "--port", "0", "--host", host, "--allow-remote"],
            cwd=rtws,
            stdin=subprocess.DEVNULL,
            stdout=o,
            stderr=e,
            env=child_env(rtws, {}),
        )
    try:
        printed = re.compile(rf"http://{re.escape(host)}:(\d+)/\?token=(\S+)")
        found = wait_until(
            lambda: printed.search(out.read_text()) or (proc.poll() is not None and "ended"),
            60.0,
            "`mindloop web` to print its address",
        )
        assert isinstance(found, re.Match), out.read_text() + err.read_text()
        warning = err.read_text()
        assert f"warning: serving on {host}, not only on this machine" in warning
        assert "read and steer your agents" in warning
        assert found.group(0) not in warning  # the address goes to stdout
        conn = http.client.HTTPConnection(host, int(found.group(1)), timeout=30)
        try:
            conn.request(
                "GET",
                "/api/tasks",
                headers={"Authorization": f"Bearer {found.group(2)}", "Accept": "application/json"},
            )
            resp = conn.getresponse()
            assert resp.status == 200 and b"tasks/example.tsk" in resp.read()
        finally:
            conn.close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_open_hands_the_token_address_to_the_browser(procs: Procs, tmp_path: Path) -> None:
    """`--open` opens the printed address (with its token) in the default browser: here a
    `BROWSER` that writes down what it was given."""
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(
        f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {opened}.part\nmv {opened}.part {opened}\n"
    )
    browser.chmod(0o755)
    procs.env["BROWSER"] = str(browser)
    web = start_web(procs, "--open")
    wait_until(opened.exists, 60.0, "the browser to be opened")
    assert opened.read_text().splitlines() == [web.url]
    status, headers, _ = web.request(
        "GET", urlsplit(web.url).path + "?" + urlsplit(web.url).query, bearer=False
    )
    assert status == 303 and "mindloop_token=" in headers["set-cookie"]  # the address works


def test_without_open_no_browser_is_started(procs: Procs, tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\ntouch {opened}\n")
    browser.chmod(0o755)
    procs.env["BROWSER"] = str(browser)
    web = start_web(procs)
    assert web.call("GET", "/api/tasks")  # it serves (the browser would have opened by now)
    assert stop_web(procs, web) == 130
    assert not opened.exists()


def test_ctrl_c_stops_the_server_and_says_state_is_saved(procs: Procs, web: Web) -> None:
    assert stop_web(procs, web) == 130
    assert "state is saved" in web.proc.output()


# ---------------------------------------------------------------------------- use cases


def test_a_bad_input_is_refused_with_the_use_cases_words_and_nothing_changes(web: Web) -> None:
    status, _, body = web.request("POST", "/chat", {"message": "   "})
    assert status == 400 and "the message is empty" in json.loads(body)["error"]
    status, _, body = web.request("POST", "/chat", {"message": "hi", "member": "nobody"})
    assert status == 400 and "nobody" in json.loads(body)["error"]
    status, _, body = web.request("POST", "/questions/q4h-nope/answer", {"answer": "x"})
    assert status == 404
    status, _, body = web.request(
        "POST", "/taskdoc/edit", {"task": "tasks/example.tsk", "section": "goals", "content": " "}
    )
    assert status == 400 and "content is required" in json.loads(body)["error"]
    assert not _dialogs(web)
    started = web.call("POST", "/chat", {"message": "first question"})
    status, _, body = web.request("POST", f"/dialogs/{started['dialog']['id']}/retry")
    assert status == 400 and "nothing to retry" in json.loads(body)["error"]
    status, headers, _ = web.request("GET", f"//elsewhere.example?token={web.token}", bearer=False)
    assert status == 303 and headers["location"] == "/"  # only a path of this server


def test_a_task_created_from_its_form_is_the_humans_and_a_bad_name_creates_nothing(
    web: Web, rtws: Path
) -> None:
    made = web.call(
        "POST",
        "/tasks",
        {"slug": "login", "goal": "Users can log in.", "constraints": "Keep it small\n\n Tested "},
    )
    assert made["task"] == "tasks/login.tsk" and made["location"] == "/task/tasks/login.tsk"
    pkg = rtws / "tasks" / "login.tsk"
    assert (pkg / "goals.md").read_text("utf-8") == "Users can log in.\n"
    assert (pkg / "constraints.md").read_text("utf-8") == "- Keep it small\n- Tested\n"
    for section in ("goals.md", "constraints.md", "progress.md"):
        [created] = read_store(
            rtws, lambda s, sec=section: s.taskdoc_history("tasks/login.tsk", sec)
        )
        assert (created.actor_member, created.actor_dialog) == ("human", None), section
        assert created.content_before is None
    shown = web.call("GET", "/api/taskdoc/tasks/login.tsk")
    assert {(s["actor"], s["changed_outside"]) for s in shown["sections"]} == {("human", False)}
    assert "tasks/login.tsk" in [r["path"] for r in web.call("GET", "/api/tasks")]

    # The same name again: refused, the package as it was, no second history entry.
    status, _, body = web.request("POST", "/tasks", {"slug": "login", "goal": "Something else."})
    assert status == 400 and "tasks/login.tsk already exists" in json.loads(body)["error"]
    assert (pkg / "goals.md").read_text("utf-8") == "Users can log in.\n"
    assert len(read_store(rtws, lambda s: s.taskdoc_history("tasks/login.tsk", "goals.md"))) == 1

    # A name that leaves tasks/: refused, nothing written anywhere.
    before = sorted(p.name for p in (rtws / "tasks").iterdir())
    for slug in ("../escape", "../../escape", "a/../../escape", "/tmp/escape"):
        status, _, body = web.request("POST", "/tasks", {"slug": slug, "goal": "out"})
        assert status == 400 and "Invalid task slug" in json.loads(body)["error"], slug
    assert sorted(p.name for p in (rtws / "tasks").iterdir()) == before
    assert not list(rtws.parent.glob("**/escape*"))
    status, _, body = web.request("POST", "/tasks", {"slug": "  "})
    assert status == 400 and "the task needs a name" in json.loads(body)["error"]
    tasks = [r["path"] for r in web.call("GET", "/api/tasks")]
    assert sorted(tasks) == ["tasks/example.tsk", "tasks/login.tsk"]


# ---------------------------------------------------------------------------- the stream


def test_the_event_stream_resumes_from_last_event_id_without_loss_or_repeat(
    procs: Procs, web: Web
) -> None:
    started = web.call("POST", "/chat", {"message": "first question", "task": "tasks/example.tsk"})
    root = started["dialog"]["id"]
    wait_until(lambda: _answered(web, root, 1), TIMEOUT, "the first answer")

    stream = web.events(f"root={root}&since=m0.e0.c0")
    assert stream.status == 200
    seen = stream.until(lambda ev: ev.event == "mark")
    first = [ev.json() for ev in seen if ev.event == "entry"]
    assert [e["message_kind"] for e in first] == ["user", "assistant"]
    assert "First answer." in first[1]["html"]
    position = stream.last_id
    assert position is not None and position == seen[-1].id
    stream.close()  # the connection drops

    web.call("POST", f"/dialogs/{root}/messages", {"message": "second question"})
    wait_until(lambda: _answered(web, root, 2), TIMEOUT, "the second answer")

    again = web.events(f"root={root}&since=m0.e0.c0", last_event_id=position)
    replayed = again.until(lambda ev: ev.event == "mark")
    assert replayed[0].event == "hello" and replayed[1].event == "state"
    entries = [ev.json() for ev in replayed if ev.event == "entry"]
    # Only what was missed (Last-Event-ID wins over the page's `since`), each once.
    assert [e["message_kind"] for e in entries] == ["user", "assistant"]
    assert "second question" in entries[0]["html"] and "Second answer." in entries[1]["html"]
    ids = [e["log_id"] for e in entries]
    assert ids == sorted(ids) and min(ids) > min(e["log_id"] for e in first)
    again.close()

    messages = read_store(procs.rtws, lambda s: s.load_history(root))
    assert [m.id for m in messages] == [e["log_id"] for e in first + entries]


def test_a_position_the_server_did_not_write_is_refused(web: Web) -> None:
    stream = web.events("since=m0.e0.c0", last_event_id="garbage")
    assert stream.status == 400
    assert "not a feed position" in json.loads(stream.resp.read())["error"]
    stream.close()


@pytest.mark.sqlite_only
def test_state_is_created_only_when_the_server_starts(procs: Procs, rtws: Path) -> None:
    assert not (rtws / STATE_DIR / STATE_FILE).exists()
    web = start_web(procs)
    assert (rtws / STATE_DIR / STATE_FILE).exists()
    assert web.call("GET", "/api/tasks")[0]["path"] == "tasks/example.tsk"


# ---------------------------------------------------------------------------- approvals

WRITE = {"name": "write_file", "arguments": {"path": "out.txt", "content": "hello\n"}}


@pytest.fixture
def approving(rtws: Path, tmp_path: Path) -> Iterator[tuple[Procs, Web]]:
    """A server whose member needs the human's approval to write a file."""
    write_team(rtws, {"dev": {"toolsets": ["fs"], "approval_required": ["write_file"]}})
    write_script(
        rtws,
        [
            {"contains": "The human approved", "response": "written"},
            {"contains": "The human rejected", "response": "not written"},
            {"contains": "write it", "response": "Writing.", "tool_calls": [WRITE]},
        ],
    )
    procs = Procs(rtws, tmp_path / "logs")
    try:
        yield procs, start_web(procs)
    finally:
        procs.close()


def _waiting_approval(web: Web) -> dict[str, object]:
    started = web.call("POST", "/chat", {"message": "write it", "task": "tasks/example.tsk"})
    root = started["dialog"]["id"]
    [item] = wait_until(lambda: web.call("GET", "/api/approvals"), TIMEOUT, "the approval")
    assert item["root_id"] == root
    return dict(item)


def _notes(web: Web, dialog_id: str) -> list[str]:
    shown = web.call("GET", f"/api/dialogs/{dialog_id}")
    return [m["data"]["text"] for m in shown["messages"] if m["kind"] == "note"]


def test_an_approval_is_listed_and_approve_runs_exactly_the_approved_call(
    approving: tuple[Procs, Web], rtws: Path
) -> None:
    _, web = approving
    item = _waiting_approval(web)
    a = item["approval"]
    assert isinstance(a, dict)
    assert (a["member"], a["tool"]) == ("dev", "write_file")
    assert json.loads(a["arguments"]) == WRITE["arguments"]
    assert len(a["args_digest"]) == 64
    assert not (rtws / "out.txt").exists()
    # The inbox shows it with its tool, arguments and digest, and counts it.
    status, _, page = web.request("GET", "/inbox", headers={"Accept": "text/html"})
    html = page.decode()
    assert status == 200 and f'data-approval="{a["id"]}"' in html
    assert "write_file" in html and "out.txt" in html and f'value="{a["args_digest"]}"' in html
    assert 'data-inbox-count="1"' in html
    [row] = [r for r in web.call("GET", "/api/tasks") if r["path"] == "tasks/example.tsk"]
    assert (row["status"], row["questions"]) == ("waiting for you", 1)

    # Free text never decides an approval (the refusal names the page's buttons, not the
    # CLI's commands), and a digest not shown decides nothing.
    status, _, body = web.request("POST", f"/questions/{a['id']}/answer", {"answer": "yes"})
    error = json.loads(body)["error"]
    assert status == 400 and f"{a['id']} is an approval, not a question" in error
    assert "its Approve or Reject button" in error and "mindloop" not in error
    status, _, body = web.request("POST", f"/approvals/{a['id']}/approve", {"digest": "0" * 64})
    assert status == 400 and "nothing was decided" in json.loads(body)["error"]
    status, _, body = web.request("POST", f"/approvals/{a['id']}/approve", {})
    assert status == 400 and "digest" in json.loads(body)["error"]
    assert [x["approval"]["id"] for x in web.call("GET", "/api/approvals")] == [a["id"]]
    assert not (rtws / "out.txt").exists()

    decided = web.call(
        "POST", f"/approvals/{a['id']}/approve", {"digest": a["args_digest"], "back": "/inbox"}
    )
    assert decided["decided"]["decision"] == "approve" and decided["location"] == "/inbox"
    dialog = str(a["dialog_id"])
    wait_until(lambda: _answered(web, dialog, 2), TIMEOUT, "the answer after the approval")
    assert (rtws / "out.txt").read_text() == "hello\n"  # exactly the approved arguments
    [note] = _notes(web, dialog)
    assert "The human approved" in note and "exactly the approved arguments" in note
    assert web.call("GET", "/api/approvals") == []
    status, _, body = web.request("POST", f"/approvals/{a['id']}/approve", {"digest": "x"})
    assert status == 400


def test_reject_needs_a_reason_and_the_model_reads_it(
    approving: tuple[Procs, Web], rtws: Path
) -> None:
    _, web = approving
    a = _waiting_approval(web)["approval"]
    assert isinstance(a, dict)
    digest = a["args_digest"]
    status, _, body = web.request("POST", f"/approvals/{a['id']}/reject", {"digest": digest})
    assert status == 400 and "needs a reason" in json.loads(body)["error"]
    decided = web.call(
        "POST", f"/approvals/{a['id']}/reject", {"digest": digest, "reason": "not today"}
    )
    assert decided["decided"]["decision"] == "reject"
    dialog = str(a["dialog_id"])
    wait_until(lambda: _answered(web, dialog, 2), TIMEOUT, "the answer after the rejection")
    [note] = _notes(web, dialog)
    assert "not today" in note
    assert not (rtws / "out.txt").exists()
    assert web.call("GET", "/api/approvals") == []
