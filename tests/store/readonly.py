"""Making a project read-only for a child process (see the `readonly_base` fixture)."""

from __future__ import annotations

from pathlib import Path

NOBODY = 65534  # whom a child runs as when the tests run as root


def make_read_only(root: Path) -> None:
    """Every file and directory under `root` (itself too) loses its write bits."""
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o555 if p.is_dir() else 0o444)
