"""Volatile prefix parts: what changes in ``system`` and ``tools`` between requests of the real
Claude Code session, synthetic timestamps/UUIDs, the prefix log per session, the hit rate from
the ledger, and the ``headroom cache report`` command."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from typer.testing import CliRunner

from headroom_core.cache import volatile
from headroom_core.cache.hit_rate import cache_hit_rate
from headroom_core.cache.prefix_log import PrefixLog, prefix_events
from headroom_core.cache.session import session_key
from headroom_core.db.models import RequestOutcome
from headroom_core.project import resolve_project
from headroom_core.request_plan import plan_request, run_diagnostics, run_observers
from tests.conftest import flow_files, load_flow


def corpus_bodies() -> list[tuple[str, dict]]:
    """``(file name, request body)`` of the recorded LLM calls (count_tokens calls left out:
    the proxy does not plan them)."""
    out = []
    for f in flow_files():
        body = load_flow(f)["request"]["body"]
        if "max_tokens" in body:
            out.append((f.name, body))
    return out


def test_corpus_prefix_changes_between_consecutive_requests():
    """The real session's prefix changes three ways: 63 MCP tools appended (session-a-05), MCP
    tools reordered plus one new ``git status`` line after a restart (session-a-16), the model
    line after a model switch (session-a-28); the compaction call (session-a-23) is another
    prompt altogether. Nothing else changes."""
    bodies = dict(corpus_bodies())
    prefixes = {name: volatile.prefix_of(b) for name, b in bodies.items()}
    names = sorted(prefixes)
    found = {}
    for a, b in zip(names, names[1:]):
        if prefixes[a] != prefixes[b]:
            found[b] = volatile.diff_prefix(prefixes[a], prefixes[b])
    assert sorted(found) == [
        "session-a-05.json",
        "session-a-16.json",
        "session-a-23.json",
        "session-a-25.json",
        "session-a-28.json",
    ]
    added = found["session-a-05.json"]
    assert added.kinds == ("tools-added",) and added.changes[0].after.startswith(
        "+63 at the end: mcp__yt-dlp__search_videos"
    )
    resumed = found["session-a-16.json"]
    assert resumed.kinds == ("tool-order", "git-status")
    git = [c for c in resumed.changes if c.part == "system"]
    assert [(c.kind, c.before, c.after) for c in git] == [("git-status", "", "?? lua/pome/term/claude_utils.lua")]
    system16 = (
        bodies["session-a-16.json"]["system"][0]["text"] + "\n" + bodies["session-a-16.json"]["system"][1]["text"]
    )
    assert system16[resumed.first_offset :].startswith("?? lua/pome/term/claude_utils.lua")
    model = found["session-a-28.json"]
    assert model.kinds == ("model",) and "Sonnet 4" in model.changes[0].after and "Opus 4" in model.changes[0].before
    assert found["session-a-23.json"].replaced and found["session-a-23.json"].similarity < 0.05


@pytest.mark.parametrize(
    "old,new,kind",
    [
        ("Today's date: 2025-08-06", "Today's date: 2025-08-07", "date"),
        ("Current time: 2025-08-06T10:41:02Z", "Current time: 2025-08-06T10:42:17Z", "timestamp"),
        ("It is 10:41 now.", "It is 10:42 now.", "timestamp"),
        ("epoch 1754476862", "epoch 1754476925", "timestamp"),
        (
            "session 3b241101-e2bb-4255-8caf-4136c566a962 started",
            "session 0f5c2d4e-93a1-4b7e-9d55-0b6c1f7a8e21 started",
            "uuid",
        ),
        (" M src/app.py", "?? src/new.py", "git-status"),
        ("a1b2c3d fix: parser", "e4f5a6b feat: lexer", "git-status"),
        ("Working directory: /home/user/a", "Working directory: /home/user/b", "cwd"),
        ("Be brief.", "Be thorough.", "other"),
    ],
)
def test_synthetic_volatile_lines_are_classified(old, new, kind):
    head = "You are a coding agent.\n" + "\n".join(f"Rule {i}: stay calm." for i in range(30))
    d = volatile.diff_system(f"{head}\n{old}\nEnd.", f"{head}\n{new}\nEnd.")
    assert [c.kind for c in d.changes] == [kind]
    c = d.changes[0]
    assert (c.line, c.before, c.after) == (32, old.strip("\n"), new.strip("\n"))
    assert c.offset == len(head) + 1
    assert not d.replaced


def test_the_line_diffs_are_the_standard_librarys():
    """cydifflib's SequenceMatcher (the diffs here) gives difflib's opcodes and ratios: on the
    system prompts and lines of the corpus session, each with seeded edits (spaces doubled,
    characters dropped, a date changed), as lines and as characters."""
    import difflib
    import random

    from cydifflib import SequenceMatcher

    rnd = random.Random(33)
    texts = sorted({volatile.system_text(b) for _n, b in corpus_bodies()})
    pairs: list[tuple] = []
    for t in texts:
        lines = t.splitlines()
        edited = [
            ln.replace(" ", "  ", rnd.randint(0, 3)) if rnd.random() < 0.5 else ln[: rnd.randint(0, len(ln))]
            for ln in lines
        ]
        edited[rnd.randrange(len(edited))] = "Today's date is 2026-12-02."
        pairs.append((lines, edited))
        pairs += [(a, b) for a, b in zip(lines, edited) if a != b][:40]
    assert len(pairs) > 60
    for a, b in pairs:
        ours, std = SequenceMatcher(None, a, b, autojunk=False), difflib.SequenceMatcher(None, a, b, autojunk=False)
        assert [tuple(o) for o in ours.get_opcodes()] == std.get_opcodes()
        assert (ours.ratio(), ours.quick_ratio(), ours.real_quick_ratio()) == (
            std.ratio(),
            std.quick_ratio(),
            std.real_quick_ratio(),
        )


def test_identical_and_unrelated_system_prompts():
    assert volatile.diff_system("same", "same").changes == ()
    d = volatile.diff_system("\n".join(f"alpha {i}" for i in range(10)), "\n".join(f"beta {i}" for i in range(10)))
    assert d.replaced and [c.kind for c in d.changes] == ["replaced"]


def test_tool_changes_are_named():
    a = (("Read", "1"), ("Bash", "2"), ("mcp__x__a", "3"), ("mcp__y__b", "4"))
    assert [c.kind for c in volatile.diff_tools(a, a[:2] + (a[3], a[2]))] == ["tool-order"]
    assert [c.kind for c in volatile.diff_tools(a, a[:3])] == ["tools-removed"]
    assert [c.kind for c in volatile.diff_tools(a, (("Read", "9"),) + a[1:])] == ["tool-definition"]
    added = volatile.diff_tools(a[:2], (("New", "5"),) + a[:2])
    assert [(c.kind, c.after) for c in added] == [("tools-added", "+1 among the others: New")]


def test_system_text_of_every_dialect():
    assert (
        volatile.system_text(
            {
                "system": [
                    {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "b"},
                ]
            }
        )
        == "a\nb"
    )
    assert volatile.system_text({"instructions": "be brief", "input": []}) == "be brief"
    assert (
        volatile.system_text(
            {
                "messages": [
                    {"role": "system", "content": "s"},
                    {"role": "developer", "content": [{"type": "text", "text": "d"}]},
                    {"role": "user", "content": "u"},
                ]
            }
        )
        == "s\nd"
    )
    # cache_control is not part of a tool's identity (clients move breakpoints)
    t = {"name": "Read", "input_schema": {"type": "object"}}
    assert volatile.tool_entries({"tools": [t]}) == volatile.tool_entries(
        {"tools": [{**t, "cache_control": {"type": "ephemeral"}}]}
    )
    nested = {**t, "input_schema": {"type": "object", "cache_control": {"type": "ephemeral"}}}
    assert volatile.tool_entries({"tools": [nested]}) == volatile.tool_entries(
        {"tools": [{**nested, "input_schema": {"type": "object"}}]}
    )
    said = {**t, "description": 'a "cache_control" member'}  # the words only: nothing left out
    assert volatile.tool_entries({"tools": [said]}) != volatile.tool_entries({"tools": [t]})


def test_prefix_log_per_session_on_the_corpus(runtime):
    """Recorded as the proxy sees it (session keys and projects derived from the requests):
    per session, the parts that broke the cache; an identical prefix of an earlier session
    (after compaction) is not a change; nothing is compared across projects."""
    log = PrefixLog(runtime.sessions)
    keys = []
    for name, body in corpus_bodies():
        key = session_key("anthropic-messages", body)
        keys.append(key)
        log.observe(key, resolve_project({}, body, key), "anthropic-messages", "claude-code", volatile.prefix_of(body))
    events = prefix_events(runtime.sessions)
    changed = {(e.session_key, tuple(c.kind for c in e.changes)) for e in events if e.changes}
    assert changed == {
        (keys[4], ("tools-added",)),  # same session as session-a-01..04: its own previous prefix
        (keys[15], ("tool-order", "git-status")),  # resumed session: nearest prefix of the project
        (keys[26], ("model",)),  # session-a-28 (index 26 once count_tokens is left out)
    }
    # 01 and 02 are one session although Claude Code marked the first message with cache_control in 01 only
    assert keys[0] == keys[1] == keys[3]
    assert len({e.session_key for e in events}) == len(set(keys))
    # a request that states no working directory is its conversation's own project
    assert {e.project for e in events} - {f"conversation:{k[:16]}" for k in keys} == {"/home/user/dev/stow/nvim"}
    # the other project's prompt is never a comparison base
    other = volatile.Prefix("Working directory: /elsewhere\n" + volatile.system_text(corpus_bodies()[0][1]), ())
    assert log.observe("other-session", "/elsewhere", "anthropic-messages", "claude-code", other) is None
    # seen before: no database work, no diff
    assert (
        log.observe(
            keys[-1],
            "/home/user/dev/stow/nvim",
            "anthropic-messages",
            "claude-code",
            volatile.prefix_of(corpus_bodies()[-1][1]),
        )
        is None
    )


def test_observer_is_registered_in_the_request_walk_as_a_diagnostic(runtime):
    body = {
        "model": "claude-sonnet-4",
        "max_tokens": 10,
        "system": "Working directory: /p\nToday's date: 2025-08-06",
        "messages": [{"role": "user", "content": "hi"}],
    }
    run_observers(runtime, plan_request(runtime, "POST", "/v1/messages", {}, json.dumps(body).encode()))
    assert prefix_events(runtime.sessions, project="/p") == []  # not an observer the answer waits for
    run_diagnostics(runtime, plan_request(runtime, "POST", "/v1/messages", {}, json.dumps(body).encode()))
    body["system"] = body["system"].replace("08-06", "08-07")
    run_diagnostics(runtime, plan_request(runtime, "POST", "/v1/messages", {}, json.dumps(body).encode()))
    events = prefix_events(runtime.sessions, project="/p")
    assert [tuple(c.kind for c in e.changes) for e in events] == [(), ("date",)]
    assert events[1].changes[0].after == "Today's date: 2025-08-07"


def _outcome(session: str, dialect: str, inp: int | None, read: int | None, write: int | None) -> RequestOutcome:
    return RequestOutcome(
        created_at=datetime(2025, 8, 6),
        dialect=dialect,
        client="c",
        model="m",
        session_key=session,
        project="p",
        action="unchanged",
        reason="",
        body_bytes_before=1,
        body_bytes_after=1,
        tokens_before=0,
        tokens_after=0,
        blocks_compressed=0,
        status_code=200,
        usage_input_tokens=inp,
        usage_cache_read_tokens=read,
        usage_cache_write_tokens=write,
        detail="",
    )


def test_cache_hit_rate_from_the_ledger(runtime):
    """Anthropic's input excludes cached tokens, OpenAI's includes them; rows without usage
    do not count."""
    with runtime.sessions.begin() as s:
        s.add_all(
            [
                _outcome("a" * 32, "anthropic-messages", 4, 0, 58101),
                _outcome("a" * 32, "anthropic-messages", 7, 58101, 511),
                _outcome("a" * 32, "anthropic-messages", None, None, None),
                _outcome("b" * 32, "openai-chat", 2000, 1536, None),
            ]
        )
    rates = {u.key: u for u in cache_hit_rate(runtime.sessions)}
    a = rates["a" * 32]
    assert (a.requests, a.reported, a.prompt_tokens, a.cache_read_tokens) == (3, 2, 4 + 58101 + 7 + 58101 + 511, 58101)
    assert a.rate == pytest.approx(58101 / 116724)
    assert rates["b" * 32].rate == pytest.approx(1536 / 2000)
    (everything,) = cache_hit_rate(runtime.sessions, by=None)
    assert everything.rate == pytest.approx((58101 + 1536) / (116724 + 2000))
    assert [u.key for u in cache_hit_rate(runtime.sessions, "bbbb")] == ["b" * 32]


def test_cache_report_command(runtime, monkeypatch):
    from headroom_core.cli.main import app

    log = PrefixLog(runtime.sessions)
    bodies = corpus_bodies()
    for _name, body in bodies[25:27]:  # session-a-27 and -28: the model switch
        log.observe(
            session_key("anthropic-messages", body),
            "/home/user/dev/stow/nvim",
            "anthropic-messages",
            "claude-code",
            volatile.prefix_of(body),
        )
    key = session_key("anthropic-messages", bodies[26][1])
    with runtime.sessions.begin() as s:
        s.add(_outcome(key, "anthropic-messages", 4, 0, 124898))
        s.add(_outcome(key, "anthropic-messages", 8, 124898, 290))
    monkeypatch.setenv("HEADROOM_HOME", runtime.settings.home)
    res = CliRunner().invoke(app, ["cache", "report", "--session", key[:8]], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert key[:12] in res.output and "49.9%" in res.output
    assert "model (system line 167)" in res.output and "Sonnet 4" in res.output
