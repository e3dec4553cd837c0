"""Optional LLM pass over learned rules: rephrase them and merge those that say the same thing.

Never required: ``headroom learn`` is deterministic without it. The pass sends the rules' texts
(already redacted, no evidence beyond the counts) to the Messages API of the configured provider
(an ``anthropic.Anthropic`` client: ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``) and accepts
the reply only when it is well-formed: a JSON array of ``{"id", "text"}`` naming known rules,
each text non-empty, at most 400 characters and keeping every backticked command of the
original. Anything else keeps the rules as they were (the reason is returned).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any, Sequence

from headroom_core.learn.rules import Rule, rank

DEFAULT_MODEL = "claude-haiku-4-5"
PROMPT = (
    "You edit the rules a coding agent reads before it works in a project. Each rule below was learned "
    "from the agent's own failures. Rewrite each one as a short, natural instruction (one or two sentences). "
    "Keep every `backticked` command or name exactly as written. When two rules say the same thing, give them "
    'the identical text. Do not invent rules. Reply with only a JSON array of objects {"id": ..., "text": ...}, '
    "one per rule, in any order.\n\nRules:\n"
)
_TICKS = re.compile(r"`([^`]+)`")


def rephrase(rules: Sequence[Rule], client: Any, model: str = DEFAULT_MODEL) -> tuple[list[Rule], str]:
    """``(rules, note)``: the rules rephrased and merged (rules given identical texts become
    one, with their evidence added), or the rules unchanged and the reason in ``note``.
    ``client`` is an ``anthropic.Anthropic``; its errors are caught and reported in ``note``."""
    if not rules:
        return list(rules), "no rules"
    listing = "\n".join(json.dumps({"id": r.id, "text": r.text}, ensure_ascii=False) for r in rules)
    try:
        msg = client.messages.create(
            model=model, max_tokens=2000, messages=[{"role": "user", "content": PROMPT + listing}]
        )
        reply = "".join(getattr(b, "text", "") for b in msg.content)
    except Exception as e:  # noqa: BLE001 - any provider failure keeps the deterministic rules
        return list(rules), f"LLM pass skipped: {type(e).__name__}: {e}"
    m = re.search(r"\[.*\]", reply, re.S)
    try:
        items = json.loads(m.group(0)) if m else None
    except ValueError:
        items = None
    if not isinstance(items, list):
        return list(rules), "LLM pass skipped: the reply was not a JSON array"
    by_id = {r.id: r for r in rules}
    texts: dict[str, str] = {}
    for it in items:
        if not isinstance(it, dict) or it.get("id") not in by_id or not isinstance(it.get("text"), str):
            return list(rules), "LLM pass skipped: the reply named unknown rules or had no text"
        t = " ".join(it["text"].split())
        if not t or len(t) > 400 or not set(_TICKS.findall(by_id[it["id"]].text)) <= set(_TICKS.findall(t)):
            return list(rules), f"LLM pass skipped: rule {it['id']} lost a command or was empty/too long"
        texts[it["id"]] = t
    merged: dict[str, Rule] = {}
    for r in rules:
        t = texts.get(r.id, r.text)
        if t in merged:
            keep = merged[t]
            merged[t] = replace(
                keep, evidence=keep.evidence + r.evidence, sources=tuple(sorted(set(keep.sources) | set(r.sources)))
            )
        else:
            merged[t] = replace(r, text=t)
    return rank(merged.values()), f"LLM pass: {len(rules)} rules -> {len(merged)}"
