"""Benchmark: the proxy under load, against plain mitmdump in the same run.

32 simulated agents (``--concurrency``) send ``--requests`` requests in all (default 10,000)
through ``mitmdump`` to a local HTTPS upstream, first through a plain mitmdump, then through
``mitmdump -s addons/headroom.py`` (same options: ``flow_detail=0``, ``ssl_insecure``). Each agent
speaks one dialect (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses; JSON and SSE
alternating) and runs sessions that grow turn by turn as a coding agent's do: the real Claude
Code system prompt and tool definitions of ``../shared/corpus/anthropic-flows`` and, per turn,
one more real tool output (GitHub API JSON, loghub logs, Python source of an installed package,
``grep`` hits) tagged with the agent and session, so every session's outputs are its own (new
outputs are compressed once, earlier turns replayed). Bodies average about ``--body-kb`` KB.

The upstream (its own process, asyncio) parses every body it receives and counts those that are
not valid JSON; the load generator (its own process, asyncio, one keep-alive TLS connection per
agent through the proxy) counts errors (connection failures, non-2xx, truncated streams) and
latencies. Printed per proxy: requests, errors, invalid upstream bodies, requests/s (and the
ratio to plain), latency percentiles, resident memory (VmRSS) at start (listening, warmed up
with one request per agent), at the end and its peak (VmHWM); for Headroom also the ledger rows
(``request_outcomes``) against the requests answered. The proxies run side by side and take
turns in ``--rounds`` rounds, so a change in the machine's load hits both alike.

``--workload replay``: every agent resends the last turn of one session instead (the proxy's
cost on content it has decided before: replayed prefix, cached decisions).

``--kill-after N``: instead, send a burst to Headroom only, ``kill -9`` it once ``N`` requests
were answered, and report how many answered requests are in the ledger right afterwards
(committed) and after a restart (the restart writes what the ledger journal holds and the
database lacks).

Run: ``.venv/bin/python bench/bench_load.py [--requests 10000] [--concurrency 32]``.
Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import re
import signal
import ssl
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CORPUS = REPO.parent / "shared" / "corpus"
DIALECTS = ("anthropic", "chat", "responses")
PATHS = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
TAG = b"@@TAG@@"
STREAM = b'"@@STREAM@@"'


# ---------------------------------------------------------------------------------------------
# request bodies (templates: the agent/session tag and the stream flag are filled in per request)


def _tool_outputs() -> list[tuple[str, str, dict, str]]:
    """``(tool name, call id stem, arguments, output text)``: real tool outputs of about 5-40 KB;
    each holds the placeholder ``@@TAG@@ turn @@TURN@@`` where its kind allows (a JSON array item, a
    log line, a source comment line, a grep hit)."""
    import importlib.util

    outs: list[tuple[str, str, dict, str]] = []
    for f in sorted((CORPUS / "github-api").glob("*.json")):
        data = json.loads(f.read_text())
        arrays = [x["response"] for x in data if isinstance(x.get("response"), list)]
        payload = max(arrays, key=lambda a: len(json.dumps(a))) if arrays else data
        if isinstance(payload, list):
            payload = [{"bench_session": "@@TAG@@ turn @@TURN@@"}, *payload]
        else:
            payload = {"bench_session": "@@TAG@@ turn @@TURN@@", "exchanges": payload}
        outs.append(("mcp__github__api", "gh", {"path": f"/repos/o/r/{f.stem}"}, json.dumps(payload, indent=2)))
    for name in ("HDFS", "Spark", "OpenSSH", "Zookeeper"):
        lines = (CORPUS / "logs" / f"{name}_2k.log").read_text(errors="replace").splitlines()
        outs.append(
            (
                "Bash",
                "log",
                {"command": f"tail -n 150 /var/log/{name.lower()}.log"},
                "\n".join(["bench session @@TAG@@ turn @@TURN@@", *lines[:150]]),
            )
        )
    for mod in ("sqlalchemy.orm.session", "alembic.command", "httpx._client"):
        spec = importlib.util.find_spec(mod)
        assert spec and spec.origin
        src = "# bench session @@TAG@@ turn @@TURN@@\n" + Path(spec.origin).read_text()[:15_000]
        numbered = "\n".join(f"{i + 1:6}\t{ln}" for i, ln in enumerate(src.splitlines()))
        outs.append(("Read", "read", {"file_path": spec.origin}, numbered))
    hits = []
    for p in sorted((REPO / "headroom_core").rglob("*.py")):
        for i, ln in enumerate(p.read_text().splitlines()):
            if "def " in ln:
                hits.append(f"{p.relative_to(REPO)}:{i + 1}:{ln}")
    outs.append(
        ("Grep", "grep", {"pattern": "def "}, "\n".join(["bench/session.py:1:@@TAG@@ turn @@TURN@@", *hits])[:15_000])
    )
    # interleave kinds so every session sees several
    order = sorted(range(len(outs)), key=lambda i: (i % 4, i))
    return [outs[i] for i in order]


def _claude_code_prefix(tools_kb: int) -> tuple[list, list]:
    body = json.loads((CORPUS / "anthropic-flows" / "session-a-01.json").read_text())["request"]["body"]
    tools, size = [], 0
    for t in body["tools"]:
        n = len(json.dumps(t))
        if size + n > tools_kb * 1024:
            continue
        tools.append(t)
        size += n
    return body["system"], tools


def _anthropic(system: list, tools: list, turns: list) -> dict:
    msgs: list = [{"role": "user", "content": "[@@TAG@@] Look at the failing build and tell me what to fix."}]
    for k, (name, stem, args, out) in enumerate(turns):
        cid = f"toolu_{stem}{k}_@@TAG@@"
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Checking {name} output."},
                    {"type": "tool_use", "id": cid, "name": name, "input": args},
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": cid, "content": out.replace("@@TURN@@", str(k))}],
            }
        )
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": system,
        "tools": tools,
        "messages": msgs,
        "stream": "@@STREAM@@",
    }


def _chat(system: list, tools: list, turns: list) -> dict:
    sys_text = "\n".join(b["text"] for b in system)
    fns = [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t.get("input_schema", {}),
            },
        }
        for t in tools
    ]
    msgs: list = [
        {"role": "system", "content": sys_text},
        {"role": "user", "content": "[@@TAG@@] Look at the failing build and tell me what to fix."},
    ]
    for k, (name, stem, args, out) in enumerate(turns):
        cid = f"call_{stem}{k}_@@TAG@@"
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": out.replace("@@TURN@@", str(k))})
    return {"model": "gpt-4.1", "tools": fns, "messages": msgs, "stream": "@@STREAM@@"}


def _responses(system: list, tools: list, turns: list) -> dict:
    fns = [
        {
            "type": "function",
            "name": t["name"],
            "description": t.get("description", ""),
            "parameters": t.get("input_schema", {}),
        }
        for t in tools
    ]
    items: list = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "[@@TAG@@] Look at the failing build and tell me what to fix."}],
        }
    ]
    for k, (name, stem, args, out) in enumerate(turns):
        cid = f"call_{stem}{k}_@@TAG@@"
        items.append({"type": "function_call", "call_id": cid, "name": name, "arguments": json.dumps(args)})
        items.append({"type": "function_call_output", "call_id": cid, "output": out.replace("@@TURN@@", str(k))})
    return {
        "model": "gpt-5",
        "instructions": "\n".join(b["text"] for b in system),
        "tools": fns,
        "input": items,
        "stream": "@@STREAM@@",
    }


def build_templates(body_kb: int) -> dict[str, list[bytes]]:
    """Per dialect, the body template of each turn of a session (turn t carries t+1 outputs)."""
    outs = _tool_outputs()
    tools_kb = max(20, body_kb * 2 // 5)
    system, tools = _claude_code_prefix(tools_kb)
    mean_out = sum(len(o[3]) for o in outs) / len(outs)
    # turns 1..T add one output each: mean body = prefix + mean_out * (T + 1) / 2
    prefix = len(json.dumps(system)) + len(json.dumps(tools))
    turns = max(2, min(len(outs), round(2 * max(body_kb * 1024 - prefix, mean_out) / mean_out - 1)))
    make = {"anthropic": _anthropic, "chat": _chat, "responses": _responses}
    return {d: [json.dumps(make[d](system, tools, outs[: t + 1])).encode() for t in range(turns)] for d in DIALECTS}


# ---------------------------------------------------------------------------------------------
# the upstream: asyncio HTTPS, three dialects, JSON or SSE; validates every body


def _canned() -> dict[tuple[str, bool], tuple[bytes, bytes]]:
    """(dialect, stream) -> (content type, body)."""
    text = "The build fails because the migration step runs before the database is ready."
    usage_a = {
        "input_tokens": 50_000,
        "output_tokens": 20,
        "cache_read_input_tokens": 40_000,
        "cache_creation_input_tokens": 100,
    }
    a_json = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage_a,
    }

    def sse(events: list[tuple[str | None, dict | str]]) -> bytes:
        out = []
        for ev, data in events:
            head = f"event: {ev}\n" if ev else ""
            out.append(head + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n")
        return "".join(out).encode()

    words = text.split(" ")
    a_sse = sse(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {**a_json, "content": [], "stop_reason": None, "usage": {**usage_a, "output_tokens": 1}},
                },
            ),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
        ]
        + [
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w + " "}},
            )
            for w in words
        ]
        + [
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 20},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )
    usage_c = {
        "prompt_tokens": 50_000,
        "completion_tokens": 20,
        "total_tokens": 50_020,
        "prompt_tokens_details": {"cached_tokens": 40_000},
    }
    c_json = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage_c,
    }
    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1"}
    c_sse = sse(
        [
            (
                None,
                {
                    **chunk,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
                },
            )
        ]
        + [
            (None, {**chunk, "choices": [{"index": 0, "delta": {"content": w + " "}, "finish_reason": None}]})
            for w in words
        ]
        + [
            (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            (None, {**chunk, "choices": [], "usage": usage_c}),
            (None, "[DONE]"),
        ]
    )
    usage_r = {
        "input_tokens": 50_000,
        "output_tokens": 20,
        "total_tokens": 50_020,
        "input_tokens_details": {"cached_tokens": 40_000},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    msg = {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    r_json = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-5",
        "output": [msg],
        "usage": usage_r,
    }
    seq = iter(range(1000))
    r_sse = sse(
        [
            (
                "response.created",
                {
                    "type": "response.created",
                    "sequence_number": next(seq),
                    "response": {**r_json, "status": "in_progress", "output": [], "usage": None},
                },
            ),
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": 0,
                    "item": {**msg, "status": "in_progress", "content": []},
                },
            ),
        ]
        + [
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "sequence_number": next(seq),
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": w + " ",
                },
            )
            for w in words
        ]
        + [
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "sequence_number": next(seq), "output_index": 0, "item": msg},
            ),
            ("response.completed", {"type": "response.completed", "sequence_number": next(seq), "response": r_json}),
        ]
    )
    js = b"application/json"
    ev = b"text/event-stream"
    return {
        ("anthropic", False): (js, json.dumps(a_json).encode()),
        ("anthropic", True): (ev, a_sse),
        ("chat", False): (js, json.dumps(c_json).encode()),
        ("chat", True): (ev, c_sse),
        ("responses", False): (js, json.dumps(r_json).encode()),
        ("responses", True): (ev, r_sse),
    }


def upstream_main(certdir: str, port_w, stats_r) -> None:
    """The upstream process: serve until SIGTERM; ``GET /__stats`` answers the counters."""
    from tests.support.upstream import make_self_signed_cert

    cert, key = make_self_signed_cert(Path(certdir))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    canned = _canned()
    by_path = {v: k for k, v in PATHS.items()}
    stats = {"requests": 0, "invalid": 0, "bytes": 0, "invalid_samples": []}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                hdrs = {}
                for ln in lines[1:]:
                    if ":" in ln:
                        k, v = ln.split(":", 1)
                        hdrs[k.strip().lower()] = v.strip()
                if "content-length" in hdrs:
                    body = await reader.readexactly(int(hdrs["content-length"]))
                elif hdrs.get("transfer-encoding", "").lower() == "chunked":
                    parts = []
                    while True:
                        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                        if size == 0:
                            await reader.readuntil(b"\r\n")
                            break
                        parts.append(await reader.readexactly(size))
                        await reader.readexactly(2)
                    body = b"".join(parts)
                else:
                    body = b""
                if path == "/__stats":
                    payload = json.dumps(stats).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                        % len(payload)
                        + payload
                    )
                    await writer.drain()
                    continue
                stats["requests"] += 1
                stats["bytes"] += len(body)
                stream = False
                try:
                    doc = json.loads(body)
                    stream = bool(doc.get("stream")) if isinstance(doc, dict) else False
                except ValueError as e:
                    stats["invalid"] += 1
                    if len(stats["invalid_samples"]) < 5:
                        stats["invalid_samples"].append(f"{path}: {e}: {body[:200]!r}")
                dialect = by_path.get(path.split("?", 1)[0], "anthropic")
                ctype, payload = canned[(dialect, stream)]
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n" % (ctype, len(payload))
                    + payload
                )
                await writer.drain()
        except Exception:  # noqa: BLE001 - a broken client connection
            return
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx, limit=2**26, backlog=512)
        port_w.send(server.sockets[0].getsockname()[1])
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        async with server:
            await stop.wait()

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------
# the load generator: asyncio, one keep-alive TLS connection through the proxy per agent


def client_main(
    proxy_port: int,
    up_port: int,
    ca: str,
    templates: dict[str, list[bytes]],
    n: int,
    conc: int,
    run_id: str,
    out_w,
    progress=None,
    replay: bool = False,
) -> None:
    """Send ``n`` requests with ``conc`` agents; send ``{latencies, errors, samples, seconds}``
    to ``out_w``. ``progress`` (a shared counter) counts answered requests. ``replay``: every
    agent resends the last turn of one session (content the proxy has decided already)."""
    import h11

    ctx = ssl.create_default_context(cafile=ca)
    host = f"127.0.0.1:{up_port}"
    lat: list[float] = []
    errors: list[str] = []
    remaining = [n]

    async def connect():
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy_port, limit=2**24)
        writer.write(f"CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise ConnectionError(head[:80])
        await writer.start_tls(ctx, server_hostname="127.0.0.1")
        return reader, writer

    async def agent(k: int) -> None:
        dialect = DIALECTS[k % 3]
        turns = templates[dialect][-1:] if replay else templates[dialect]
        session = 0
        turn = 0
        conn = None
        i = 0
        while remaining[0] > 0:
            remaining[0] -= 1
            tag = f"{run_id}-a{k}-s{session}".encode()
            body = turns[turn].replace(TAG, tag).replace(STREAM, b"true" if i % 2 else b"false")
            i += 1
            turn += 1
            if turn == len(turns):
                turn, session = 0, session + (0 if replay else 1)
            t0 = time.monotonic()
            try:
                if conn is None:
                    conn = await connect()
                reader, writer = conn
                req = (
                    f"POST {PATHS[dialect]} HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\n"
                    f"user-agent: bench-load/1.0\r\nx-api-key: bench\r\ncontent-length: {len(body)}\r\n\r\n"
                ).encode()
                writer.write(req + body)
                await writer.drain()
                h = h11.Connection(h11.CLIENT)
                # h11 only parses the response: tell it a request went (the bytes were written above)
                h.send(
                    h11.Request(method="POST", target=PATHS[dialect], headers=[("host", host), ("content-length", "0")])
                )
                h.send(h11.EndOfMessage())
                status, got, done = 0, 0, False
                while not done:
                    ev = h.next_event()
                    if ev is h11.NEED_DATA:
                        data = await asyncio.wait_for(reader.read(65536), 300)
                        h.receive_data(data)
                        if not data:
                            raise ConnectionError("closed mid-response")
                    elif isinstance(ev, h11.Response):
                        status = ev.status_code
                    elif isinstance(ev, h11.Data):
                        got += len(ev.data)
                    elif isinstance(ev, h11.EndOfMessage):
                        done = True
                if status != 200 or got == 0:
                    errors.append(f"{dialect}: status {status}, {got} bytes")
                else:
                    lat.append(time.monotonic() - t0)
                    if progress is not None:
                        with progress.get_lock():
                            progress.value += 1
                if h.our_state is h11.MUST_CLOSE or h.their_state is h11.MUST_CLOSE:
                    writer.close()
                    conn = None
            except Exception as e:  # noqa: BLE001 - counted
                errors.append(f"{dialect}: {type(e).__name__}: {e}"[:200])
                if conn is not None:
                    conn[1].close()
                conn = None

    async def main() -> float:
        t0 = time.monotonic()
        await asyncio.gather(*(agent(k) for k in range(conc)))
        return time.monotonic() - t0

    seconds = asyncio.run(main())
    out_w.send({"latencies": lat, "errors": len(errors), "samples": errors[:5], "seconds": seconds})


# ---------------------------------------------------------------------------------------------
# running it


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
        for k in kids:
            out += [k, *_descendants(k)]
    return out


def rss_mib(pid: int) -> tuple[float, float]:
    """``(VmRSS, VmHWM)`` in MiB of process ``pid`` plus its child processes (the proxy's
    compression worker, when it runs): resident memory summed, peaks summed per process."""
    rss = hwm = 0.0
    for p in [pid, *_descendants(pid)]:
        try:
            text = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        get = lambda k: int(re.search(rf"^{k}:\s+(\d+) kB", text, re.M).group(1)) / 1024  # noqa: E731
        rss, hwm = rss + get("VmRSS"), hwm + get("VmHWM")
    return rss, hwm


def upstream_stats(up_port: int) -> dict:
    import httpx

    return httpx.get(f"https://127.0.0.1:{up_port}/__stats", verify=False, timeout=30).json()


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


def run_client(proxy, up_port: int, templates, n: int, conc: int, run_id: str, progress=None, replay: bool = False):
    r, w = mp.Pipe(duplex=False)
    p = mp.Process(
        target=client_main,
        args=(proxy.port, up_port, str(proxy.ca_path), templates, n, conc, run_id, w, progress, replay),
    )
    p.start()
    return p, r


def run_all(targets: list[tuple[str, Path | None]], up_port: int, templates, args) -> list[dict]:
    """Start a proxy per ``(label, script)``, warm each up, then send ``args.requests`` to each
    in ``args.rounds`` rounds, the proxies taking turns (first one first in even rounds, last
    one first in odd ones), so a change of the machine's load during the run hits all alike."""
    from tests.support.proxy import MitmProxy

    replay = args.workload == "replay"
    proxies = []
    try:
        for label, script in targets:
            opts: dict = {"flow_detail": 0}
            if script is not None:
                opts["headroom_compress_timeout_seconds"] = args.compress_timeout
            proxies.append(MitmProxy(script, options=opts, startup_timeout=120).start())
        res: list[dict] = []
        for (label, script), px in zip(targets, proxies):
            # warm up: one request per agent (vocabulary, caches; with --workload replay, the content)
            p, r = run_client(
                px,
                up_port,
                templates,
                args.concurrency,
                args.concurrency,
                f"run{label}" if replay else f"warm{label}",
                replay=replay,
            )
            warm = r.recv()
            p.join()
            res.append(
                {
                    "label": label,
                    "latencies": [],
                    "errors": warm["errors"],
                    "samples": warm["samples"],
                    "seconds": 0.0,
                    "upstream": 0,
                    "invalid": 0,
                    "bytes": 0,
                    "invalid_samples": [],
                    "answered": len(warm["latencies"]),
                    "script": script,
                }
            )
        time.sleep(3)
        for rr, px in zip(res, proxies):
            rr["rss_start"] = rss_mib(px.process.pid)[0]
        per_round = [
            args.requests // args.rounds + (1 if i < args.requests % args.rounds else 0) for i in range(args.rounds)
        ]
        for rnd, n in enumerate(per_round):
            order = list(range(len(proxies)))
            if rnd % 2:
                order.reverse()
            for i in order:
                px, rr = proxies[i], res[i]
                before = upstream_stats(up_port)
                p, r = run_client(
                    px,
                    up_port,
                    templates,
                    n,
                    args.concurrency,
                    f"run{rr['label']}" if replay else f"run{rr['label']}-{rnd}",
                    replay=replay,
                )
                got = r.recv()
                p.join()
                after = upstream_stats(up_port)
                rr["latencies"] += got["latencies"]
                rr["answered"] += len(got["latencies"])
                rr["errors"] += got["errors"]
                rr["samples"] += got["samples"]
                rr["seconds"] += got["seconds"]
                rr["upstream"] += after["requests"] - before["requests"]
                rr["invalid"] += after["invalid"] - before["invalid"]
                rr["bytes"] += after["bytes"] - before["bytes"]
                rr["invalid_samples"] = after["invalid_samples"]
                print(
                    f"round {rnd + 1}/{args.rounds} {rr['label']}: {len(got['latencies'])} answered, {got['errors']} errors, "
                    f"{len(got['latencies']) / got['seconds']:.1f} requests/s",
                    flush=True,
                )
        for rr, px in zip(res, proxies):
            rr["rss_end"], rr["rss_peak"] = rss_mib(px.process.pid)
            rr["mean_kb"] = rr["bytes"] / max(1, rr["upstream"]) / 1024
            rr["rows"] = ledger_rows(px.home, rr["answered"]) if rr["script"] is not None else None
            rr["log"] = px.log_text()[-3000:]
        return res
    finally:
        for px in proxies:
            px.cleanup()


def ledger_rows(home: Path, expect: int, wait_s: float = 30.0) -> int:
    import sqlite3

    deadline = time.monotonic() + wait_s
    n = 0
    while time.monotonic() < deadline:
        with sqlite3.connect(home / "headroom.db", timeout=30) as c:
            n = c.execute("select count(*) from request_outcomes").fetchone()[0]
        if n >= expect:
            break
        time.sleep(0.2)
    return n


def kill9(up_port: int, templates, args) -> None:
    from tests.support.proxy import ADDON_SCRIPT, MitmProxy

    px = MitmProxy(
        ADDON_SCRIPT,
        options={"flow_detail": 0, "headroom_compress_timeout_seconds": args.compress_timeout},
        startup_timeout=120,
    )
    px.start()
    try:
        progress = mp.Value("i", 0)
        p, r = run_client(px, up_port, templates, args.requests, args.concurrency, "kill", progress)
        while progress.value < args.kill_after and p.is_alive():
            time.sleep(0.01)
        answered = progress.value
        t_kill = time.monotonic()
        px.process.send_signal(signal.SIGKILL)
        px.process.wait(30)
        res = r.recv()
        p.join()
        rows_now = ledger_rows(px.home, 0, 0.01)
        px.restart()
        px.wait_for_log(r"headroom: ready", timeout=120, since_start=True)  # the journal is written before it
        rows_after = ledger_rows(px.home, 0, 0.01)
        print(
            f"kill -9 after {answered} answered requests (client saw {len(res['latencies'])} answered in all, "
            f"{res['errors']} failed when the proxy died): {rows_now} ledger rows right after the kill, {rows_after} after a restart "
            f"[{time.monotonic() - t_kill:.1f} s]"
        )
    finally:
        px.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=10_000, help="requests per proxy (default 10000)")
    ap.add_argument("--concurrency", type=int, default=32, help="simultaneous agents (default 32)")
    ap.add_argument("--body-kb", type=int, default=200, help="mean request body in KB (default 200)")
    ap.add_argument("--only", choices=("both", "plain", "headroom"), default="both")
    ap.add_argument(
        "--script", default="", help="addon script to load instead of addons/headroom.py (e.g. another checkout's)"
    )
    ap.add_argument(
        "--compress-timeout", default="10", help="headroom_compress_timeout_seconds (default 10, the shipped default)"
    )
    ap.add_argument(
        "--kill-after",
        type=int,
        default=0,
        help="kill -9 Headroom after this many answered requests and count ledger rows",
    )
    ap.add_argument("--rounds", type=int, default=5, help="the proxies take turns in this many rounds (default 5)")
    ap.add_argument(
        "--workload",
        choices=("sessions", "replay"),
        default="sessions",
        help="sessions: growing sessions, a new tool output each turn (default); replay: each agent resends one full session turn",
    )
    args = ap.parse_args()

    from rich.console import Console
    from rich.table import Table

    from tests.support.proxy import ADDON_SCRIPT

    templates = build_templates(args.body_kb)
    sizes = [len(t) for ts in templates.values() for t in ts]
    print(
        f"{len(templates['anthropic'])} turns per session; bodies {min(sizes) // 1024}-{max(sizes) // 1024} KB, mean {sum(sizes) / len(sizes) / 1024:.0f} KB"
    )
    certdir = tempfile.mkdtemp(prefix="bench-load-")
    port_r, port_w = mp.Pipe(duplex=False)
    up = mp.Process(target=upstream_main, args=(certdir, port_w, None), daemon=True)
    up.start()
    up_port = port_r.recv()
    script = Path(args.script) if args.script else ADDON_SCRIPT
    try:
        if args.kill_after:
            kill9(up_port, templates, args)
            return
        targets: list[tuple[str, Path | None]] = []
        if args.only in ("both", "plain"):
            targets.append(("plain mitmdump", None))
        if args.only in ("both", "headroom"):
            targets.append(("headroom", script))
        results = run_all(targets, up_port, templates, args)
    finally:
        os.kill(up.pid, signal.SIGTERM)
        up.join(10)

    for r in results:
        if r["errors"] or r["invalid"]:
            print(r["label"], "error samples:", r["samples"], r["invalid_samples"])
            print(r["log"])
    t = Table(
        title=f"{args.requests} requests at concurrency {args.concurrency}, three dialects, JSON and SSE, workload {args.workload}",
        title_justify="left",
    )
    t.add_column("")
    for res in results:
        t.add_column(res["label"], justify="right")
    for res in results:
        res["requests_per_s"] = len(res["latencies"]) / res["seconds"]
    base = results[0]["requests_per_s"] or 1.0
    row = lambda name, fn: t.add_row(name, *[fn(r) for r in results])  # noqa: E731
    row("answered", lambda r: f"{len(r['latencies'])}")
    row("errors", lambda r: f"{r['errors']}")
    row("invalid upstream bodies", lambda r: f"{r['invalid']} of {r['upstream']}")
    row("mean upstream body", lambda r: f"{r['mean_kb']:.0f} KB")
    row("requests/s", lambda r: f"{r['requests_per_s']:.1f}")
    row("ratio to first", lambda r: f"{r['requests_per_s'] / base:.2f}")
    for q in (0.5, 0.9, 0.99):
        row(f"latency p{int(q * 100)}", lambda r, q=q: f"{1000 * pct(r['latencies'], q):.0f} ms")
    row("latency max", lambda r: f"{1000 * max(r['latencies'] or [0]):.0f} ms")
    row("resident memory at start", lambda r: f"{r['rss_start']:.0f} MiB")
    row("resident memory at end", lambda r: f"{r['rss_end']:.0f} MiB")
    row("resident memory peak", lambda r: f"{r['rss_peak']:.0f} MiB")
    row("ledger rows / answered", lambda r: "" if r["rows"] is None else f"{r['rows']} / {r['answered']}")
    row("  (answered includes the warm-up)", lambda r: "")
    Console().print(t)


if __name__ == "__main__":
    main()
