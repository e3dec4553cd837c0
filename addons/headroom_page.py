"""The stats page at the reserved host ``http://headroom.localhost/`` (``/stats`` JSON,
``/metrics`` Prometheus, ``/health``), served by the proxy itself the way mitmproxy's
Onboarding addon serves ``mitm.it``: requests to that host never leave the proxy, on its
base-URL ports too (where a request naming that host in its target is the ``headroom``
command's port probe, never an API call to forward)."""

from __future__ import annotations

from headroom_direct import addressed_to_proxy, base_url_providers
from headroom_options import State
from mitmproxy import ctx, http
from mitmproxy.addons import asgiapp
from mitmproxy.net.http import url
from mitmproxy.proxy.mode_specs import ReverseMode

from headroom_core.pricing import PriceTable
from headroom_core.web import PAGE_HOST
from headroom_core.web.app import create_app


class HeadroomPage(asgiapp.WSGIApp):
    """mitmproxy's ``WSGIApp`` hosting :func:`headroom_core.web.create_app` at ``PAGE_HOST``
    (any port), reading the ledger of the current runtime."""

    name = "headroom_page"

    def __init__(self, state: State) -> None:
        super().__init__(
            create_app(
                lambda: state.runtime.sessions if state.runtime is not None else None,
                lambda: _warm(state),
                lambda: _prices(state),
                lambda ref: _show(state, ref),
                _ports,
            ),
            PAGE_HOST,
            None,
        )

    def should_serve(self, flow: http.HTTPFlow) -> bool:
        """Requests for ``PAGE_HOST`` through the proxy, and plain requests addressed to the
        proxy's own listen port on a loopback name (so ``http://127.0.0.1:8080/`` opens the
        page in a browser, which never proxies loopback addresses). On a base-URL (reverse
        mode) port mitmproxy has already pointed the request at the upstream; one whose target
        was ``http://headroom.localhost/…`` (absolute form: the port probe of
        ``headroom_core.cli.proxy_process``; no API client sends that to a base URL) is served
        here instead of forwarded."""
        if super().should_serve(flow):
            return True
        if isinstance(flow.client_conn.proxy_mode, ReverseMode) and flow.request.authority:
            try:
                host = url.parse_authority(flow.request.authority, check=False)[0]
            except ValueError:
                host = ""
            if host == PAGE_HOST:
                return bool(flow.live and not flow.error and not flow.response)
        return bool(addressed_to_proxy(flow) and flow.live and not flow.error and not flow.response)


def _ports() -> dict:
    """The proxy's listen ports for ``/health``: its own (``listen_port``) and its base-URL
    ports by provider (``headroom_base_urls``)."""
    return {
        "proxy_port": ctx.options.listen_port,
        "base_urls": {name: port for port, name in base_url_providers().items()},
    }


def _warm(state: State) -> bool:
    """Whether the runtime's warm-up is done (:class:`headroom_core.readiness.Readiness`)."""
    rt = state.runtime
    return rt is not None and rt.ready.ready


def _show(state: State, ref: str | None) -> dict | None:
    """The report of one request (:func:`headroom_core.show.request_report`), texts included."""
    from headroom_core.show import request_report

    rt = state.runtime
    if rt is None:
        raise LookupError("the proxy is still starting")
    return request_report(rt.sessions, ref, rt.sealer, rt.store)


_price_tables: dict[tuple[str, ...], PriceTable] = {}


def _prices(state: State) -> PriceTable:
    """The price table of the current settings (the built-in one plus ``prices``)."""
    user = tuple(state.runtime.settings.prices) if state.runtime is not None else ()
    if user not in _price_tables:
        _price_tables[user] = PriceTable(user=user)
    return _price_tables[user]


def make(state: State) -> HeadroomPage:
    """The addon instance ``addons/headroom.py`` appends to its ``addons`` list."""
    return HeadroomPage(state)
