"""A tiny Python "agent": POSTs one Messages API request (body read from a file) to LLM_URL
with the standard library, which honours HTTPS_PROXY / NO_PROXY and verifies TLS with the
default roots (SSL_CERT_FILE). No other set-up.

Usage: python tiny_agent.py BODY.json   (env: LLM_URL, EXIT_CODE)
"""

import json
import os
import sys
import urllib.request

body = open(sys.argv[1], "rb").read()
req = urllib.request.Request(
    os.environ["LLM_URL"],
    data=body,
    method="POST",
    headers={
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "x-api-key": "test-key",
        "user-agent": "tiny-python-agent/1.0",
    },
)
with urllib.request.urlopen(req, timeout=60) as r:
    reply = json.loads(r.read())
    print(f"status {r.status}: {reply['content'][0]['text']}")
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
