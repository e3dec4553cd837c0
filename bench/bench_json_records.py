"""Benchmark: the JSON compressor on one large tool output of many small records (issue 33).

Run ``python bench/bench_json_records.py [--runs N] [--records N]`` from the project root.
Generates, deterministically (a seeded ``random.Random``), the outputs an agent meets when it
lists things: about 1 MB holding 12,000 small records each, as

* ``ls``: a directory listing as JSON (name, type, size, modified), compact as ``jq -c`` prints;
* ``api``: a REST listing (id, title, state, user object, labels, creation date), compact;
* ``ls-pretty``: the ``ls`` records pretty-printed (``indent=2``, as ``jq .`` prints), larger.

For each it prints characters, tokens before and after (cl100k_base), the strategy chosen, the
SHA-256 prefix of the compressed bytes (so a change of output shows) and the wall time of
:func:`headroom_core.compress.router.compress_text` with the vocabulary loaded but every count
new (a fresh counter sharing the loaded vocabulary each run): min and median of ``--runs``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.compress.router import Hint, compress_text  # noqa: E402
from headroom_core.compress.tokens import TokenCounter  # noqa: E402

QUERY = "Which of these are large or were changed in March?"


def ls_records(n: int, seed: int = 7) -> list[dict]:
    """``n`` directory entries as a listing tool prints them."""
    rnd = random.Random(seed)
    exts = ("py", "ts", "md", "json", "go", "rs", "txt")
    return [
        {
            "name": f"{rnd.choice(('core', 'util', 'api', 'db', 'web'))}_{i:05d}.{rnd.choice(exts)}",
            "type": rnd.choice(("file",) * 9 + ("dir",)),
            "size": rnd.randint(0, 200_000),
            "modified": f"2024-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}T{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:00Z",
        }
        for i in range(n)
    ]


def api_records(n: int, seed: int = 11) -> list[dict]:
    """``n`` issues as a REST API lists them (a smaller GitHub issue object)."""
    rnd = random.Random(seed)
    users = [f"user{k}" for k in range(40)]
    words = "fix add crash parser cache timeout docs flaky test build release memory leak".split()
    out = []
    for i in range(n):
        login = rnd.choice(users)
        out.append({
            "id": 1_000_000 + i,
            "title": " ".join(rnd.choice(words) for _ in range(2)),
            "state": rnd.choice(("open",) * 3 + ("closed",)),
            "user": {"login": login},
            "labels": [rnd.choice(("bug", "docs"))] if rnd.random() < 0.3 else [],
            "created_at": f"2024-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}",
        })  # fmt: skip
    return out


def outputs(records: int) -> dict[str, str]:
    ls = ls_records(records)
    return {
        "ls": json.dumps(ls),
        "api": json.dumps(api_records(records)),
        "ls-pretty": json.dumps(ls, indent=2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--records", type=int, default=12_000)
    args = ap.parse_args()
    base = TokenCounter(ROOT)
    vocab = base._tokenizer()  # loaded once; each run counts afresh with it
    table = Table(
        title=f"JSON compressor on {args.records:,} small records (compress_text, warm vocabulary, new counts)"
    )
    for col in ("output", "chars", "tokens before", "tokens after", "strategy", "sha256[:12]", "min s", "median s"):
        table.add_column(col, justify="left" if col in ("output", "strategy", "sha256[:12]") else "right")
    for name, text in outputs(args.records).items():
        secs = []
        res = None
        for _ in range(args.runs):
            counter = TokenCounter(ROOT)
            counter._tok = vocab
            t0 = time.perf_counter()
            res = compress_text(text, QUERY, counter, min_tokens=250, min_saving_ratio=0.1, hint=Hint(tool_name="Bash"))
            secs.append(time.perf_counter() - t0)
        assert res is not None
        table.add_row(
            name, f"{len(text):,}", f"{base.count(text):,}", f"{base.count(res.text):,}", res.strategy,
            hashlib.sha256(res.text.encode()).hexdigest()[:12], f"{min(secs):.3f}", f"{statistics.median(secs):.3f}",
        )  # fmt: skip
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
