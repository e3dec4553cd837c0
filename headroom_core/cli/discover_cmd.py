"""``headroom discover``: what the proxy would have saved on your past sessions.

Reads Claude Code (``$CLAUDE_CONFIG_DIR``/``~/.claude`` ``projects/…``), Codex
(``$CODEX_HOME``/``~/.codex`` ``sessions/…``) and SWE-agent (``<project>/trajectories``) logs —
the current project's by default, every project's with ``--all``, or the files and folders
named with ``--from`` — runs the proxy's compressors on their tool outputs, and prints the
estimated tokens saved per tool and per content kind. Nothing is written anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from headroom_core.cli import ui
from headroom_core.settings import SettingsError, load_settings

console = Console()


def find_logs(project: Path, every: bool, sources: list[Path]) -> list[Path]:
    """The logs to read: ``sources`` (files, or folders searched for ``*.jsonl``/``*.traj``),
    else the project's Claude Code, Codex and SWE-agent logs (``every``: all projects')."""
    from headroom_core.learn.readers import claude_code, codex, swe_agent

    if sources:
        out: list[Path] = []
        for src in sources:
            src = src.expanduser()
            if src.is_dir():
                out += sorted(p for p in src.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".traj"))
            elif src.exists():
                out.append(src)
            else:
                raise typer.BadParameter(f"{src} does not exist", param_hint="--from")
        return out
    if every:
        cc = sorted((claude_code.config_dir() / "projects").glob("*/*.jsonl"))
        return cc + codex.find_logs(None) + swe_agent.find_logs(project)
    return claude_code.find_logs(project) + codex.find_logs(project) + swe_agent.find_logs(project)


def _tally_table(title: str, first: str, rows: dict, limit: int | None) -> Table:
    t = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, title_style="bold"
    )
    t.add_column(first, overflow="ellipsis", no_wrap=True, min_width=8)
    for c in ("outputs", "compressed", "tokens before", "saved", "saved %"):
        t.add_column(c, justify="right", no_wrap=True)
    items = sorted(rows.items(), key=lambda kv: (-kv[1].saved, -kv[1].before, kv[0]))
    for k, x in items[:limit] if limit else items:
        t.add_row(k, f"{x.outputs:,}", f"{x.compressed:,}", f"{x.before:,}", f"{x.saved:,}", ui.pct(x.saved_share))
    if limit and len(items) > limit:
        t.add_row(f"… {len(items) - limit} more (--top 0: all)", "", "", "", "", "")
    return t


def discover(
    project: Optional[Path] = typer.Option(
        None, "--project", help="The project whose logs are read (default: the current directory)."
    ),
    every: bool = typer.Option(
        False, "--all", help="Every project's Claude Code logs and every Codex session, not only this project's."
    ),
    sources: list[Path] = typer.Option([], "--from", help="Read these log files or folders (*.jsonl, *.traj) instead."),
    top: int = typer.Option(15, "--top", min=0, help="Show the N tools that would save most (0: all)."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """What the proxy would have saved on your past sessions (Claude Code, Codex, SWE-agent logs).

    Runs the proxy's compressors on the tool outputs in the logs and prints the estimated tokens saved per tool and per content kind. Reads only; stores nothing.
    """
    from headroom_core.cache.decisions import DecisionCache
    from headroom_core.compress.pipeline import compress_outputs
    from headroom_core.compress.router import compress_text
    from headroom_core.compress.tokens import TokenCounter, TokenizerUnavailable
    from headroom_core.discover import Discovery, read_outputs
    from headroom_core.discover import discover as run

    proj = (project or Path.cwd()).expanduser().resolve()
    paths = find_logs(proj, every, sources)
    if not paths:
        ui.copyable(
            f"No session logs found for {proj}. Looked in Claude Code's projects folder, Codex's sessions and {proj / 'trajectories'}; use --all for every project, or --from to name log files or folders.",
            markup=False,
        )
        raise typer.Exit(1)
    try:
        s = load_settings()
        counter = TokenCounter(s.home, s.tokenizer_path)
    except (SettingsError, TokenizerUnavailable) as e:
        ui.fail("discover", str(e))
        raise typer.Exit(2) from e
    found = Discovery()
    quiet = as_json or not ui.err.is_terminal
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with ui.status("loading the embedding model (prose and HTML need it) …", quiet=quiet):
        _load_model()
    with Progress(*columns, console=ui.err, disable=quiet, transient=True) as progress:
        task = progress.add_task("reading logs", total=len(paths))
        outputs = read_outputs(paths, found, lambda p: progress.advance(task))
        cache = DecisionCache(None)  # in memory only: discover stores nothing
        work = progress.add_task("compressing tool outputs", total=len(outputs))

        def judge(out, call):
            return compress_outputs(
                [out],
                "",
                lambda t, q, h=None: compress_text(
                    t, q, counter, min_tokens=s.min_tokens, min_saving_ratio=s.min_saving_ratio, hint=h
                ),
                counter,
                cache,
                min_tokens=s.min_tokens,
                exclude_tools=s.exclude_tools,
                calls={call.call_id: call},
            )

        run(outputs, judge, found, counter.count, lambda o: progress.advance(work))
    if as_json:
        print(json.dumps(found.as_dict(), indent=2))
        return
    t = found.total
    console.print(
        f"[bold]{found.files:,} session logs[/], {found.outputs:,} tool outputs; {t.outputs:,} large enough to consider: "
        f"{t.before:,} → {t.after:,} tokens, [bold green]{t.saved:,} saved ({ui.pct(t.saved_share)})[/]"
        + (f"; {len(found.unreadable)} unreadable" if found.unreadable else "")
    )
    for title, first, rows, limit in (
        ("per tool", "tool", found.by_tool, top or None),
        ("per content kind", "kind", found.by_kind, None),
        ("per agent", "agent", found.by_source, None),
    ):
        if rows and (first != "agent" or len(rows) > 1):
            console.print()
            console.print(_tally_table(title, first, rows, limit))
    console.print()
    console.print(
        "Estimated tokens (the proxy's counter) of each tool output once, judged as the proxy judges a new output "
        "(the latest read of a file stays verbatim). Every later turn sends the outputs again, so each request saves this "
        "again. See what it saves live: `headroom wrap <agent>`, then `headroom stats`."
    )


def _load_model() -> None:
    """Load the embedding model now (prose and HTML compression need it), if it is installed."""
    from headroom_core.compress import embeddings

    if embeddings.available():
        try:
            embeddings.get_model()
        except embeddings.EmbeddingModelUnavailable:
            pass


def register(app: typer.Typer) -> None:
    """Add ``headroom discover`` to the CLI."""
    app.command("discover")(discover)
