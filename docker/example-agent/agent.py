"""An example agent turn: one Anthropic Messages request whose tool_result is a large JSON
array (what coding agents send after a tool call), through HTTPS_PROXY; then the proxy's
savings as JSON from its reserved host. Standard library only: urllib honours HTTPS_PROXY /
NO_PROXY and verifies TLS with SSL_CERT_FILE."""

import json
import os
import sys
import urllib.error
import urllib.request

URL = os.environ.get("LLM_URL", "https://api.anthropic.com/v1/messages")
records = [
    {
        "id": i,
        "number": 1000 + i,
        "title": f"Flaky test in module {i % 17}",
        "state": "open" if i % 9 == 0 else "closed",
        "labels": ["bug", "ci"] if i % 3 == 0 else ["chore"],
        "comments": i % 7,
        "author": f"dev{i % 11}",
    }
    for i in range(400)
]
body = {
    "model": os.environ.get("LLM_MODEL", "claude-sonnet-4-5"),
    "max_tokens": 300,
    "messages": [
        {"role": "user", "content": "Which issues are still open?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "list_issues", "input": {}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": json.dumps(records, indent=2)}],
        },
    ],
    "tools": [
        {
            "name": "list_issues",
            "description": "List the repository's issues.",
            "input_schema": {"type": "object", "properties": {}},
        }
    ],
}
req = urllib.request.Request(
    URL,
    data=json.dumps(body).encode(),
    method="POST",
    headers={
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""),
        "user-agent": "example-agent/1.0",
    },
)
try:
    with urllib.request.urlopen(req, timeout=120) as r:
        print(f"LLM host answered {r.status}: {json.loads(r.read())['content'][0].get('text', '')[:300]}")
except urllib.error.HTTPError as e:  # e.g. 401 without a key: the request still went through the proxy
    print(f"LLM host answered {e.code}: {e.read()[:300]!r}")

stats = urllib.request.build_opener(urllib.request.ProxyHandler({"http": os.environ["HTTP_PROXY"]}))
with stats.open("http://headroom.localhost/stats", timeout=30) as r:
    totals = json.load(r)["totals"]
print(f"headroom: {totals['requests']} requests, {totals['tokens_saved']} tokens saved (estimated)")
sys.exit(0)
