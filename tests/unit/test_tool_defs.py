"""Tests for headroom_core.tools.minify: tool-definition minification and dedupe."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from headroom_core.tools.minify import (
    REFERENCE_PREFIX,
    ToolsResult,
    expand_references,
    minify_tools,
    normalize_description,
)

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
FLOWS = CORPUS / "anthropic-flows"
REPO = Path(__file__).resolve().parents[2]

_SUBSCHEMA_KEYS = (
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "items",
)
_SUBSCHEMA_LIST_KEYS = ("anyOf", "oneOf", "allOf", "prefixItems", "items")
_SUBSCHEMA_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def flow_tools() -> list[tuple[str, list]]:
    if not FLOWS.is_dir():
        pytest.skip(f"real-input corpus not found: {FLOWS} (the ../shared/corpus folder beside the repo)")
    out = []
    for path in sorted(FLOWS.glob("session-a-*.json")):
        body = json.loads(path.read_text(encoding="utf-8"))["request"]["body"]
        if isinstance(body, dict) and body.get("tools"):
            out.append((path.name, body["tools"]))
    assert out, f"no request with tools in {FLOWS}"
    return out


@pytest.fixture(scope="module")
def corpus():
    return flow_tools()


# --- structural projections -------------------------------------------------------------------


def projection(schema):
    """The schema without the keys minification may drop or rewrite (description, title, $schema)."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("description", "title", "$schema"):
            continue
        if key in _SUBSCHEMA_MAP_KEYS and isinstance(value, dict):
            value = {k: projection(v) for k, v in value.items()}
        elif key in _SUBSCHEMA_LIST_KEYS and isinstance(value, list):
            value = [projection(v) for v in value]
        elif key in _SUBSCHEMA_KEYS and isinstance(value, dict):
            value = projection(value)
        out[key] = value
    return out


def descriptions(schema, path=()):
    """``{path: description}`` for every description keyword of a schema."""
    found = {}
    if not isinstance(schema, dict):
        return found
    for key, value in schema.items():
        if key == "description" and isinstance(value, str):
            found[path] = value
        elif key in _SUBSCHEMA_MAP_KEYS and isinstance(value, dict):
            for k, v in value.items():
                found.update(descriptions(v, path + (key, k)))
        elif key in _SUBSCHEMA_LIST_KEYS and isinstance(value, list):
            for i, v in enumerate(value):
                found.update(descriptions(v, path + (key, i)))
        elif key in _SUBSCHEMA_KEYS and isinstance(value, dict):
            found.update(descriptions(value, path + (key,)))
    return found


def params(schema, prefix=""):
    """Every parameter name (dotted), type, enum, required, default and format of a schema."""
    out = []
    if not isinstance(schema, dict):
        return out
    out.append(
        (
            prefix,
            schema.get("type"),
            schema.get("enum"),
            schema.get("required"),
            schema.get("default"),
            schema.get("format"),
        )
    )
    for name, sub in (schema.get("properties") or {}).items():
        out.extend(params(sub, f"{prefix}.{name}"))
    if isinstance(schema.get("items"), dict):
        out.extend(params(schema["items"], prefix + "[]"))
    return out


# --- the corpus -------------------------------------------------------------------------------


def test_corpus_structure_kept(corpus):
    for fname, tools in corpus:
        res = minify_tools(tools)
        assert isinstance(res, ToolsResult)
        assert [t["name"] for t in res.tools] == [t["name"] for t in tools], fname
        for orig, new in zip(tools, res.tools):
            assert set(new) <= set(orig), (fname, orig["name"])
            assert projection(new["input_schema"]) == projection(orig["input_schema"]), (fname, orig["name"])
            # Key order too: the projection serialises identically.
            assert dumps(projection(new["input_schema"])) == dumps(projection(orig["input_schema"]))
            assert params(new["input_schema"]) == params(orig["input_schema"]), (fname, orig["name"])
            assert "$schema" not in dumps(new["input_schema"]).replace('"$schema":{', "")


def test_corpus_words_kept_without_dedupe(corpus):
    for fname, tools in corpus:
        res = minify_tools(tools, dedupe=False)
        for orig, new in zip(tools, res.tools):
            assert new.get("description", "").split() == orig.get("description", "").split(), (fname, orig["name"])
            od, nd = descriptions(orig["input_schema"]), descriptions(new["input_schema"])
            for path, text in od.items():
                if text.split():
                    assert nd[path].split() == text.split(), (fname, orig["name"], path)
                else:
                    assert path not in nd  # empty descriptions are dropped
            assert set(nd) <= set(od)


def test_corpus_smaller_and_deterministic(corpus):
    by_input: dict[str, str] = {}
    for fname, tools in corpus:
        before = dumps(tools)
        snapshot = copy.deepcopy(tools)
        for dedupe in (False, True):
            first = minify_tools(tools, dedupe=dedupe)
            second = minify_tools(tools, dedupe=dedupe)
            assert dumps(first.tools) == dumps(second.tools), fname
            assert json.dumps(first.tools) == json.dumps(second.tools), fname
            assert len(dumps(first.tools)) <= len(before), fname
            assert len(json.dumps(first.tools)) <= len(json.dumps(tools)), fname
            # Minifying the minified output changes nothing further.
            again = minify_tools(first.tools, dedupe=dedupe)
            assert dumps(again.tools) == dumps(first.tools), fname
        assert tools == snapshot, f"{fname}: input mutated"
        out = dumps(minify_tools(tools).tools)
        # Identical input tools on two turns give identical output bytes.
        assert by_input.setdefault(before, out) == out, fname
    # The session really does repeat its tools turn after turn.
    assert len(by_input) < len(corpus)


def test_corpus_changes_and_saves(corpus):
    fname, tools = max(corpus, key=lambda c: len(c[1]))
    plain = minify_tools(tools, dedupe=False)
    deduped = minify_tools(tools)
    assert plain.changed and deduped.changed
    assert plain.changed_names == tuple(t["name"] for t, n in zip(tools, plain.tools) if t is not n)
    # Untouched entries are the same objects.
    for orig, new in zip(tools, plain.tools):
        assert (orig is new) == (orig["name"] not in plain.changed_names)
    assert len(dumps(deduped.tools)) < len(dumps(plain.tools)) < len(dumps(tools))
    # The real session carries MCP boilerplate: zen's model notes, desktop-commander's path notes.
    text = dumps(deduped.tools)
    assert REFERENCE_PREFIX + "mcp__zen__chat param model:" in text
    assert REFERENCE_PREFIX + "mcp__desktop-commander-mcp__read_file description:" in text


def test_corpus_dedupe_round_trip(corpus):
    seen = set()
    for fname, tools in corpus:
        key = dumps(tools)
        if key in seen:
            continue
        seen.add(key)
        plain = minify_tools(tools, dedupe=False).tools
        deduped = minify_tools(tools).tools
        assert expand_references(deduped) == plain, fname
        assert dumps(expand_references(deduped)) == dumps(plain), fname


def test_corpus_openai_shapes(corpus):
    fname, tools = max(corpus, key=lambda c: len(c[1]))
    anth = minify_tools(tools).tools
    chat = [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]},
        }
        for t in tools
    ]
    resp = [
        {
            "type": "function",
            "name": t["name"],
            "description": t["description"],
            "parameters": t["input_schema"],
            "strict": False,
        }
        for t in tools
    ]
    chat_out = minify_tools(chat).tools
    resp_out = minify_tools(resp).tools
    for a, c, r in zip(anth, chat_out, resp_out):
        assert c["type"] == "function" and r["type"] == "function" and r["strict"] is False
        assert c["function"]["name"] == r["name"] == a["name"]
        assert c["function"].get("description") == r.get("description") == a.get("description")
        assert c["function"]["parameters"] == r["parameters"] == a["input_schema"]
    assert expand_references(chat_out) == minify_tools(chat, dedupe=False).tools
    assert expand_references(resp_out) == minify_tools(resp, dedupe=False).tools


def test_deterministic_across_processes(corpus):
    fname, _tools = max(corpus, key=lambda c: len(c[1]))
    script = (
        "import hashlib, json, sys\n"
        "from headroom_core.tools.minify import minify_tools\n"
        "tools = json.load(open(sys.argv[1], encoding='utf-8'))['request']['body']['tools']\n"
        "out = minify_tools(tools).tools\n"
        "print(hashlib.sha256(json.dumps(out, ensure_ascii=False, separators=(',', ':')).encode()).hexdigest())\n"
    )
    digests = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run(
            [sys.executable, "-c", script, str(FLOWS / fname)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        digests.add(proc.stdout.strip())
    tools = json.loads((FLOWS / fname).read_text(encoding="utf-8"))["request"]["body"]["tools"]
    digests.add(hashlib.sha256(dumps(minify_tools(tools).tools).encode()).hexdigest())
    assert len(digests) == 1


# --- pass-through -----------------------------------------------------------------------------


def test_unknown_and_server_tools_pass_as_same_object():
    messy = "  Run it.\n\n\n\n  Carefully.  "
    entries = [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250124", "name": "str_replace_editor"},
        {"type": "computer_20241022", "name": "computer", "display_width_px": 1024, "display_height_px": 768},
        {"type": "web_search_preview"},  # OpenAI Responses built-in
        {"type": "custom", "name": "grammar_tool", "description": messy, "format": {"type": "text"}},
        {"type": "function", "function": "not a dict", "description": messy},
        {"type": "function", "function": {"description": messy}},  # no name
        {"description": messy, "input_schema": {"type": "object"}},  # no name
        {"name": 42, "description": messy},
        "a string",
        None,
        7,
        ["nested"],
        {"name": "mcp__srv__tool", "description": messy, "input_schema": {"$schema": "x", "type": "object"}},
    ]
    res = minify_tools(entries, exclude=("mcp__*",))
    assert res.changed is False and res.changed_names == ()
    assert res.tools is entries
    for a, b in zip(entries, res.tools):
        assert a is b


def test_excluded_mixed_with_minified():
    messy = "Do   the thing.\n\n\n\nThen  stop.  "
    tools = [
        {"name": "mcp__srv__a", "description": messy, "input_schema": {"type": "object"}},
        {"name": "Read", "description": messy, "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search"},
    ]
    res = minify_tools(tools, exclude=("mcp__*", "nothing?"))
    assert res.changed and res.changed_names == ("Read",)
    assert res.tools is not tools
    assert res.tools[0] is tools[0] and res.tools[2] is tools[2]
    assert res.tools[1]["description"] == "Do the thing.\n\nThen stop."
    assert tools[1]["description"] == messy  # input untouched
    # Globs are case-sensitive on every OS.
    assert minify_tools(tools, exclude=("READ",)).changed_names == ("mcp__srv__a", "Read")


def test_non_list_tools_unchanged():
    for value in (None, {"name": "x"}, "tools", 3):
        res = minify_tools(value)
        assert res.tools is value and not res.changed and res.reason == "tools is not a list"
    res = minify_tools([])
    assert res.tools == [] and not res.changed


def test_already_minimal_returns_same_list():
    tools = [{"name": "Read", "description": "Reads a file.", "input_schema": {"type": "object"}}]
    res = minify_tools(tools)
    assert res.tools is tools and res.tools[0] is tools[0] and not res.changed


# --- schema rules -----------------------------------------------------------------------------


def test_schema_keywords_dropped_and_kept():
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "get_user_infoArguments",
        "type": "object",
        "properties": {
            "repo_path": {"title": "Repo Path", "type": "string", "description": ""},
            "maxCount": {"title": "Max count", "type": "integer", "default": 10, "minimum": 1},
            "mode": {"title": "How to run", "type": "string", "enum": ["a", "b"], "description": "  The   mode. "},
            # Parameters *named* like keywords are parameters, not keywords.
            "title": {"type": "string", "title": "Title"},
            "description": {"type": "string", "description": "   "},
            "$schema": {"type": "string", "format": "uri"},
            "nested": {
                "type": "object",
                "properties": {
                    "deep_one": {
                        "title": "Deep One",
                        "type": "array",
                        "items": {"type": "string", "title": "Item", "description": ""},
                    }
                },
                "additionalProperties": False,
            },
            "choice": {"anyOf": [{"type": "string", "description": "a  b"}, {"type": "null"}]},
            "data": {"type": "object", "default": {"title": "x", "description": "", "$schema": "y"}},
        },
        "required": ["repo_path"],
        "additionalProperties": False,
    }
    tools = [{"name": "mcp__reddit__get_user_info", "description": "Get info.", "input_schema": schema}]
    snapshot = copy.deepcopy(tools)
    out = minify_tools(tools).tools[0]["input_schema"]
    assert tools == snapshot
    assert out == {
        "type": "object",
        "properties": {
            "repo_path": {"type": "string", "description": ""},  # no words: left as written
            "maxCount": {"type": "integer", "default": 10, "minimum": 1},
            "mode": {"title": "How to run", "type": "string", "enum": ["a", "b"], "description": "The mode."},
            "title": {"type": "string"},
            "description": {"type": "string", "description": "   "},
            "$schema": {"type": "string", "format": "uri"},
            "nested": {
                "type": "object",
                "properties": {
                    "deep_one": {"type": "array", "items": {"type": "string", "title": "Item", "description": ""}}
                },
                "additionalProperties": False,
            },
            "choice": {"anyOf": [{"type": "string", "description": "a b"}, {"type": "null"}]},
            "data": {"type": "object", "default": {"title": "x", "description": "", "$schema": "y"}},
        },
        "required": ["repo_path"],
        "additionalProperties": False,
    }
    # Key order of what stays is the original order.
    assert list(out) == ["type", "properties", "required", "additionalProperties"]


@pytest.mark.parametrize(
    "title,dropped",
    [
        ("GitStatus", True),
        ("git_status", True),
        ("GitStatusRequest", True),
        ("git_statusArguments", True),
        ("mcp__git__git_status", True),
        ("Repository status", False),
        ("GitStatusResult", False),
    ],
)
def test_root_title(title, dropped):
    tools = [{"name": "mcp__git__git_status", "input_schema": {"title": title, "type": "object"}}]
    out = minify_tools(tools).tools[0]["input_schema"]
    assert ("title" not in out) == dropped


def test_description_without_words_left_as_written():
    tools = [
        {
            "name": "X",
            "description": " \n\n ",
            "input_schema": {"type": "object", "properties": {"a": {"description": "\t"}}},
        }
    ]
    res = minify_tools(tools)
    assert res.tools is tools and not res.changed


# --- whitespace -------------------------------------------------------------------------------


def test_normalize_docstring_and_lists():
    text = (
        "\n                        Read a file.\n                        \n"
        "                        Supports:\n                        - 'offset'   (start line)\n"
        "                          * Positive: from line N   \n\n\n\n"
        "                        Done.\n                        "
    )
    assert normalize_description(text) == (
        "Read a file.\n\nSupports:\n- 'offset' (start line)\n  * Positive: from line N\n\nDone."
    )
    doc = "Get posts.\n\n    Args:\n        limit:  Number (1-100)\n\n    Returns:\n        dict\n"
    assert normalize_description(doc) == "Get posts.\n\nArgs:\n    limit: Number (1-100)\n\nReturns:\n    dict"
    # A flush paragraph later in the text means no docstring margin: indentation stays.
    md = "Run:\n\n    npm install\n\nThen go."
    assert normalize_description(md) == md


def test_normalize_keeps_fenced_code():
    text = 'Example:\n```json\n{\n  "a":    1,   \n    "b": [1,  2]\n}\n```\nAfter    fence.'
    assert normalize_description(text) == ('Example:\n```json\n{\n  "a":    1,\n    "b": [1,  2]\n}\n```\nAfter fence.')


def test_normalize_keeps_words_and_crlf():
    text = "\tA\r\n\r\n\r\nB\t\tC  \rD"
    out = normalize_description(text)
    assert out == "A\n\nB C\nD"
    assert out.split() == text.split()
    assert normalize_description("") == "" and normalize_description(" \n\t ") == ""


# --- dedupe -----------------------------------------------------------------------------------

NOTE = (
    "IMPORTANT: Always use absolute paths for reliability. Paths are automatically normalized "
    "regardless of slash direction. Relative paths may fail as they depend on the current working "
    "directory. Unless the user explicitly asks for relative paths, use absolute paths."
)
NOTE2 = 'This command can be referenced as "SRV: ..." in your instructions, and it reports errors as text.'
MODEL_NOTES = (
    "Models available:\n- 'alpha': fast, 1M context, good for quick questions and short edits\n"
    "- 'beta': slow, 200K context, deep reasoning for hard debugging and architecture work\n"
    "- 'gamma': local, 32K context, private and free, fine for summaries"
)


def mcp_tools() -> list:
    return [
        {
            "name": "mcp__srv__read",
            "description": f"Read a file.\n\n{NOTE}\n\n{NOTE2}",
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "model": {"type": "string", "description": f"Which model.\n\n{MODEL_NOTES}"},
                },
            },
        },
        {
            "name": "mcp__srv__write",
            "description": f"Write a file.\n\n{NOTE}\n\n{NOTE2}",
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "model": {"type": "string", "description": f"Which model.\n\n{MODEL_NOTES}"},
                },
            },
        },
        {"type": "web_search_20250305", "name": "web_search"},
        {
            "name": "mcp__srv__list",
            "description": f"List a directory.\n\n{NOTE}\n\nShort tail.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    ]


def test_dedupe_synthetic_mcp():
    tools = mcp_tools()
    snapshot = copy.deepcopy(tools)
    res = minify_tools(tools)
    assert tools == snapshot
    assert res.changed and res.changed_names == ("mcp__srv__write", "mcp__srv__list")
    assert res.tools[0] is tools[0] and res.tools[2] is tools[2]
    write, lst = res.tools[1], res.tools[3]
    assert write["description"] == (
        "Write a file.\n\n[same text as in mcp__srv__read description: "
        '"IMPORTANT: Always use absolute paths for reliability. Paths…" (2 paragraphs)]'
    )
    assert lst["description"] == (
        "List a directory.\n\n[same text as in mcp__srv__read description: "
        '"IMPORTANT: Always use absolute paths for reliability. Paths…"]\n\nShort tail.'
    )
    # The run of paragraphs starts at the first shared one (even a short one) and is referenced as a whole.
    assert write["input_schema"]["properties"]["model"]["description"] == (
        '[same text as in mcp__srv__read param model: "Which model.…" (2 paragraphs)]'
    )
    assert "2 repeated" not in res.reason and "3 repeated passages referenced" in res.reason
    # Exactly recoverable.
    assert expand_references(res.tools) == minify_tools(tools, dedupe=False).tools == tools
    # Off means every word stays.
    assert minify_tools(tools, dedupe=False).changed is False


def test_dedupe_respects_threshold_and_saving():
    tools = mcp_tools()
    assert minify_tools(tools, dedupe_min_chars=10_000).changed is False
    short = "Short shared note that is repeated but is not long enough."
    small = [{"name": f"t{i}", "description": f"Tool {i}.\n\n{short}"} for i in range(3)]
    assert minify_tools(small, dedupe_min_chars=10).changed is False  # reference would not be shorter


def test_dedupe_not_within_one_tool_and_not_excluded():
    one = [{"name": "solo", "description": f"{NOTE}\n\nMiddle.\n\n{NOTE}"}]
    assert minify_tools(one).changed is False
    tools = mcp_tools()
    res = minify_tools(tools, exclude=("mcp__srv__read",))
    assert res.tools[0] is tools[0]
    # The first non-excluded tool becomes the source.
    assert res.changed_names == ("mcp__srv__list",)
    assert "[same text as in mcp__srv__write description:" in res.tools[3]["description"]


def test_dedupe_skipped_when_reference_text_already_present():
    tools = mcp_tools()
    tools[3]["description"] += f'\n\n{REFERENCE_PREFIX}x description: "y…"]'
    res = minify_tools(tools)
    assert "dedupe skipped" in res.reason
    assert REFERENCE_PREFIX not in dumps(res.tools[:2])


def test_dedupe_reference_is_deterministic_with_reordered_lists():
    tools = mcp_tools()
    rev = [tools[3], tools[2], tools[1], tools[0]]
    out = minify_tools(rev).tools
    # The first tool in list order holds the text; the others name it.
    assert NOTE in out[0]["description"]
    assert "[same text as in mcp__srv__list description:" in out[2]["description"]
    assert expand_references(out) == rev
