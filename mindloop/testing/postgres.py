"""A throwaway PostgreSQL server for tests and benchmarks: the operating system's
PostgreSQL (15, 16 or 17) started in a temporary directory, on 127.0.0.1 and a free port,
with trust authentication on loopback; `stop()` removes it.

    from mindloop.testing.postgres import PgServer

    srv = PgServer()
    srv.start()
    url = srv.database_url()        # a new, empty database: MINDLOOP_DATABASE_URL=url
    ...
    srv.stop()

Run as root, the server runs as the `postgres` user (PostgreSQL refuses to run as root;
the Debian package creates it). Needs the server binaries (`apt-get install postgresql`)
and psycopg (`pip install 'mindloop[postgres]'`). mindloop's own test suite
(`tests/pg.py`) and `bench/run.py --postgres` start theirs with this.
"""

from __future__ import annotations

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

BIN_DIRS = (
    "/usr/lib/postgresql/15/bin",
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/17/bin",
)
RUN_AS = "postgres"  # the user the server runs as when started by root


def _bin_dir() -> Path:
    for d in BIN_DIRS:
        if (Path(d) / "initdb").is_file():
            return Path(d)
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise RuntimeError(
        "PostgreSQL's server binaries were not found (initdb under /usr/lib/postgresql/*/bin): "
        "install the operating system's package (`apt-get install -y postgresql`)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def admin(url: str, sql: str) -> None:
    """Run one statement outside a transaction (CREATE DATABASE …) on the server at `url`."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


def new_database(url: str, name: str | None = None) -> str:
    """Create a new, empty database on the server `url` names; the URL of the new one."""
    from sqlalchemy.engine import make_url

    name = name or f"db_{uuid.uuid4().hex[:12]}"
    admin(url, f'CREATE DATABASE "{name}"')
    return make_url(url).set(database=name).render_as_string(hide_password=False)


class PgServer:
    """One PostgreSQL cluster in a temporary directory (see the module doc)."""

    def __init__(self, *, max_connections: int = 400) -> None:
        self.bin = _bin_dir()
        self.dir = Path(tempfile.mkdtemp(prefix="mindloop-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.user = "postgres"
        self.max_connections = max_connections
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
        """initdb and start (durability off: fsync and full-page writes; a test server)."""
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
            f"-c fsync=off -c full_page_writes=off -c max_connections={self.max_connections} "
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
        admin(self.url(database), sql)

    def _name(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{prefix}{self._n}_{uuid.uuid4().hex[:6]}"

    def database_url(self) -> str:
        """A new, empty database of its own."""
        return new_database(self.url(), self._name("db"))

    def schema_url(self) -> str:
        """A new, empty schema in the shared database, selected by the URL's search_path."""
        name = self._name("s")
        self.admin(f'CREATE SCHEMA "{name}"')
        return self.url() + f"?options=-csearch_path%3D{name}"
