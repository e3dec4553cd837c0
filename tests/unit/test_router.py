"""The content router on real tool outputs (../shared/corpus: Claude Code session logs, a SWE-agent
trajectory, loghub logs, GitHub API payloads) and the pipeline's latest-read rule."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from headroom_core.cache.decisions import DecisionCache
from headroom_core.ccr import retrieve
from headroom_core.ccr.store import OriginalsStore
from headroom_core.compress.code import parses
from headroom_core.compress.markers import MARKER_RE, offload_key
from headroom_core.compress.numbered import split_numbered
from headroom_core.compress.pipeline import compress_outputs
from headroom_core.compress.reads import file_access, shell_read, verbatim_call_ids
from headroom_core.compress.router import Hint, Kind, classify, compress_text
from headroom_core.compress.sections import split_sections
from headroom_core.db.engine import open_database
from headroom_core.request_plan import plan_request
from headroom_core.wire import anthropic
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.calls import tool_calls_in_request
from headroom_core.wire.detect import Dialect
from tests.conftest import corpus_dir


def session_outputs(name: str) -> list[tuple[dict, str]]:
    """(tool_use block, tool_result text) pairs of a real Claude Code session log, in order."""
    uses: dict[str, dict] = {}
    out = []
    for line in (corpus_dir("claude-code-sessions") / name).read_text().splitlines():
        rec = json.loads(line)
        for b in (rec.get("message") or {}).get("content") or []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use":
                uses[b["id"]] = b
            elif b.get("type") == "tool_result" and b.get("tool_use_id") in uses:
                c = b.get("content")
                text = c if isinstance(c, str) else "".join(x.get("text", "") for x in c or [] if isinstance(x, dict))
                out.append((uses[b["tool_use_id"]], text))
    return out


def swe_steps() -> list[dict]:
    return json.loads((corpus_dir("swe-agent") / "pydicom-1458.traj").read_text())["trajectory"]


def hint_of(use: dict) -> Hint:
    inp = use.get("input") or {}
    return Hint(use["name"], inp.get("file_path", ""), inp.get("command", ""))


def test_claude_code_reads_route_by_file_type():
    """Read outputs are numbered (``     1→``) with a trailing <system-reminder>; the numbered
    section is code in the file's language, or numbered text for JSON, Markdown and CSS."""
    seen = set()
    for use, text in session_outputs("fe5e1c67.jsonl"):
        if use["name"] != "Read" or "→" not in text[:20]:
            continue
        path = use["input"]["file_path"]
        sections = split_sections(text)
        assert "".join(s.text for s in sections) == text
        main = sections[0]
        assert main.numbered
        kind = classify(main.text, hint_of(use))
        want = {".ts": Kind("code", "typescript", True), ".tsx": Kind("code", "tsx", True)}.get(
            Path(path).suffix, Kind("text", numbered=True)
        )
        assert kind == want, path
        # the reminder is its own verbatim section
        assert any(s.verbatim and "<system-reminder>" in s.text for s in sections)
        seen.add(want.language or "text")
        # without the hint the language is recognised from the code itself (when it parses)
        if want.name == "code" and parses(split_numbered(main.text).code, want.language):
            assert classify(main.text).name == "code"
    assert seen == {"typescript", "tsx", "text"}


def test_claude_code_shell_outputs_route():
    kinds = {}
    for use, text in session_outputs("fe5e1c67.jsonl") + session_outputs("5c0375b4.jsonl"):
        if use["name"] != "Bash" or len(text) < 200:
            continue
        cmd = use["input"]["command"]
        kinds[cmd] = classify(text, hint_of(use)).name
        kinds["(no hint) " + cmd] = classify(text).name
    find_cmds = [c for c in kinds if c.startswith("find ") and "-type d" not in c]
    assert find_cmds and all(kinds[c] == "search" for c in find_cmds)
    assert all(kinds["(no hint) " + c] == "search" for c in find_cmds)  # path lists by their look alone
    assert all(kinds[c] == "text" for c in kinds if c.startswith("ls -la"))  # a listing is plain text
    assert all(kinds[c] == "test" for c in kinds if c.startswith("npm run build"))


def test_swe_agent_observations_route():
    steps = swe_steps()
    by_action = {s["action"].split()[0]: s["observation"] for s in steps if s["action"].strip()}
    assert classify(by_action["submit"]).name == "diff"
    traceback = next(s["observation"] for s in steps if s["observation"].startswith("Traceback"))
    assert classify(traceback).name == "test"
    # the open window: header, numbered python (path from the header), trailer
    window = by_action["open"]
    sections = split_sections(window)
    numbered = [s for s in sections if s.numbered]
    assert len(numbered) == 1
    assert classify(
        numbered[0].text, Hint(path="/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py")
    ) == Kind("code", "python", True)
    found = next(s["observation"] for s in steps if s["action"].startswith("find_file"))
    assert classify(found.split("\n", 1)[1] * 3).name == "search"


@pytest.mark.parametrize("system", ["HDFS", "Linux", "Apache", "Spark", "OpenStack", "Zookeeper", "Hadoop", "OpenSSH"])
def test_loghub_logs_route_to_log(system):
    text = (corpus_dir("logs") / f"{system}_2k.log").read_text(errors="replace")
    assert classify(text).name == "log"


def test_github_json_routes_to_json_and_compresses(counter):
    text = json.dumps(json.loads((corpus_dir("github-api") / "search-issues.json").read_text()), indent=2)
    assert classify(text).name == "json"
    res = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1)
    assert res.changed and res.kind == "json"


def test_html_routes():
    page = (
        Path(importlib.util.find_spec("mitmproxy").origin).parent
        / "addons"
        / "onboardingapp"
        / "templates"
        / "index.html"
    )
    assert classify(page.read_text()).name == "html"


def test_missing_compressor_is_harmless(counter):
    """The log/prose/HTML compressors come from another module; without it the text stays."""
    text = (corpus_dir("logs") / "HDFS_2k.log").read_text()
    res = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1)
    if importlib.util.find_spec("headroom_core.compress.logs") is None:
        assert not res.changed and res.reason == "no compressor for log yet"
    else:
        assert res.kind in ("log", "logs")  # the log compressor names its kind


def test_wrong_kind_is_harmless(counter):
    """Forcing a kind that does not fit gives the original back."""
    text = (corpus_dir("logs") / "Linux_2k.log").read_text(errors="replace")
    for kind in ("code", "diff", "search", "json"):
        res = compress_text(text, "", counter, min_tokens=50, min_saving_ratio=0.1, hint=kind)
        assert not res.changed and res.text == text, kind


def test_read_with_reminder_keeps_reminder_and_round_trips(tmp_path, counter):
    use, text = max(
        ((u, t) for u, t in session_outputs("fe5e1c67.jsonl") if u["name"] == "Read"), key=lambda x: len(x[1])
    )
    res = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1, hint=hint_of(use))
    assert res.changed and res.kind == "code" and res.strategy == "sections"
    reminder = text[text.index("<system-reminder>") :]
    assert res.text.endswith(reminder)
    (off,) = res.offloads
    assert off.original == text and {m.group("key") for m in MARKER_RE.finditer(res.text)} == {offload_key(text)}
    store = OriginalsStore(open_database(f"sqlite:///{tmp_path / 'h.db'}"), 3600, 10**8)
    store.put(off.key, off.original, res.kind)
    assert retrieve.answer(ToolCall("x", "headroom_retrieve", {"key": off.key.upper()}), store) == text


def test_decisions_are_deterministic(counter):
    use, text = max(
        ((u, t) for u, t in session_outputs("fe5e1c67.jsonl") if u["name"] == "Bash"), key=lambda x: len(x[1])
    )
    a = compress_text(text, "lucide icons", counter, min_tokens=250, min_saving_ratio=0.1, hint=hint_of(use))
    b = compress_text(text, "lucide icons", counter, min_tokens=250, min_saving_ratio=0.1, hint=hint_of(use))
    assert a == b and a.changed


# --- the latest read stays verbatim -----------------------------------------------------------


def test_file_access_of_calls():
    assert file_access(ToolCall("1", "Read", {"file_path": "/a/b.py"})).full
    assert not file_access(ToolCall("1", "Read", {"file_path": "/a/b.py", "offset": 10, "limit": 20})).full
    assert file_access(ToolCall("1", "Write", {"file_path": "/a/b.py", "content": "x"})).action == "write"
    assert file_access(ToolCall("1", "Edit", {"file_path": "/a/b.py"})).action == "edit"
    assert file_access(ToolCall("1", "shell", {"command": ["bash", "-lc", "cat src/x.py"]})).paths == ("src/x.py",)
    assert shell_read("sed -n '10,80p' src/x.py").full is False
    assert shell_read("cat x.py | grep foo") is None
    patch = "*** Begin Patch\n*** Update File: src/x.py\n@@\n-a\n+b\n*** End Patch"
    assert file_access(ToolCall("1", "apply_patch", {"input": patch})).paths == ("src/x.py",)


def test_verbatim_rule():
    calls = {
        "r1": ToolCall("r1", "Read", {"file_path": "/p/a.ts"}),
        "e1": ToolCall("e1", "Edit", {"file_path": "/p/a.ts"}),
        "r2": ToolCall("r2", "Read", {"file_path": "/p/b.ts", "offset": 5, "limit": 10}),
        "g": ToolCall("g", "Grep", {"pattern": "x"}),
        "r3": ToolCall("r3", "Read", {"file_path": "/p/a.ts"}),
        "e2": ToolCall("e2", "Edit", {"file_path": "/p/a.ts"}),
    }
    # r1 and e1 are superseded by the later full read r3; r3 stays (an edit alone does not supersede)
    assert verbatim_call_ids(calls) == {"r2", "r3", "e2"}


def session_body(name: str) -> dict:
    """The real session log's messages (main thread and sub-agents, in log order) as one
    Anthropic request body."""
    msgs = []
    for line in (corpus_dir("claude-code-sessions") / name).read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") in ("user", "assistant") and isinstance(rec.get("message"), dict):
            m = rec["message"]
            msgs.append({"role": m["role"], "content": m["content"]})
    return {"model": "claude-sonnet-4", "max_tokens": 1024, "messages": msgs}


def test_pipeline_keeps_latest_read_verbatim_and_compresses_superseded(runtime, counter):
    """fe5e1c67 reads page.tsx three times: the two older reads, superseded by a later full read,
    are compressed; the latest goes as it is. Every latest read of every file stays verbatim."""
    body = session_body("fe5e1c67.jsonl")
    calls = tool_calls_in_request(body, Dialect.ANTHROPIC_MESSAGES)
    outputs = anthropic.tool_outputs(body)
    reads = [
        o for o in outputs if o.tool_name == "Read" and calls[o.call_id].arguments["file_path"].endswith("app/page.tsx")
    ]
    assert len(reads) == 3
    result = compress_outputs(
        outputs,
        "",
        lambda t, q, h=None: compress_text(t, q, counter, min_tokens=100, min_saving_ratio=0.1, hint=h),
        counter,
        DecisionCache(None),
        min_tokens=100,
        calls=calls,
    )
    changed = dict(result.replacements)
    outcome = {b.path: b for b in result.blocks}
    # the older reads went to the router (create-next-app's page.tsx has "&utm_…" in JSX
    # attribute strings, which the TSX grammar rejects, so the code compressor kept them)
    for r in reads[:2]:
        assert outcome[r.path].kind == "code" and outcome[r.path].reason != "latest view of a file"
        assert "does not parse" in outcome[r.path].reason
    assert reads[2].path not in changed
    assert outcome[reads[2].path].reason == "latest view of a file"
    # every read with no later full read or Write of its file goes verbatim
    order = list(calls)
    for o in outputs:
        if o.tool_name != "Read":
            continue
        path = calls[o.call_id].arguments["file_path"]
        later = [
            c
            for c in order[order.index(o.call_id) + 1 :]
            if calls[c].name in ("Read", "Write") and calls[c].arguments.get("file_path") == path
        ]
        if not later:
            assert o.path not in changed, path


def test_request_plan_latest_read_verbatim(runtime):
    """Through plan_request: a file read twice; only the older read is compressed."""
    src = (Path(importlib.util.find_spec("alembic").origin).parent / "command.py").read_text()
    numbered = "\n".join(f"{i:6d}→{ln}" for i, ln in enumerate(src.split("\n"), 1))
    body = {
        "model": "claude-sonnet-4",
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "Fix the revision command."},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/r/alembic/command.py"}}
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": numbered}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "/r/alembic/command.py"}}
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": numbered}]},
        ],
    }
    p = plan_request(runtime, "POST", "/v1/messages", {}, json.dumps(body).encode())
    assert p.action == "rewrite", p.reason
    out = json.loads(p.body)
    first = out["messages"][2]["content"][0]["content"]
    second = out["messages"][4]["content"][0]["content"]
    assert second == numbered
    assert first != numbered and "headroom_retrieve key=" in first
    # kept lines keep their true numbers
    lines = src.split("\n")
    for ln in first.split("\n"):
        n, _, rest = ln.partition("→")
        if n.strip():
            assert lines[int(n) - 1] == rest or lines[int(n) - 1].startswith(rest.rstrip('"').rstrip())
