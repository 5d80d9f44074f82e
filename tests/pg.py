"""A real PostgreSQL server for the tests: the operating system's PostgreSQL 15, started
in a temporary directory on 127.0.0.1 and a free port, stopped when the test process ends.

One server per test process (each pytest-xdist worker has its own), started on first use.
Each store gets a schema of its own (`schema_url`: cheap, isolates one test from another
on one database), each scaled-out scenario a database of its own (`database_url`: DBOS's
system tables live beside the store's). As root, the server runs as the `postgres` user
(PostgreSQL refuses to run as root); the Debian package creates it. `.ci/run` installs the
package when it is missing.

`MINDLOOP_TEST_DATABASE=postgresql` points the whole runtime suite at this server (the
root `conftest.py`), the way DBOS's own suite switches on `DBOS_DATABASE`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

import psycopg

TEST_DATABASE_ENV = "MINDLOOP_TEST_DATABASE"
BIN_DIRS = (
    "/usr/lib/postgresql/15/bin",
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/17/bin",
)
RUN_AS = "postgres"  # the user the server runs as when the tests run as root


def suite_on_postgres() -> bool:
    """Whether the whole suite runs its stores on PostgreSQL."""
    return os.environ.get(TEST_DATABASE_ENV, "").lower() in ("postgresql", "postgres", "pg")


def _bin_dir() -> Path:
    for d in BIN_DIRS:
        if (Path(d) / "initdb").is_file():
            return Path(d)
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise RuntimeError(
        "PostgreSQL's server binaries were not found (initdb under /usr/lib/postgresql/*/bin): "
        "install the operating system's package (`apt-get install -y postgresql`; .ci/run does)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One PostgreSQL cluster in a temporary directory, trust authentication on loopback."""

    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.dir = Path(tempfile.mkdtemp(prefix="mindloop-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.user = "postgres"
        self._as: list[str] = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam(RUN_AS)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self._as = ["runuser", "-u", RUN_AS, "--"]
        self.started = False
        self._lock = threading.Lock()
        self._n = 0

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [*self._as, *args], capture_output=True, text=True, timeout=120, cwd=self.dir
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        self._run(
            str(self.bin / "initdb"),
            "-D", str(self.data),
            "-U", self.user,
            "--auth=trust",
            "-E", "UTF8",
            "--locale=C",
        )  # fmt: skip
        opts = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off -c max_connections=400 "
            "-c shared_buffers=64MB"
        )
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "log"),
            "-o", opts, "-w", "-t", "60", "start",
        )  # fmt: skip
        self.started = True

    def stop(self) -> None:
        if self.started:
            self.started = False
            with contextlib.suppress(Exception):
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str = "postgres", *, driver: str = "postgresql") -> str:
        return f"{driver}://{self.user}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str, database: str = "postgres") -> None:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def _name(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{prefix}{self._n}_{uuid.uuid4().hex[:6]}"

    def database_url(self) -> str:
        """A new, empty database of its own."""
        name = self._name("db")
        self.admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def schema_url(self) -> str:
        """A new, empty schema in the shared database, selected by the URL's search_path."""
        name = self._name("s")
        self.admin(f'CREATE SCHEMA "{name}"')
        return self.url() + f"?options=-csearch_path%3D{name}"


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
