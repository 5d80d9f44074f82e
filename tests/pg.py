"""A real PostgreSQL server for the tests: the operating system's PostgreSQL, started in a
temporary directory on 127.0.0.1 and a free port (`mindloop.testing.postgres.PgServer`),
stopped when the test process ends.

One server per test process (each pytest-xdist worker has its own), started on first use.
Each store gets a schema of its own (`schema_url`: cheap, isolates one test from another
on one database), each scaled-out scenario a database of its own (`database_url`: DBOS's
system tables live beside the store's). `.ci/run` installs the package when it is missing.

`MINDLOOP_TEST_DATABASE=postgresql` points the whole runtime suite at this server (the
root `conftest.py`), the way DBOS's own suite switches on `DBOS_DATABASE`.
"""

from __future__ import annotations

import atexit
import os
import threading

from mindloop.testing.postgres import PgServer

TEST_DATABASE_ENV = "MINDLOOP_TEST_DATABASE"

__all__ = ["TEST_DATABASE_ENV", "PgServer", "server", "stop_server", "suite_on_postgres"]


def suite_on_postgres() -> bool:
    """Whether the whole suite runs its stores on PostgreSQL."""
    return os.environ.get(TEST_DATABASE_ENV, "").lower() in ("postgresql", "postgres", "pg")


_server: PgServer | None = None
_server_lock = threading.Lock()


def server() -> PgServer:
    """This process's server, started on first use and stopped when the process exits."""
    global _server
    with _server_lock:
        if _server is None:
            srv = PgServer()
            try:
                srv.start()
            except BaseException:
                srv.stop()
                raise
            atexit.register(srv.stop)
            _server = srv
        return _server


def stop_server() -> None:
    global _server
    with _server_lock:
        if _server is not None:
            _server.stop()
            _server = None
