"""compress_logs on the eight real loghub logs (../shared/corpus/logs) against their ground truth.

For every log: every ground-truth event template (``*_templates.csv``, ``<*>`` a wildcard) is
still found in the output, every error-level line (by the log's own level field) and every line
with an error word is kept verbatim, kept lines keep their order, the gap and fold counts add
up, and the offloaded original comes back byte for byte from a real originals store.
"""

from __future__ import annotations

import csv
import json
import re
import traceback
from dataclasses import dataclass

import pytest

from headroom_core.ccr.store import OriginalsStore
from headroom_core.compress.logs import MAX_QUERY, compress_logs, is_error_line, mine_templates, trace_end
from headroom_core.compress.markers import MARKER_RE, find_marker_keys, offload_key
from headroom_core.db.engine import open_database
from tests.conftest import corpus_dir
from tests.support.log_variants import is_error_word_line, represented

SYSTEMS = ("Apache", "HDFS", "Hadoop", "Linux", "OpenSSH", "OpenStack", "Spark", "Zookeeper")
# Level field values that mean an error (loghub's Level column, per system).
ERROR_LEVELS = {"ERROR", "FATAL", "SEVERE", "CRITICAL", "error", "crit", "fatal", "emerg", "alert"}
EXCEPTION_IN_CONTENT = re.compile(r"Exception|Traceback")
SUMMARY_HEAD = "[headroom log templates (Drain3)"
GAP_RE = re.compile(r"\[… (\d+) lines?\]")
FOLD_RE = re.compile(r"\[… (\d+) more copies of (?:the line above|the (\d+) lines above), (\d+) in a row\]")


def _log(system: str) -> tuple[str, list[dict], list[dict]]:
    d = corpus_dir("logs")
    base = d / f"{system}_2k.log"
    text = base.read_text(encoding="utf-8")
    with open(f"{base}_templates.csv", newline="", encoding="utf-8") as f:
        templates = list(csv.DictReader(f))
    with open(f"{base}_structured.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return text, templates, rows


def _template_regex(template: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in template.split("<*>")))


@dataclass
class Layout:
    """A compressed log taken apart: the marker, kept lines, gap sizes, folds, summary lines."""

    marker: re.Match
    kept: list[str]
    gaps: list[int]
    folds: list[tuple[int, int]]  # (copies left out, lines per copy)
    summary: list[str]


def _split(out: str) -> Layout:
    lines = out.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    marker = MARKER_RE.fullmatch(lines[0])
    assert marker, lines[0]
    body = lines[1:]
    summary: list[str] = []
    if any(ln.startswith(SUMMARY_HEAD) for ln in body):
        at = next(i for i, ln in enumerate(body) if ln.startswith(SUMMARY_HEAD))
        body, summary = body[:at], body[at + 1 :]
    assert not any(MARKER_RE.search(ln) for ln in body), "one marker only"
    gaps = [int(m.group(1)) for m in (GAP_RE.fullmatch(ln) for ln in body) if m]
    folds = [(int(m.group(1)), int(m.group(2) or 1)) for m in (FOLD_RE.fullmatch(ln) for ln in body) if m]
    kept = [ln for ln in body if not GAP_RE.fullmatch(ln) and not FOLD_RE.fullmatch(ln)]
    return Layout(marker, kept, gaps, folds, summary)


def check_layout(text: str, res, n_lines: int) -> Layout:
    """The invariants of every compressed log: one marker naming the whole text's key, kept
    lines are original lines in order, gaps + folded copies + kept lines = all lines, one
    offload with the text byte for byte."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    lay = _split(res.text)
    key = offload_key(text)
    assert lay.marker.group("key") == key
    pos = 0
    for ln in lay.kept:
        pos = lines.index(ln, pos) + 1
    folded = sum(c * p for c, p in lay.folds)
    assert sum(lay.gaps) + folded + len(lay.kept) == n_lines
    hidden, of = re.fullmatch(r"(\d+) of (\d+) lines.*", lay.marker.group("what")).groups()
    assert int(of) == n_lines and int(hidden) == sum(lay.gaps) + folded
    assert len(res.offloads) == 1 and res.offloads[0].key == key and res.offloads[0].original == text
    return lay


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> OriginalsStore:
    db = tmp_path_factory.mktemp("ccr") / "h.db"
    return OriginalsStore(open_database(f"sqlite:///{db}"), 3600, 1 << 30)


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_template_and_error_line_survives(system, counter, store):
    text, templates, rows = _log(system)
    lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    assert len(lines) == len(rows) == 2000

    res = compress_logs(text, "", counter)
    assert res.changed and res.kind == "log" and res.strategy == "templates", res.reason
    before, after = counter.count(text), counter.count(res.text)
    assert after <= 0.9 * before

    lay = check_layout(text, res, 2000)
    assert lay.summary

    # Every ground-truth template: in a kept line or in a template/count line.
    for t in templates:
        rx = _template_regex(t["EventTemplate"])
        assert any(rx.search(ln) for ln in lines), f"ground truth {t['EventId']} matches no line of the log"
        assert any(rx.search(ln) for ln in lay.kept) or any(rx.search(ln) for ln in lay.summary), (
            f"{system}: template {t['EventId']} {t['EventTemplate']!r} lost"
        )

    # Every error-level line and every line with an error word is represented: kept verbatim,
    # or a repeat of one error (same template and variant) whose first and last lines are kept
    # and whose count is in the summary.
    out_lines = res.text.split("\n")
    errors = [
        lines[int(r["LineId"]) - 1]
        for r in rows
        if r.get("Level", "") in ERROR_LEVELS or EXCEPTION_IN_CONTENT.search(r["Content"])
    ] + [ln for ln in lines if is_error_word_line(ln)]
    missing = [e for e in errors if not represented(e, out_lines)]
    assert not missing, missing[:3]
    # The count lines add up to at least the left-out lines (every left-out line is counted).
    assert sum(int(s.split("×", 1)[0]) for s in lay.summary) >= sum(lay.gaps)

    # The offload is retrievable from a real store, byte for byte.
    key = offload_key(text)
    store.put(key, res.offloads[0].original, res.kind)
    assert store.get(key).text.encode("utf-8") == text.encode("utf-8")


@pytest.mark.parametrize("system", ["HDFS", "Zookeeper"])
def test_same_input_same_bytes(system, counter):
    text, _, _ = _log(system)
    a = compress_logs(text, "why did the leader election fail", counter)
    b = compress_logs(text, "why did the leader election fail", counter)
    assert a.text == b.text and a.reason == b.reason


def test_query_lines_kept(counter):
    text, _, _ = _log("HDFS")
    lines = text.split("\n")
    rx = re.compile(r"(?<![^\W_])verification", re.IGNORECASE)
    hits = [ln for ln in lines if rx.search(ln)]
    assert 0 < len(hits) <= MAX_QUERY
    without = set(_split(compress_logs(text, "", counter).text).kept)
    kept = set(_split(compress_logs(text, "which blocks had verification done?", counter).text).kept)
    assert set(hits) <= kept
    assert not set(hits) <= without  # the query made the difference


def test_drain_config_is_not_read_from_cwd(counter, tmp_path, monkeypatch):
    text, _, _ = _log("Spark")
    expected = compress_logs(text, "", counter).text
    (tmp_path / "drain3.ini").write_text("[DRAIN]\nsim_th = 0.99\ndepth = 9\n[MASKING]\nmasking = []\n")
    monkeypatch.chdir(tmp_path)
    assert compress_logs(text, "", counter).text == expected


def _python_traceback() -> list[str]:
    """A real traceback, raised and formatted here."""
    try:
        json.loads('{"a": [1, 2,, 3]}')
    except json.JSONDecodeError:
        return traceback.format_exc().rstrip("\n").split("\n")
    raise AssertionError("json.loads accepted bad JSON")


# A Java stack trace as Hadoop prints it (hand-made in the shape of the Hadoop log's own
# NoRouteToHostException line, whose loghub sample lost the frames).
JAVA_TRACE = """2015-10-18 18:06:26,139 ERROR [eventHandlingThread] org.apache.hadoop.yarn.YarnUncaughtExceptionHandler: Thread Thread[eventHandlingThread,5,main] threw an Exception.
java.net.NoRouteToHostException: No Route to Host from  MININT-FNANLI5/127.0.0.1 to msra-sa-41:9000 failed on socket timeout exception
\tat sun.reflect.NativeConstructorAccessorImpl.newInstance0(Native Method)
\tat org.apache.hadoop.net.NetUtils.wrapException(NetUtils.java:791)
\tat org.apache.hadoop.ipc.Client.call(Client.java:1472)
Caused by: java.net.NoRouteToHostException: No route to host: no further information
\tat sun.nio.ch.SocketChannelImpl.checkConnect(Native Method)
\t... 23 more"""


def test_stack_traces_stay_attached(counter):
    text, _, _ = _log("Hadoop")
    lines = text.split("\n")[:-1]
    py = ["2015-10-18 18:07:00,001 ERROR [main] worker: job failed"] + _python_traceback()
    java = JAVA_TRACE.split("\n")
    mixed = lines[:700] + py + lines[700:1400] + java + lines[1400:]
    assert trace_end(mixed, 700) == 700 + len(py)
    assert trace_end(mixed, 700 + len(py) + 700) == 700 + len(py) + 700 + len(java)

    res = compress_logs("\n".join(mixed) + "\n", "", counter)
    assert res.changed
    out = res.text
    assert "\n".join(py) in out, "the Python traceback is not kept whole after its error line"
    assert "\n".join(java) in out, "the Java stack trace is not kept whole after its error line"
    assert res.offloads[0].original == "\n".join(mixed) + "\n"


def test_is_error_line():
    assert is_error_line("2015-10-18 18:06:26,029 FATAL [IPC Server handler 13] x: Task exited")
    assert is_error_line("[Sun Dec 04 04:47:44 2005] [error] mod_jk child workerEnv in error state 6")
    assert is_error_line("Dec 10 07:51:15 LabSZ sshd[24324]: error: Received disconnect from 1.2.3.4")
    assert is_error_line("ts=1 level=error msg=boom")
    assert is_error_line("Caused by java.io.IOException: closed")
    assert is_error_line("Traceback (most recent call last):")
    assert is_error_line("ValueError: bad value")
    # error words in any case, inside longer words too
    assert is_error_line("nova INFO wsgi HTTP exception thrown: No instances found")
    assert is_error_line(
        "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 RAS KERNEL INFO instruction cache parity error corrected"
    )
    assert is_error_line("Dec 10 sshd[1]: Failed password for root from 1.2.3.4 port 22 ssh2")
    assert is_error_line("kernel[0]: Sandbox: QQ(12) deny(1) network-outbound: Permission denied")
    assert is_error_line("20171224-1:59:43:574|HiH_HiSyncControl|30002312|syncData() failed, errorCode = -1")
    assert is_error_line("03-17 16:13:38.819  1702  8671 E AndroidRuntime: FATAL EXCEPTION: main")
    assert is_error_line("Kernel panic - not syncing")
    assert is_error_line("npm ERR! code E404")
    assert is_error_line("\tat org.apache.hadoop.ipc.Client.call(Client.java:1472)")
    assert is_error_line('  File "/srv/app/worker.py", line 88, in run')
    assert not is_error_line("2015-10-18 INFO [main] org.apache.hadoop.mapred.Task: Task done")
    assert not is_error_line("081109 INFO dfs.DataNode: Verification succeeded for blk_1")
    assert not is_error_line("20171223-22:15:29:606|Step_LSC|30002312|onStandStepChanged 3579")


def test_templates_are_mined_per_drain3(counter):
    text, templates, rows = _log("HDFS")
    lines = text.split("\n")[:-1]
    cluster_of, mined, variants = mine_templates(lines)
    assert len(cluster_of) == 2000 and all(c >= 0 for c in cluster_of)
    assert sum(t.count for t in mined) == 2000
    # Drain3 finds about as many templates as the ground truth (14 for HDFS).
    assert len(templates) <= len(mined) <= 2 * len(templates)
    assert set(t.first for t in mined) <= set(variants)


def test_unchanged_reasons(counter):
    text, _, _ = _log("Apache")
    lines = text.split("\n")
    assert compress_logs("\n".join(lines[:5]), "", counter).reason == "small"
    few = "\n".join(lines[:3]) + "\n" + "x " * 400
    assert compress_logs(few, "", counter, min_tokens=10).reason == "few lines"
    # Lines all distinct enough to keep (each an anchor, an error of its own kind, or a template)
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()
    errors_only = "\n".join(
        f"[Sun Dec 04 04:47:{k:02d} 2005] [error] stage {w} failed: {w.upper()} unavailable"
        for k, w in enumerate(words)
    )
    r = compress_logs(errors_only, "", counter, min_tokens=10)
    assert not r.changed and r.reason == "nothing to drop" and r.text == errors_only
    # but the same error many times is shown by its first and last lines, its count summarised
    same = [ln for ln in lines if "[error] mod_jk child workerEnv in error state 6" in ln]
    r = compress_logs("\n".join(same), "", counter, min_tokens=10)
    out = r.text.split("\n")
    shown = [ln for ln in out if ln in same]
    assert r.changed and len(same) == 369 and len(shown) <= 12  # the first error lines and the last (anchors)
    assert out[1] == same[0] and out[-3] == same[-1]
    assert out[-1] == "369× mod_jk child workerEnv in error state <NUM>"
    assert compress_logs("", "", counter).reason == "not text"
    assert compress_logs("\ud800 bad", "", counter).reason == "small"  # a lone surrogate is text too


def test_crlf_lines_round_trip(counter):
    text, _, _ = _log("OpenSSH")
    crlf = text.replace("\n", "\r\n")
    res = compress_logs(crlf, "", counter)
    assert res.changed
    assert res.offloads[0].original == crlf
    assert "\n" not in res.text.replace("\r\n", "")  # the text's own line ends throughout
    originals = crlf.split("\r\n")
    for ln in _split(res.text.replace("\r\n", "\n")).kept:
        assert ln in originals
    assert find_marker_keys(res.text) and set(find_marker_keys(res.text)) == {offload_key(crlf)}
