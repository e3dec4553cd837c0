"""The stats page, ``/stats`` JSON and ``/metrics``: a small WSGI app over the savings ledger
(:func:`headroom_core.web.app.create_app`).

mitmproxy serves it at the reserved host :data:`PAGE_HOST` (``addons/headroom_page.py``), the
way its Onboarding addon serves ``mitm.it``; it can also be mounted in any WSGI server.
"""

#: The reserved host the proxy answers itself (requests to it never leave the proxy).
PAGE_HOST = "headroom.localhost"

#: The paths of the stats page; on the proxy port itself only these are served (any other
#: request sent to the port, not through it, gets a provider-shaped error: addons/headroom_direct.py).
PAGE_ROUTES = ("/", "/stats", "/metrics", "/health", "/favicon.ico", "/request")
