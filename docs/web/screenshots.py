"""Take the README's screenshots of the web UI: the demo's project, played in the browser as
a new user plays it (`mindloop demo --init`, then `mindloop web`, then the browser only).

    .venv/bin/python docs/web/screenshots.py     # writes docs/web/*.png

Needs the test extra (Playwright) and the operating system's Chromium (/usr/bin/chromium).
Every wait is on the page; the pictures are taken where the story is: the inbox with the
team's approval, the task page while the loop waits for it, a node's page, the loop root's
dialog and the task list once the task is DONE.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from mindloop.demo import DEMO_PROMPT, DEMO_TASK, HUMAN_ANSWER, prepare_demo_rtws

OUT = Path(__file__).parent
WAIT_MS = 120_000


def main() -> None:
    rtws = prepare_demo_rtws(Path(tempfile.mkdtemp(prefix="mindloop-shots-")) / "my-project")
    log = rtws.parent / "web.log"
    with log.open("wb") as fh:
        server = subprocess.Popen(
            [sys.executable, "-m", "mindloop.cli.app", "-C", str(rtws), "web"],
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    try:
        url = None
        for _ in range(600):
            found = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", log.read_text())
            if found:
                url = found.group(0)
                break
            time.sleep(0.1)
        assert url, log.read_text()
        base = url.split("/?")[0]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium")
            context = browser.new_context(viewport={"width": 1280, "height": 860})
            context.set_default_timeout(WAIT_MS)
            page = context.new_page()
            page.goto(url)
            live = '[data-connection-state][data-state="open"]'

            # The task page's composer starts the task's loop; it asks the human first.
            page.goto(f"{base}/task/{DEMO_TASK}")
            page.locator(live).wait_for()
            page.get_by_label("Message to the work loop").fill(DEMO_PROMPT)
            page.get_by_role("button", name="Send to the loop").click()
            page.locator("#pane-questions [data-question]").wait_for()

            # The inbox: the question answered, then the approval the team asks for.
            inbox = context.new_page()
            inbox.goto(f"{base}/inbox")
            inbox.locator(live).wait_for()
            question = inbox.locator("[data-question]")
            question.get_by_label("Your answer to @dev").fill(HUMAN_ANSWER)
            question.get_by_role("button", name="Answer").click()
            inbox.locator("[data-approval]").wait_for()
            inbox.locator("[data-no-questions]").wait_for()
            inbox.screenshot(path=OUT / "inbox.png")

            # The task page, followed live: the plan, the node tree mid-way, the loop
            # waiting for the approval.
            page.locator('[data-node="n4"]').wait_for()
            page.locator("[data-loop-status]", has_text="WAITING").wait_for()
            page.screenshot(path=OUT / "task.png", full_page=True)

            inbox.locator("[data-approval]").get_by_role("button", name="Approve").click()
            page.locator("[data-loop-status]", has_text="DONE").wait_for()

            # A node's page: the contributing guide, worked by the reviewer.
            page.locator('[data-node="n2"] [data-node-link]').click()
            page.wait_for_url(re.compile(r"/node/n2$"))
            page.locator(live).wait_for()
            page.screenshot(path=OUT / "node.png")

            # The loop root's dialog: its tree (the teammate, the FBR samples) beside the
            # start of the transcript (the task's message, PLAN, the human's question).
            page.goto(f"{base}/task/{DEMO_TASK}")
            page.locator("[data-loop] a").first.click()
            page.wait_for_url(re.compile(r"/dialogs/\w+$"))
            page.locator(live).wait_for()
            page.set_viewport_size({"width": 1280, "height": 1100})
            page.screenshot(path=OUT / "dialog.png")
            page.set_viewport_size({"width": 1280, "height": 860})

            page.goto(base + "/")
            page.locator(live).wait_for()
            page.screenshot(path=OUT / "tasks.png")
            browser.close()
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
