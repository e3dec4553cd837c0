"""Reading user turns for memory: the latest user text to rank memories against, explicit
"remember: …" instructions to save, the kind a statement most likely is, and the ids of
memories already injected earlier in the conversation (never injected twice)."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from headroom_core.inject import BLOCK_HEADER
from headroom_core.wire.detect import Dialect
from headroom_core.wire.request_view import view_of

# Blocks agents add to user messages on their own (not the user's words): Claude Code's
# <system-reminder>, Codex's <environment_context> / <user_instructions>, our own block.
_AGENT_BLOCKS = re.compile(
    r"<(system-reminder|environment_context|user_instructions|headroom-context|command-message|command-name|local-command-stdout)>.*?</\1>",
    re.S,
)
# "remember: …", "Remember that …", "please remember, …", "memorize: …", "note for later: …", at
# the start of a line or of a sentence; the statement runs to the end of the line
_EXPLICIT = re.compile(
    r"(?:^|(?<=[.!?;])[ \t]+)[ \t>*\-]*(?:please[ \t,]+)?(?:remember|memori[sz]e|note for later|for future reference)\b(?:[ \t]*[:,\-–][ \t]*|[ \t]+that[ \t]+)(?P<text>\S.*?)[ \t]*$",
    re.I | re.M,
)
# an id as the injected block shows it: "[memory 3f9a2c1b7d10]"
INJECTED_ID = re.compile(r"\[memory ([0-9a-f]{12})\]")

_RULE = re.compile(r"\b(never|always|must|do not|don't|dont|only ever|forbidden|not allowed)\b", re.I)
_PITFALL = re.compile(
    r"\b(pitfall|careful|beware|gotcha|breaks?|fails?|failing|crash(?:es)?|error|bug|doesn't work|does not work|workaround)\b",
    re.I,
)
_PREFERENCE = re.compile(r"\b(prefer|prefers|preferred|i like|we like|rather than|instead of|style)\b", re.I)


def strip_agent_blocks(text: str) -> str:
    """``text`` without the blocks agents and the proxy add on their own, trimmed."""
    return _AGENT_BLOCKS.sub("", text).strip()


def guess_kind(text: str) -> str:
    """``rule`` (never/always/must …), ``pitfall`` (fails, beware …), ``preference`` (prefer …),
    else ``fact``: a keyword heuristic for explicit user instructions (the model states the kind
    itself when it calls ``memory_save``)."""
    if _RULE.search(text):
        return "rule"
    if _PITFALL.search(text):
        return "pitfall"
    if _PREFERENCE.search(text):
        return "preference"
    return "fact"


def explicit_instructions(text: str) -> list[str]:
    """The statements a user asked to be remembered (``remember: X`` starting a line or a sentence),
    in order, agent-added blocks ignored."""
    out = []
    for m in _EXPLICIT.finditer(strip_agent_blocks(text)):
        t = m.group("text").strip().rstrip(".").strip()
        if len(t) >= 3:
            out.append(t + ("." if not t.endswith(("!", "?", "`", ")")) else ""))
    return out


def latest_user_turn(dialect: Dialect, body: Mapping[str, Any], live_from: int) -> str:
    """The user's own words in the conversation's last message, when that message is a user
    message of the live zone; "" otherwise (a tool-result turn, an assistant prefill, a
    replayed message). Agent-added blocks are removed."""
    v = view_of(dialect, body)
    if v.input_text is not None:
        return strip_agent_blocks(v.input_text)
    seq = v.conversation
    if not seq or len(seq) - 1 < live_from:
        return ""
    return strip_agent_blocks("\n".join(v.user_texts(len(seq) - 1)))


def live_user_texts(dialect: Dialect, body: Mapping[str, Any], live_from: int) -> list[str]:
    """Texts of the user messages in the live zone (index >= ``live_from``), in order."""
    v = view_of(dialect, body)
    if v.input_text is not None:
        return [v.input_text]
    return [t for i in range(max(0, live_from), len(v.conversation)) for t in v.user_texts(i)]


def injected_ids(texts: Iterable[str | None]) -> set[str]:
    """Ids of memories the proxy already injected, found in the texts it forwarded earlier in the
    session (the frozen prefix replays them, so the model has them already)."""
    ids: set[str] = set()
    for t in texts:
        if t and BLOCK_HEADER in t:
            ids.update(INJECTED_ID.findall(t))
    return ids
