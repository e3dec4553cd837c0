"""``headroom backup [PATH]``: copy the SQLite database (ledger, originals, memories, rules) into
one self-contained file while the proxy may be running (issue 36, item 8).

Copying ``headroom.db`` by hand misses what is still in ``headroom.db-wal`` (everything since
the last checkpoint; a stopped proxy checkpoints, a running one does now and then): this uses
SQLite's online backup API (:func:`~headroom_core.db.backup.backup_sqlite`). The memory
database, when it is another SQLite file (``memory_db_url``), is copied beside it as
``<PATH stem>-memory<suffix>``. A PostgreSQL database is backed up with ``pg_dump``; the command
says so.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from headroom_core.cli import ui
from headroom_core.cli.dbopen import safe_url, sqlite_file
from headroom_core.settings import SettingsError, load_settings


def backup(
    path: Optional[Path] = typer.Argument(
        None, help="Where to write the copy (default: <home>/backups/headroom-<UTC time>.db). It must not exist."
    ),
    db_url: Optional[str] = typer.Option(None, help="Back up this database instead of the configured one."),
) -> None:
    """Copy the SQLite database into one file, safely while the proxy runs (PostgreSQL: use pg_dump).

    The copy is owner-only (it holds tool outputs and memories). Restore it by stopping the proxy and putting the copy in place of headroom.db (remove headroom.db-wal and headroom.db-shm beside it).
    """
    import sqlite3

    from headroom_core.db.backup import backup_sqlite

    try:
        settings = load_settings({"db_url": db_url} if db_url else None)
    except SettingsError as e:
        ui.fail("backup", str(e))
        raise typer.Exit(2) from e
    source = sqlite_file(settings.database_url)
    if source is None:
        ui.fail("backup", f"{safe_url(settings.database_url)} is not a SQLite file: back up a PostgreSQL database with its own tool, "
                          "e.g. `pg_dump --format=custom --file=headroom.dump <database>` (restore with pg_restore)")  # fmt: skip
        raise typer.Exit(2)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    dest = path if path is not None else Path(settings.home) / "backups" / f"headroom-{stamp}.db"
    copies = [(source, dest)]
    memory = sqlite_file(settings.memory_db_url) if settings.memory_db_url else None
    if memory is not None and memory != source:
        copies.append((memory, dest.with_name(f"{dest.stem}-memory{dest.suffix}")))
    for src, out in copies:
        try:
            with ui.status(f"copying {src} …"):
                size = backup_sqlite(src, out)
        except (OSError, sqlite3.Error) as e:
            ui.fail("backup", f"cannot copy {src} to {out}: {e}")
            raise typer.Exit(2) from e
        ui.copyable(f"{src} copied to {out} ({size:,} bytes)", markup=False)


def register(app: typer.Typer) -> None:
    """Add ``headroom backup`` to the CLI."""
    app.command("backup")(backup)
