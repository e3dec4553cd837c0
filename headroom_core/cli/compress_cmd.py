"""``headroom compress FILE|-``: preview what the proxy would do to a tool output.

The same router and compressors as the proxy (``compress/router.py::compress_text``) run on a
file or standard input. The compressed text goes to standard output; a one-line summary (kind,
tokens before and after, what was kept) to standard error, so the text can be piped on. Nothing
is stored: the originals a marker names are not put in the originals store.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from headroom_core.cli.ui import compact, status
from headroom_core.compress.router import KINDS, Hint, classify, compress_text
from headroom_core.compress.tokens import TokenCounter, TokenizerUnavailable
from headroom_core.settings import SettingsError, load_settings


def summary_line(kind: str, before: int, after: int, strategy: str, reason: str) -> str:
    """``kind=code(python) tokens 5123 -> 1234 (-75.9%) outline: <reason>`` (tokens: whole)."""
    pct = f"{100.0 * (after - before) / before:+.1f}%" if before else "-"
    return f"kind={kind} tokens {before} -> {after} ({pct}) {strategy}: {reason}"


def compress(
    source: str = typer.Argument(..., metavar="FILE|-", help="A file to compress, or - for standard input."),
    query: str = typer.Option(
        "", "--query", "-q", help="The user's question: search hits and JSON items are ranked by it."
    ),
    kind: Optional[str] = typer.Option(
        None, "--kind", "-k", help=f"Skip detection and use this kind: {', '.join(KINDS)}."
    ),
    tool: str = typer.Option("", "--tool", help="Tool name the output came from (e.g. Grep, Read), as a hint."),
    min_tokens: Optional[int] = typer.Option(
        None, help="Leave texts under this many tokens alone (default: the proxy's setting)."
    ),
    min_saving_ratio: Optional[float] = typer.Option(
        None, help="Share of tokens a result must save (default: the proxy's setting)."
    ),
) -> None:
    """Compress FILE (or standard input) with the proxy's content router and print the result."""
    if kind is not None and kind not in KINDS:
        typer.echo(f"headroom compress: unknown kind {kind!r}; choose one of {', '.join(KINDS)}", err=True)
        raise typer.Exit(2)
    try:
        if source == "-":
            text = sys.stdin.buffer.read().decode("utf-8")
            path = ""
        else:
            text = Path(source).read_bytes().decode("utf-8")
            path = source
    except (OSError, UnicodeDecodeError) as e:
        typer.echo(f"headroom compress: cannot read {source}: {e}", err=True)
        raise typer.Exit(2) from e
    name = "standard input" if source == "-" else Path(source).name
    # a large file takes seconds (a 23 MB log: ~10 s): say what runs, on standard error only
    with status(f"compressing {name} ({_size(len(text))}) …") as phase:
        try:
            settings = load_settings()
            counter = TokenCounter(settings.home, settings.tokenizer_path)
            hint = Hint(tool_name=tool, path=path, kind=kind or "")
            detected = kind or classify(text, hint).name
            if detected in ("text", "html"):
                phase("loading the embedding model (prose and HTML need it; seconds, once) …")
                _wait_for_model()
            phase(f"compressing {name} ({_size(len(text))}, {detected}) …")
            res = compress_text(
                text,
                query,
                counter,
                min_tokens=settings.min_tokens if min_tokens is None else min_tokens,
                min_saving_ratio=settings.min_saving_ratio if min_saving_ratio is None else min_saving_ratio,
                hint=hint,
            )
            phase(f"counting the tokens of {name} …")
            before = counter.count(text)
            after = counter.count(res.text) if res.changed else before
            shown = str(classify(text, hint)) if res.kind in ("code", "") or not res.changed else res.kind
        except (SettingsError, TokenizerUnavailable) as e:
            typer.echo(f"headroom compress: {e}", err=True)
            raise typer.Exit(2) from e
    sys.stdout.write(res.text)
    if res.text and not res.text.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()
    typer.echo(summary_line(shown, before, after, res.strategy, res.reason), err=True)
    if res.offloads:
        typer.echo(
            "(a preview: nothing is stored, so the headroom_retrieve keys above answer only when the proxy compresses this output)",
            err=True,
        )


def register(app: typer.Typer) -> None:
    """Add the ``compress`` command to the ``headroom`` app."""
    app.command("compress")(compress)


def _size(chars: int) -> str:
    """A text's size for a progress line: ``812 characters``, ``12.3k characters``, ``23.4M characters``."""
    return f"{compact(chars)} characters"


def _wait_for_model() -> None:
    """A preview may take its time: load the embedding model (prose and HTML need it) instead of
    answering "model loading" as the proxy does while it loads in the background."""
    from headroom_core.compress import embeddings

    if embeddings.available():
        try:
            embeddings.get_model()
        except embeddings.EmbeddingModelUnavailable:
            pass  # the compressors then say why
