"""Content compression: one module per content kind, the router and the request pipeline.

``compress`` knows content, not providers: it takes plain text (or parsed JSON) and a query,
and returns the compressed text and what it dropped (:class:`~headroom_core.compress.result.CompressResult`).
"""
