"""Headroom core: compression, reversible offload (CCR), prompt-cache care, memory and learning.

Nothing in this package imports mitmproxy; the addons in ``addons/`` translate flows into the
plain bytes and JSON that these modules take.
"""

__version__ = "0.1.0"
