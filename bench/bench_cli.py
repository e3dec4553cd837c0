"""Benchmark: how long the ``headroom`` commands a user types take, end to end (a new process each
time, as from a shell), and where a memory command's time goes.

Run ``python bench/bench_cli.py [--runs 5]`` from the project root. Everything runs in a fresh
temporary Headroom home (never ``~/.headroom``) with no ``HEADROOM_*`` variables of the caller.

Table 1, per command, min / median / max wall seconds over ``--runs`` runs:

* ``headroom --version``, ``headroom --help``;
* ``headroom stats`` on a ledger the proxy made;
* ``headroom wrap -q true`` with a Headroom proxy already running on the port (started once with
  ``headroom proxy --detach``, its start time shown on its own row, then stopped);
* ``headroom compress FILE``: a 1.1 MB log (the eight loghub 2k logs of ``../shared/corpus``,
  or a generated log when the corpus is absent) and a prose file (which loads the embedding model);
* ``headroom memory add`` in a project without memories (no model needed), in a project with
  memories (the model finds near-duplicates), ``memory search`` (the model ranks) and
  ``memory search --text`` (words only).

Table 2, the parts of a memory command (one new process per run): Python and the CLI's own
imports, opening the database (SQLAlchemy, migrations), importing torch, transformers and
sentence-transformers, building the model from its folder, one encode.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.support.proxy import free_port  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
HEADROOM = str(Path(sys.executable).parent / "headroom")

#: The parts of a memory command, timed in one process (printed as JSON laps).
PARTS = r"""
import json, os, sys, time
t0 = time.perf_counter(); laps = {}
def lap(name):
    global t0
    now = time.perf_counter(); laps[name] = now - t0; t0 = now
import typer, rich, headroom_core.cli.main
lap("CLI imports (typer, rich, the command table)")
from headroom_core.settings import load_settings
from headroom_core.db.engine import open_database
from headroom_core.memory.store import MemoryStore
s = load_settings(); open_database(s.database_url)
lap("open the database (SQLAlchemy, migrations, memory store)")
import torch
lap("import torch")
import transformers
lap("import transformers")
import sentence_transformers
lap("import sentence-transformers (scikit-learn, scipy)")
from headroom_core.compress.embeddings import default_model_path
from transformers.utils import logging as hf_logging
hf_logging.disable_progress_bar()
torch.set_num_threads(1)
m = sentence_transformers.SentenceTransformer(default_model_path(), device="cpu", local_files_only=True)
lap("build the model from its folder")
m.encode(["how do I run the tests?"], normalize_embeddings=True, show_progress_bar=False)
lap("encode one sentence")
print("LAPS " + json.dumps(laps))
"""


def env_for(home: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_") and not k.lower().endswith("_proxy")}
    return {**base, "HEADROOM_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def timed(args: list[str], env: dict[str, str], cwd: Path) -> float:
    """Wall seconds of one ``args`` process. Raises RuntimeError when it fails."""
    t = time.perf_counter()
    out = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {out.returncode}: {out.stderr[-800:]}")
    return took


def log_file(folder: Path) -> Path:
    """The loghub 2k logs in one file (or a generated log of about the same size)."""
    f = folder / "loghub.log"
    logs = sorted(CORPUS.glob("logs/*_2k.log"))
    if logs:
        f.write_bytes(b"".join(p.read_bytes() for p in logs))
    else:
        f.write_text(
            "".join(
                f"2025-06-01 10:00:{i % 60:02d} INFO worker-{i % 7} handled request {i} in {i % 97} ms\n"
                for i in range(16000)
            )
        )
    return f


def prose_file(folder: Path) -> Path:
    src = CORPUS / "README.md"
    f = folder / "notes.md"
    f.write_text(
        src.read_text()
        if src.exists()
        else ("The proxy compresses tool outputs before they reach the model. " * 40 + "\n\n") * 12
    )
    return f


def row(t: Table, name: str, xs: list[float]) -> None:
    t.add_row(name, str(len(xs)), f"{min(xs):.2f}", f"{statistics.median(xs):.2f}", f"{max(xs):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="Runs per command (default 5).")
    a = ap.parse_args()
    console = Console(width=110)  # one line per row, also into a file or pipe
    with tempfile.TemporaryDirectory(prefix="headroom-bench-cli-") as tmp:
        root = Path(tmp)
        home, work, empty = root / "home", root / "project", root / "empty"
        for d in (home, work, empty):
            d.mkdir()
        env = env_for(home)
        log, prose = log_file(root), prose_file(root)
        results: dict[str, list[float]] = {}

        def run(name: str, args: list[str], cwd: Path = work) -> None:
            for _ in range(a.runs):
                results.setdefault(name, []).append(timed(args, env, cwd))

        port = free_port()
        start = time.perf_counter()
        timed(
            [HEADROOM, "proxy", "--detach", "--port", str(port), "--anthropic-port", "0", "--openai-port", "0"],
            env,
            work,
        )
        results["headroom proxy --detach (start, once)"] = [time.perf_counter() - start]
        try:
            run("headroom --version", [HEADROOM, "--version"])
            run("headroom --help", [HEADROOM, "--help"])
            run("headroom stats", [HEADROOM, "stats"])
            run("headroom wrap -q true (proxy running)", [HEADROOM, "wrap", "--port", str(port), "-q", "true"])
        finally:
            subprocess.run(
                [HEADROOM, "proxy", "--stop", "--port", str(port)], env=env, capture_output=True, timeout=120
            )
        run(f"headroom compress FILE (log, {log.stat().st_size / 1e6:.1f} MB)", [HEADROOM, "compress", str(log)])
        run(
            f"headroom compress FILE (prose, {prose.stat().st_size / 1e3:.0f} kB: model)",
            [HEADROOM, "compress", str(prose)],
        )
        n = iter(range(10**6))

        for _ in range(a.runs):
            results.setdefault("headroom memory add (first of a project: no model)", []).append(
                timed(
                    [
                        HEADROOM,
                        "memory",
                        "add",
                        "--project",
                        f"/bench/new-{next(n)}",
                        "The build needs make -j4 and GNU make 4.3",
                    ],
                    env,
                    work,
                )
            )
        timed([HEADROOM, "memory", "add", "The test suite runs with pnpm test:unit"], env, work)
        for _ in range(a.runs):
            results.setdefault("headroom memory add (near-duplicate check: model)", []).append(
                timed(
                    [HEADROOM, "memory", "add", f"Deploys go through the staging cluster first ({next(n)})"], env, work
                )
            )
        run("headroom memory search (model)", [HEADROOM, "memory", "search", "how are tests run?"])
        run("headroom memory search --text", [HEADROOM, "memory", "search", "--text", "tests"])
        run("headroom memory search (a project without memories)", [HEADROOM, "memory", "search", "tests"], cwd=empty)

        parts: dict[str, list[float]] = {}
        for _ in range(a.runs):
            out = subprocess.run(
                [sys.executable, "-c", PARTS], env=env, cwd=work, capture_output=True, text=True, timeout=600
            )
            if out.returncode != 0:
                raise RuntimeError(out.stderr[-800:])
            for k, v in json.loads(out.stdout.rsplit("LAPS ", 1)[1]).items():
                parts.setdefault(k, []).append(v)

    t = Table(
        title=f"headroom commands, wall seconds per new process ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})",
        title_justify="left",
    )
    for c in ("command", "runs", "min", "median", "max"):
        t.add_column(c, justify="left" if c == "command" else "right", no_wrap=c != "command")
    for name, xs in results.items():
        row(t, name, xs)
    console.print(t)
    p = Table(title="where a memory command's time goes (seconds, one process per run)", title_justify="left")
    for c in ("part", "runs", "min", "median", "max"):
        p.add_column(c, justify="left" if c == "part" else "right", no_wrap=c != "part")
    for name, xs in parts.items():
        row(p, name, xs)
    console.print(p)


if __name__ == "__main__":
    main()
