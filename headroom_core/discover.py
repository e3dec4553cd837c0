"""What the proxy would have saved on past sessions: the tool outputs in Claude Code, Codex and
SWE-agent session logs, run through the same pipeline as live traffic.

The logs are found and read with the session-log readers' public functions
(:mod:`headroom_core.learn.readers`: ``find_logs``, ``read_jsonl``); this module only pulls the
tool calls and their outputs out of the records. Each output is judged as the proxy judges it
the first time it is in the live zone (:func:`~headroom_core.compress.pipeline.compress_outputs`
with the proxy's settings): small outputs, errors, excluded tools and the latest read of a file
stay as they are (when an output is new, its own read is the latest view of that file, so reads
are kept verbatim, as live). Nothing is stored: the decision cache lives in memory only.

Figures are estimated tokens (the proxy's counter) of each output once; every later turn of a
session sends the outputs again, so the saving per request is larger than this.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headroom_core.learn.readers import LogError, read_jsonl
from headroom_core.wire.blocks import ToolCall, ToolOutput


@dataclass(frozen=True)
class LoggedOutput:
    """One tool output found in a log: the call that produced it and its text."""

    source: str  # "claude-code" | "codex" | "swe-agent"
    path: str
    call: ToolCall
    text: str
    is_error: bool = False


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    if isinstance(content, dict):
        return json.dumps(content)
    return ""


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def claude_code_outputs(path: Path) -> Iterator[LoggedOutput]:
    """The ``tool_result`` blocks of a Claude Code session log, each with its ``tool_use``."""
    records, _, _ = read_jsonl(path)
    calls: dict[str, ToolCall] = {}
    for r in records:
        msg = r.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            continue
        for b in content:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                calls[b["id"]] = ToolCall(b["id"], str(b.get("name") or ""), b.get("input"))
            elif b.get("type") == "tool_result":
                call = calls.pop(str(b.get("tool_use_id", "")), None)
                if call is not None:
                    yield LoggedOutput("claude-code", str(path), call, _text(b.get("content")), bool(b.get("is_error")))


def codex_outputs(path: Path) -> Iterator[LoggedOutput]:
    """The ``function_call_output`` (and custom / local shell) items of a Codex rollout."""
    records, _, _ = read_jsonl(path)
    calls: dict[str, ToolCall] = {}
    for r in records:
        p = got if isinstance(got := r.get("payload"), dict) else r
        t = p.get("type")
        if t in ("function_call", "custom_tool_call", "local_shell_call"):
            cid = str(p.get("call_id") or p.get("id") or "")
            if t == "local_shell_call":
                calls[cid] = ToolCall(cid, "local_shell", p.get("action") or {})
            else:
                calls[cid] = ToolCall(
                    cid, str(p.get("name") or ""), _args(p.get("arguments") if t == "function_call" else p.get("input"))
                )
        elif t in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            call = calls.pop(str(p.get("call_id") or ""), None)
            if call is not None:
                out = p.get("output")
                if isinstance(out, str):  # Codex wraps shell output as {"output": ..., "metadata": ...}
                    try:
                        inner = json.loads(out)
                    except ValueError:
                        inner = None
                    if isinstance(inner, dict) and isinstance(inner.get("output"), str):
                        out = inner["output"]
                yield LoggedOutput("codex", str(path), call, _text(out))


def swe_agent_outputs(path: Path) -> Iterator[LoggedOutput]:
    """The observations of a SWE-agent trajectory; the tool is the action's first word."""
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as e:
        raise LogError(f"{path}: not a readable SWE-agent trajectory ({e})") from e
    steps = data.get("trajectory") if isinstance(data, dict) else None
    if not isinstance(steps, list):
        raise LogError(f"{path}: not a SWE-agent trajectory (no 'trajectory' list)")
    for i, st in enumerate(steps):
        if (
            not isinstance(st, dict)
            or not isinstance(st.get("action"), str)
            or not isinstance(st.get("observation"), str)
        ):
            continue
        action = st["action"].strip()
        word = action.split(maxsplit=1)[0] if action else ""
        yield LoggedOutput(
            "swe-agent",
            str(path),
            ToolCall(f"{path.stem}-{i}", f"swe-agent:{word}", {"command": action}),
            st["observation"],
        )


def outputs_of(path: Path) -> Iterator[LoggedOutput]:
    """The tool outputs of any supported log, by name and content as ``learn`` reads them:
    ``*.traj`` is SWE-agent; a ``.jsonl`` whose first records carry ``payload`` /
    ``session_meta`` (or named ``rollout-*``) is Codex; other ``.jsonl`` is Claude Code.
    Raises :class:`~headroom_core.learn.readers.LogError` when the file cannot be read."""
    if path.suffix == ".traj":
        yield from swe_agent_outputs(path)
        return
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            head = fh.read(4096)
    except OSError as e:
        raise LogError(f"{path}: cannot read ({e})") from e
    if path.name.startswith("rollout-") or '"session_meta"' in head or '"payload"' in head[:600]:
        yield from codex_outputs(path)
    else:
        yield from claude_code_outputs(path)


@dataclass
class Tally:
    """Counts for one tool or kind: ``outputs`` seen, ``compressed`` of them, estimated tokens
    ``before``/``after`` (whole tokens)."""

    outputs: int = 0
    compressed: int = 0
    before: int = 0
    after: int = 0

    @property
    def saved(self) -> int:
        return self.before - self.after

    @property
    def saved_share(self) -> float | None:
        return self.saved / self.before if self.before else None

    def add(self, changed: bool, before: int, after: int) -> None:
        self.outputs += 1
        self.compressed += 1 if changed else 0
        self.before += before
        self.after += after


@dataclass
class Discovery:
    """The result: ``files`` read, ``unreadable`` (path -> why), ``outputs`` found, and tallies
    of the outputs the pipeline considered, in total, per tool, per kind and per source."""

    files: int = 0
    unreadable: dict[str, str] = field(default_factory=dict)
    outputs: int = 0
    total: Tally = field(default_factory=Tally)
    by_tool: dict[str, Tally] = field(default_factory=dict)
    by_kind: dict[str, Tally] = field(default_factory=dict)
    by_source: dict[str, Tally] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: every tally as ``{outputs, compressed, before, after, saved, saved_share}``."""

        def t(x: Tally) -> dict[str, Any]:
            return {
                "outputs": x.outputs,
                "compressed": x.compressed,
                "before": x.before,
                "after": x.after,
                "saved": x.saved,
                "saved_share": x.saved_share,
            }

        return {
            "files": self.files,
            "unreadable": self.unreadable,
            "outputs": self.outputs,
            "total": t(self.total),
            "by_tool": {k: t(v) for k, v in sorted(self.by_tool.items(), key=lambda kv: -kv[1].saved)},
            "by_kind": {k: t(v) for k, v in sorted(self.by_kind.items(), key=lambda kv: -kv[1].saved)},
            "by_source": {k: t(v) for k, v in self.by_source.items()},
        }


def read_outputs(
    paths: Iterable[Path], found: Discovery, on_file: Callable[[Path], None] = lambda p: None
) -> list[LoggedOutput]:
    """Every tool output of ``paths`` (unreadable files are noted in ``found``)."""
    out: list[LoggedOutput] = []
    for p in paths:
        on_file(p)
        try:
            got = list(outputs_of(p))
        except LogError as e:
            found.unreadable[str(p)] = str(e).split(": ", 1)[-1]
            continue
        found.files += 1
        out += got
    found.outputs += len(out)
    return out


#: Kind labels of outputs the pipeline keeps without classifying them (as the ledger names them).
KEPT = {
    "latest view of a file": "latest file read (kept)",
    "tool excluded": "excluded",
    "too large to compress in time": "too large (kept)",
}


def discover(
    outputs: Iterable[LoggedOutput],
    judge: Callable[[ToolOutput, ToolCall], Any],
    found: Discovery,
    count: Callable[[str], int],
    on_output: Callable[[LoggedOutput], None] = lambda o: None,
) -> Discovery:
    """Run ``judge`` (one output -> a :class:`~headroom_core.compress.pipeline.PipelineResult`)
    on every output and tally the blocks it considered; outputs it kept without counting them
    (a file's latest read, an excluded tool) are counted with ``count`` (text -> tokens) and
    tallied as kept. Returns ``found``."""
    for i, o in enumerate(outputs):
        on_output(o)
        if o.is_error:
            continue
        res = judge(ToolOutput((i,), o.text, o.call.name, o.call.call_id, 0), o.call)
        for b in res.blocks:
            before, after, kind = b.tokens_before, b.tokens_after, b.kind
            if not kind:
                kind = KEPT.get(b.reason, "kept as is")
                if before == 0 and b.reason != "too large to compress in time":
                    before = after = count(o.text)
            for tally in (
                found.total,
                found.by_tool.setdefault(o.call.name or "(unnamed)", Tally()),
                found.by_kind.setdefault(kind, Tally()),
                found.by_source.setdefault(o.source, Tally()),
            ):
                tally.add(b.changed, before, after)
    return found
