"""``headroom mcp``: Headroom's retrieval, memory and compression as MCP tools over stdio, for
agents that prefer tools to a proxy (or cannot use one); ``install`` registers it with Claude
Code and Codex."""
