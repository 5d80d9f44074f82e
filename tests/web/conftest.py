"""A real headless Chromium for the web UI's tests: the operating system's, driven by
Playwright (`playwright install` cannot download a browser here).

A missing Chromium fails the tests with what to install; nothing is skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("MINDLOOP_CHROMIUM", "/usr/bin/chromium"))
MISSING = (
    "the browser tests drive the operating system's Chromium, and {path} does not exist: "
    "install it with `apt-get install chromium` (.ci/run does so when it is missing), or "
    "name another Chromium with MINDLOOP_CHROMIUM"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(MISSING.format(path=CHROMIUM), pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context (no cookie) at desktop width; fails the test on any
    script error of the page."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield pg
    finally:
        context.close()
    assert not errors, f"script errors in the page: {errors}"
