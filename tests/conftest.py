"""Shared fixtures: a fresh rtws per test, built with the public scaffold."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.rtws import init_rtws


@pytest.fixture
def rtws(tmp_path: Path) -> Path:
    """A fresh rtws on the mock provider (members and script set by each test)."""
    root = tmp_path / "proj"
    init_rtws(root, provider="mock")
    return root
