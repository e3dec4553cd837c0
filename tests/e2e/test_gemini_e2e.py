"""The Gemini dialects end to end: the real ``google-genai`` SDK (Gemini API and Vertex AI)
through a real ``mitmdump -s addons/headroom.py`` to a local upstream speaking Gemini's wire
format (tests/support/upstream.py: JSON, ``?alt=sse`` chunks, ``functionCall`` parts).

- a large ``functionResponse`` output goes upstream compressed, ``headroom_retrieve`` offered as
  a ``functionDeclarations`` Tool; the model's retrieve call is answered by the proxy (JSON, SSE
  and the JSON-array stream without ``alt=sse``), the client never sees it and gets one answer; the follow-up carries the byte-exact
  original and the model's ``thoughtSignature`` as sent;
- the next turn replays the earlier contents byte for byte (implicit caching is by prefix);
- ``:countTokens`` is planned like the request it measures (compressed too), never recorded;
- a body over ``max_body_bytes`` gets a 413 in Google's error shape; an unparsable one passes;
- the ledger row: dialect, model (from the path), the workspace as project, usage;
- the same tool output saves the same as through the Messages dialect (±5%).
"""

from __future__ import annotations

import json
import time

import pytest

from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from tests.support.clients import anthropic_client, http_client, ssl_context
from tests.support.dialect_e2e import OPTIONS, big_output, ledger_rows, proxy  # noqa: F401 (fixtures)
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply

genai = pytest.importorskip("google.genai")
from google.genai import types  # noqa: E402

MODEL = "gemini-2.5-pro"
R = retrieve.TOOL_NAME
WORKSPACE = "/home/gem/app"
SESSION_CONTEXT = (
    "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\nToday's date is Monday, 4 May 2026.\n"
    f"My operating system is: linux\n- **Workspace Directories:**\n  - {WORKSPACE}\n- **Directory Structure:**\n\n{WORKSPACE}/\n</session_context>"
)
SIGNATURE = "CiQBVKhc7q0Zr8n1c2lnbmF0dXJlLW9wYXF1ZQ=="


def gemini_client(upstream, proxy, *, vertex: bool = False):
    """A real ``genai.Client`` whose requests go to ``upstream`` through ``proxy`` (its CA trusted)."""
    opts = types.HttpOptions(
        base_url=upstream.url,
        client_args={"proxy": proxy.url, "verify": ssl_context(proxy.ca_path)},
        async_client_args={},
    )
    if vertex:
        from google.oauth2.credentials import Credentials

        return genai.Client(
            vertexai=True,
            project="proj-1",
            location="us-central1",
            credentials=Credentials(token="ya29.test"),
            http_options=opts,
        )
    return genai.Client(api_key="test-key", http_options=opts)


def history(big_output: str) -> list[types.Content]:
    return [
        types.Content(role="user", parts=[types.Part(text=SESSION_CONTEXT)]),
        types.Content(role="user", parts=[types.Part(text="which issues are open?")]),
        types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(
                        name="run_shell_command", args={"command": "gh issue list --json"}
                    ),
                    thought_signature=__import__("base64").b64decode(SIGNATURE),
                )
            ],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(name="run_shell_command", response={"output": big_output})
                )
            ],
        ),
    ]


CONFIG = types.GenerateContentConfig(
    system_instruction="You are an interactive CLI agent.",
    tools=[
        types.Tool(
            function_declarations=[
                types.FunctionDeclaration(
                    name="run_shell_command",
                    description="Run a command.",
                    parameters_json_schema={"type": "object", "properties": {"command": {"type": "string"}}},
                )
            ]
        )
    ],
    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
)


def _output(req) -> str:
    return req.json["contents"][3]["parts"][0]["functionResponse"]["response"]["output"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("vertex", [False, True])
def test_sdk_output_compressed_and_retrieve_answered_by_the_proxy(upstream, proxy, big_output, stream, vertex):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."), Reply.text("Thirteen issues are open."))
    client = gemini_client(upstream, proxy, vertex=vertex)
    if stream:
        chunks = list(client.models.generate_content_stream(model=MODEL, contents=history(big_output), config=CONFIG))
        text = "".join(c.text or "" for c in chunks)
        calls = [p.function_call for c in chunks for p in (c.candidates[0].content.parts or []) if p.function_call]
        assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    else:
        resp = client.models.generate_content(model=MODEL, contents=history(big_output), config=CONFIG)
        text, calls = resp.text, resp.function_calls or []
        assert resp.usage_metadata.prompt_token_count == sum(
            max(1, len(r.body) // 4) for r in upstream.requests
        )  # summed over rounds
    assert text == "Checking.Thirteen issues are open."
    assert calls == []  # the proxy's call never reaches the client
    first, follow = upstream.requests
    path = first.path_only
    assert ("/publishers/google/models/" in path) is vertex and path.endswith(
        ":streamGenerateContent" if stream else ":generateContent"
    )
    # compressed upstream, retrieve offered in Gemini's own tool shape
    assert len(_output(first)) < len(big_output) / 2 and key in _output(first)
    names = [fd["name"] for t in first.json["tools"] for fd in t.get("functionDeclarations", [])]
    assert names == ["run_shell_command", R]
    # the follow-up: the model's turn as sent, then the byte-exact original as the function's output
    assert follow.json["contents"][:4] == first.json["contents"] and follow.text.startswith(
        first.text[: first.text.index(SIGNATURE)]
    )
    model_turn, answer = follow.json["contents"][-2:]
    assert model_turn["role"] == "model" and model_turn["parts"][-1]["functionCall"]["name"] == R
    fr = answer["parts"][0]["functionResponse"]
    assert answer["role"] == "user" and fr["name"] == R and fr["response"]["output"] == big_output
    assert follow.json["contents"][2]["parts"][0]["thoughtSignature"] == SIGNATURE  # thought signatures as sent
    assert follow.header("x-goog-api-key") == (None if vertex else "test-key")


def test_next_turn_replays_earlier_contents_byte_for_byte(upstream, proxy, big_output):
    upstream.script(Reply.text("Thirteen."), Reply.text("Done."))
    client = gemini_client(upstream, proxy)
    h = history(big_output) + [types.Content(role="user", parts=[types.Part(text="and closed ones?")])]
    h[-2] = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    name="run_shell_command", response={"output": big_output + "\n"}
                )
            )
        ],
    )
    client.models.generate_content(model=MODEL, contents=h, config=CONFIG)
    h2 = h + [
        types.Content(role="model", parts=[types.Part(text="Thirteen.")]),
        types.Content(role="user", parts=[types.Part(text="thanks")]),
    ]
    client.models.generate_content(model=MODEL, contents=h2, config=CONFIG)
    a, b = upstream.requests[-2:]
    ca, cb = a.json["contents"], b.json["contents"]
    assert cb[: len(ca)] == ca  # every earlier content as it went upstream (the compressed output too)
    assert len(ca[3]["parts"][0]["functionResponse"]["response"]["output"]) < len(big_output) / 2
    assert b.json["tools"] == a.json["tools"] and b.json["systemInstruction"] == a.json["systemInstruction"]


def test_count_tokens_planned_like_the_request(upstream, proxy, big_output):
    upstream.script(Reply.text("unused"))
    client = gemini_client(upstream, proxy)
    before = len(ledger_rows(proxy, 0, timeout=0))
    got = client.models.count_tokens(model=MODEL, contents=history(big_output))
    req = upstream.requests[-1]
    assert req.path_only.endswith(":countTokens")
    assert got.total_tokens == max(1, len(req.body) // 4)
    assert len(req.body) < len(json.dumps(big_output)) / 2  # measured as it would be sent
    time.sleep(1.0)
    assert len(ledger_rows(proxy, 0, timeout=0)) == before  # nothing recorded for a count


def test_too_large_is_refused_in_googles_shape_and_garbage_passes(upstream, proxy_factory):
    p = proxy_factory(ADDON_SCRIPT, options={"headroom_max_body_bytes": 2000})
    upstream.script(Reply.text("ok"))
    with http_client(p) as c:
        url = f"{upstream.url}/v1beta/models/{MODEL}:generateContent"
        r = c.post(
            url, json={"contents": [{"role": "user", "parts": [{"text": "x" * 5000}]}]}, headers={"x-goog-api-key": "k"}
        )
        assert r.status_code == 413
        err = r.json()["error"]
        assert err["code"] == 413 and err["status"] == "INVALID_ARGUMENT" and "max_body_bytes" in err["message"]
        garbage = b'{"contents": [ {"role": "user", "parts": [ '
        r2 = c.post(url, content=garbage, headers={"content-type": "application/json"})
    assert r2.status_code == 400  # the upstream's own answer: the body went on as sent
    assert upstream.requests[-1].body == garbage


def test_ledger_row_names_dialect_model_project_and_usage(upstream, proxy_factory, big_output):
    p = proxy_factory(ADDON_SCRIPT, options=OPTIONS)
    upstream.script(Reply.text("Thirteen.", input_tokens=1234, output_tokens=5, cache_read=1000))
    client = gemini_client(upstream, p)  # held: the SDK closes its HTTP client when the Client goes
    client.models.generate_content(model=MODEL, contents=history(big_output), config=CONFIG)
    (row,) = ledger_rows(p, 1)
    assert (row.dialect, row.model, row.project, row.status_code) == ("gemini", MODEL, WORKSPACE, 200)
    assert (row.usage_input_tokens, row.usage_output_tokens, row.usage_cache_read_tokens) == (1234, 5, 1000)
    assert row.action == "compressed" and row.tokens_after < row.tokens_before
    # priced at Google's rates: promptTokenCount includes the 1000 cached tokens (USD 0.125/MTok)
    from headroom_core import ledger
    from headroom_core.db.engine import open_database
    from headroom_core.pricing import PriceTable

    ((_, t),) = ledger.totals(open_database(f"sqlite:///{p.home / 'headroom.db'}"), prices=PriceTable())
    assert t.priced_requests == 1
    assert t.cost_prompt_usd == pytest.approx((234 * 1.25 + 1000 * 0.125) / 1e6) and t.cost_output_usd == pytest.approx(
        5 * 10.0 / 1e6
    )


def test_same_output_saves_the_same_as_the_messages_dialect(upstream, proxy_factory, big_output):
    """The same tool output through the Gemini and the Messages dialect: tokens saved within ±5%."""
    p = proxy_factory(ADDON_SCRIPT, options=OPTIONS)
    upstream.script(Reply.text("a"), Reply.text("b"))
    client = gemini_client(upstream, p)  # held: the SDK closes its HTTP client when the Client goes
    client.models.generate_content(model=MODEL, contents=history(big_output), config=CONFIG)
    anthropic_client(upstream, p).messages.create(
        model="claude-sonnet-4-5", max_tokens=50, system="You are an interactive CLI agent.",
        tools=[{"name": "run_shell_command", "description": "Run a command.", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
        messages=[
            {"role": "user", "content": SESSION_CONTEXT},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "run_shell_command", "input": {"command": "gh issue list --json"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": big_output}, {"type": "text", "text": "which issues are open?"}]},
        ],
    )  # fmt: skip
    g, a = upstream.requests[-2:]
    saved_g = len(big_output) - len(_output(g))
    saved_a = len(big_output) - len(a.json["messages"][2]["content"][0]["content"])
    assert saved_g > 0 and abs(saved_g - saved_a) <= 0.05 * saved_a
    rows = ledger_rows(p, 2)
    by = {r.dialect: r.tokens_before - r.tokens_after for r in rows}
    assert by["gemini"] > 0 and abs(by["gemini"] - by["anthropic-messages"]) <= 0.05 * by["anthropic-messages"]


def _raw_history(big_output: str) -> dict:
    """:func:`history` and :data:`CONFIG` as the REST body (for clients without the SDK)."""
    return {
        "contents": [
            {"role": "user", "parts": [{"text": SESSION_CONTEXT}]},
            {"role": "user", "parts": [{"text": "which issues are open?"}]},
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "run_shell_command", "args": {"command": "gh issue list --json"}},
                        "thoughtSignature": SIGNATURE,
                    }
                ],
            },
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"output": big_output}}}],
            },
        ],
        "systemInstruction": {"parts": [{"text": "You are an interactive CLI agent."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "run_shell_command",
                        "description": "Run a command.",
                        "parametersJsonSchema": {"type": "object", "properties": {"command": {"type": "string"}}},
                    }
                ]
            }
        ],
    }


def test_a_json_array_stream_without_the_proxy_s_tools_reaches_the_client_as_sent(upstream, proxy):
    """``:streamGenerateContent`` without ``alt=sse`` answers one JSON array: read (usage), not rewritten."""
    upstream.script(Reply.text("plain array"))
    with http_client(proxy) as c:
        r = c.post(
            f"{upstream.url}/v1beta/models/{MODEL}:streamGenerateContent",
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        )
    assert r.status_code == 200 and isinstance(r.json(), list)
    assert "".join(p["text"] for ch in r.json() for p in ch["candidates"][0]["content"]["parts"]) == "plain array"


def test_a_json_array_stream_gets_retrieve_answered_by_the_proxy(upstream, proxy_factory, big_output):
    """The JSON-array stream (Google's REST streaming without ``alt=sse``; the SDKs ask for SSE, so
    a raw HTTP client) carries the proxy's ``headroom_retrieve`` call: the proxy answers it, the
    follow-up goes to the same path, and the client reads one array without the call, usage summed."""
    p = proxy_factory(ADDON_SCRIPT, options=OPTIONS)
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."), Reply.text("Thirteen issues are open."))
    url = f"{upstream.url}/v1beta/models/{MODEL}:streamGenerateContent?key=test-key"
    with http_client(p) as c, c.stream("POST", url, json=_raw_history(big_output)) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        body = r.read()
    chunks = json.loads(body)  # one JSON array over both rounds
    parts = [q for ch in chunks for cand in ch["candidates"] for q in cand["content"]["parts"]]
    assert "".join(q.get("text", "") for q in parts) == "Checking.Thirteen issues are open."
    assert not any("functionCall" in q for q in parts) and chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    first, follow = upstream.requests
    assert first.path == follow.path and follow.path.endswith(":streamGenerateContent?key=test-key")
    assert len(_output(first)) < len(big_output) / 2 and key in _output(first)
    fr = follow.json["contents"][-1]["parts"][0]["functionResponse"]
    assert fr["name"] == R and fr["response"]["output"] == big_output
    assert chunks[-1]["usageMetadata"]["promptTokenCount"] == sum(max(1, len(q.body) // 4) for q in upstream.requests)
    (row,) = ledger_rows(p, 1)
    assert (row.dialect, row.model, row.status_code) == ("gemini", MODEL, 200)
    assert row.usage_input_tokens == chunks[-1]["usageMetadata"]["promptTokenCount"]


def test_sdk_inline_image_resized_to_what_gemini_sees(upstream, proxy):
    """A real PNG larger than Gemini's 3072 px square, sent by the SDK as ``inlineData``: it goes
    upstream resized to fit the square (PNG, ``mimeType`` as sent), the text beside it unchanged."""
    import base64
    import io

    from PIL import Image

    from tests.unit.test_gemini_images import photo

    png = photo(3600, 1200)
    upstream.script(Reply.text("A chart."))
    client = gemini_client(upstream, proxy)
    contents = [
        types.Content(
            role="user",
            parts=[types.Part.from_bytes(data=png, mime_type="image/png"), types.Part(text="What is this?")],
        )
    ]
    assert client.models.generate_content(model=MODEL, contents=contents).text == "A chart."
    (req,) = upstream.requests
    img, text = req.json["contents"][0]["parts"]
    assert "-" in img["inlineData"]["data"] or "_" in img["inlineData"]["data"]  # written URL-safe, as the SDK wrote it
    sent = Image.open(io.BytesIO(base64.urlsafe_b64decode(img["inlineData"]["data"])))
    assert (sent.format, sent.size, img["inlineData"]["mimeType"]) == ("PNG", (3072, 1024), "image/png")
    assert text == {"text": "What is this?"} and len(req.body) < len(base64.b64encode(png))
