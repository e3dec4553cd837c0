"""``headroom memory``: read and edit the memory agents share per project.

    headroom memory list [--kind K] [--all] [--archived]   memories of the project (newest first)
    headroom memory search QUERY [--limit N] [--text]      best matches (embeddings; --text: words)
    headroom memory add TEXT [--kind K]                    save one (redacted, near-duplicates merge)
    headroom memory remove ID                              delete one
    headroom memory stats                                  per project: counts, kinds, evidence, value
    headroom memory export FILE                            JSON Lines ("-" for stdout)
    headroom memory import FILE                            from an export (near-duplicates merge)

``--project`` names the project; by default the current directory (the working directory an agent
started here states, so its memories are the ones shown). ``stats`` and ``export`` cover every
project unless ``--project`` is given. The database is ``memory_db_url`` (else ``db_url``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

console = Console()
err = Console(stderr=True)

memory_app = typer.Typer(help="Memories shared by all agents, per project (list, search, add, remove, stats, export, import).", no_args_is_help=True)

PROJECT_HELP = "Project (default: the current directory, as agents state it; a conversation that states none is its own, 'conversation:<key>')."


def _project(project: Optional[str]) -> str:
    return project.strip() if project and project.strip() else os.getcwd()


def _store(model: bool = False, create: bool = True):
    """The memory store on the configured database; ``model`` loads the embedding model
    (blocking). With ``create`` False (commands that only read) a SQLite file that does not
    exist yet is not created: the command says there are no memories and exits 0."""
    from headroom_core.cli.dbopen import open_existing, safe_url
    from headroom_core.cli.ui import fail
    from headroom_core.compress.embeddings import embedder
    from headroom_core.db.engine import DatabaseError, open_database
    from headroom_core.memory.store import MemoryStore
    from headroom_core.settings import SettingsError, load_settings

    try:
        s = load_settings()
        url = s.memory_db_url or s.database_url
        sessions = open_database(url) if create else open_existing(url)
    except (SettingsError, DatabaseError) as e:
        fail("memory", str(e))
        raise typer.Exit(2) from e
    if sessions is None:
        console.print(f"No memories yet: there is no database at {safe_url(url)}.", soft_wrap=True)
        raise typer.Exit(0)
    emb = None
    if model:
        emb = embedder(s.memory_model_path)
        with err.status("loading the embedding model …"):
            if not emb.wait(300):
                err.print(f"[yellow]embedding model not available ({emb.error}); text search and exact duplicates only[/]")
    return MemoryStore(
        sessions, emb, dedup_similarity=s.memory_dedup_similarity, half_life_days=s.memory_half_life_days,
        archive_below=s.memory_archive_below, archive_min_age_days=s.memory_archive_min_age_days,
    )  # fmt: skip


def _when(t) -> str:
    return t.strftime("%Y-%m-%d %H:%M") if t else "-"


def _table(title: str, rows, extra: Optional[list[str]] = None, with_project: bool = False) -> Table:
    t = Table(title=title, show_lines=False)
    t.add_column("id", style="cyan", no_wrap=True)
    t.add_column("kind")
    t.add_column("text", overflow="fold")
    if with_project:
        t.add_column("project", overflow="fold")
    for col in ["evidence", "value", "updated", "source"] + (extra or []):
        t.add_column(col, justify="right" if col in ("evidence", "value", "similarity", "score") else "left")
    return t


@memory_app.command("list")
def list_(
    project: Optional[str] = typer.Option(None, "--project", "-p", help=PROJECT_HELP),
    kind: Optional[str] = typer.Option(None, help="Only this kind: fact, rule, preference or pitfall."),
    limit: int = typer.Option(50, help="At most this many."),
    all_projects: bool = typer.Option(False, "--all", help="Every project."),
    archived: bool = typer.Option(False, help="Include archived memories."),
) -> None:
    """Memories of the project, most recently updated first."""
    st = _store(create=False)
    proj = None if all_projects else _project(project)
    rows = st.list(proj, kind=kind, limit=limit, include_archived=archived)
    t = _table(f"Memories of {proj or 'all projects'}", rows, ["archived"] if archived else None, with_project=proj is None)
    for m in rows:
        cells = [m.id, m.kind, m.text] + ([m.project] if proj is None else []) + [str(m.evidence), f"{m.value:.2f}", _when(m.updated_at), m.source]
        t.add_row(*cells, *(["yes" if m.archived else ""] if archived else []))
    console.print(t)
    if not rows:
        console.print(f"no memories{'' if proj is None else f' for project {proj}'} (use --project, or --all)")


@memory_app.command()
def search(
    query: str = typer.Argument(..., help="What to look for."),
    project: Optional[str] = typer.Option(None, "--project", "-p", help=PROJECT_HELP),
    limit: int = typer.Option(5, help="At most this many."),
    text: bool = typer.Option(False, "--text", help="Text search only (no embedding model)."),
) -> None:
    """The memories of the project most relevant to QUERY (the ranking the proxy injects with)."""
    st = _store(model=not text, create=False)
    proj = _project(project)
    res = st.search(proj, query, limit=limit)
    t = _table(f"{res.mode} search in {proj}: {query}", res.hits, ["similarity", "score"])
    for h in res.hits:
        m = h.memory
        t.add_row(m.id, m.kind, m.text, str(m.evidence), f"{m.value:.2f}", _when(m.updated_at), m.source, f"{h.similarity:.3f}", f"{h.score:.3f}")
    console.print(t)


@memory_app.command()
def add(
    text: str = typer.Argument(..., help="One self-contained statement."),
    project: Optional[str] = typer.Option(None, "--project", "-p", help=PROJECT_HELP),
    kind: str = typer.Option("fact", help="fact, rule, preference or pitfall."),
) -> None:
    """Save a memory (secrets are redacted; a near-duplicate updates the existing one)."""
    from headroom_core.memory.store import MemoryInputError

    st = _store(model=True)
    proj = _project(project)
    try:
        out = st.save(proj, text, kind, source="cli")
    except MemoryInputError as e:
        err.print(f"[red]headroom memory add:[/] {e}")
        raise typer.Exit(2) from e
    if out.redacted:
        console.print(f"[yellow]redacted:[/] {', '.join(out.redacted)}")
    if out.action == "merged":
        console.print(f"updated memory [cyan]{out.memory.id}[/] (similarity {out.similarity:.2f}, evidence {out.memory.evidence}) in {proj}")
    else:
        console.print(f"saved memory [cyan]{out.memory.id}[/] ({out.memory.kind}) in {proj}")


@memory_app.command()
def remove(
    memory_id: str = typer.Argument(..., metavar="ID", help="The memory's id (12 hex digits)."),
    project: Optional[str] = typer.Option(None, "--project", "-p", help=PROJECT_HELP),
) -> None:
    """Delete a memory of the project."""
    from headroom_core.memory.store import normalize_id

    mid = normalize_id(memory_id)
    if mid is None:
        err.print(f"[red]headroom memory remove:[/] {memory_id!r} is not a memory id (12 hex digits)")
        raise typer.Exit(2)
    proj = _project(project)
    if not _store(create=False).delete(proj, mid):
        err.print(f"[red]headroom memory remove:[/] project {proj} has no memory {mid} (see: headroom memory list --all)")
        raise typer.Exit(1)
    console.print(f"removed memory [cyan]{mid}[/] from {proj}")


@memory_app.command()
def stats(project: Optional[str] = typer.Option(None, "--project", "-p", help="Only this project (default: all).")) -> None:
    """Per project: active and archived memories, kinds, evidence, mean value, last update."""
    rows = _store(create=False).stats(project)
    t = Table(title="Memory per project")
    for col in ("project", "active", "archived", "fact", "rule", "preference", "pitfall", "evidence", "mean value", "last update"):
        t.add_column(col, justify="left" if col in ("project", "last update") else "right", overflow="fold")
    for r in rows:
        t.add_row(r.project, str(r.active), str(r.archived), *[str(r.kinds.get(k, 0)) for k in ("fact", "rule", "preference", "pitfall")],
                  str(r.evidence), f"{r.mean_value:.2f}", _when(r.last_updated))
    console.print(t)


@memory_app.command()
def export(
    file: str = typer.Argument(..., help="Output file (JSON Lines); '-' for stdout."),
    project: Optional[str] = typer.Option(None, "--project", "-p", help="Only this project (default: all)."),
) -> None:
    """Write memories (archived included) as JSON Lines, one memory per line."""
    st = _store(create=False)
    n = 0
    out = sys.stdout if file == "-" else open(Path(file).expanduser(), "w", encoding="utf-8")
    try:
        for rec in st.export(project):
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    finally:
        if out is not sys.stdout:
            out.close()
    err.print(f"exported {n} memories{'' if project is None else f' of {project}'}" + ("" if file == "-" else f" to {file}"))


@memory_app.command("import")
def import_(
    file: Path = typer.Argument(..., help="A file written by 'headroom memory export' (JSON Lines)."),
    project: Optional[str] = typer.Option(None, "--project", "-p", help="Import into this project (default: each record's own)."),
) -> None:
    """Read memories from an export; near-duplicates of existing ones merge into them."""
    try:
        lines = file.expanduser().read_text(encoding="utf-8").splitlines()
    except OSError as e:
        err.print(f"[red]headroom memory import:[/] {e}")
        raise typer.Exit(2) from e
    records, bad = [], []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            bad.append(i)
    counts = _store(model=True).import_records(records, project=project)
    counts["invalid"] += len(bad)
    console.print(f"imported: {counts['added']} added, {counts['merged']} merged into existing, {counts['invalid']} invalid" + (f" (lines {bad[:10]})" if bad else ""))


def register(app: typer.Typer) -> None:
    """Add ``headroom memory …`` to the ``headroom`` command."""
    app.add_typer(memory_app, name="memory")
