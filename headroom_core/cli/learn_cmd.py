"""``headroom learn``: mine session logs for failures and write rules where agents read them.

Reads Claude Code (``$CLAUDE_CONFIG_DIR``/``~/.claude`` ``projects/<project>/*.jsonl`` with their
sub-agent files), Codex (``$CODEX_HOME``/``~/.codex`` ``sessions/**/rollout-*.jsonl`` run in the
project), SWE-agent (``<project>/trajectories/**/*.traj``), opencode (``$XDG_DATA_HOME``/
``~/.local/share`` ``opencode/opencode.db`` or its older ``storage/`` of JSON files: the sessions
run in the project) and Aider (``<project>/.aider.chat.history.md``) logs, or the files and
folders given with ``--from`` (the format is told by content); pairs failures with fixes, builds rules
(deterministic, no LLM unless ``--llm``), and merges them into the managed section of the target
files (``CLAUDE.local.md`` by default). Generic rules about the agent's own tools are written only
with ``--include-generic``. Failures nothing fixed are listed as known problems and kept in the
database for the past-failures feed. When nothing is written, it says why. ``--dry-run`` shows the
diff and stores nothing; without ``--yes`` it asks first. ``--list`` shows the rules learned so
far (live and offline) from the database.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.progress import track
from rich.table import Table

from headroom_core.cli.ui import copyable, err
from headroom_core.learn import writers
from headroom_core.learn.offline import KnownProblem, LearnResult, learn_from_logs
from headroom_core.learn.readers import (
    NOT_A_LOG,
    LogError,
    LogSession,
    aider,
    claude_code,
    codex,
    gemini_cli,
    opencode,
    read_logs,
    swe_agent,
)
from headroom_core.learn.rules import Rule, rank

if TYPE_CHECKING:
    from headroom_core.learn.store import LearnStore, StoredRule

console = Console()


def _collect(project: Path, sources: list[Path]) -> list[Path]:
    if sources:
        out: list[Path] = []
        for src in sources:
            src = src.expanduser()
            if src.is_dir():
                out += sorted(
                    p
                    for p in src.rglob("*")
                    if p.is_file()
                    and _maybe_log(p)
                    and not claude_code.is_subagent_file(p)
                    and not opencode.is_storage_part(p)
                )
            elif src.exists():
                out.append(src)
            else:
                raise typer.BadParameter(f"{src} does not exist", param_hint="--from")
        return out
    return (
        claude_code.find_logs(project)
        + codex.find_logs(project)
        + swe_agent.find_logs(project)
        + opencode.find_logs()
        + aider.find_logs(project)
        + gemini_cli.find_logs(project)
    )


def _maybe_log(p: Path) -> bool:
    """A file in a folder given with --from that may be a session log (its content decides):
    JSON, JSON lines, a trajectory, a database (opencode) or an Aider history."""
    return p.suffix in (".jsonl", ".traj", ".json", ".db") or p.name.endswith(aider.HISTORY_NAME)


def _select(sessions: list[LogSession], session: str | None, last: int | None) -> list[LogSession]:
    if session:
        sessions = [s for s in sessions if s.session_id.startswith(session) or Path(s.path).stem.startswith(session)]
    if last:

        def when(s: LogSession) -> tuple[str, float]:
            return (s.started, Path(s.path).stat().st_mtime if Path(s.path).exists() else 0.0)

        sessions = sorted(sessions, key=when)[-last:]
    return sessions


def _store(create: bool) -> LearnStore | None:
    """The learner's store on the configured database, or None (with a note) when it cannot be
    opened; with ``create`` False a SQLite file that does not exist yet is not created."""
    from headroom_core.db.engine import DatabaseError, open_database
    from headroom_core.learn.store import LearnStore
    from headroom_core.settings import SettingsError, load_settings

    try:
        settings = load_settings()
        url = settings.database_url
        if not create and url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).exists():
            return None
        return LearnStore(open_database(url))
    except (SettingsError, DatabaseError) as e:
        console.print(f"[yellow]headroom learn:[/] database not used ({escape(str(e))})")
        return None


def _diff_markup(diff: str) -> str:
    """A unified diff as rich markup: added lines green, removed red, hunk headers cyan; every
    line whole (the caller prints it with :func:`~headroom_core.cli.ui.copyable`)."""
    out = []
    for line in diff.splitlines():
        style = (
            "bold"
            if line.startswith(("+++", "---"))
            else "green"
            if line.startswith("+")
            else "red"
            if line.startswith("-")
            else "cyan"
            if line.startswith("@@")
            else ""
        )
        out.append(f"[{style}]{escape(line)}[/]" if style else escape(line))
    return "\n".join(out)


def _files_table(res: LearnResult, unreadable: dict[str, str], wide: bool = False) -> Table:
    """Per log file, fitting the terminal (:mod:`headroom_core.cli.tables`): the part of each
    path that tells it from the others (folded, never cut; the common folder in the caption) and
    the figures; ``wide`` adds malformed and unknown records and the other signals (a file not
    read has its reason there, and in the compact table's last column)."""
    from headroom_core.cli.tables import distinct_names, number, table

    paths = [f.path for f in res.files] + list(unreadable)
    folder, names = distinct_names(paths)
    t = table("Session logs", caption=f"in {escape(folder)}" if folder else None)
    t.add_column("file", overflow="fold", min_width=12)
    t.add_column("agent", no_wrap=True)
    cols = (
        ("records", "malformed", "unknown", "failures", "other signals", "pairs", "rules written", "known problems")
        if wide
        else ("records", "failures", "pairs", "rules", "problems")
    )
    for col in cols:
        t.add_column(col, overflow="fold") if col == "other signals" else number(t, col)
    if unreadable and not wide:
        t.add_column("not read", overflow="fold")
    for name, f in zip(names, res.files):
        sig = ", ".join(f"{k} {v}" for k, v in sorted(f.signals.items())) or "-"
        figures = (
            (f.records, f.skipped, f.unknown, f.failures, sig, f.pairs, f.rules_written, f.problems)
            if wide
            else (f.records, f.failures, f.pairs, f.rules_written, f.problems)
        )
        t.add_row(escape(name), f.source, *(str(x) for x in figures), *([""] if unreadable and not wide else []))
    for name, why in zip(names[len(res.files) :], unreadable.values()):
        cells = ["-"] * len(cols)
        if wide:
            cells[cols.index("other signals")] = f"[red]{escape(why)}[/]"
        t.add_row(escape(name), "?", *cells, *([] if wide else [f"[red]{escape(why)}[/]"]))
    return t


def _problems_table(problems: list[KnownProblem]) -> Table:
    from headroom_core.cli.tables import number, table

    t = table("Known problems (no fix found; kept for the past-failures feed)")
    number(t, "failed calls")
    t.add_column("command", overflow="fold", ratio=1)
    t.add_column("error", overflow="fold", ratio=1)
    for p in problems:
        t.add_row(str(p.count), escape(p.shown), escape(p.error))
    return t


def _rules_table(title: str, rules: list[Rule], dim: bool = False) -> Table:
    from headroom_core.cli.tables import number, table

    t = table(title)
    number(t, "evidence")
    t.add_column("kind", no_wrap=True)
    t.add_column("rule", overflow="fold", ratio=1)
    for r in rules:
        style = "dim" if dim else None
        t.add_row(str(r.evidence), r.kind, escape(r.text), style=style)
    return t


def learn(
    project: Optional[Path] = typer.Option(
        None,
        "--project",
        help="The project folder (default: the current directory): whose logs are read and where the rules are written.",
    ),
    target: list[str] = typer.Option(
        [],
        "--target",
        help="File to write: CLAUDE.local.md (default), CLAUDE.md, AGENTS.md or GEMINI.md; repeat for several.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would change (a diff); write nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Write without asking."),
    last: Optional[int] = typer.Option(None, "--last", min=1, help="Only the N most recent sessions."),
    session: Optional[str] = typer.Option(None, "--session", help="Only the session with this id (or id prefix)."),
    list_rules: bool = typer.Option(
        False, "--list", help="List the rules learned so far for the project (live and offline) and exit."
    ),
    sources: list[Path] = typer.Option(
        [], "--from", help="Read these log files or folders (*.jsonl, *.traj) instead of the default locations."
    ),
    min_evidence: int = typer.Option(
        2,
        "--min-evidence",
        min=1,
        help="Write a rule only with at least this much evidence (the user's own corrections always count).",
    ),
    include_generic: bool = typer.Option(
        False,
        "--include-generic",
        help="Also write generic rules about the agent's own tools (read before edit, required parameters, edit line ranges and indentation), which its harness already enforces.",
    ),
    llm: bool = typer.Option(
        False,
        "--llm",
        help="Let an LLM rephrase and merge the rules (Anthropic API: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL). Optional.",
    ),
    llm_model: str = typer.Option("claude-haiku-4-5", "--llm-model", help="Model for --llm."),
    wide: bool = typer.Option(
        False,
        "--wide",
        help="Every column of the per-file table (malformed and unknown records, other signals); the default fits 80 columns.",
    ),
) -> None:
    """Learn rules from past failures in session logs and write them where agents read them.

    The steps, in order: list the rules learned so far (``--list``, and stop); discover the
    logs; read them; pick the sessions; pair failures with fixes and build rules
    (:func:`~headroom_core.learn.offline.learn_from_logs`); report; keep the known problems;
    decide what each target file would become; show the diffs and write."""
    proj = (project or Path.cwd()).expanduser().resolve()
    key = str(proj)
    if list_rules:
        _print_learned(key)
        return
    targets = _targets(target)
    paths = _collect(proj, sources)
    if not paths:
        console.print(_no_logs_found(proj))
        raise typer.Exit(1)
    sessions, unreadable = _read(paths, project=None if sources else key)
    sessions = _select(sessions, session, last)
    why = _why_no_sessions(key, sessions, unreadable, from_given=bool(sources), selected=bool(session or last))
    if why:
        console.print(why)
        raise typer.Exit(1)
    res = learn_from_logs(sessions, min_evidence=min_evidence, ignore=frozenset({key}), include_generic=include_generic)
    for part in _files_report(res, unreadable, wide):
        console.print(part)
    rules = list(res.rules)
    if llm and rules:
        rules = _rephrase(rules, llm_model)
    store = _store(create=not dry_run)
    live = _kept_rules(store.as_rules(key) if store else [], rules, include_generic)
    for part in _rules_report(res, rules, live, min_evidence):
        console.print(part)
    console.print(_summary(sessions, res, rules, unreadable))
    if store is not None and not dry_run:
        _keep_problems(store, key, res)
    changed = _changes(proj, targets, rules, live, sessions, key, from_given=bool(sources))
    if not changed:
        console.print(
            "Nothing to change: the target files already hold these rules." if rules or live else "No file changed."
        )
        return
    if _write(changed, dry_run, yes) and store is not None:
        _keep_rules(store, key, rules)


def _print_learned(key: str) -> None:
    """``--list``: the rules learned so far for the project (live and offline), from the
    database; a line saying there are none when it holds none (or does not exist)."""
    store = _store(create=False)
    rows = store.rules(key) if store else []
    if not rows:
        console.print(f"No rules learned yet for {key}.")
        return
    console.print(_learned_table(key, rows))


def _learned_table(key: str, rows: list[StoredRule]) -> Table:
    from headroom_core.cli.tables import number, table

    t = table(f"Rules learned for {escape(key)}")
    number(t, "evidence")
    t.add_column("source", no_wrap=True)
    t.add_column("kind", no_wrap=True)
    t.add_column("rule", overflow="fold", ratio=1)
    t.add_column("updated", no_wrap=True)
    for r in rows:
        t.add_row(str(r.evidence), r.source, r.kind, escape(r.text), r.updated_at.strftime("%Y-%m-%d %H:%M"))
    return t


def _targets(target: list[str]) -> list[str]:
    """The target files named with ``--target`` (default: :data:`~headroom_core.learn.writers.DEFAULT_TARGET`).
    Raises typer.BadParameter for an unknown one."""
    try:
        return [writers.target_file(t) for t in (target or [writers.DEFAULT_TARGET])]
    except writers.TargetError as e:
        raise typer.BadParameter(str(e), param_hint="--target") from e


def _no_logs_found(proj: Path) -> str:
    """The line saying no log was found, and every place looked in."""
    key = str(proj)
    return (
        f"No session logs found for {key} (looked in {claude_code.config_dir() / 'projects' / claude_code.project_dir_name(key)}, "
        f"{codex.codex_home() / 'sessions'}, {opencode.data_dir()}, {proj / 'trajectories'}, {proj / aider.HISTORY_NAME}). Use --from to name log files or folders."
    )


def _read(paths: list[Path], project: str | None) -> tuple[list[LogSession], dict[str, str]]:
    """Every session of the log files (those run in ``project`` when given), and the files not
    read with why (path -> reason); a progress bar on a terminal for five files or more."""
    sessions: list[LogSession] = []
    unreadable: dict[str, str] = {}
    for p in track(
        paths,
        description="Reading session logs",
        console=err,
        transient=True,
        disable=len(paths) < 5 or not err.is_terminal,
    ):
        try:
            sessions += read_logs(p, project=project)
        except LogError as e:
            unreadable[str(p)] = str(e).split(": ", 1)[-1]
    return sessions, unreadable


def _why_no_sessions(
    key: str, sessions: list[LogSession], unreadable: dict[str, str], from_given: bool, selected: bool
) -> str | None:
    """Why there is nothing to learn from (None when there are sessions): the logs found hold
    none of the project's sessions, ``--session``/``--last`` (``selected``) matched none, or no
    file could be read."""
    if sessions:
        return None
    if not unreadable and not from_given and not selected:
        return f"No sessions of {key} in the session logs found. Use --from to name log files or folders."
    if selected:
        return "No session matched."
    return "No readable session logs: " + escape("; ".join(f"{Path(p).name}: {why}" for p, why in unreadable.items()))


def _files_report(res: LearnResult, unreadable: dict[str, str], wide: bool) -> list[RenderableType]:
    """The per-file table (files that are no session log of a known agent left out of it) and
    a line naming those files."""
    not_logs = {p: why for p, why in unreadable.items() if why.startswith(NOT_A_LOG)}
    out: list[RenderableType] = [
        _files_table(res, {p: why for p, why in unreadable.items() if p not in not_logs}, wide)
    ]
    if not_logs:
        out.append(
            escape(
                f"{len(not_logs)} file(s) are no session log of a known agent: "
                + ", ".join(Path(p).name for p in not_logs)
            )
        )
    return out


def _rephrase(rules: list[Rule], model: str) -> list[Rule]:
    """``--llm``: the rules rephrased and merged by ``model`` (Anthropic API), printing its note."""
    import anthropic

    from headroom_core.learn.rephrase import rephrase

    rules, note = rephrase(rules, anthropic.Anthropic(), model)
    console.print(f"[cyan]{escape(note)}[/]")
    return rules


def _kept_rules(stored: list[Rule], rules: list[Rule], include_generic: bool) -> list[Rule]:
    """The rules learned earlier (database) that are kept beside the new ``rules``: those not
    learned again, generic ones only with ``include_generic``."""
    new = {x.id for x in rules}
    return [r for r in stored if r.id not in new and (include_generic or not r.generic)]


def _rules_report(res: LearnResult, rules: list[Rule], live: list[Rule], min_evidence: int) -> list[RenderableType]:
    """The rule tables in the order they are shown: to write (or why nothing), learned earlier
    and kept, generic (not written), below the threshold, dropped, and the known problems."""
    out: list[RenderableType] = [
        _rules_table(f"Rules to write (evidence ≥ {min_evidence})", rules)
        if rules
        else escape(res.why_nothing(min_evidence))
    ]
    if live:
        out.append(_rules_table("Rules learned earlier (database), kept", rank(live)))
    if res.generic:
        out.append(
            _rules_table(
                "Generic rules about the agent's own tools (not written; --include-generic writes them)",
                list(res.generic),
                dim=True,
            )
        )
    if res.candidates:
        out.append(_rules_table("Below the threshold (not written)", list(res.candidates), dim=True))
    if res.dropped:
        out.append(_rules_table("Dropped: contradict each other", list(res.dropped), dim=True))
    if res.problems:
        out.append(_problems_table(list(res.problems)))
    return out


def _summary(sessions: list[LogSession], res: LearnResult, rules: list[Rule], unreadable: dict[str, str]) -> str:
    """The one-line count of what was read and found."""
    malformed = sum(s.skipped for s in sessions)
    unknown = sum(s.unknown for s in sessions)
    return (
        f"{len(sessions)} sessions, {sum(f.failures for f in res.files)} failures, {len(res.pairs)} pairs, "
        f"{len(rules)} rules, {len(res.problems)} known problems; {malformed} malformed records skipped, "
        f"{unknown} records of unknown types ignored, {len(unreadable)} files not read."
    )


def _keep_problems(store: LearnStore, key: str, res: LearnResult) -> None:
    """Keep the known problems (failures nothing fixed) for the past-failures feed."""
    if res.problems:
        n = store.record_known_problems(key, list(res.problems))
        console.print(f"{n} known problem(s) kept for the past-failures feed.")


def _keep_rules(store: LearnStore, key: str, rules: list[Rule]) -> None:
    """Keep the rules just written in the database (``--list`` shows them)."""
    if rules:
        store.save_rules(key, rules)
        console.print(f"{len(rules)} rule(s) kept in the database (headroom learn --list shows them).")


def _changes(
    proj: Path,
    targets: list[str],
    rules: list[Rule],
    live: list[Rule],
    sessions: list[LogSession],
    key: str,
    from_given: bool,
) -> list[writers.Planned]:
    """The target files that writing the new and kept rules would change. Logs read with
    ``--from`` (``from_given``) may be another project's: their rules go under a heading naming it."""
    found_in = (
        writers.origins(rules, {s.path: s.cwd for s in sessions}, key) if from_given else {r.id: "" for r in rules}
    )
    return [p for p in writers.plan(proj, targets, rank([*rules, *live]), found_in) if p.changed]


def _write(changed: list[writers.Planned], dry_run: bool, yes: bool) -> bool:
    """Show each file's diff, then (not ``dry_run``; asking first without ``yes``) write them.
    Returns whether they were written."""
    for pf in changed:
        copyable(_diff_markup(writers.diff(pf.path, pf.old, pf.new)), console)
    if dry_run:
        console.print("--dry-run: nothing written.")
        return False
    if not yes and not typer.confirm(f"Write {', '.join(str(p.path) for p in changed)}?", default=False):
        console.print("Nothing written.")
        return False
    for pf in changed:
        writers.write(pf)
        copyable(f"wrote {escape(str(pf.path))}", console)
    return True


def register(app: typer.Typer) -> None:
    """Add ``headroom learn`` to the ``headroom`` command."""
    app.command("learn")(learn)
