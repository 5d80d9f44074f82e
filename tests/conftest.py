"""Shared fixtures: a fresh rtws per test, built with the public scaffold."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.rtws import init_rtws
from mindloop.store.location import DATABASE_URL_ENV
from tests import pg


@pytest.fixture(autouse=True)
def _state_database(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Where each test's stores live: SQLite files (the default), or with
    `MINDLOOP_TEST_DATABASE=postgresql` a fresh schema on a real PostgreSQL server for every
    test (`tests/pg.py`), which the CLI processes a test starts inherit. Tests of the SQLite
    file itself (damaged, read-only, WAL) are marked `sqlite_only` and keep SQLite."""
    if pg.suite_on_postgres() and request.node.get_closest_marker("sqlite_only") is None:
        monkeypatch.setenv(DATABASE_URL_ENV, pg.server().schema_url())
    else:
        monkeypatch.delenv(DATABASE_URL_ENV, raising=False)


@pytest.fixture
def rtws(tmp_path: Path) -> Path:
    """A fresh rtws on the mock provider (members and script set by each test)."""
    root = tmp_path / "proj"
    init_rtws(root, provider="mock")
    return root
