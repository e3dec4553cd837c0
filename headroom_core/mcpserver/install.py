"""Registering ``headroom mcp`` with Claude Code and Codex, in their documented config files.

- Claude Code ("Connect Claude Code to tools via MCP", docs.anthropic.com/en/docs/claude-code/mcp,
  "MCP installation scopes"): user scope in ``~/.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json``
  when that is set), top-level ``mcpServers``; project scope in ``.mcp.json`` at the project
  root, ``mcpServers``. A stdio entry is ``{"type": "stdio", "command", "args", "env"}``.
- Codex ("Model Context Protocol", developers.openai.com/codex/mcp, and ``docs/config.md`` of
  openai/codex): ``[mcp_servers.<name>]`` tables with ``command``, ``args``, ``env`` and
  ``startup_timeout_sec`` in ``$CODEX_HOME/config.toml`` (``~/.codex/config.toml``), or in
  ``.codex/config.toml`` of a trusted project.

Each change is computed first (:class:`Change`: the file's text before and after), shown as a
unified diff, and written only when asked, atomically and keeping the file's permissions. JSON
is rewritten with two-space indentation (as Claude Code writes it); TOML through ``tomlkit``,
so comments and layout stay. A file that does not parse is never touched.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from headroom_core.errors import UsageError

SERVER_KEY = "headroom"
#: Codex waits 10 s for a server to start by default; opening the database can take longer on a busy machine.
CODEX_STARTUP_TIMEOUT_SEC = 30


class InstallError(ValueError, UsageError):
    """A config file cannot be changed safely (it does not parse, or has an unexpected shape);
    the message names the file and what to do."""


@dataclass(frozen=True)
class Change:
    """One config file: its ``path``, its text ``before`` ("" when absent) and ``after``."""

    client: str
    path: Path
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """The unified diff from ``before`` to ``after`` ("" when equal)."""
        return "".join(
            difflib.unified_diff(
                self.before.splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                fromfile=str(self.path) if self.before else "/dev/null",
                tofile=str(self.path),
            )
        )

    def write(self) -> None:
        """Write ``after`` atomically (a temporary file in the same folder, then rename), keeping
        the old file's permissions (0600 for a new file: these files may hold tokens)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mode = self.path.stat().st_mode & 0o777 if self.path.exists() else 0o600
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(self.after)
            os.chmod(tmp, mode)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def server_command() -> list[str]:
    """The command that starts this installation's server: the ``headroom`` script next to the
    running Python (a virtual environment's ``bin``), else ``python -m headroom_core.cli.main``."""
    script = Path(sys.executable).parent / ("headroom.exe" if os.name == "nt" else "headroom")
    if script.exists():
        return [str(script), "mcp"]
    return [sys.executable, "-m", "headroom_core.cli.main", "mcp"]


def claude_config_path(
    scope: str, project_dir: Path, home: Path | None = None, env: dict[str, str] | None = None
) -> Path:
    """Claude Code's file for ``scope`` (``user`` or ``project``)."""
    env = dict(os.environ) if env is None else env
    if scope == "project":
        return project_dir / ".mcp.json"
    base = Path(env["CLAUDE_CONFIG_DIR"]).expanduser() if env.get("CLAUDE_CONFIG_DIR") else (home or Path.home())
    return base / ".claude.json"


def codex_config_path(
    scope: str, project_dir: Path, home: Path | None = None, env: dict[str, str] | None = None
) -> Path:
    """Codex's ``config.toml`` for ``scope`` (``user``: ``$CODEX_HOME``, ``project``: ``.codex/``)."""
    env = dict(os.environ) if env is None else env
    if scope == "project":
        return project_dir / ".codex" / "config.toml"
    base = Path(env["CODEX_HOME"]).expanduser() if env.get("CODEX_HOME") else (home or Path.home()) / ".codex"
    return base / "config.toml"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as e:
        raise InstallError(f"{path}: cannot read it ({e}); nothing was changed") from e


def claude_change(path: Path, command: list[str], remove: bool = False, name: str = SERVER_KEY) -> Change:
    """The change that adds (or with ``remove`` drops) ``mcpServers[name]`` in a Claude Code JSON
    file. Raises :class:`InstallError` when the file is not a JSON object."""
    before = _read(path)
    try:
        data: Any = json.loads(before) if before.strip() else {}
    except ValueError as e:
        raise InstallError(f"{path} is not valid JSON ({e}); fix or move it, nothing was changed") from e
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise InstallError(f"{path}: expected a JSON object with an object 'mcpServers'; nothing was changed")
    servers = dict(data.get("mcpServers") or {})
    entry = {"type": "stdio", "command": command[0], "args": command[1:], "env": {}}
    if (remove and name not in servers) or (not remove and servers.get(name) == entry):
        return Change("claude", path, before, before)  # nothing to do: the file stays byte for byte
    if remove:
        del servers[name]
    else:
        servers[name] = entry
    after = json.dumps({**data, "mcpServers": servers}, indent=2, ensure_ascii=False)
    return Change("claude", path, before, after + "\n" if before.endswith("\n") or not before else after)


def codex_change(path: Path, command: list[str], remove: bool = False, name: str = SERVER_KEY) -> Change:
    """The change that adds (or with ``remove`` drops) ``[mcp_servers.<name>]`` in a Codex
    ``config.toml``. Raises :class:`InstallError` when the file is not valid TOML."""
    before = _read(path)
    try:
        doc = tomlkit.parse(before)
    except TOMLKitError as e:
        raise InstallError(f"{path} is not valid TOML ({e}); fix or move it, nothing was changed") from e
    servers = doc.get("mcp_servers")
    if servers is not None and not isinstance(servers, dict):
        raise InstallError(f"{path}: 'mcp_servers' is not a table; nothing was changed")
    if remove:
        if servers is None or name not in servers:
            return Change("codex", path, before, before)
        del servers[name]
        if not servers:
            del doc["mcp_servers"]
        return Change("codex", path, before, tomlkit.dumps(doc))
    entry = tomlkit.table()
    entry.add("command", command[0])
    entry.add("args", command[1:])
    entry.add("startup_timeout_sec", CODEX_STARTUP_TIMEOUT_SEC)
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    if name in servers and _same(servers[name], entry):
        return Change("codex", path, before, before)
    servers[name] = entry
    return Change("codex", path, before, tomlkit.dumps(doc))


def _same(a: Any, b: Any) -> bool:
    try:
        return dict(a.unwrap() if hasattr(a, "unwrap") else a) == dict(b.unwrap())
    except (TypeError, ValueError):
        return False


def plan(
    clients: list[str], scope: str, project_dir: Path, remove: bool = False, command: list[str] | None = None
) -> list[Change]:
    """The changes for ``clients`` (``claude``, ``codex``) at ``scope``. Raises
    :class:`InstallError` for a file that cannot be changed safely."""
    cmd = command or server_command()
    out = []
    for c in clients:
        if c == "claude":
            out.append(claude_change(claude_config_path(scope, project_dir), cmd, remove))
        elif c == "codex":
            out.append(codex_change(codex_config_path(scope, project_dir), cmd, remove))
        else:
            raise InstallError(f"unknown client {c!r}: choose claude or codex")
    return out
