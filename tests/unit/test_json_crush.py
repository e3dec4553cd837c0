"""compress_json on real GitHub API payloads (../shared/corpus/github-api)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from headroom_core.compress.json_crush import TABLE_KEY, compress_json, decode_table, encode_tables
from headroom_core.compress.json_select import query_words, select_items
from headroom_core.compress.markers import MARKER_RE, offload_key
from headroom_core.compress.tokens import TokenCounter

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
GITHUB = CORPUS / "github-api"


def _need_corpus() -> None:
    if not GITHUB.is_dir():
        pytest.skip(f"real-input corpus folder {GITHUB} is absent")


def _load(name: str) -> list[dict]:
    _need_corpus()
    return json.loads((GITHUB / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def counter(tmp_path_factory) -> TokenCounter:
    return TokenCounter(tmp_path_factory.mktemp("headroom-home"))


def _issues() -> list[dict]:
    """The 13 issues created in the paginate-issues scenario (real POST responses), in order."""
    return [e["response"] for e in _load("paginate-issues.json") if e["method"] == "post" and "number" in e["response"]]


def _decoded(result_text: str) -> object:
    return decode_table(json.loads(result_text))


def _shown_and_markers(items: list[object]) -> tuple[list[dict], list[re.Match]]:
    shown = [x for x in items if isinstance(x, dict)]
    markers = [MARKER_RE.fullmatch(x) for x in items if isinstance(x, str)]
    assert all(markers), [x for x in items if isinstance(x, str)]
    return shown, markers


def _check_markers(markers: list[re.Match], shown: int, total: int, text: str) -> None:
    key = offload_key(text)
    dropped = 0
    for m in markers:
        n, of = re.fullmatch(r"(\d+) of (\d+) items", m.group("what")).groups()
        assert int(of) == total
        dropped += int(n)
        assert m.group("key") == key
    assert dropped + shown == total


# --- the corpus files as tool outputs ---------------------------------------------------------


@pytest.mark.parametrize("name", ["git-refs.json", "labels.json", "paginate-issues.json", "search-issues.json"])
@pytest.mark.parametrize("indent", [2, None])
def test_corpus_file_shrinks_and_stays_json(name, indent, counter):
    doc = _load(name)
    text = json.dumps(doc, indent=indent)
    res = compress_json(text, "", counter)
    before, after = counter.count(text), counter.count(res.text)
    print(f"{name} indent={indent}: {before} -> {after} tokens ({after / before:.2f}) {res.strategy}: {res.reason}")
    assert res.changed and res.kind == "json"
    assert after <= before * 0.9
    out = _decoded(res.text)
    assert isinstance(out, list)
    if res.strategy == "crush":
        assert len(res.offloads) == 1
        off = res.offloads[0]
        assert off.original == text and off.key == offload_key(text)
        keys = {m.group("key") for m in MARKER_RE.finditer(res.text)}
        assert keys == {off.key}
        # the exchanges array: the first two and the last exchange survive (their own long
        # arrays, such as rawHeaders, may be crushed inside them)
        for i in (0, 1, -1):
            assert {k: out[i][k] for k in ("method", "path", "status")} == {
                k: doc[i][k] for k in ("method", "path", "status")
            }


@pytest.mark.parametrize("name", ["git-refs.json", "labels.json", "paginate-issues.json", "search-issues.json"])
def test_table_encoding_is_lossless_on_every_file(name):
    doc = _load(name)
    enc = json.loads(json.dumps(encode_tables(doc), ensure_ascii=False))
    assert TABLE_KEY in json.dumps(enc)
    assert decode_table(enc) == doc


def test_each_response_lossless_when_small(counter):
    seen = set()
    for name in ["git-refs.json", "labels.json", "paginate-issues.json", "search-issues.json"]:
        for e in _load(name):
            resp = e["response"]
            if not isinstance(resp, (list, dict)):
                continue
            text = json.dumps(resp, indent=2)
            res = compress_json(text, "", counter)
            seen.add(res.strategy)
            if res.changed:
                assert res.strategy in ("minify", "table") and res.offloads == ()
                assert _decoded(res.text) == resp
                assert counter.count(res.text) <= counter.count(text) * 0.9
            else:
                assert res.reason == "small"
    assert {"minify", "table", "unchanged"} <= seen


def test_labels_page_is_a_table(counter):
    labels = _load("labels.json")[1]["response"]
    assert len(labels) == 9
    text = json.dumps(labels, indent=2)
    res = compress_json(text, "", counter)
    before, after = counter.count(text), counter.count(res.text)
    print(f"labels page: {before} -> {after} tokens")
    assert res.strategy == "table" and res.offloads == ()
    table = json.loads(res.text)[TABLE_KEY]
    assert "name" in table["columns"] and len(table["rows"]) == 9
    assert [r[table["columns"].index("name")] for r in table["rows"]] == [x["name"] for x in labels]
    assert decode_table(json.loads(res.text)) == labels
    assert after < before * 0.75


def test_issue_page_table_shares_constant_fields(counter):
    page = _load("paginate-issues.json")[14]["response"]
    res = compress_json(json.dumps(page, indent=2), "", counter)
    assert res.strategy == "table"
    body = json.loads(res.text)[TABLE_KEY]
    assert body["same"]["user"]["login"] == "octokit-fixture-user-a"
    assert "user" not in body["columns"] and "title" in body["columns"]
    assert decode_table(json.loads(res.text)) == page


# --- crushing: what survives ----------------------------------------------------------------


def _doctored_issues() -> tuple[list[dict], dict[str, int]]:
    """13 real issues; one closed, one with an error field, one with a comment-count outlier."""
    issues = copy.deepcopy(_issues())
    assert [i["number"] for i in issues] == list(range(1, 14))
    assert {i["state"] for i in issues} == {"open"}
    closed = issues[5]
    closed.update(state="closed", state_reason="completed", closed_at="2022-07-19T05:00:00Z")
    issues[7]["error"] = "Validation Failed: body is too long (maximum is 65536 characters)"
    issues[9]["comments"] = 250
    return issues, {"closed": 6, "error": 8, "outlier": 10}


@pytest.mark.parametrize("indent", [2, None])
def test_crush_keeps_anchors_errors_rare_and_outliers(indent, counter):
    issues, which = _doctored_issues()
    text = json.dumps(issues, indent=indent)
    res = compress_json(text, "", counter)
    before, after = counter.count(text), counter.count(res.text)
    print(f"13 issues indent={indent}: {before} -> {after} tokens: {res.reason}")
    assert res.strategy == "crush" and after < before * 0.9
    out = _decoded(res.text)
    shown, markers = _shown_and_markers(out)
    by_number = {i["number"]: i for i in shown}
    for n in (1, 2, 13, *which.values()):
        assert by_number[n] == issues[n - 1], n
    assert by_number[which["error"]]["error"].startswith("Validation Failed")
    assert by_number[which["closed"]]["state"] == "closed"
    assert by_number[which["outlier"]]["comments"] == 250
    assert len(shown) < 13 and markers
    _check_markers(markers, len(shown), 13, text)
    assert len(res.offloads) == 1 and res.offloads[0].original == text
    assert res.offloads[0].key == offload_key(text)
    assert res.offloads[0].what == f"{13 - len(shown)} of 13 items"
    for word in ("error", "outlier", "rare"):
        assert word in res.reason
    # items keep their order
    assert [i["number"] for i in shown] == sorted(by_number)


def test_crushed_table_keeps_markers_as_rows(counter):
    issues, which = _doctored_issues()
    for it in issues:  # same keys everywhere again, so the kept items can be a table
        it.pop("error", None)
    text = json.dumps(issues, indent=2)
    res = compress_json(text, "", counter)
    assert res.strategy == "crush"
    body = json.loads(res.text)[TABLE_KEY]
    assert any(isinstance(r, str) for r in body["rows"])
    # "same" only holds what all 13 originals share, not what the kept ones happen to share
    for k, v in body.get("same", {}).items():
        assert all(i[k] == v for i in issues), k
    shown, markers = _shown_and_markers(decode_table(json.loads(res.text)))
    _check_markers(markers, len(shown), 13, text)
    for it in shown:
        assert it == issues[it["number"] - 1]
    assert {1, 2, 13, which["closed"], which["outlier"]} <= {i["number"] for i in shown}


def test_nested_results_and_query_match(counter):
    search = _load("search-issues.json")[3]["response"]
    real_hits = search["items"]
    assert len(real_hits) == 2
    items = []
    for it in _issues():
        items.append(dict(it, score=1.0))
    items.insert(5, real_hits[0])
    items.insert(10, real_hits[1])
    payload = {"data": {"total_count": len(items), "incomplete_results": False, "results": items}}
    text = json.dumps(payload, indent=2)
    query = "Why do the sesame seeds not pop?"
    assert query_words(query) == ("sesame", "seeds", "pop")
    res = compress_json(text, query, counter)
    print(f"search payload: {counter.count(text)} -> {counter.count(res.text)} tokens: {res.reason}")
    assert res.strategy == "crush" and "query" in res.reason
    out = _decoded(res.text)
    assert out["data"]["total_count"] == 15 and out["data"]["incomplete_results"] is False
    shown, markers = _shown_and_markers(out["data"]["results"])
    titles = [i["title"] for i in shown]
    assert real_hits[0]["title"] in titles and real_hits[1]["title"] in titles
    assert real_hits[0] in shown and real_hits[1] in shown
    _check_markers(markers, len(shown), 15, text)


def test_query_words_of_a_pasted_log_are_its_distinct_words_in_order():
    # a user message holding a pasted log or file (here 12,000 distinct words, each three
    # times): every word once, where it first appears; short words and stopwords left out
    words = [f"w{i:05d}x" for i in range(12000)]
    query = " ".join(words + ["the", "an", "and"] + list(reversed(words)) + [w.upper() for w in words])
    got = query_words(query)
    assert got == tuple(words)
    assert query_words(query) == got  # asked again (every compressor asks): the same words


def test_query_word_common_to_all_items_does_not_pin_everything():
    issues = _issues()
    sel = select_items(issues, query_words("show me test issue 7"))
    assert "query" not in sel.counts()
    assert sel.keep == (0, 1, 12)


def test_array_of_strings_keeps_failures(counter):
    # every URL template of the real repository object, one per line, like a tool listing them
    repo = _load("paginate-issues.json")[0]["response"]
    lines = [v for k, v in repo.items() if k.endswith("_url") and isinstance(v, str)]
    assert len(lines) >= 30
    lines.insert(17, "fatal: could not read from remote repository")
    text = json.dumps({"lines": lines}, indent=2)
    res = compress_json(text, "", counter, min_tokens=100)
    assert res.strategy == "crush"
    out = json.loads(res.text)["lines"]
    assert "fatal: could not read from remote repository" in out
    assert out[0] == lines[0] and out[1] == lines[1] and out[-1] == lines[-1]
    shown = [x for x in out if not MARKER_RE.fullmatch(x)]
    _check_markers([MARKER_RE.fullmatch(x) for x in out if MARKER_RE.fullmatch(x)], len(shown), len(lines), text)


def test_status_codes_of_400_and_up_survive(counter):
    exchanges = _load("paginate-issues.json")
    doctored = copy.deepcopy(exchanges)
    doctored[8]["status"] = 422
    text = json.dumps(doctored, indent=2)
    res = compress_json(text, "", counter)
    assert res.strategy == "crush"
    shown, markers = _shown_and_markers(_decoded(res.text))
    failed = [e for e in shown if e["status"] == 422]
    assert len(failed) == 1 and failed[0]["body"] == {"title": "Test issue 8"}
    assert failed[0]["response"] == doctored[8]["response"]
    _check_markers(markers, len(shown), len(doctored), text)


# --- determinism, unchanged cases -------------------------------------------------------------


def test_same_input_same_bytes(counter, tmp_path):
    issues, _ = _doctored_issues()
    text = json.dumps({"items": issues}, indent=2)
    a = compress_json(text, "closed issue comments", counter)
    b = compress_json(text, "closed issue comments", counter)
    c = compress_json(text, "closed issue comments", TokenCounter(tmp_path))
    assert a == b == c
    assert a.text.encode() == c.text.encode()


@pytest.mark.parametrize(
    "text,reason",
    [
        ("", "not json"),
        ("   ", "not json"),
        ("hello, this is not JSON at all", "not json"),
        ('{"a": 1, "b": [1, 2', "not json"),
        ("42", "scalar"),
        ('"a string"', "scalar"),
        ("null", "scalar"),
        ("[]", "small"),
        ("{}", "small"),
        ('{"a": 1, "a": 2}', "duplicate keys"),
        ("[1.00000000000000000000001]", "number not representable"),
        ("[1e999]", "number not representable"),
    ],
)
def test_unchanged_inputs(text, reason, counter):
    res = compress_json(text, "query", counter)
    assert not res.changed and res.text == text and res.reason == reason and res.offloads == ()
    assert res.strategy == "unchanged"


def test_large_non_json_and_deep_nesting_do_not_raise(counter):
    log = (CORPUS / "logs" / "HDFS_2k.log") if CORPUS.is_dir() else None
    text = log.read_text(encoding="utf-8")[:20000] if log and log.is_file() else "x " * 5000
    assert compress_json(text, "", counter).reason == "not json"
    deep = "[" * 5000 + "]" * 5000
    res = compress_json(deep, "", counter)
    assert not res.changed


def test_small_real_payload_is_left_alone(counter):
    label = _load("labels.json")[2]["response"]
    text = json.dumps(label, indent=2)
    res = compress_json(text, "", counter)
    assert not res.changed and res.reason == "small" and res.text == text


def test_compact_object_without_arrays_is_no_gain(counter):
    repo = _load("git-refs.json")[0]["response"]
    text = json.dumps(repo, ensure_ascii=False, separators=(",", ":"))
    res = compress_json(text, "", counter)
    assert not res.changed and res.reason == "no gain" and res.text == text


def test_pretty_object_is_minified(counter):
    repo = _load("git-refs.json")[0]["response"]
    text = json.dumps(repo, indent=2)
    res = compress_json(text, "", counter)
    assert res.strategy == "minify" and json.loads(res.text) == repo and res.offloads == ()


def test_text_naming_the_table_key_is_never_table_encoded(counter):
    labels = copy.deepcopy(_load("labels.json")[1]["response"])
    labels[0]["description"] = "mentions headroom_table"
    res = compress_json(json.dumps(labels, indent=2), "", counter)
    assert res.changed and TABLE_KEY + '":' not in res.text


def test_lone_surrogates_never_break_utf8(counter):
    labels = copy.deepcopy(_load("labels.json")[1]["response"])
    labels[3]["description"] = "half an emoji \ud83d"
    escaped = json.dumps(labels, indent=2)  # the surrogate as a \\ud83d escape, as JSON allows
    res = compress_json(escaped, "", counter)
    assert res.changed
    res.text.encode("utf-8")
    assert decode_table(json.loads(res.text)) == labels
    raw = json.dumps(labels, indent=2, ensure_ascii=False)  # the surrogate itself: no UTF-8 form
    res = compress_json(raw, "", counter)
    assert res.changed and "half an emoji \\ud83d" in res.text  # compressed all the same, escaped
    assert decode_table(json.loads(res.text)) == labels
