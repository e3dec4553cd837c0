"""Images: bytes and estimated tokens before and after, per format and size, and the time taken.

    .venv/bin/python bench/bench_images.py [--target 800]

Inputs: the real Claude Code screenshot of ``../shared/corpus/anthropic-flows`` (when present)
and UI-like screenshots at common display sizes made with Pillow, in PNG, JPEG, WebP and GIF.
Rows: the effective-size step for Claude (Sonnet 4.5: long edge 1568 px, 784x1568 budget) and
GPT-4o (detail high), then the opt-in token target for Claude. Prints one table.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from headroom_core.compress import images as I  # noqa: E402
from tests.unit.test_images import screenshot  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "anthropic-flows"
SIZES = [(1920, 1080), (2880, 1800), (3024, 1964), (3840, 2160)]


def inputs() -> list[tuple[str, bytes]]:
    out = []
    f = CORPUS / "session-a-26.json"
    if f.exists():
        blk = json.loads(f.read_text())["request"]["body"]["messages"][2]["content"][2]
        out.append(("corpus screenshot", base64.b64decode(blk["source"]["data"])))
    for w, h in SIZES:
        for fmt in ("PNG", "JPEG", "WEBP", "GIF"):
            out.append((f"{w}x{h}", screenshot(w, h, fmt)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=int, default=800, help="token target of the opt-in step")
    args = ap.parse_args()
    claude = I.anthropic_limit("claude-sonnet-4-5")
    gpt = I.openai_limit("gpt-4o", "high")
    steps = [
        ("claude effective", claude, lambda w, h: I.anthropic_tokens(w, h, claude), 0),
        ("gpt-4o effective", gpt, lambda w, h: I.openai_tokens(w, h, gpt), 0),
        (f"claude target {args.target}", claude, lambda w, h: I.anthropic_tokens(w, h, claude), args.target),
    ]
    t = Table(title="images: bytes and estimated tokens (provider formula) before -> after", title_justify="left")
    for col in (
        "input",
        "format",
        "step",
        "size before",
        "size after",
        "bytes before",
        "bytes after",
        "bytes saved",
        "tokens before",
        "tokens after",
        "ms",
    ):
        t.add_column(col, justify="left" if col in ("input", "format", "step") else "right")
    for name, data in inputs():
        for label, lim, tok, target in steps:
            t0 = time.perf_counter()
            r = I.shrink(data, lim, tok, None, target)
            ms = (time.perf_counter() - t0) * 1000
            saved = f"{100 * (1 - r.bytes_after / r.bytes_before):.0f}%" if r.bytes_before else "-"
            t.add_row(
                name, r.format, label, f"{r.before[0]}x{r.before[1]}", f"{r.after[0]}x{r.after[1]}" if r.changed else "(kept)",
                f"{r.bytes_before:,}", f"{r.bytes_after:,}", saved, f"{r.tokens_before:,}", f"{r.tokens_after:,}", f"{ms:.0f}",
            )  # fmt: skip
    Console(width=200).print(t)


if __name__ == "__main__":
    main()
