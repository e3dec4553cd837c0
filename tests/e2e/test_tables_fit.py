"""Tables that fit (issue 34, item 7), rendered by the real ``headroom`` command at 80 and 120
columns: ``memory search``/``list`` give the text the room and fold it (every character kept),
``learn --dry-run`` tells two files with a long shared name apart, ``cache report`` has time and
agent columns and session ids that are unique (and work with ``--session``). Every line fits."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from headroom_core.cli.cache_cmd import unique_prefix_length
from headroom_core.cli.tables import distinct_names
from tests.unit.test_learn_origin import rollout

HEADROOM = str(Path(sys.executable).parent / "headroom")
LONG = ("Run the frontend with pnpm dev --filter web; the API server must already run on port 8000, started with "
        "uvicorn app.main:app --reload from the backend folder, or the login page shows a blank screen")  # fmt: skip


def _run(home: Path, cwd: Path, columns: int, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_") and not k.lower().endswith("_proxy")}
    out = subprocess.run([HEADROOM, *args], cwd=cwd, env={**base, "HEADROOM_HOME": str(home), "COLUMNS": str(columns), **env},
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out


def _column(lines: list[str], header: str, name: str, following: str) -> list[str]:
    """The cells of column ``name`` (up to column ``following``) on the lines after ``header``."""
    i = lines.index(header)
    a, b = header.index(name), header.index(following)
    return [ln[a:b].rstrip() for ln in lines[i + 2 :]]


def _fits(out: str, columns: int) -> list[str]:
    lines = out.splitlines()
    assert all(len(ln.rstrip()) <= columns for ln in lines), [ln for ln in lines if len(ln.rstrip()) > columns]
    return lines


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_memory_search_gives_the_text_the_room(tmp_path, columns):
    project = tmp_path / "app"
    project.mkdir()
    _run(tmp_path / "home", project, columns, "memory", "add", LONG)
    out = _run(tmp_path / "home", project, columns, "memory", "search", "--text", "frontend login")
    lines = _fits(out.stdout, columns)
    header = next(ln for ln in lines if ln.startswith("id ") and " text " in ln)
    cells = [c for c in _column(lines, header, "text", "ev.") if c]
    assert " ".join(cells) == LONG  # folded at spaces, nothing cut
    assert (
        header.index("ev.") - header.index("text") >= columns - 46
    )  # the other columns take what they need, the text the rest
    row = lines[lines.index(header) + 2]
    assert row.split()[0] == row.split()[0][:12] and len(row.split()[0]) == 12  # the whole id


@pytest.mark.parametrize("columns", [80, 120])
def test_memory_list_of_all_projects_fits(tmp_path, columns):
    project = tmp_path / "a-project-folder-with-a-long-name" / "and-a-subfolder"
    project.mkdir(parents=True)
    _run(tmp_path / "home", project, columns, "memory", "add", LONG)
    other = tmp_path / "b"
    other.mkdir()
    _run(tmp_path / "home", other, columns, "memory", "add", "the API needs Python 3.12")
    lines = _fits(_run(tmp_path / "home", project, columns, "memory", "list", "--all").stdout, columns)
    assert "".join(f"Memories of all projects (in {tmp_path})".split()) in "".join(
        "".join(lines[:3]).split()
    )  # the title may fold
    header = next(ln for ln in lines if ln.startswith("id ") and " text " in ln)
    texts = [c for c in _column(lines, header, "text", "project") if c]
    assert " ".join(texts) == "the API needs Python 3.12 " + LONG  # newest first, each folded whole
    shown = [c for c in _column(lines, header, "project", "ev.") if c]
    assert shown == ["b", "and-a-subfolder"]  # newest first; the part of the path that tells them apart
    stats = _fits(_run(tmp_path / "home", project, columns, "memory", "stats").stdout, columns)
    header = next(ln for ln in stats if ln.startswith("project "))
    body = [ln for ln in stats[stats.index(header) + 2 :] if not ln.startswith("projects in ")]
    cells = [ln[: header.index("active")].strip() for ln in body]
    figures = [ln[header.index("active") :].split() for ln in body]
    named = {
        "".join(cells[i : i + 2]) if i + 1 < len(cells) and not figures[i + 1] else cells[i]: figures[i]
        for i in range(len(body))
        if figures[i]
    }
    assert named == {"and-a-subfolder": ["1", "0", "1", "0.50", "1", "fact", named["and-a-subfolder"][-1]],
                     "b": ["1", "0", "1", "0.50", "1", "fact", named["b"][-1]]}  # fmt: skip


@pytest.mark.parametrize("columns", [80, 120])
def test_learn_tells_files_with_one_long_shared_name_apart(tmp_path, columns):
    logs = tmp_path / "logs"
    for i in (1, 2):
        rollout(
            logs / f"rollout-2025-06-01T10-00-0{i}-0197a3c4-aaaa-bbbb-cccc-00000000000{i}.jsonl", f"s{i}", "/srv/app"
        )
    env = {
        "CLAUDE_CONFIG_DIR": str(tmp_path / "none"),
        "CODEX_HOME": str(tmp_path / "none"),
        "XDG_DATA_HOME": str(tmp_path / "none"),
    }
    out = _run(
        tmp_path / "home",
        tmp_path,
        columns,
        "learn",
        "--project",
        str(tmp_path),
        "--from",
        str(logs),
        "--dry-run",
        **env,
    )
    lines = _fits(out.stdout.split("Rules to write")[0], columns)  # the diff after it is never wrapped, on purpose
    header = next(ln for ln in lines if ln.startswith("file "))
    cells = _column(lines, header, "file", "agent")
    rows = [i for i, ln in enumerate(lines[lines.index(header) + 2 :]) if "codex" in ln]
    names = []
    for a, b in zip(rows, [*rows[1:], rows[-1] + 3]):  # a file's cell with the lines it folds onto
        names.append("".join(c for c in cells[a:b] if c and not c.startswith("in ")))
    assert names == ["…01-0197a3c4-aaaa-bbbb-cccc-000000000001.jsonl", "…02-0197a3c4-aaaa-bbbb-cccc-000000000002.jsonl"]
    assert f"in {logs}" in out.stdout


def test_distinct_names_keep_what_tells_files_apart():
    assert distinct_names(["/l/rollout-2025-06-01T10-00-01-aa.jsonl", "/l/rollout-2025-06-01T10-00-02-bb.jsonl"]) == (
        "/l",
        ["…01-aa.jsonl", "…02-bb.jsonl"],
    )
    assert distinct_names(["/x/a/session.jsonl", "/x/b/session.jsonl"]) == (
        "/x",
        ["a/session.jsonl", "b/session.jsonl"],
    )
    assert distinct_names(["/p/9f3e.jsonl", "/p/7b2d.jsonl"]) == (
        "/p",
        ["9f3e.jsonl", "7b2d.jsonl"],
    )  # short shared part: kept


def _ledger(home: Path, rows: list[tuple[str, str, str, datetime, int, int, int]]) -> None:
    """Request outcomes (session, client, project, time, input, cache read, cache write) in the
    home's SQLite ledger, migrated by the real code."""
    from headroom_core.db.engine import open_database
    from headroom_core.db.models import RequestOutcome

    sessions = open_database(f"sqlite:///{home / 'headroom.db'}")
    with sessions.begin() as s:
        for key, client, project, at, inp, read, write in rows:
            s.add(RequestOutcome(created_at=at, dialect="anthropic-messages", client=client, model="claude-sonnet-4", session_key=key, project=project,
                                 action="unchanged", reason="", body_bytes_before=1, body_bytes_after=1, tokens_before=0, tokens_after=0,
                                 blocks_compressed=0, status_code=200, usage_input_tokens=inp, usage_cache_read_tokens=read,
                                 usage_cache_write_tokens=write, detail=""))  # fmt: skip


@pytest.mark.parametrize("columns", [80, 120])
def test_cache_report_has_time_agent_and_unique_ids(tmp_path, columns):
    home = tmp_path / "home"
    home.mkdir()
    a, b = "0123456789abc" + "0" * 19, "0123456789abd" + "1" * 19  # the same first 12 hex digits
    _ledger(home, [
        (a, "claude-cli", "/home/u/dev/shop", datetime(2025, 8, 6, 9, 15), 4, 0, 50000),
        (a, "claude-cli", "/home/u/dev/shop", datetime(2025, 8, 6, 9, 20), 8, 50000, 100),
        (b, "codex_cli_rs", "/home/u/dev/api", datetime(2025, 8, 7, 14, 5), 2000, 1500, 0),
    ])  # fmt: skip
    lines = _fits(_run(home, tmp_path, columns, "cache", "report").stdout, columns)
    header = next(ln for ln in lines if ln.startswith("session "))
    rows = [ln.split() for ln in lines[lines.index(header) + 2 :] if ln.startswith("0123")]
    assert [r[:4] for r in rows] == [
        [b[:13], "08-07", "14:05", "codex_cli_rs"],
        [a[:13], "08-06", "09:20", "claude-cli"],
    ]
    assert rows[1][-2:] == ["2", f"{100 * 50000 / (4 + 50000 + 8 + 50000 + 100):.1f}%"]  # requests, hit rate
    one = _run(
        home, tmp_path, columns, "cache", "report", "--session", a[:13]
    ).stdout  # the id shown selects that session alone
    assert a[:13] in one and b[:13] not in one


def test_unique_prefix_length():
    assert unique_prefix_length(["abcdef0123456789"], {"abcdef0123456789", "ffff"}) == 12
    assert unique_prefix_length(["abcdef012345a789"], {"abcdef012345a789", "abcdef012345a7ff"}) == 15
    assert unique_prefix_length(["ab"], {"ab"}, minimum=12) == 2  # never longer than the key
