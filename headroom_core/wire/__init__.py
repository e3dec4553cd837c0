"""Provider dialects (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses), SSE, and
byte-faithful JSON edits. ``wire`` knows formats, not policy."""
