"""The ``headroom`` command (typer + rich)."""
