"""Fixtures for the store's tests: a project made read-only for a child process."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scenario_util import ml
from tests.store.readonly import NOBODY


@pytest.fixture
def readonly_base(tmp_path: Path) -> Iterator[tuple[Path, int | None]]:
    """A directory for a project that is then made read-only for the CLI's user: by file
    modes when tests run unprivileged; as root (whom modes do not stop) the CLI runs as
    `nobody`, so the project lives where `nobody` can reach it."""
    if os.geteuid() != 0:
        yield tmp_path, None
        for p in [tmp_path, *tmp_path.rglob("*")]:  # let pytest clean up
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        return
    probe = ml("--help", cwd=Path("/"), user=NOBODY) if shutil.which("setpriv") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("running as root, and the CLI cannot be run as `nobody` (needs setpriv)")
    base = Path(tempfile.mkdtemp(prefix="mindloop-ro-"))
    base.chmod(0o755)
    try:
        yield base, NOBODY
    finally:
        shutil.rmtree(base, ignore_errors=True)
