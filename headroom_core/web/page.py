"""The stats page: one self-contained HTML document (inline CSS and SVG, no script, nothing
fetched) rendered from :func:`headroom_core.ledger.snapshot`."""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape
from typing import Any

from headroom_core.web.charts import paired_hbars, stacked_bars

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:980px;color:#1d2330;background:#fafbfc}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.sub{color:#5b6475;margin:0 0 18px}
.cards{display:grid;grid-template-columns:repeat(4,1fr);gap:10px}
.card{background:#fff;border:1px solid #e1e5ec;border-radius:8px;padding:10px 12px}
.card .v{font-size:22px;font-weight:600}.card .k{color:#5b6475;font-size:12px}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #e1e5ec}
th,td{padding:5px 8px;border-bottom:1px solid #eef0f4;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left;max-width:340px;overflow:hidden;text-overflow:ellipsis}
th{background:#f3f5f8;font-weight:600;font-size:12px}
.chart{width:100%;height:auto;background:#fff;border:1px solid #e1e5ec;border-radius:8px}
.chart .grid{stroke:#eef0f4}.chart .axis{fill:#5b6475;font-size:11px}.chart .legend{fill:#1d2330;font-size:12px}
.chart .lower{fill:#8aa4c8}.chart .upper{fill:#2e9d6a}.chart .before{fill:#d5dbe5}.chart .after{fill:#2e6fd0}
.note{color:#5b6475;font-size:12px}
"""


def _n(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) else "-"


def _pct(v: Any) -> str:
    return f"{100 * v:.1f}%" if isinstance(v, (int, float)) else "-"


def _usd(v: Any) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    a = abs(v)
    s = f"${a:,.0f}" if a >= 1000 else f"${a:,.2f}" if a >= 1 or a == 0 else f"${a:.4f}"
    return f"-{s}" if v < 0 else s


#: Seconds between the page's own reloads (``<meta http-equiv="refresh">``: no script needed).
REFRESH_SECONDS = 30


def _card(figure: str, label: str, value: Any, text: str) -> str:
    return f'<div class="card"><div class="v" data-figure="{figure}" data-value="{escape(str(value))}">{escape(text)}</div><div class="k">{escape(label)}</div></div>'


_GROUP_COLS = (
    ("requests", "requests", _n),
    ("compressed", "compressed", _n),
    ("tokens_saved", "saved (est.)", _n),
    ("saved_share", "saved % (est.)", _pct),
    ("cost_saved_usd", "$ saved (est.)", _usd),
    ("cost_usd", "$ paid", _usd),
    ("usage_prompt_tokens", "prompt tokens (provider)", _n),
    ("saved_share_of_prompt", "saved % of prompt", _pct),
    ("cache_hit_rate", "cache hit", _pct),
)
_KIND_COLS = (
    ("blocks", "blocks", _n),
    ("compressed", "compressed", _n),
    ("reused", "reused", _n),
    ("tokens_before", "before (est.)", _n),
    ("tokens_after", "after (est.)", _n),
    ("tokens_saved", "saved", _n),
    ("saved_share", "saved %", _pct),
    ("cost_saved_usd", "$ saved (est.)", _usd),
)


def _table(group: str, title: str, rows: list[dict], cols) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for _, h, _ in cols)
    body = []
    for r in rows:
        cells = "".join(
            f'<td data-col="{c}" data-value="{escape(str(r.get(c)))}">{f(r.get(c))}</td>' for c, _, f in cols
        )
        body.append(
            f'<tr data-key="{escape(str(r["key"]))}"><td title="{escape(str(r["key"]))}">{escape(str(r["key"]))}</td>{cells}</tr>'
        )
    if not rows:
        body.append(f'<tr><td colspan="{len(cols) + 1}">no requests yet</td></tr>')
    return f'<table data-group="{group}"><thead><tr><th>{escape(title)}</th>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _uncompressed(rows: list[dict], total: int) -> str:
    """The table of requests that went out uncompressed, per reason (``snapshot()["uncompressed"]``)."""
    body = "".join(
        f'<tr data-key="{escape(str(r["key"]))}"><td>{escape(str(r["label"]))}</td>'
        f'<td data-col="requests" data-value="{int(r["requests"])}">{_n(int(r["requests"]))}</td>'
        f"<td>{_pct(r['requests'] / total if total else None)}</td></tr>"
        for r in rows
    )
    if not rows:
        body = '<tr><td colspan="3">none: every request was planned</td></tr>'
    return f'<table data-group="uncompressed"><thead><tr><th>reason</th><th>requests</th><th>of all</th></tr></thead><tbody>{body}</tbody></table>'


def render_page(snap: dict) -> str:
    """The HTML page for a :func:`headroom_core.ledger.snapshot` dict (UTF-8 text)."""
    t = snap.get("totals") or {}
    by = snap.get("by") or {}
    cards = "".join(
        [
            _card("requests", "requests", t.get("requests", 0), _n(t.get("requests", 0))),
            _card("compressed", "compressed", t.get("compressed", 0), _n(t.get("compressed", 0))),
            _card("tokens_saved", "tokens saved (estimated)", t.get("tokens_saved", 0), _n(t.get("tokens_saved", 0))),
            _card("saved_share", "saved of what was considered", t.get("saved_share"), _pct(t.get("saved_share"))),
            _card(
                "cost_saved_usd",
                "money saved (estimate)",
                t.get("cost_saved_usd"),
                _usd(t.get("cost_saved_usd") if t.get("priced_requests") else None),
            ),
            _card(
                "cost_usd",
                f"paid, {t.get('priced_requests', 0):,} priced requests",
                t.get("cost_usd"),
                _usd(t.get("cost_usd") if t.get("priced_requests") else None),
            ),
            _card(
                "cost_saved_share",
                "money saved of the prompt cost",
                t.get("cost_saved_share"),
                _pct(t.get("cost_saved_share")),
            ),
            _card(
                "usage_output_tokens",
                "output tokens (provider)",
                t.get("usage_output_tokens", 0),
                _n(t.get("usage_output_tokens", 0)),
            ),
            _card(
                "usage_prompt_tokens",
                "prompt tokens (provider)",
                t.get("usage_prompt_tokens", 0),
                _n(t.get("usage_prompt_tokens", 0)),
            ),
            _card(
                "saved_share_of_prompt",
                "saved of the whole prompt",
                t.get("saved_share_of_prompt"),
                _pct(t.get("saved_share_of_prompt")),
            ),
            _card("cache_hit_rate", "prompt-cache hit rate", t.get("cache_hit_rate"), _pct(t.get("cache_hit_rate"))),
            _card("retrieve_rounds", "retrieval rounds", t.get("retrieve_rounds", 0), _n(t.get("retrieve_rounds", 0))),
            _card(
                "proxy_tools_tokens",
                "proxy tools added (tokens, for retrieval)",
                t.get("proxy_tools_tokens", 0),
                _n(t.get("proxy_tools_tokens", 0)),
            ),
            _card(
                "uncompressed",
                "went out uncompressed",
                sum(u["requests"] for u in snap.get("uncompressed") or []),
                _n(sum(u["requests"] for u in snap.get("uncompressed") or [])),
            ),
        ]
    )
    days = by.get("day") or []
    day_chart = stacked_bars(
        [d["key"] for d in days],
        [d.get("usage_prompt_tokens", 0) for d in days],
        [d.get("tokens_saved", 0) for d in days],
        lower_name="prompt tokens sent (provider)",
        upper_name="tokens saved (estimated)",
    )
    kinds = by.get("kind") or []
    kind_chart = paired_hbars(
        [k["key"] for k in kinds], [k.get("tokens_before", 0) for k in kinds], [k.get("tokens_after", 0) for k in kinds]
    )
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Headroom savings</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><meta http-equiv="refresh" content="{REFRESH_SECONDS}"><style>{_CSS}</style></head>
<body>
<h1>Headroom savings</h1>
<p class="sub">What the proxy saved, from the savings ledger · {escape(now)} (refreshes every {REFRESH_SECONDS} s) · <a href="/stats">JSON</a> · <a href="/metrics">metrics</a> · <a href="/request">latest request</a></p>
<div class="cards">{cards}</div>
<h2>Savings over time</h2>
{day_chart}
<h2>Per content kind</h2>
{kind_chart}
{_table("kind", "kind", kinds, _KIND_COLS)}
<h2>Went out uncompressed, by reason</h2>
{_uncompressed(snap.get("uncompressed") or [], t.get("requests") or 0)}
<h2>Per agent</h2>
{_table("agent", "agent", by.get("agent") or [], _GROUP_COLS)}
<h2>Per project</h2>
{_table("project", "project", by.get("project") or [], _GROUP_COLS)}
<h2>Per day</h2>
{_table("day", "day (UTC)", days, _GROUP_COLS)}
<p class="note">Estimated: our token counts of the tool outputs and tool definitions the proxy considered.
Provider: the <code>usage</code> figures in the responses (prompt = input + cache read + cache write).
Cache hit rate = cache-read tokens / prompt tokens.
Tool definitions are the client's; the proxy's own tools added (<code>headroom_retrieve</code>, memory tools, for retrieval) are counted apart.
Money: each request's usage priced for its model (Anthropic cache writes 1.25&times;, reads 0.1&times; of input; OpenAI cached input at its model's price; overridable with the <code>prices</code> setting);
money saved is an estimate: the tokens the proxy removed, priced at that request's own average prompt rate.</p>
</body></html>
"""


def _prefix_words(p: dict | None) -> str:
    if p is None:
        return "not recorded for this request"
    if not p.get("known"):
        return f"first turn of its session ({p.get('messages', 0)} messages): nothing to compare with"
    words = [f"{p['same_messages']} of {p['messages']} messages sent as last turn ({p['same_bytes']:,} bytes the same, tools included)",
             "tools the same" if p.get("tools_same") else "tools changed"]  # fmt: skip
    if p.get("system_same") is not None:
        words.append("system prompt the same" if p["system_same"] else "system prompt changed")
    words.append(f"first difference: {p['first_difference']}" if p.get("first_difference") else "no difference")
    return "; ".join(words)


def render_request(r: dict) -> str:
    """The HTML view of one request's report (:func:`headroom_core.show.report`): its figures
    (``data-figure``), a table of its tool outputs (``data-block`` rows) and, for each compressed
    one, the text before and after where stored."""
    u = r.get("usage") or {}
    facts = [
        ("when", "at", r.get("at") or "-"),
        ("agent, model", "agent", f"{r.get('agent')}, {r.get('model') or '-'} ({r.get('dialect')})"),
        ("project", "project", r.get("project") or "-"),
        ("session", "session", r.get("session") or "-"),
        ("status", "status", r.get("status")),
        ("what the proxy did", "action", r.get("action")),
        ("why", "outcome", r.get("outcome_label") or r.get("outcome") or "-"),
        ("reason", "reason", r.get("reason") or "-"),
        ("body bytes", "bytes", f"{r['bytes']['before']:,} → {r['bytes']['after']:,}"),
        ("tool outputs, tokens (est.)", "tokens", f"{r['tokens']['before']:,} → {r['tokens']['after']:,}"),
        ("tool definitions (est.)", "tools", f"{r['tools']['before']:,} → {r['tools']['after']:,}"),
        ("proxy tools added (for retrieval)", "proxy_tools", f"{r['tools']['proxy']:,}"),
        (
            "replayed from earlier turns",
            "replayed",
            f"{r['replayed']['blocks']} outputs, {r['replayed']['tokens_before']:,} → {r['replayed']['tokens_after']:,} tokens",
        ),
        ("prefix vs previous turn", "prefix", _prefix_words(r.get("prefix"))),
        ("provider cache read / write", "cache", f"{_n(u.get('cache_read'))} / {_n(u.get('cache_write'))}"),
        ("provider input / output", "usage", f"{_n(u.get('input'))} / {_n(u.get('output'))}"),
    ]
    rows = "".join(
        f'<tr><td>{escape(k)}</td><td data-figure="{f}" style="text-align:left;white-space:normal">{escape(str(v))}</td></tr>'
        for k, f, v in facts
    )
    blocks = [b for b in r.get("blocks") or [] if b.get("decision") != "replayed"]
    brows = (
        "".join(
            f'<tr data-block="{i}" data-kind="{escape(b["kind"])}" data-decision="{escape(b["decision"])}" data-before="{b["tokens_before"]}" data-after="{b["tokens_after"]}">'
            f"<td>{_n(b['message'])}</td><td>{escape(b['tool'] or '-')}</td><td>{escape(b['kind'])}</td><td>{escape(b['decision'])}</td>"
            f'<td>{b["tokens_before"]:,} → {b["tokens_after"]:,}</td><td style="text-align:left;white-space:normal">{escape(b["reason"])}</td></tr>'
            for i, b in enumerate(blocks)
        )
        or '<tr><td colspan="6">no tool output of this request was considered</td></tr>'
    )
    texts = []
    for i, b in enumerate(blocks):
        if b.get("decision") != "compressed":
            continue
        before = (
            escape(b["before"])
            if b.get("before") is not None
            else "(original not stored: a lossless change keeps none)"
        )
        after = escape(b["after"]) if b.get("after") is not None else "(no longer stored: the session moved on)"
        texts.append(
            f"<h3>message {_n(b['message'])}, {escape(b['tool'] or '-')} ({escape(b['kind'])})</h3>"
            f'<div class="pair"><div><div class="note">before, {b["tokens_before"]:,} tokens</div><pre data-text="before" data-block="{i}">{before}</pre></div>'
            f'<div><div class="note">after, {b["tokens_after"]:,} tokens</div><pre data-text="after" data-block="{i}">{after}</pre></div></div>'
        )
    css = (
        _CSS
        + ".pair{display:grid;grid-template-columns:1fr 1fr;gap:10px}pre{background:#fff;border:1px solid #e1e5ec;padding:8px;max-height:420px;overflow:auto;white-space:pre-wrap;font-size:12px}"
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Headroom: request #{r["id"]}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{css}</style></head>
<body>
<h1>Request #{r["id"]}</h1>
<p class="sub">What the proxy did to this request · <a href="/">savings</a> · <a href="/request?id={r["id"]}&amp;format=json">JSON</a></p>
<table data-group="request">{rows}</table>
<h2>Tool outputs</h2>
<table data-group="blocks"><thead><tr><th>message</th><th>tool</th><th>kind</th><th>decision</th><th>tokens (est.)</th><th>reason</th></tr></thead><tbody>{brows}</tbody></table>
{"".join(texts)}
</body></html>
"""
