"""Fuzzing the proxy: ``hypothesis`` strategies for request bodies of the three dialects, the
upstream's replies, and the oracle that judges what reached the upstream.

A :class:`Case` is the exact bytes a client sends (``body``) to a dialect's path, with what the
generator knows about it. Bodies are written by our own small JSON writer so that numbers keep
the literal text chosen for them (``1e400``, ``-0.0``, 25-digit decimals, ``1E+2``) and the
layout varies (compact, spaced, indented; ``\\u`` escapes or raw UTF-8). What they hold: nested
content blocks, unknown fields anywhere, lone surrogates (always as ``\\ud83d`` escapes: a raw
one has no UTF-8 form), huge and odd numbers, JSON nested hundreds deep inside tool text, real
tool outputs from ``../shared/corpus`` (so compression happens), images, Anthropic thinking and
redacted-thinking blocks with signatures, Responses reasoning items, ``cache_control`` on any
object, and, as whole bodies, non-JSON bytes, truncated JSON and JSON of the wrong shape.

:func:`check` is the oracle: the upstream body is byte-identical to what was sent, or it parses
and keeps every value (numbers compared as exact decimals) except (1) tool-output texts, which
compression may replace, (2) ``tools`` entries, which the proxy may put in its deterministic
order (the scope's, :mod:`headroom_core.tools.order`; ``cache_control`` stays at its
position) and minification may change only by
normalising description whitespace, dropping ``$schema`` and ``title`` keywords and replacing
repeated passages by references that expand back to the same words, (3) the proxy's own tools
appended at the end of ``tools``, (4) one ``<headroom-context>`` block appended to the latest
user message. It returns the list of violations (empty when the body is right).
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
PATHS = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
CONV = {"anthropic": "messages", "chat": "messages", "responses": "input"}
ODD_NUMBERS = (
    "1e400", "-1E+400", "1e-400", "0.1000000000000000000000001", "1.0000000000000000000000001", "-0.0", "0.0", "1E+2",
    "123456789012345678901234567890", "-9223372036854775809", "2.2250738585072014e-308", "5e-324", "1.7976931348623157e308",
    "3.141592653589793238462643383279", "0", "-1", "1.5", "100000000000000000000000.0",
)  # fmt: skip
PROXY_TOOL_PREFIXES = ("headroom_", "memory_")
CONTEXT_HEADER = "<headroom-context>"


class Num:
    """A JSON number written exactly as ``text``."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Num({self.text})"


@dataclass(frozen=True)
class Style:
    """How :func:`write` lays out JSON: ``indent`` (None: one line), ``space`` after ``:`` and
    ``,``, ``ascii`` (``\\u`` escapes for every non-ASCII character)."""

    indent: int | None = None
    space: bool = False
    ascii: bool = False


def _string(s: str, style: Style) -> str:
    out = json.dumps(s, ensure_ascii=style.ascii)
    # a lone surrogate has no UTF-8 form: write it as its \u escape, as JavaScript's JSON does
    return re.sub(r"[\ud800-\udfff]", lambda m: "\\u%04x" % ord(m.group()), out)


def write(v: Any, style: Style = Style(), depth: int = 0) -> str:
    """JSON text of ``v`` (dicts, lists, str, bool, None, int, float, :class:`Num`)."""
    if isinstance(v, Num):
        return v.text
    if isinstance(v, str):
        return _string(v, style)
    if v is None or isinstance(v, (bool, int)):
        return json.dumps(v)
    if isinstance(v, float):
        return repr(v) if v == v and v not in (float("inf"), float("-inf")) else "0"
    colon = ": " if style.space or style.indent is not None else ":"
    comma = ", " if style.space and style.indent is None else ","
    if style.indent is not None and depth < 6:
        pad = "\n" + " " * (style.indent * (depth + 1))
        end = "\n" + " " * (style.indent * depth)
    else:
        pad = end = ""
    if isinstance(v, dict):
        if not v:
            return "{}"
        items = [pad + _string(str(k), style) + colon + write(x, style, depth + 1) for k, x in v.items()]
        return "{" + comma.join(items) + end + "}"
    if isinstance(v, (list, tuple)):
        if not v:
            return "[]"
        return "[" + comma.join(pad + write(x, style, depth + 1) for x in v) + end + "]"
    raise TypeError(type(v))


# ---------------------------------------------------------------------------------------------
# strategies

_SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_CHAR = st.characters(blacklist_categories=("Cs",))
TEXT = st.lists(st.one_of(_CHAR, _CHAR, _CHAR, _SURROGATE), max_size=40).map("".join)
KEY = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12)
NUMBER = st.one_of(
    st.sampled_from(ODD_NUMBERS).map(Num),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
)
SCALAR = st.one_of(st.none(), st.booleans(), NUMBER, TEXT)
JSON_VALUE = st.recursive(
    SCALAR, lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(KEY, c, max_size=4)), max_leaves=12
)


def _corpus_outputs() -> list[str]:
    outs: list[str] = []
    gh = CORPUS / "github-api"
    if gh.is_dir():
        for f in sorted(gh.glob("*.json"))[:2]:
            outs.append(json.dumps(json.loads(f.read_text()), indent=2)[:30_000])
    logs = CORPUS / "logs"
    if logs.is_dir():
        for name in ("HDFS_2k.log", "OpenSSH_2k.log"):
            p = logs / name
            if p.is_file():
                outs.append("\n".join(p.read_text(errors="replace").splitlines()[:400]))
    return outs


_CORPUS_OUTPUTS = _corpus_outputs()


@st.composite
def tool_text(draw) -> str:
    """A tool output: short text, a real corpus output (compressible; maybe with a lone
    surrogate inserted), or JSON nested deep."""
    kind = draw(st.sampled_from(["short", "short", "corpus", "deep", "json"]))
    if kind == "corpus" and _CORPUS_OUTPUTS:
        text = draw(st.sampled_from(_CORPUS_OUTPUTS))
        if draw(st.booleans()):
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(_SURROGATE) + text[at:]
        return text
    if kind == "deep":
        depth = draw(st.integers(50, 3000))
        inner = draw(st.sampled_from(['"x"', "1e400", "[]", '{"a":null}']))
        return "[" * depth + inner + "]" * depth if draw(st.booleans()) else '{"a":' * depth + inner + "}" * depth
    if kind == "json":
        return write(draw(st.lists(st.dictionaries(KEY, SCALAR, max_size=5), max_size=30)), Style(indent=2))
    return draw(TEXT)


def _maybe(draw, d: dict, extra_prob: bool = True) -> dict:
    """``d`` with, maybe, unknown fields and a ``cache_control`` breakpoint."""
    if extra_prob and draw(st.integers(0, 5)) == 0:
        for k, v in draw(st.dictionaries(KEY.map(lambda k: "x_" + k), JSON_VALUE, max_size=2)).items():
            d[k] = v
    if draw(st.integers(0, 6)) == 0:
        d["cache_control"] = {"type": "ephemeral"} if draw(st.booleans()) else {"type": "ephemeral", "ttl": "1h"}
    return d


_PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")).decode()
SCHEMA = st.fixed_dictionaries(
    {"type": st.just("object"), "properties": st.dictionaries(KEY, st.fixed_dictionaries({"type": st.sampled_from(["string", "number", "integer"])}, optional={
        "description": TEXT, "default": NUMBER, "maximum": NUMBER, "title": TEXT, "enum": st.lists(SCALAR, max_size=3)}), max_size=4)},
    optional={"$schema": st.just("http://json-schema.org/draft-07/schema#"), "required": st.lists(KEY, max_size=2), "title": TEXT},
)  # fmt: skip
TOOL_DESC = st.one_of(TEXT, TEXT.map(lambda t: "  " + t + "   \n\n\n  more   words  "), st.just("   "), st.just(""))


@st.composite
def anthropic_body(draw) -> dict:
    tools = [
        _maybe(draw, {"name": draw(KEY), "description": draw(TOOL_DESC), "input_schema": draw(SCHEMA)})
        for _ in range(draw(st.integers(0, 3)))
    ]
    if draw(st.booleans()):
        tools.append({"type": "web_search_20250305", "name": "web_search", "max_uses": draw(NUMBER)})
    msgs: list = [{"role": "user", "content": draw(TEXT) or "hi"}]
    for k in range(draw(st.integers(0, 3))):
        cid = f"toolu_{k}{draw(KEY)}"
        blocks: list = []
        if draw(st.booleans()):
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": draw(TEXT),
                    "signature": base64.b64encode(draw(st.binary(max_size=48))).decode(),
                }
            )
        if draw(st.integers(0, 4)) == 0:
            blocks.append(
                {"type": "redacted_thinking", "data": base64.b64encode(draw(st.binary(max_size=32))).decode()}
            )
        blocks.append(_maybe(draw, {"type": "text", "text": draw(TEXT)}))
        blocks.append(
            _maybe(
                draw,
                {
                    "type": "tool_use",
                    "id": cid,
                    "name": draw(KEY),
                    "input": draw(st.dictionaries(KEY, JSON_VALUE, max_size=3)),
                },
            )
        )
        msgs.append({"role": "assistant", "content": blocks})
        out: Any = draw(tool_text())
        if draw(st.integers(0, 3)) == 0:
            out = [
                _maybe(draw, {"type": "text", "text": out}),
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _PNG}},
            ]
        result = _maybe(draw, {"type": "tool_result", "tool_use_id": cid, "content": out})
        if draw(st.integers(0, 5)) == 0:
            result["is_error"] = True
        msgs.append(
            {
                "role": "user",
                "content": [result] + ([{"type": "text", "text": draw(TEXT)}] if draw(st.booleans()) else []),
            }
        )
    system: Any = draw(
        st.one_of(TEXT, st.lists(st.builds(lambda t: {"type": "text", "text": t}, TEXT), min_size=1, max_size=2))
    )
    if isinstance(system, list):
        system = [_maybe(draw, b, False) for b in system]
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": draw(st.one_of(st.just(1024), NUMBER)),
        "system": system,
        "messages": msgs,
        "stream": draw(st.booleans()),
    }
    if tools:
        body["tools"] = tools
    return _maybe(draw, body)


@st.composite
def chat_body(draw) -> dict:
    tools = [
        _maybe(
            draw,
            {
                "type": "function",
                "function": {"name": draw(KEY), "description": draw(TOOL_DESC), "parameters": draw(SCHEMA)},
            },
        )
        for _ in range(draw(st.integers(0, 3)))
    ]
    user: Any = draw(TEXT) or "hi"
    if draw(st.integers(0, 3)) == 0:
        user = [
            {"type": "text", "text": user},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _PNG}},
        ]
    msgs: list = [{"role": "system", "content": draw(TEXT)}, {"role": "user", "content": user}]
    for k in range(draw(st.integers(0, 3))):
        cid = f"call_{k}{draw(KEY)}"
        msgs.append(
            _maybe(
                draw,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {
                                "name": draw(KEY),
                                "arguments": write(draw(st.dictionaries(KEY, JSON_VALUE, max_size=3))),
                            },
                        }
                    ],
                },
            )
        )
        out: Any = draw(tool_text())
        if draw(st.integers(0, 4)) == 0:
            out = [{"type": "text", "text": out}]
        msgs.append(_maybe(draw, {"role": "tool", "tool_call_id": cid, "content": out}))
    body = {"model": "gpt-4.1", "messages": msgs, "stream": draw(st.booleans()), "temperature": draw(NUMBER)}
    if tools:
        body["tools"] = tools
    return _maybe(draw, body)


@st.composite
def responses_body(draw) -> dict:
    tools = [
        _maybe(
            draw,
            {
                "type": "function",
                "name": draw(KEY),
                "description": draw(TOOL_DESC),
                "parameters": draw(SCHEMA),
                "strict": draw(st.booleans()),
            },
        )
        for _ in range(draw(st.integers(0, 3)))
    ]
    items: list = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": draw(TEXT) or "hi"}]}]
    if draw(st.integers(0, 3)) == 0:
        items[0]["content"].append({"type": "input_image", "image_url": "data:image/png;base64," + _PNG})
    for k in range(draw(st.integers(0, 3))):
        cid = f"call_{k}{draw(KEY)}"
        if draw(st.booleans()):
            items.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{k}",
                    "summary": [],
                    "encrypted_content": base64.b64encode(draw(st.binary(max_size=48))).decode(),
                }
            )
        items.append(
            _maybe(
                draw,
                {
                    "type": "function_call",
                    "call_id": cid,
                    "name": draw(KEY),
                    "arguments": write(draw(st.dictionaries(KEY, JSON_VALUE, max_size=3))),
                },
            )
        )
        items.append(_maybe(draw, {"type": "function_call_output", "call_id": cid, "output": draw(tool_text())}))
    body = {"model": "gpt-5", "instructions": draw(TEXT), "input": items, "stream": draw(st.booleans())}
    if tools:
        body["tools"] = tools
    return _maybe(draw, body)


BODIES = {"anthropic": anthropic_body, "chat": chat_body, "responses": responses_body}
STYLE = st.builds(Style, st.sampled_from([None, None, 1, 2]), st.booleans(), st.booleans())


@dataclass(frozen=True)
class Case:
    """One request: ``dialect``, ``kind`` (``json``, ``wrong-shape``, ``truncated``, ``not-json``),
    the exact ``body`` bytes, and the ``stream`` flag it asks for."""

    dialect: str
    kind: str
    body: bytes
    stream: bool = field(default=False)

    @property
    def path(self) -> str:
        return PATHS[self.dialect]

    def __repr__(self) -> str:  # bodies run to tens of KB: show the start and the size
        return (
            f"Case({self.dialect!r}, {self.kind!r}, {len(self.body)} bytes: {self.body[:300]!r}…, stream={self.stream})"
        )


@st.composite
def cases(draw) -> Case:
    """A :class:`Case` of any dialect and kind (mostly well-formed JSON of the dialect)."""
    dialect = draw(st.sampled_from(sorted(BODIES)))
    kind = draw(st.sampled_from(["json"] * 7 + ["wrong-shape", "truncated", "not-json"]))
    if kind == "not-json":
        raw = draw(
            st.one_of(
                st.binary(max_size=200),
                TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")),
                st.just(b"NaN"),
                st.just(b""),
            )
        )
        return Case(dialect, kind, raw)
    if kind == "wrong-shape":
        key = CONV[dialect]
        body = {
            "model": "m",
            key: draw(st.one_of(SCALAR, st.dictionaries(KEY, JSON_VALUE, max_size=3), st.lists(SCALAR, max_size=3))),
            "stream": draw(st.booleans()),
        }
        if draw(st.booleans()):
            body["tools"] = draw(JSON_VALUE)
        return Case(
            dialect,
            kind,
            write(body, draw(STYLE)).encode("utf-8"),
            bool(body["stream"]) if isinstance(body["stream"], bool) else False,
        )
    body = draw(BODIES[dialect]())
    text = write(body, draw(STYLE)).encode("utf-8")
    if kind == "truncated":
        return Case(dialect, kind, text[: draw(st.integers(0, max(0, len(text) - 1)))])
    return Case(dialect, kind, text, bool(body.get("stream")))


# ---------------------------------------------------------------------------------------------
# the upstream's replies


def reply_for(path: str, body: bytes) -> tuple[str, bytes]:
    """``(content type, body)`` the fuzz upstream answers: a minimal valid response of the
    path's dialect, SSE when the request asked to stream."""
    try:
        doc = json.loads(body)
        stream = isinstance(doc, dict) and doc.get("stream") is True
    except ValueError:
        stream = False
    d = next((k for k, v in PATHS.items() if path.split("?")[0] == v), "anthropic")

    def sse(events: list[tuple[str | None, Any]]) -> bytes:
        return "".join(
            (f"event: {e}\n" if e else "") + "data: " + (x if isinstance(x, str) else json.dumps(x)) + "\n\n"
            for e, x in events
        ).encode()

    if d == "anthropic":
        msg = {
            "id": "msg_f",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        if not stream:
            return "application/json", json.dumps(msg).encode()
        return "text/event-stream", sse([
            ("message_start", {"type": "message_start", "message": {**msg, "content": [], "stop_reason": None}}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 1}}),
            ("message_stop", {"type": "message_stop"}),
        ])  # fmt: skip
    if d == "chat":
        usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
        if not stream:
            return "application/json", json.dumps(
                {
                    "id": "c",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "m",
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
                    ],
                    "usage": usage,
                }
            ).encode()
        ch = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        return "text/event-stream", sse(
            [
                (
                    None,
                    {
                        **ch,
                        "choices": [
                            {"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}
                        ],
                    },
                ),
                (None, {**ch, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}),
                (None, "[DONE]"),
            ]
        )
    out = {
        "type": "message",
        "id": "m1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "ok", "annotations": []}],
    }
    resp = {
        "id": "r",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "m",
        "output": [out],
        "usage": {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11},
    }
    if not stream:
        return "application/json", json.dumps(resp).encode()
    return "text/event-stream", sse(
        [
            (
                "response.created",
                {
                    "type": "response.created",
                    "sequence_number": 0,
                    "response": {**resp, "status": "in_progress", "output": []},
                },
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "sequence_number": 1, "output_index": 0, "item": out},
            ),
            ("response.completed", {"type": "response.completed", "sequence_number": 2, "response": resp}),
        ]
    )


# ---------------------------------------------------------------------------------------------
# the oracle


def _load(raw: bytes) -> Any:
    return json.loads(raw, parse_float=Decimal, parse_constant=lambda c: ("constant", c))


def tool_output_paths(dialect: str, body: Any) -> set[tuple]:
    """Paths (keys and indexes) of the tool-output texts of ``body``, found independently of the
    proxy's own code."""
    out: set[tuple] = set()
    seq = body.get(CONV[dialect]) if isinstance(body, dict) else None
    if not isinstance(seq, list):
        return out
    for i, m in enumerate(seq):
        if not isinstance(m, dict):
            continue
        if dialect == "anthropic" and m.get("role") == "user" and isinstance(m.get("content"), list):
            for j, b in enumerate(m["content"]):
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    c = b.get("content")
                    if isinstance(c, str):
                        out.add((CONV[dialect], i, "content", j, "content"))
                    elif isinstance(c, list):
                        out |= {
                            (CONV[dialect], i, "content", j, "content", k, "text")
                            for k, x in enumerate(c)
                            if isinstance(x, dict) and x.get("type") == "text"
                        }
        elif dialect == "chat" and m.get("role") == "tool":
            c = m.get("content")
            if isinstance(c, str):
                out.add((CONV[dialect], i, "content"))
            elif isinstance(c, list):
                out |= {
                    (CONV[dialect], i, "content", k, "text")
                    for k, x in enumerate(c)
                    if isinstance(x, dict) and x.get("type") == "text"
                }
        elif dialect == "responses" and m.get("type") in ("function_call_output", "custom_tool_call_output"):
            o = m.get("output")
            if isinstance(o, str):
                out.add((CONV[dialect], i, "output"))
            elif isinstance(o, list):
                out |= {
                    (CONV[dialect], i, "output", k, "text")
                    for k, x in enumerate(o)
                    if isinstance(x, dict) and x.get("type") in ("input_text", "output_text")
                }
    return out


def _same_minified(sent: Any, up: Any, path: tuple, problems: list[str]) -> None:
    """``up`` is ``sent`` up to minification (module docstring, allowance 2)."""
    if isinstance(sent, dict) and isinstance(up, dict):
        for k in up:
            if k not in sent:
                problems.append(f"{path}: key {k!r} added")
        for k, v in sent.items():
            if k not in up:
                if k not in ("$schema", "title"):
                    problems.append(f"{path}: key {k!r} dropped")
                continue
            if k == "description" and isinstance(v, str) and isinstance(up[k], str):
                if v.split() != up[k].split():
                    problems.append(f"{path + (k,)}: description words changed")
                continue
            _same_minified(v, up[k], path + (k,), problems)
        return
    if isinstance(sent, list) and isinstance(up, list) and len(sent) == len(up):
        for i, (a, b) in enumerate(zip(sent, up)):
            _same_minified(a, b, path + (i,), problems)
        return
    if type(sent) is not type(up) or sent != up:
        problems.append(f"{path}: {_short(sent)} became {_short(up)}")


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) < 120 else r[:117] + "..."


def _compare(sent: Any, up: Any, path: tuple, outputs: set[tuple], problems: list[str]) -> None:
    if path in outputs:
        if not isinstance(up, str):
            problems.append(f"{path}: tool output became {type(up).__name__}")
        return
    if isinstance(sent, dict) and isinstance(up, dict):
        if set(sent) != set(up):
            problems.append(f"{path}: keys {sorted(set(sent) ^ set(up))[:5]} differ")
        for k in sent.keys() & up.keys():
            _compare(sent[k], up[k], path + (k,), outputs, problems)
        return
    if isinstance(sent, list) and isinstance(up, list):
        if len(sent) != len(up):
            problems.append(f"{path}: {len(sent)} items became {len(up)}")
            return
        for i, (a, b) in enumerate(zip(sent, up)):
            _compare(a, b, path + (i,), outputs, problems)
        return
    if type(sent) is not type(up) or sent != up:
        problems.append(f"{path}: {_short(sent)} became {_short(up)}")


def _marks(tools: list) -> list:
    """``(index, value)`` of each tool's ``cache_control``: a breakpoint stays at its position
    when the proxy orders the tools (``request_plan``: "carried by position")."""
    return [(k, t["cache_control"]) for k, t in enumerate(tools) if isinstance(t, dict) and "cache_control" in t]


def _unmarked(tools: list) -> list:
    return [{k: v for k, v in t.items() if k != "cache_control"} if isinstance(t, dict) else t for t in tools]


def _in_client_order(sent: list, up: list, problems: list[str]) -> list:
    """``up`` (the client's tools as they went upstream) in the order of ``sent``: the proxy
    sends a scope's tools in one deterministic order (:mod:`headroom_core.tools.order`),
    so the same tools may come in another order. A tool missing or added is a problem."""
    from headroom_core.tools.order import unique_ids

    by_id = dict(zip(unique_ids(up), up))
    ids = unique_ids(sent)
    if sorted(ids) != sorted(by_id):
        problems.append(f"tools {sorted(set(ids) ^ set(by_id))[:5]} differ")
        return up
    return [by_id[i] for i in ids]


def check(case: Case, upstream_body: bytes) -> list[str]:
    """What is wrong with ``upstream_body`` for ``case`` (module docstring); [] when right."""
    if upstream_body == case.body:
        return []
    try:
        sent = _load(case.body)
    except ValueError:
        return ["a body that is not JSON was changed"]
    try:
        up = _load(upstream_body)
    except ValueError as e:
        return [f"the upstream body is not JSON: {e}"]
    if not isinstance(sent, dict) or not isinstance(up, dict):
        return ["a non-object body was changed"]
    from headroom_core.tools.minify import expand_references

    problems: list[str] = []
    sent, up = dict(sent), dict(up)
    # (2), (3): tools
    if "tools" in sent or "tools" in up:
        st_, ut = sent.pop("tools", None), up.pop("tools", None)
        if st_ is None and isinstance(ut, list):
            st_ = []  # the proxy may add "tools" to hold its own
        if not isinstance(st_, list) or not isinstance(ut, list):
            if st_ != ut:
                problems.append(f"tools changed: {_short(st_)} -> {_short(ut)}")
        else:
            extra = ut[len(st_) :]
            for t in extra:
                name = t.get("name") or (t.get("function") or {}).get("name", "") if isinstance(t, dict) else ""
                if not str(name).startswith(PROXY_TOOL_PREFIXES):
                    problems.append(f"tool {name!r} added")
            client = ut[: len(st_)]
            if _marks(st_) != _marks(client):
                problems.append(f"tools: cache_control {_marks(st_)} became {_marks(client)}")
            st_, client = _unmarked(st_), _unmarked(client)
            _same_minified(st_, expand_references(_in_client_order(st_, client, problems)), ("tools",), problems)
    # (4): the latest user message may carry one context block more
    key = CONV[case.dialect]
    seq_s, seq_u = sent.get(key), up.get(key)
    if (
        isinstance(seq_s, list)
        and isinstance(seq_u, list)
        and seq_s
        and len(seq_s) == len(seq_u)
        and isinstance(seq_u[-1], dict)
        and isinstance(seq_s[-1], dict)
    ):
        cu, cs = seq_u[-1].get("content"), seq_s[-1].get("content")
        if (
            isinstance(cu, list)
            and cu
            and isinstance(cu[-1], dict)
            and str(cu[-1].get("text", "")).startswith(CONTEXT_HEADER)
        ):
            rest = cu[:-1]
            if isinstance(cs, str) and len(rest) == 1 and isinstance(rest[0], dict) and rest[0].get("text") == cs:
                rest = cs
            seq_u = seq_u[:-1] + [dict(seq_u[-1], content=rest)]
            up[key] = seq_u
    _compare(sent, up, (), tool_output_paths(case.dialect, sent), problems)
    return problems
