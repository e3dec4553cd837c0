"""Runs of repeated lines or blocks are folded with their count, in every text kind, and the
original stays retrievable (issue 13, case 8: a tool output of 8,000 identical lines).

Unit tests of :mod:`headroom_core.compress.repeats`; the router on 160 KB of one repeated line
as prose, log, test output, code and search output, and on a repeated block; the request plan;
and end to end through a real ``mitmdump`` with the Anthropic SDK: the folded tool output goes
upstream and a ``headroom_retrieve`` call gets the 160 KB back byte for byte.
"""

from __future__ import annotations

import re

import pytest

from headroom_core.ccr import retrieve
from headroom_core.ccr.store import OriginalsStore
from headroom_core.compress import markers
from headroom_core.compress.repeats import MIN_SAVED_CHARS, Run, find_runs, fold_lines, fold_text
from headroom_core.compress.router import compress_text
from headroom_core.db.engine import open_database
from tests.support.clients import anthropic_client
from tests.support.upstream import Reply
from tests.unit.test_request_plan import anthropic_request, plan

FOLD_RE = re.compile(
    r"\[headroom omitted (\d+) more copies of (?:the line above|the (\d+) lines above) \((\d+) in a row\); headroom_retrieve key=([0-9a-f]{24})\]"
)


def unfold(text: str) -> str:
    """The text a folded text stands for: each marker replaced by the copies it counts."""
    lines = text.split("\n")
    out: list[str] = []
    for ln in lines:
        m = FOLD_RE.fullmatch(ln.rstrip("\r"))
        if m is None:
            out.append(ln)
            continue
        more, period = int(m.group(1)), int(m.group(2) or 1)
        assert int(m.group(3)) == more + 1
        block = out[-period:]
        out.extend(block * more)
    return "\n".join(out)


# --- repeats.py -----------------------------------------------------------------------------


def test_one_line_repeated():
    lines = ["start"] + ["the same warning about a deprecated option"] * 100 + ["end"]
    assert find_runs(lines) == [Run(1, 1, 100)]


def test_block_repeated_and_shortest_period_wins():
    block = ["Retrying request to https://api.example.com/v1/items", "  attempt failed: timeout", "  waiting 2 s"]
    lines = ["a"] + block * 40 + ["b"] + ["x" * 50] * 10
    runs = find_runs(lines)
    assert runs == [Run(1, 3, 40), Run(122, 1, 10)]
    # "a a a a" is one line four times, not two lines twice
    assert find_runs(["y" * 80] * 4) == [Run(0, 1, 4)]


def test_not_worth_a_marker():
    assert find_runs(["ok"] * 3) == []  # 6 characters saved: a marker costs more
    assert find_runs(["ok"] * (MIN_SAVED_CHARS // 3 + 1)) != []
    assert find_runs([f"line {i}" for i in range(1000)]) == []
    assert find_runs([]) == []


def test_fold_is_lossless_and_deterministic():
    text = (
        "header\n"
        + "".join(f"{i % 3}: a line long enough to matter in a repeated block\n" for i in range(300))
        + "tail\n"
    )
    key = markers.offload_key(text)
    f = fold_text(text, key)
    assert f is not None and f.runs == (Run(1, 3, 100),) and f.lines_folded == 297
    assert unfold(f.text) == text
    assert fold_text(text, key) == f
    assert set(markers.find_marker_keys(f.text)) == {key}


def test_crlf_text_keeps_its_line_ends():
    text = "first\r\n" + "same line, said again and again and again\r\n" * 50 + "last\r\n"
    f = fold_text(text, markers.offload_key(text))
    assert f is not None
    assert "\n" not in f.text.replace("\r\n", "")
    assert unfold(f.text) == text


def test_fold_lines_leaves_other_lines_alone():
    lines = ["a", "b", "b", "b", "c"]
    assert fold_lines(lines, [Run(1, 1, 3)], "0" * 24) == [
        "a",
        "b",
        markers.make_marker("2 more copies of the line above (3 in a row)", "0" * 24),
        "c",
    ]


# --- every kind -------------------------------------------------------------------------------

LINE_KINDS = {
    "prose": "Waiting for the database lock to be released\n",
    "log": "2024-03-04 10:00:00,123 WARN pool: connection slow, retrying\n",
    "test output": "tests/test_api.py::test_get_item PASSED\n",
    "code": "    assert response.status_code == 200  # check\n",
    "search": "src/app/handlers.py:12:    raise NotImplementedError\n",
}


@pytest.mark.parametrize("kind", sorted(LINE_KINDS))
def test_8000_identical_lines_are_folded_in_every_kind(kind, counter, tmp_path):
    line = LINE_KINDS[kind]
    text = (line * 8000)[: 160 * 1024 - 1].rsplit("\n", 1)[0] + "\n"  # 160 KB of whole lines
    n = text.count("\n")
    assert n > 2500 and len(text.encode()) <= 160 * 1024
    res = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1)
    assert res.changed, res.reason
    assert len(res.text) < 500
    if kind == "search":  # grouped by file: the hit once per block shown, the count of matches
        assert "12:    raise NotImplementedError" in res.text and f"{n} matches" in res.text
    else:
        assert res.text.count(line) == 1  # the line itself, once
        assert f"{n - 1} more copies" in res.text and f"{n} in a row" in res.text  # and its count
    key = markers.offload_key(text)
    assert set(markers.find_marker_keys(res.text)) == {key}
    (off,) = res.offloads
    assert off.key == key and off.original == text
    store = OriginalsStore(open_database(f"sqlite:///{tmp_path / 'h.db'}"), 3600, 10**8)
    store.put(off.key, off.original, res.kind)
    assert store.get(key).text == text
    assert compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1) == res


def test_repeated_block_inside_other_text_is_folded(counter):
    intro = "Installing dependencies for the project, this can take a while.\n"
    block = "Downloading artifact core-utils (1.2 MB)\nVerifying checksum of core-utils\nChecksum mismatch, retrying download\n"
    text = intro + block * 500 + "Gave up after 500 attempts.\n"
    res = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1)
    assert res.changed
    assert block in res.text and "499" in res.text and "Gave up after 500 attempts." in res.text
    assert len(res.text) < 1000


def test_request_plan_folds_the_tool_output(runtime):
    text = "npm WARN deprecated inflight@1.0.6: This module is not supported\n" * 2500
    p = plan(runtime, anthropic_request(text, "why does the install warn?"))
    assert p.action == "rewrite", p.reason
    import json

    sent = json.loads(p.body)["messages"][2]["content"][0]["content"]
    assert len(sent) < 1000 and "2499" in sent
    assert set(markers.find_marker_keys(sent)) == {markers.offload_key(text)}


# --- end to end -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    from tests.support.proxy import ADDON_SCRIPT

    return module_proxy_factory(
        ADDON_SCRIPT, options={"headroom_max_body_bytes": 4_000_000, "headroom_compress_timeout_seconds": 300}
    )


def test_identical_lines_through_mitmdump_fold_and_come_back(upstream, proxy):
    text = "Waiting for the database lock to be released (pid 4242)\n" * 2900  # ~160 KB
    key = markers.offload_key(text)
    upstream.script(
        Reply.tool_call(retrieve.TOOL_NAME, {"key": key}, text="Let me see it all."),
        Reply.text("It waited 2900 times."),
    )
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(text, "why is the job stuck?")
    msg = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=100, tools=body["tools"], messages=body["messages"]
    )
    assert [b.text for b in msg.content] == ["Let me see it all.", "It waited 2900 times."]
    first, follow = upstream.requests
    sent = first.json["messages"][2]["content"][0]["content"]
    assert sent.startswith(
        "Waiting for the database lock to be released (pid 4242)\n[headroom omitted 2899 more copies"
    )
    assert len(sent) < 300
    assert first.json["tools"][-1]["name"] == retrieve.TOOL_NAME
    assert follow.json["messages"][-1]["content"][0]["content"] == text  # byte for byte


def test_wrapped_shell_output_is_folded_under_the_whole_key(counter):
    """A BashOutput-style result: wrapper tags stay, the stdout section is folded, and the marker
    names the key of the whole tool output (which is what is stored)."""
    text = (
        "<stdout>\n" + "Waiting for the database lock to be released\n" * 4000 + "</stdout>\n<exit_code>1</exit_code>\n"
    )
    res = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1)
    assert res.changed and res.strategy == "sections"
    assert res.text.startswith(
        "<stdout>\nWaiting for the database lock to be released\n[headroom omitted 3999 more copies"
    )
    assert res.text.endswith("</stdout>\n<exit_code>1</exit_code>\n")
    assert set(markers.find_marker_keys(res.text)) == {markers.offload_key(text)}
    assert res.offloads[0].original == text


def test_json_is_never_folded_line_by_line(counter):
    """JSON keeps parsing: its own compressor handles repeated items."""
    import json

    text = json.dumps([{"status": "waiting", "msg": "lock held by another process"}] * 3000, indent=2)
    res = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1)
    assert res.changed and res.kind == "json"
    assert "more copies of" not in res.text


def test_keyless_fold_is_a_lossless_rewrite():
    """With no key (nothing stored) the fold notes alone say what the copies were."""
    text = "start\n" + "Checksum mismatch, retrying the download of core-utils\n" * 300 + "end\n"
    f = fold_text(text, None)
    assert f is not None and "headroom_retrieve" not in f.text
    assert (
        f.text
        == "start\nChecksum mismatch, retrying the download of core-utils\n[… 299 more copies of the line above, 300 in a row]\nend\n"
    )
    note = re.compile(r"\[… (\d+) more copies of (?:the line above|the (\d+) lines above), (\d+) in a row\]")
    out: list[str] = []
    for ln in f.text.split("\n"):
        m = note.fullmatch(ln)
        if m:
            out.extend(out[-int(m.group(2) or 1) :] * int(m.group(1)))
        else:
            out.append(ln)
    assert "\n".join(out) == text
