"""The WSGI app (Flask, which mitmproxy already depends on) behind the stats page.

Routes: ``/`` the HTML page, ``/stats`` the ledger as JSON (:func:`headroom_core.ledger.snapshot`),
``/request?id=REF`` what the proxy did to one request (:mod:`headroom_core.show`; ``&format=json``
for JSON; no ``id``: the latest),
``/metrics`` Prometheus text exposition, ``/health`` ``{"service": "headroom", "ok": true}``
(what ``headroom wrap`` and the Docker health check probe through the proxy; with the proxy's
ports, so a probe of a base-URL port knows what it reached).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from flask import Flask, Response, jsonify, request
from sqlalchemy.orm import Session, sessionmaker
from werkzeug.exceptions import HTTPException

from headroom_core import ledger
from headroom_core.pricing import PriceTable
from headroom_core.web.page import render_page, render_request

log = logging.getLogger("headroom")

SessionsProvider = Callable[[], "sessionmaker[Session] | None"]
#: ``show(ref)``: the report of the request ``ref`` names (:func:`headroom_core.show.request_report`), or None
ShowProvider = Callable[["str | None"], "dict | None"]
#: ``ports()``: the proxy's listen ports for ``/health``: ``{"proxy_port": 8080, "base_urls":
#: {"anthropic": 8081, "openai": 8082}}`` (empty when unknown)
PortsProvider = Callable[[], dict]


def create_app(
    sessions: SessionsProvider, ready: Callable[[], bool] = lambda: True, prices: Callable[[], PriceTable] = PriceTable, show: ShowProvider | None = None,
    ports: PortsProvider = dict,
) -> Flask:  # fmt: skip
    """A Flask app reading the ledger through ``sessions()`` on every request (it may return
    None while the proxy is starting: the routes then answer 503). ``ready()`` tells ``/health``
    whether the proxy has finished warming up (database open, vocabulary loaded); ``prices()``
    is the price table the money figures use; ``show(ref)`` reports one request for
    ``/request`` (default: the ledger's figures only, no texts); ``ports()`` the proxy's listen
    ports, added to ``/health`` (``proxy_port``, ``base_urls``)."""
    app = Flask("headroom_web")

    def _sessions() -> sessionmaker[Session]:
        s = sessions()
        if s is None:
            raise LookupError("the proxy is still starting")
        return s

    @app.errorhandler(LookupError)
    def _starting(e: LookupError):
        return jsonify(error=str(e)), 503

    @app.errorhandler(Exception)
    def _failed(e: Exception):
        if isinstance(e, HTTPException):
            return e
        log.exception("headroom: stats page failed")
        return jsonify(error=f"{type(e).__name__}: {e}"), 500

    @app.get("/health")
    def health():
        try:
            ok, detail = sessions() is not None, ""
        except Exception as e:  # noqa: BLE001 - health reports it
            ok, detail = False, f"{type(e).__name__}: {e}"
        return jsonify(service="headroom", ok=ok, ready=ok and ready(), detail=detail, **ports()), 200 if ok else 503

    @app.get("/stats")
    def stats():
        return jsonify(ledger.snapshot(_sessions(), prices=prices()))

    @app.get("/metrics")
    def prometheus():
        from headroom_core.web import metrics  # prometheus-client, only when scraped

        return Response(metrics.render(_sessions), content_type=metrics.CONTENT_TYPE)

    @app.get("/request")
    def one_request():
        ref = request.args.get("id") or None
        if show is not None:
            r = show(ref)
        else:
            from headroom_core.show import request_report

            r = request_report(_sessions(), ref)
        if r is None:
            return jsonify(error=f"no recorded request matches {ref!r}" if ref else "no requests recorded yet"), 404
        if request.args.get("format") == "json":
            return jsonify(r)
        return Response(render_request(r), content_type="text/html; charset=utf-8")

    @app.get("/")
    def page():
        return Response(
            render_page(ledger.snapshot(_sessions(), prices=prices())), content_type="text/html; charset=utf-8"
        )

    return app
