"""The live learner and the past-failures block, as the proxy's observer and injector.

:func:`observe` (an observer: ``fn(rt, ctx) -> None``) reads the tool calls and results of a
request's history (Anthropic ``tool_use``/``tool_result``, Chat Completions ``tool_calls``/
``role: "tool"``, Responses ``function_call``/``function_call_output``), pairs failures with their
corrections (:func:`~.pairing.find_pairs` over the whole history, keeping only pairs whose fix is
new this turn: ``message_index >= ctx.live_from``), and records:

- each pair as evidence for its rule, once per session; the rule is persisted when it reaches
  ``learn_min_evidence`` distinct pairs (default 5), unless contradicted;
- each new failed call as a recent failure of the project;
- each new call that worked on its first try as the end of the failures it corrects.

:func:`past_failures` (an injector: ``fn(rt, ctx) -> str | None``) gives the latest user message
at most ``learn_feedback_max_lines`` lines about the project's failures of the last
``learn_feedback_hours`` hours, each line once per session. Bypassed requests never reach either
(the request walk stops before extensions). A request of no known project (no
``x-headroom-project`` header and no working directory stated) is its conversation's own project
(:func:`~headroom_core.project.conversation_project`): it is learned from and given feedback
within that conversation only, so unrelated work never shares failures or rules.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from headroom_core.extensions import RequestContext
from headroom_core.learn.pairing import SETUP_WINDOW, find_pairs
from headroom_core.learn.rules import rule_for_pair
from headroom_core.learn.steps import Step, is_rejection, make_step
from headroom_core.learn.store import LearnStore, pair_hash
from headroom_core.project import is_conversation

if TYPE_CHECKING:
    from headroom_core.runtime import Runtime

BLOCK_TITLE = "Past failures to avoid in this project (recent; from headroom's failure learner):"


def steps_of(ctx: RequestContext, since: int = 0) -> list[Step]:
    """The request's tool calls with their results, in the order of the results; a call
    without a result yet, or one the user refused (:func:`~.steps.is_rejection`), is left out.
    Several text parts of one result are joined. With ``since`` (a message index), only the
    calls whose results are at or after it, plus the :data:`~.pairing.SETUP_WINDOW` calls before them
    (all a new correction can pair with), are built: the work per request stays bounded
    however long the history grows."""
    texts: dict[str, list[str]] = {}
    first: dict[str, tuple[int, bool, str]] = {}
    for o in ctx.tool_outputs:
        texts.setdefault(o.call_id, []).append(o.text)
        mi, err, name = first.get(o.call_id, (o.message_index, False, o.tool_name))
        first[o.call_id] = (mi, err or o.is_error, name)
    order = sorted(first.items(), key=lambda kv: kv[1][0])
    order = [(cid, v) for cid, v in order if not is_rejection("\n".join(texts[cid]))]
    start = next((i for i, (_, (mi, _, _)) in enumerate(order) if mi >= since), len(order))
    order = order[max(0, start - SETUP_WINDOW) :]
    if not order:
        return []
    calls = ctx.view.tool_calls
    steps: list[Step] = []
    for cid, (mi, err, name) in order:
        call = calls.get(cid)
        tool = call.name if call else name
        args = call.arguments if call and call.arguments is not None else {}
        # is_error absent is no evidence of success (only Anthropic clients set it): None keeps the other evidence
        steps.append(
            make_step(
                tool,
                args,
                "\n".join(texts[cid]),
                is_error=True if err else None,
                index=len(steps),
                message_index=mi,
                call_id=cid,
            )
        )
    return steps


def _ignore(project: str) -> frozenset[str]:
    return frozenset() if is_conversation(project) else frozenset({project, project.rstrip("/")})


def _root(project: str) -> str:
    return project if project.startswith("/") else ""


def observe(rt: "Runtime", ctx: RequestContext) -> None:
    """Accumulate evidence and failures from one request (module docstring). Off when the
    ``learn`` setting is false."""
    s = rt.settings
    if not s.learn or not ctx.project:
        return
    steps = steps_of(ctx, ctx.live_from)
    new = [st for st in steps if st.message_index >= ctx.live_from]
    if not new:
        return
    store = LearnStore(rt.sessions)
    pairs = [
        p
        for p in find_pairs(steps, ignore=_ignore(ctx.project), root=_root(ctx.project))
        if p.fixed.message_index >= ctx.live_from
    ]
    store.record_failures(ctx.project, ctx.session_key, [st for st in new if not st.ok])
    fixes = {p.fixed.call_id for p in pairs}
    first_try = [st for st in new if st.ok and st.call_id not in fixes]
    store.clear_recovered(ctx.project, first_try, timedelta(hours=s.learn_feedback_hours))
    for p in pairs:
        rule = rule_for_pair(p)
        if rule is not None:
            store.add_evidence(ctx.project, ctx.session_key, pair_hash(p.failed, p.fixed), rule, s.learn_min_evidence)


def _latest_is_user(ctx: RequestContext) -> bool:
    v = ctx.view
    return v.latest_is_user and ctx.live_from < len(v.conversation)


def past_failures(rt: "Runtime", ctx: RequestContext) -> str | None:
    """The past-failures block for this request, or None (feature off, nothing recent, or the
    latest message is not the user's)."""
    s = rt.settings
    if not s.learn_feedback or s.learn_feedback_max_lines <= 0 or not ctx.project or not _latest_is_user(ctx):
        return None
    lines = LearnStore(rt.sessions).past_failure_lines(
        ctx.project, ctx.session_key, timedelta(hours=s.learn_feedback_hours), s.learn_feedback_max_lines
    )
    if not lines:
        return None
    return BLOCK_TITLE + "\n" + "\n".join(f"- {ln}" for ln in lines)
