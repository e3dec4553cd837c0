"""Failure learning (docs/architecture.md ``learn/``): turn failed tool calls, their corrections and the
user's own corrections into short, evidence-backed rules, written where agents read them
(CLAUDE.md, AGENTS.md, ...) and fed back into the next request.

- :mod:`.steps`: one tool call with its outcome; :mod:`.outcome`: how a result is read (exit
  codes, "no match", timeouts, error summaries); :mod:`.shell`: how a command line is read
  (program, job, set-up, inspection, server); :mod:`.redaction`: secrets out.
- :mod:`.pairing`: failed call -> fixing call pairs (pure; shared by live and offline).
- :mod:`.signals`: other failure signals in session logs (repeats, interruptions, corrections,
  rollbacks, context exhaustion).
- :mod:`.rules`: rules from pairs and corrections, specific or generic, contradictions.
- :mod:`.offline`: ``headroom learn`` over logs: evidence, known problems, why nothing was learned.
- :mod:`.readers`: Claude Code, Codex and SWE-agent session logs.
- :mod:`.writers`: the managed section in CLAUDE.local.md / CLAUDE.md / AGENTS.md / GEMINI.md.
- :mod:`.live`, :mod:`.store`, :mod:`.hooks`: the proxy's live learner and past-failures feedback.

No LLM call is needed for any of it (:mod:`.rephrase` is an optional pass).
"""
