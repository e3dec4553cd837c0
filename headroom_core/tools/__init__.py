"""The ``tools`` array of a request: everything the proxy does with the client's tool definitions.

The plan calls one entry, :func:`plan_step` (step 4 of a request's walk, docs/architecture.md);
the modules behind it:

- :mod:`~headroom_core.tools.step`: the step: the prompt-cache rule for ``tools`` (the same text
  as last time unless the client changed its tools), the array composed as the session sends it;
- :mod:`~headroom_core.tools.order`: the scope's deterministic order of tools (table ``tool_order``);
- :mod:`~headroom_core.tools.minify`: deterministic minification of tool definitions (whitespace,
  redundant titles, dedupe of repeated passages);
- :mod:`~headroom_core.tools.minifier`: minification once per distinct list, written from the
  client's own JSON text;
- :mod:`~headroom_core.tools.on_demand`: tools on demand: which tools go as skeletons, and
  ``headroom_tool_docs``, the proxy tool that gives a full definition back;
- :mod:`~headroom_core.tools.skeleton`: the skeleton of one tool definition;
- :mod:`~headroom_core.tools.figures`: the ledger's token figures of ``tools``, counted in the
  background.

Where a tool definition keeps its name, description and schema in each dialect is wire
knowledge (:mod:`headroom_core.wire.tool_defs`, :mod:`headroom_core.wire.tool_deferral`).
"""

from headroom_core.tools.figures import ToolsFigures
from headroom_core.tools.step import ToolsRequest, ToolsStep, plan_step

__all__ = ["ToolsFigures", "ToolsRequest", "ToolsStep", "plan_step"]
