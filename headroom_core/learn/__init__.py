"""Failure learning (DESIGN.md ``learn/``): turn failed tool calls, their corrections and the
user's own corrections into short, evidence-backed rules, written where agents read them
(CLAUDE.md, AGENTS.md, ...) and fed back into the next request.

- :mod:`.steps`: one tool call with its outcome (failure detection, error summaries, shell parsing).
- :mod:`.pairing`: failed call -> corrected call pairs (pure; shared by live and offline).
- :mod:`.signals`: other failure signals in session logs (repeats, interruptions, corrections,
  rollbacks, context exhaustion).
- :mod:`.rules`: rules from pairs and corrections, evidence, abstraction, contradictions.
- :mod:`.readers`: Claude Code, Codex and SWE-agent session logs.
- :mod:`.writers`: the managed section in CLAUDE.local.md / CLAUDE.md / AGENTS.md / GEMINI.md.
- :mod:`.live`, :mod:`.store`, :mod:`.hooks`: the proxy's live learner and past-failures feedback.

No LLM call is needed for any of it (:mod:`.rephrase` is an optional pass).
"""
