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
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()
err = Console(stderr=True)

memory_app = typer.Typer(
    help="Memories shared by all agents, per project (list, search, add, remove, stats, export, import).",
    no_args_is_help=True,
)

PROJECT_HELP = "Project (default: the current directory, as agents state it; a conversation that states none is its own, 'conversation:<key>')."


def _project(project: Optional[str]) -> str:
    return project.strip() if project and project.strip() else os.getcwd()


def _store(model: bool = False, create: bool = True):
    """The memory store on the configured database; ``model`` gives it the embedding model (not
    loaded yet: see :func:`_load_model`). With ``create`` False (commands that only read) a
    SQLite file that does not exist yet is not created: the command says there are no memories
    and exits 0."""
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
    return MemoryStore(
        sessions, embedder(s.memory_model_path) if model else None, dedup_similarity=s.memory_dedup_similarity,
        half_life_days=s.memory_half_life_days, archive_below=s.memory_archive_below, archive_min_age_days=s.memory_archive_min_age_days,
    )  # fmt: skip


def _load_model(st, why: str) -> None:
    """Load the store's embedding model now, with a status line on standard error (importing
    torch and sentence-transformers is most of a memory command's time: ~10 s on a busy 2-core
    machine, see bench/bench_cli.py); a model that cannot be loaded is said in one line and the
    command goes on with words and exact duplicates."""
    from headroom_core.cli.ui import note, status

    if st.embedder is None or st.embedder.loaded:
        return
    with status(f"loading the embedding model ({why}) …"):
        ok = st.embedder.wait(300)
    if not ok:
        note("memory", f"embedding model not available ({st.embedder.error}); text search and exact duplicates only")


def _has_memories(st, project: str) -> bool:
    """Whether ``project`` has an active memory (a search or a near-duplicate check needs the model only then)."""
    return bool(st.list(project, limit=1))


def _when(t, wide: bool = True) -> str:
    return (t.strftime("%Y-%m-%d %H:%M") if wide else t.strftime("%y-%m-%d")) if t else "-"


WIDE_HELP = (
    "Every column (value, source, time of day, similarity); the default fits 80 columns and gives the text the room."
)


def _table(
    title: str, wide: bool, *, with_project: bool = False, search: bool = False, archived: bool = False
) -> Table:
    """A table of memories that fits the terminal as ``stats`` does: the text folds over as many
    lines as it needs and takes the room the other columns leave (each kept on one line: ids
    are never cut, figures never wrapped); a project shown for ``--all`` folds, as its short name
    (the part of its path that tells it from the others; the common folder in the title). Compact: id, kind, text, (project), evidence, updated (date),
    (score); ``wide`` adds value, source, the time, similarity (and archived)."""
    t = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, title_style="bold"
    )
    t.add_column("id", style="cyan", no_wrap=True, min_width=12)
    t.add_column("kind", no_wrap=True)
    t.add_column("text", overflow="fold", ratio=3, min_width=16)
    if with_project:
        t.add_column("project", overflow="fold", ratio=1, min_width=8, max_width=None if wide else 16)
    cols = ["evidence", *(["value"] if wide else []), "updated", *(["source"] if wide else []), *(["similarity", "score"] if wide and search else ["score"] if search else []),
            *(["archived"] if archived else [])]  # fmt: skip
    for col in cols:
        t.add_column(
            "ev." if col == "evidence" and not wide else col,
            justify="left" if col in ("updated", "source", "archived") else "right",
            no_wrap=True,
        )
    return t


def _cells(
    m, wide: bool, with_project: bool, hit=None, archived: bool = False, project: str | None = None
) -> list[str]:
    """One row of :func:`_table` for memory ``m`` (``hit``: its search hit; ``project``: the
    project as shown, default its whole path)."""
    row = [m.id, m.kind, escape(m.text), *([escape(project or m.project)] if with_project else []), str(m.evidence), *([f"{m.value:.2f}"] if wide else []),
           _when(m.updated_at, wide), *([escape(m.source)] if wide else [])]  # fmt: skip
    if hit is not None:
        row += [f"{hit.similarity:.3f}", f"{hit.score:.3f}"] if wide else [f"{hit.score:.2f}"]
    return row + (["yes" if m.archived else ""] if archived else [])


@memory_app.command("list")
def list_(
    project: Optional[str] = typer.Option(None, "--project", "-p", help=PROJECT_HELP),
    kind: Optional[str] = typer.Option(None, help="Only this kind: fact, rule, preference or pitfall."),
    limit: int = typer.Option(50, help="At most this many."),
    all_projects: bool = typer.Option(False, "--all", help="Every project."),
    archived: bool = typer.Option(False, help="Include archived memories."),
    wide: bool = typer.Option(False, "--wide", help=WIDE_HELP),
) -> None:
    """Memories of the project, most recently updated first."""
    st = _store(create=False)
    proj = None if all_projects else _project(project)
    rows = st.list(proj, kind=kind, limit=limit, include_archived=archived)
    title = f"Memories of {escape(proj or 'all projects')}"
    short: dict[str, str] = {}
    if proj is None and not wide:  # the part of each project's path that tells it from the others
        from headroom_core.cli.tables import distinct_names

        projects = sorted({m.project for m in rows})
        folder, names = distinct_names(projects)
        short = dict(zip(projects, names))
        title += f" (in {escape(folder)})" if folder else ""
    t = _table(title, wide, with_project=proj is None, archived=archived)
    for m in rows:
        t.add_row(*_cells(m, wide, proj is None, archived=archived, project=short.get(m.project)))
    console.print(t)
    if not rows:
        console.print(
            f"no memories{'' if proj is None else f' for project {escape(proj)}'} (use --project, or --all)",
            soft_wrap=True,
        )


@memory_app.command()
def search(
    query: str = typer.Argument(..., help="What to look for."),
    project: Optional[str] = typer.Option(None, "--project", "-p", help=PROJECT_HELP),
    limit: int = typer.Option(5, help="At most this many."),
    text: bool = typer.Option(False, "--text", help="Text search only (no embedding model)."),
    wide: bool = typer.Option(False, "--wide", help=WIDE_HELP),
) -> None:
    """The memories of the project most relevant to QUERY (the ranking the proxy injects with)."""
    st = _store(model=not text, create=False)
    proj = _project(project)
    if _has_memories(st, proj):  # nothing to rank otherwise: no model
        _load_model(st, "to rank by meaning; --text searches words without it")
    res = st.search(proj, query, limit=limit)
    t = _table(f"{res.mode} search in {escape(proj)}: {escape(query)}", wide, search=True)
    for h in res.hits:
        t.add_row(*_cells(h.memory, wide, False, hit=h))
    console.print(t)
    if not res.hits:
        console.print(f"no memory of {escape(proj)} matches (headroom memory list shows them all)", soft_wrap=True)


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
    # near-duplicates are found by meaning only among the project's memories: the first one is
    # saved at once (exact duplicates are still merged) and gets its vector at the next search
    if _has_memories(st, proj):
        _load_model(st, "to find a near-duplicate among this project's memories")
    try:
        out = st.save(proj, text, kind, source="cli")
    except MemoryInputError as e:
        err.print(f"[red]headroom memory add:[/] {e}")
        raise typer.Exit(2) from e
    if out.redacted:
        console.print(f"[yellow]redacted:[/] {', '.join(out.redacted)}")
    if out.action == "merged":
        console.print(
            f"updated memory [cyan]{out.memory.id}[/] (similarity {out.similarity:.2f}, evidence {out.memory.evidence}) in {proj}"
        )
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
        err.print(
            f"[red]headroom memory remove:[/] project {proj} has no memory {mid} (see: headroom memory list --all)"
        )
        raise typer.Exit(1)
    console.print(f"removed memory [cyan]{mid}[/] from {proj}")


@memory_app.command()
def stats(
    project: Optional[str] = typer.Option(None, "--project", "-p", help="Only this project (default: all)."),
    wide: bool = typer.Option(
        False, "--wide", help="A column per kind and the whole project paths; the default fits 80 columns."
    ),
) -> None:
    """Per project: active and archived memories, kinds, evidence, mean value, last update."""
    from headroom_core.cli.tables import distinct_names, number, table

    rows = _store(create=False).stats(project)
    kinds = ("fact", "rule", "preference", "pitfall")
    folder, names = distinct_names([r.project for r in rows]) if not wide else ("", [r.project for r in rows])
    t = table("Memory per project", caption=f"projects in {escape(folder)}" if folder else None)
    t.add_column("project", overflow="fold", min_width=8)
    for col in ("active", "archived", *(kinds if wide else ()), "evidence", "mean value"):
        number(t, col)
    if not wide:
        t.add_column("kinds", overflow="fold", min_width=8)
    t.add_column("last update", no_wrap=True)
    for name, r in zip(names, rows):
        kinds_cells = [str(r.kinds.get(k, 0)) for k in kinds] if wide else []
        t.add_row(
            escape(name),
            str(r.active),
            str(r.archived),
            *kinds_cells,
            str(r.evidence),
            f"{r.mean_value:.2f}",
            *([] if wide else [", ".join(f"{r.kinds[k]} {k}" for k in kinds if r.kinds.get(k)) or "-"]),
            _when(r.last_updated, wide),
        )
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
    err.print(
        f"exported {n} memories{'' if project is None else f' of {project}'}" + ("" if file == "-" else f" to {file}")
    )


@memory_app.command("import")
def import_(
    file: Path = typer.Argument(..., help="A file written by 'headroom memory export' (JSON Lines)."),
    project: Optional[str] = typer.Option(
        None, "--project", "-p", help="Import into this project (default: each record's own)."
    ),
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
    st = _store(model=True)
    _load_model(st, "to merge near-duplicates")
    counts = st.import_records(records, project=project)
    counts["invalid"] += len(bad)
    console.print(
        f"imported: {counts['added']} added, {counts['merged']} merged into existing, {counts['invalid']} invalid"
        + (f" (lines {bad[:10]})" if bad else "")
    )


def register(app: typer.Typer) -> None:
    """Add ``headroom memory …`` to the ``headroom`` command."""
    app.add_typer(memory_app, name="memory")
