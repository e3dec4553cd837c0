"""Agents' envelopes around tool outputs (compress/envelope.py, enveloped.py, json_cut.py): the
payload is compressed by its own kind, the envelope goes upstream byte for byte, the original
(envelope included) is stored whole under the key every marker names.

Shapes as the agents write them: Codex 0.1xx exec_command (codex-rs ExecCommandToolOutput's
response text: ``Chunk ID``/``Wall time``/exit/``Original token count`` lines, ``Output:``, a
middle cut ``…N tokens truncated…`` from utils/string truncate.rs, and the ``Warning: truncated
output`` header of output-truncation); Claude Code 2.x (``<persisted-output>`` preview as its
bundle writes it, a trailing ``<system-reminder>``); older Codex and Gemini CLI's JSON objects
with an output member. The JSON payloads are real GitHub API recordings (../shared/corpus).
"""

from __future__ import annotations

import json
import random

import pytest

from headroom_core.compress.envelope import find_cuts, split_envelope
from headroom_core.compress.json_crush import decode_table
from headroom_core.compress.json_cut import head_records, tail_records
from headroom_core.compress.markers import find_marker_keys, offload_key
from headroom_core.compress.router import classify, compress_text, enveloped
from tests.unit.test_request_plan import github_scenario

QUERY = "which issues are still open?"
CODEX_HEAD = (
    "Chunk ID: 5e1f0a\nWall time: 0.2519 seconds\nProcess exited with code 0\nOriginal token count: 10654\nOutput:\n"
)
REMINDER = "<system-reminder>\nThe task tools haven't been used recently. Consider using them.\n</system-reminder>\n"


def squeeze(text: str, counter, **kw):
    return compress_text(text, QUERY, counter, min_tokens=250, min_saving_ratio=0.1, **kw)


def saved(counter, before: str, after: str) -> float:
    return 1 - counter.count(after) / counter.count(before)


def assert_reversible(res, original: str) -> None:
    """One offload with the whole output (envelope included); every marker names its key."""
    assert res.changed
    assert [o.original for o in res.offloads] == [original]
    assert set(find_marker_keys(res.text)) <= {offload_key(original)}
    assert res.offloads[0].key == offload_key(original)


@pytest.fixture(scope="module")
def issues() -> str:
    return github_scenario("paginate-issues.json")  # a pretty-printed array of 20 API exchanges


def records(n: int = 300) -> list[dict]:
    """``n`` issue-like records of the shape an API listing prints (one failed of every 7)."""
    return [{"id": 9000 + i, "number": i, "title": f"Fix flaky test {i}", "state": "open" if i % 7 == 0 else "closed",
             "user": {"login": "octocat", "id": 1, "type": "User"}, "labels": ["bug"], "comments": i % 5} for i in range(n)]  # fmt: skip


def test_codex_exec_envelope_around_a_json_array_saves_like_the_bare_array(counter, issues):
    text = CODEX_HEAD + issues + "\n"
    bare = squeeze(issues, counter)
    res = squeeze(text, counter)
    assert classify(text).name == "json"
    assert res.text.startswith(CODEX_HEAD) and res.text.endswith("\n")
    assert saved(counter, text, res.text) >= 0.60
    assert abs(saved(counter, text, res.text) - saved(counter, issues, bare.text)) < 0.02
    # the payload went through the JSON compressor: what is sent between the envelope is JSON
    json.loads(res.text[len(CODEX_HEAD) : -1])
    assert_reversible(res, text)


def test_codex_cut_in_the_middle_of_a_record_compresses_the_records_on_both_sides(counter):
    pretty = json.dumps(records(), indent=2)
    mark = "…9870 tokens truncated…"
    text = CODEX_HEAD + pretty[:9000] + mark + pretty[-9000:] + "\n"
    env = split_envelope(text)
    assert env is not None and len(env.cuts) == 1 and env.payload[env.cuts[0].start : env.cuts[0].end] == mark
    assert classify(text).name == "json"
    res = squeeze(text, counter)
    assert res.text.startswith(CODEX_HEAD) and res.text.endswith("\n")
    # the agent's marker and the partial records at the cut are kept as they were
    at = pretty[:9000][pretty[:9000].rindex("},") + 2 :] + mark + pretty[-9000:][: pretty[-9000:].index("},") + 2]
    assert at in res.text
    assert saved(counter, text, res.text) >= 0.60
    assert_reversible(res, text)


def test_cut_json_records_are_found_on_each_side():
    pretty = json.dumps({"total_count": 300, "items": records()}, indent=2)
    head, tail = pretty[:5000], pretty[-5000:]
    h = head_records(head)
    assert h is not None and [r["number"] for r in h.values] == list(range(len(h.values)))
    assert head[: h.start].rstrip().endswith('"items": [')  # the object's array, not a nested one
    t = tail_records(tail, h.values[0])
    assert t is not None and t.values[-1]["number"] == 299
    assert [r["number"] for r in t.values] == list(range(300 - len(t.values), 300))
    assert tail[t.end :].split() == ["]", "}"]
    # a whole document is not cut; a tail of other things is not taken for records
    assert head_records(pretty) is None
    assert tail_records('"a", "b"]}, {"x": 1}]', {"number": 1}) is None


def test_claude_code_persisted_output_preview_keeps_its_wrapper_byte_for_byte(counter):
    pretty = json.dumps(records(60), indent=2)
    head = (
        "<persisted-output>\nOutput too large (21.4KB). Full output saved to: "
        "/root/.claude/projects/-work-app/5f0c/tool-results/toolu_01Hx.txt\n\nPreview (first 2KB):\n"
    )
    preview = pretty[:2000]
    preview = preview[: preview.rindex("\n")]  # Claude Code cuts the preview at a line end
    tail = "\n...\n</persisted-output>"
    text = head + preview + tail
    env = split_envelope(text)
    assert env is not None and "wrap:persisted-output" in env.shape
    res = compress_text(text, QUERY, counter, min_tokens=100, min_saving_ratio=0.1)
    assert res.text.startswith(head) and res.text.endswith(tail)
    assert saved(counter, text, res.text) >= 0.30
    assert_reversible(res, text)


def test_blank_line_before_a_trailing_system_reminder_is_kept(counter, issues):
    """Bug of issue 31 item 5: a compressed output lost the blank line before the reminder."""
    for text in (issues + "\n\n" + REMINDER, CODEX_HEAD + issues + "\n\n" + REMINDER):
        res = squeeze(text, counter)
        assert res.text.endswith("]\n\n" + REMINDER) or res.text.endswith("}\n\n" + REMINDER), res.text[-200:]
        assert saved(counter, text, res.text) >= 0.60
        assert_reversible(res, text)


def test_an_unknown_header_shape_is_handled_generically(counter, issues):
    head = "Exit status: 0\nDuration: 2.31s\nWorking dir: /srv/app\nStdout:\n"
    text = head + issues
    res = squeeze(text, counter)
    assert res.text.startswith(head)
    assert saved(counter, text, res.text) >= 0.60
    # a blank-line-ended header inside a Codex payload (the truncation warning) is envelope too
    warn = "Warning: truncated output (original token count: 18454)\nTotal output lines: 607\n\n"
    text = CODEX_HEAD + warn + issues
    res = squeeze(text, counter)
    assert res.text.startswith(CODEX_HEAD + warn)
    assert saved(counter, text, res.text) >= 0.60


def test_json_object_envelope_compresses_its_output_member(counter, issues):
    text = json.dumps(
        {
            "output": "Exit code: 0\nWall time: 0.4 seconds\nOutput:\n" + issues,
            "metadata": {"exit_code": 0, "duration_seconds": 0.4},
        }
    )
    res = squeeze(text, counter)
    sent = json.loads(res.text)
    assert sent["metadata"] == {"exit_code": 0, "duration_seconds": 0.4}
    assert sent["output"].startswith("Exit code: 0\nWall time: 0.4 seconds\nOutput:\n")
    assert res.text.endswith('", "metadata": {"exit_code": 0, "duration_seconds": 0.4}}')
    assert saved(counter, text, res.text) >= 0.60
    assert_reversible(res, text)
    # escapes written another way than ours cannot be put back byte for byte: no envelope
    ascii_text = json.dumps({"output": "Ausgabe: ü\n" + issues, "meta": 1}, ensure_ascii=True)
    env = split_envelope(ascii_text)
    assert env is None or env.join(env.payload) == ascii_text


def test_lossless_keeps_the_envelope_and_drops_nothing(counter, issues):
    text = CODEX_HEAD + issues + "\n"
    res = squeeze(text, counter, lossless=True)
    assert res.changed and not res.offloads and not find_marker_keys(res.text)
    assert res.text.startswith(CODEX_HEAD) and res.text.endswith("\n")
    assert decode_table(json.loads(res.text[len(CODEX_HEAD) : -1])) == json.loads(issues)  # table or minified


def test_a_cut_log_is_compressed_piece_by_piece(counter):
    lines = [
        f"2024-05-01 10:{i // 60 % 60:02d}:{i % 60:02d} INFO worker-{i % 4} processed batch {i} in {i % 13} ms"
        for i in range(900)
    ]
    log = "\n".join(lines)
    mark = "…4000 tokens truncated…"
    text = (
        "Chunk ID: 77\nWall time: 12.0 seconds\nProcess exited with code 1\nOutput:\n"
        + log[:20000]
        + mark
        + log[-20000:]
        + "\n"
    )
    assert classify(text).name == "log"
    res = squeeze(text, counter)
    assert res.text.startswith("Chunk ID: 77\nWall time: 12.0 seconds\nProcess exited with code 1\nOutput:\n")
    assert mark in res.text and res.text.endswith("\n")
    assert saved(counter, text, res.text) >= 0.60
    assert_reversible(res, text)


@pytest.mark.parametrize(
    "text",
    [
        # prose with "Label: value"-looking lines
        "Note: the release is planned for Friday, after the review.\nAuthor: the whole team worked on it during the sprint.\n\n"
        + "We changed the parser so that it accepts trailing commas. " * 40,
        # a capitalised YAML document
        "Name: service\nVersion: 3\nReplicas: 2\nEnv:\n  - name: A\n    value: b\n" * 30,
        # an email-like text whose header ends with a blank line, then prose
        "From: Ann\nSubject: plans\n\n"
        + "Dear all, the plans for the quarter are attached and need a review by Monday. " * 40,
    ],
)
def test_text_that_merely_looks_like_a_header_is_not_mangled(counter, text):
    """Either no envelope is seen, or the lines taken for one are kept and the rest is routed as
    the whole would be: never a dropped or rewritten header line."""
    env = enveloped(text)
    res = squeeze(text, counter)
    if env is None:
        plain = (
            compress_text(text, QUERY, counter, min_tokens=250, min_saving_ratio=0.1, hint="text")
            if classify(text).name == "text"
            else res
        )
        assert res.text == plain.text
    else:
        head = env.layers[0].head
        assert res.text.startswith(head)
    if res.changed:
        assert_reversible(res, text)


def test_prose_key_value_lines_are_no_envelope():
    assert (
        split_envelope("Note: this is a sentence about the build.\nIt ran for a while and then stopped.\nOutput:\nfoo")
        is None
    )
    assert split_envelope("name: foo\nversion: 1\ndependencies:\n  - a\n") is None  # lowercase keys: YAML
    assert enveloped("From: Ann\nSubject: plans\n\nDear all, the plans are attached. " * 3) is None


def test_truncation_markers_are_found_in_their_forms_and_ours_never():
    text = (
        "a…12 tokens truncated…b [... 40 lines omitted ...] c <truncated 7 lines> d ...1,204 chars truncated... e "
        "[headroom omitted 480 of 500 items; headroom_retrieve key=0123456789abcdef01234567] f"
    )
    found = [text[c.start : c.end] for c in find_cuts(text)]
    assert found == [
        "…12 tokens truncated…",
        "[... 40 lines omitted ...]",
        "<truncated 7 lines>",
        "...1,204 chars truncated...",
    ]


def test_every_split_joins_back_to_the_same_bytes(issues):
    rng = random.Random(31)
    parts = [CODEX_HEAD, "Output:\n", "\n\n", REMINDER, "<persisted-output>\n", "</persisted-output>", "\n...\n", issues[:3000],
             "Exit code: 1\n", "…3 tokens truncated…", "plain words\n", " \t", '{"output": "x"}', "Preview (first 2KB):\n"]  # fmt: skip
    for _ in range(400):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(1, 6)))
        env = split_envelope(text)
        if env is not None:
            assert env.join(env.payload) == text, repr(text[:200])


def test_no_decision_yet_in_the_payload_is_no_decision_for_the_output(counter):
    """A payload compressor waiting for its model ("model loading") must not become a kept
    "unchanged" decision for the whole output: the pipeline decides it again later."""
    from headroom_core.compress import enveloped as env_mod
    from headroom_core.compress.pipeline import TRANSIENT_REASON
    from headroom_core.compress.result import CompressResult

    assert env_mod.TRANSIENT_REASON == TRANSIENT_REASON
    text = CODEX_HEAD + "The build printed a long story about what it did. " * 200 + "\n"
    env = split_envelope(text)
    assert env is not None
    res = env_mod.compress_enveloped(text, env, lambda t, mt: CompressResult.unchanged(t, "text", TRANSIENT_REASON), QUERY, counter,
                                     min_tokens=100, min_saving_ratio=0.1)  # fmt: skip
    assert not res.changed and res.reason == TRANSIENT_REASON
