"""Take the README's screenshots of the web UI: the demo's project, played in the browser.

    .venv/bin/python docs/web/screenshots.py     # writes docs/web/*.png

Needs the test extra (Playwright) and the operating system's Chromium (/usr/bin/chromium).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from mindloop.demo import DEMO_PROMPT, DEMO_TASK, prepare_demo_rtws

OUT = Path(__file__).parent


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
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.goto(url)
            page.goto(f"{base}/task/{DEMO_TASK}")
            page.get_by_label("Message", exact=True).fill(DEMO_PROMPT)
            page.get_by_role("button", name="Start the dialog").click()
            page.wait_for_url(re.compile(r"/dialogs/\w+$"))
            page.locator("[data-question]").wait_for()
            # The part of the transcript with the tellasks: a teammate, FBR, the human.
            page.locator(".entry.k-assistant", has=page.locator(".tellask")).first.evaluate(
                "el => el.scrollIntoView({block: 'start'})"
            )
            page.screenshot(path=OUT / "dialog.png")
            page.goto(f"{base}/task/{DEMO_TASK}")
            page.locator("[data-question]").wait_for()
            page.screenshot(path=OUT / "task.png", full_page=True)
            page.goto(base + "/")
            page.screenshot(path=OUT / "tasks.png")
            browser.close()
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
