"""Compress unified diffs (``git diff``, ``git show``, ``diff -u``, SWE-agent ``submit``).

Kept as they are: every line outside hunks (commit headers, ``diff --git``, ``index``, ``---``,
``+++``, mode and rename lines), every hunk header (``@@ -a,b +c,d @@``), every changed line
(``+``/``-``) and ``\\ No newline at end of file``. Unchanged context lines (a leading space)
keep :data:`CONTEXT` line next to each change; a run of context between two changes that loses
lines is replaced by one ``… N unchanged lines`` line, so no two shown lines look adjacent when
they are not. The hunk headers still give every line's place in the file. One marker at the end
names how many context lines went; its key retrieves the whole original diff.
"""

from __future__ import annotations

import re

from headroom_core.compress.gain import finish, too_small
from headroom_core.compress.markers import make_marker, offload_key
from headroom_core.compress.result import CompressResult
from headroom_core.compress.tokens import TokenCounter

KIND = "diff"
CONTEXT = 1

HUNK_RX = re.compile(r"^@@@? -\d+(,\d+)? \+\d+(,\d+)? @@")


def looks_like_diff(lines: list[str]) -> bool:
    """True when ``lines`` hold a unified diff: a ``diff --git`` line, or ``---``/``+++`` file
    headers followed by a hunk header."""
    seen_minus = seen_plus = False
    for ln in lines[:2000]:
        if ln.startswith("diff --git ") or ln.startswith("diff -u"):
            return True
        if ln.startswith("--- "):
            seen_minus = True
        elif ln.startswith("+++ ") and seen_minus:
            seen_plus = True
        elif seen_plus and HUNK_RX.match(ln):
            return True
    return False


def compress_diff(
    text: str,
    query: str,
    counter: TokenCounter,
    *,
    min_tokens: int = 250,
    min_saving_ratio: float = 0.10,
) -> CompressResult:
    """Collapse unchanged context in the unified diff ``text`` (see module docstring).

    ``query`` is unused (every change stays). Returns unchanged, with the reason, when the text
    is under ``min_tokens`` tokens, is not a diff, has no context to drop, or saves less than
    ``min_saving_ratio``. Otherwise strategy ``"context"`` with one offload holding ``text``.
    """
    if too_small(text, counter, min_tokens):
        return CompressResult.unchanged(text, KIND, "small")
    lines = text.split("\n")
    if not looks_like_diff(lines):
        return CompressResult.unchanged(text, KIND, "not a unified diff")
    out: list[str] = []
    run: list[str] = []  # pending context lines
    in_hunk = False
    after_change = False
    dropped = 0
    changed = 0

    def flush(before_change: bool) -> None:
        nonlocal dropped
        keep_head = CONTEXT if after_change else 0
        keep_tail = CONTEXT if before_change else 0
        if len(run) <= keep_head + keep_tail + 1:
            out.extend(run)
        else:
            out.extend(run[:keep_head])
            n = len(run) - keep_head - keep_tail
            if after_change and before_change:
                out.append(f"… {n} unchanged lines")
            dropped += n
            out.extend(run[len(run) - keep_tail :] if keep_tail else [])
        run.clear()

    old = new = 0  # lines the current hunk still has, by its header's counts
    for ln in lines:
        if in_hunk and (old > 0 or new > 0):
            tag = ln[:1]
            if tag in (" ", "") and old > 0 and new > 0:
                old, new = old - 1, new - 1
                run.append(ln)
                continue
            if (tag == "-" and old > 0) or (tag == "+" and new > 0):
                if tag == "-":
                    old -= 1
                else:
                    new -= 1
                flush(True)
                out.append(ln)
                after_change = True
                changed += 1
                continue
            if tag == "\\":
                flush(True)
                out.append(ln)
                continue
        if in_hunk:
            flush(False)
        m = HUNK_RX.match(ln)
        in_hunk = m is not None
        if m:
            old = int(m.group(1)[1:]) if m.group(1) else 1
            new = int(m.group(2)[1:]) if m.group(2) else 1
        after_change = False
        out.append(ln)
    if in_hunk:
        flush(False)
    files = sum(1 for ln in lines if ln.startswith("diff ")) or sum(1 for ln in lines if ln.startswith("+++ "))
    if dropped == 0:
        return CompressResult.unchanged(text, KIND, "no context to collapse")
    marker = make_marker(f"{dropped} unchanged context lines", offload_key(text))
    if out and out[-1] == "":
        out.insert(len(out) - 1, marker)
    else:
        out.append(marker)
    reason = f"{files} files, {changed} changed lines kept, {dropped} context lines collapsed"
    return finish(text, "\n".join(out), counter, kind=KIND, strategy="context", reason=reason,
                  what=f"{dropped} context lines", min_saving_ratio=min_saving_ratio)  # fmt: skip
