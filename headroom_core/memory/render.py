"""How memories read to the model: the injected block and the memory tools' results."""

from __future__ import annotations

from typing import Callable, Sequence

from headroom_core.memory.store import Hit, MemoryView

INJECT_HEADER = (
    "Memories of this project (saved in earlier sessions, possibly by another coding agent). "
    "Use them when relevant; if one is wrong or outdated, fix it with memory_update or memory_delete and its id."
)


def line(m: MemoryView) -> str:
    """One memory as a line: ``- [memory <id>] (<kind>) <text>``."""
    return f"- [memory {m.id}] ({m.kind}) {m.text}"


def inject_block(
    hits: Sequence[Hit], max_entries: int, max_tokens: int, count: Callable[[str], int]
) -> tuple[str | None, list[str]]:
    """The text to inject for ``hits`` (best first): the header and as many lines as fit in
    ``max_entries`` and ``max_tokens`` (counted with ``count``, header included); a line that
    does not fit is skipped and smaller ones after it may still fit. Returns ``(text or None,
    ids injected)``."""
    used = count(INJECT_HEADER)
    lines: list[str] = []
    ids: list[str] = []
    for h in hits:
        if len(lines) >= max_entries:
            break
        ln = line(h.memory)
        n = count(ln) + 1
        if used + n > max_tokens:
            continue
        used += n
        lines.append(ln)
        ids.append(h.memory.id)
    if not lines:
        return None, []
    return INJECT_HEADER + "\n" + "\n".join(lines), ids
