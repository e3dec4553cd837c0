"""Prompt-cache economics: session identity and decisions cached by content hash, so what was
sent once is sent with the same bytes on every later turn."""
