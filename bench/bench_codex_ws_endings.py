"""What Codex CLI (the pinned release scripts/agents installs) does with each way a Responses
WebSocket response can end badly, straight against the test upstream (no proxy): the facts the
proxy's choice rests on (headroom_core/wire/reply_responses.py: a follow-up the provider fails
reaches the client as a ``response.failed`` carrying the provider's error). Prints one table.

    .venv/bin/python bench/bench_codex_ws_endings.py [-k WORD]

Each row: ``codex exec "Say hi."`` with a custom provider over the WebSocket; the socket's
prewarm frame is answered empty, the first real frame gets the ending, every later request the
text "All done.". Columns: Codex's exit status, whether it asked again (and after how many
seconds, on which transport), and its last error line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.support.agents import agents_dir  # noqa: E402
from tests.support.upstream import RawReply, Reply, Upstream  # noqa: E402


def _ev(d: dict) -> bytes:
    return json.dumps(d).encode()


CREATED = _ev(
    {
        "type": "response.created",
        "sequence_number": 0,
        "response": {"id": "resp_end", "object": "response", "status": "in_progress", "model": "gpt-5.5", "output": []},
    }
)
ADDED = _ev(
    {
        "type": "response.output_item.added",
        "sequence_number": 1,
        "output_index": 0,
        "item": {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []},
    }
)
DELTA = _ev(
    {
        "type": "response.output_text.delta",
        "sequence_number": 2,
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": "Partial text so far.",
    }
)
RL = "Rate limit reached for gpt-5.5 on tokens per min (TPM): Limit 30000, Used 30000, Requested 500. Please try again in 1.5s."


def _error(status: int | None, code: str, message: str) -> bytes:
    d: dict = {"type": "error", "error": {"type": "requests", "code": code, "message": message}}
    if status is not None:
        d["status"] = status
    return _ev(d)


def _failed(code: str, message: str) -> bytes:
    resp = {
        "id": "resp_end",
        "object": "response",
        "status": "failed",
        "model": "gpt-5.5",
        "output": [],
        "error": {"code": code, "message": message},
    }
    return _ev({"type": "response.failed", "sequence_number": 3, "response": resp})


INCOMPLETE = _ev({"type": "response.incomplete", "sequence_number": 3, "response": {
    "id": "resp_end", "object": "response", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "model": "gpt-5.5",
    "output": [{"id": "msg_1", "type": "message", "status": "incomplete", "role": "assistant", "content": [{"type": "output_text", "text": "Partial text so far.", "annotations": []}]}],
    "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}})  # fmt: skip

#: (name, the ending's frames as a RawReply)
ENDINGS: list[tuple[str, RawReply]] = [
    (
        "error event, status 429 rate_limit_exceeded, mid-response",
        RawReply(chunks=(CREATED, ADDED, DELTA, _error(429, "rate_limit_exceeded", RL))),
    ),
    (
        "error event, status 500, mid-response",
        RawReply(chunks=(CREATED, _error(500, "server_error", "The server had an error."))),
    ),
    (
        "error event without status, mid-response",
        RawReply(chunks=(CREATED, ADDED, DELTA, _error(None, "rate_limit_exceeded", RL))),
    ),
    (
        "response.failed rate_limit_exceeded ('try again in 1.5s')",
        RawReply(chunks=(CREATED, ADDED, DELTA, _failed("rate_limit_exceeded", RL))),
    ),
    ("response.failed server_error", RawReply(chunks=(CREATED, _failed("server_error", "The server had an error.")))),
    ("response.incomplete max_output_tokens", RawReply(chunks=(CREATED, ADDED, DELTA, INCOMPLETE))),
    ("socket cut mid-response", RawReply(chunks=(CREATED, ADDED, DELTA), close=True)),
    ("close frame 1011 mid-response", RawReply(status=1011, chunks=(CREATED, ADDED, DELTA), abort=True)),
]


def codex() -> Path | None:
    found = sorted(agents_dir().glob("codex-*/stamp"))
    exe = Path(found[-1].read_text().strip()) if found else None
    return exe if exe is not None and os.access(exe, os.X_OK) else None


def run(exe: Path, ending: RawReply) -> tuple[str, str, str]:
    """Codex against an upstream whose first real frame gets ``ending``: (exit, asked again, last error)."""
    with Upstream() as up:
        up.script(Reply(text=None))  # the socket's prewarm frame
        up.script(ending)
        up.responder = lambda rec: Reply.text("All done.")
        d = Path(tempfile.mkdtemp(prefix="codex-endings-"))
        (d / "codex").mkdir()
        (d / "ws").mkdir()
        (d / "codex" / "config.toml").write_text(
            f'model = "gpt-5.5"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
            f'base_url = "{up.url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\nsupports_websockets = true\n'
        )
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.lower().endswith("_proxy") and not k.startswith(("HEADROOM_", "CODEX_", "OPENAI_"))
        }
        env.update(
            HOME=str(d),
            CODEX_HOME=str(d / "codex"),
            SCRIPTED_API_KEY="sk-bench",
            CODEX_CA_CERTIFICATE=str(up.ca_path),
            SSL_CERT_FILE=str(up.ca_path),
        )
        cmd = [
            str(exe),
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-C",
            str(d / "ws"),
            "Say hi.",
        ]
        try:
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL)
            status, text = str(out.returncode), out.stderr + out.stdout
        except subprocess.TimeoutExpired:
            status, text = "timeout", ""
        llm = [r for r in up.requests if r.method in ("WS", "POST")]
        faulted = llm[1] if len(llm) > 1 else None  # after the prewarm
        again = llm[2:]
        if faulted is None:
            asked = "-"
        elif again:
            asked = f"yes, {again[0].received_at - faulted.received_at:.1f} s later ({again[0].method})"
        else:
            asked = "no"
        errors = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("ERROR")]
        return status, asked, errors[-1][:90] if errors else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", default="", help="only the endings whose name contains this")
    args = ap.parse_args()
    exe = codex()
    if exe is None:
        print("Codex is not installed: scripts/agents codex")
        return
    table = Table(title=f"Codex ({exe.parent.parent.parent.name}) and a Responses WebSocket response that ends badly")
    for col in ("ending", "exit", "asked again", "last error line"):
        table.add_column(col, overflow="fold")
    for name, ending in ENDINGS:
        if args.k.lower() in name.lower():
            table.add_row(name, *run(exe, ending))
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
