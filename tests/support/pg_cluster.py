"""A private throwaway PostgreSQL cluster for one test module or benchmark.

``scripts/postgres`` with its own data folder and port: nothing else connects to it, so its
server log is this run's alone and says exactly which errors (unique-constraint violations,
deadlocks, …) the proxies caused::

    cluster = PgCluster.start_or_skip_reason()   # (cluster, "") or (None, why)
    url = cluster.create_database("headroom_team")
    ...
    cluster.errors()      # the server log's ERROR/FATAL lines
    cluster.destroy()

Needs PostgreSQL's binaries (``/usr/lib/postgresql/*/bin``; as root, ``scripts/postgres``
installs the Debian package when they are missing).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from .proxy import REPO_ROOT, free_port

__all__ = ["PgCluster"]

PG_SCRIPT = REPO_ROOT / "scripts" / "postgres"
#: Server log lines that are errors (``ERROR:``, ``FATAL:``, ``PANIC:``), with what follows.
_ERROR = re.compile(r"^.*\b(ERROR|FATAL|PANIC):\s.*$", re.M)


class PgCluster:
    """One PostgreSQL server on ``127.0.0.1:port`` with its data in ``folder`` (see module)."""

    def __init__(self, folder: Path, port: int, url: str) -> None:
        self.folder = folder
        self.port = port
        self.url = url  # of its first database, ``postgresql+psycopg://postgres@127.0.0.1:PORT/NAME``

    @classmethod
    def start(cls, database: str = "headroom_team", timeout: float = 300.0) -> "PgCluster":
        """Initialise and start a cluster in a fresh folder under the temporary directory, with
        ``database`` created. Raises :class:`RuntimeError` with the script's output on failure."""
        folder = Path(tempfile.mkdtemp(prefix="headroom-pg-"))
        port = free_port()
        env = {**os.environ, "HEADROOM_PG_DIR": str(folder), "HEADROOM_PG_PORT": str(port), "HEADROOM_PG_DB": database}
        out = subprocess.run(
            ["bash", str(PG_SCRIPT), "start"], capture_output=True, text=True, timeout=timeout, env=env
        )
        m = re.search(r"HEADROOM_TEST_PG_URL=(\S+)", out.stdout)
        if out.returncode != 0 or not m:
            subprocess.run(["rm", "-rf", str(folder)], check=False)
            raise RuntimeError(f"scripts/postgres start failed ({out.returncode}):\n{out.stderr[-2000:]}")
        return cls(folder, port, m.group(1))

    @classmethod
    def start_or_skip_reason(cls, database: str = "headroom_team") -> tuple["PgCluster | None", str]:
        """:meth:`start`, or ``(None, why)`` when PostgreSQL is not installed and cannot be."""
        if not any(Path("/usr/lib/postgresql").glob("*/bin/initdb")) and os.geteuid() != 0:
            return None, "PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb) and this is not root"
        return cls.start(database), ""

    def create_database(self, name: str) -> str:
        """Create database ``name``; returns its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return re.sub(r"/[^/]*$", f"/{name}", self.url)

    def query(self, sql: str, database: str | None = None) -> list[tuple]:
        """The rows of ``sql`` run on ``database`` (default: the first one)."""
        import psycopg

        name = database or self.url.rsplit("/", 1)[1]
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/{name}", autocommit=True) as c:
            return list(c.execute(sql).fetchall())

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self.folder / "server.log"

    def log_text(self) -> str:
        """Everything the server logged so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def errors(self, since: int = 0) -> list[str]:
        """The server log's error lines (``ERROR:``/``FATAL:``/``PANIC:``) from character
        ``since`` on, each with the ``STATEMENT:`` line that follows it when there is one."""
        text = self.log_text()[since:]
        lines = text.splitlines()
        out = []
        for i, ln in enumerate(lines):
            if _ERROR.match(ln):
                nxt = lines[i + 1] if i + 1 < len(lines) and "STATEMENT:" in lines[i + 1] else ""
                out.append(ln + (" | " + nxt.strip() if nxt else ""))
        return out

    def destroy(self) -> None:
        """Stop the server and delete its folder."""
        env = {**os.environ, "HEADROOM_PG_DIR": str(self.folder), "HEADROOM_PG_PORT": str(self.port)}
        subprocess.run(["bash", str(PG_SCRIPT), "destroy"], capture_output=True, text=True, timeout=120, env=env)
