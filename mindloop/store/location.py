"""Where an rtws's store lives: the SQLite file under `.mindloop/` (the default), or the
PostgreSQL database `MINDLOOP_DATABASE_URL` names (every worker of a scaled-out rtws
shares it). Read when a store is opened, never per statement."""

from __future__ import annotations

import os
from pathlib import Path

from mindloop.store.dialect import StoreDialect

DATABASE_URL_ENV = "MINDLOOP_DATABASE_URL"


def database_url() -> str | None:
    """The database URL the environment names, or None (SQLite, one file per rtws)."""
    return os.environ.get(DATABASE_URL_ENV, "").strip() or None


def env_dialect(*, durable: bool) -> StoreDialect | None:
    """The dialect `MINDLOOP_DATABASE_URL` selects, or None for the SQLite default."""
    url = database_url()
    if url is None:
        return None
    from mindloop.store.postgres import PostgresDialect

    return PostgresDialect(url, durable=durable)


def state_location(rtws: Path) -> str:
    """Where the rtws's state is, as outputs name it: the database `MINDLOOP_DATABASE_URL`
    names (its password hidden), else the SQLite file under `.mindloop/` (the rule
    `Store.for_rtws` opens by)."""
    url = database_url()
    if url is None:
        from mindloop.store.store import STATE_DIR, STATE_FILE

        return str(Path(rtws) / STATE_DIR / STATE_FILE)
    from mindloop.store.postgres import redact

    return redact(url)
