"""End-to-end test support: a scripted HTTPS upstream that speaks the LLM providers'
wire formats, a real ``mitmdump`` process, and real SDK clients wired through it.

Modules:

- :mod:`upstream` -- :class:`~upstream.Upstream`, :class:`~upstream.Reply`, :class:`~upstream.RawReply`
- :mod:`proxy` -- :class:`~proxy.MitmProxy`
- :mod:`clients` -- SDK / httpx client builders and an SSE reader with arrival times
- :mod:`fixtures` -- pytest fixtures built on the above
"""
