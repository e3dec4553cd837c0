"""Cross-agent memory, per project: store, embeddings, ranking, redaction, the proxy's memory
tools and the injection of relevant memories into the latest user message (docs/architecture.md step 6)."""
