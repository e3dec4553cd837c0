"""``headroom mcp`` (issue 19, part 3): the real server as a subprocess, driven by the official
``mcp`` SDK's own stdio client; and ``headroom mcp install`` on Claude Code's and Codex's config
files (dry-run diff, write, idempotence, removal, broken files left alone)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import tomllib
from datetime import timedelta
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import headroom_core
from headroom_core.ccr import retrieve
from headroom_core.ccr.store import OriginalsStore
from headroom_core.compress import markers
from headroom_core.db.engine import open_database
from headroom_core.db.sealed import Sealer, load_secret, secret_path
from headroom_core.mcpserver.install import claude_change, codex_change, server_command
from headroom_core.memory.store import MemoryStore
from headroom_core.settings import load_settings
from tests.unit.test_images import screenshot
from tests.unit.test_request_plan import github_scenario

HEADROOM = Path(sys.executable).parent / "headroom"
TIMEOUT = timedelta(seconds=600)  # the first memory call may load the embedding model on a loaded machine


def server_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}
    env["HEADROOM_HOME"] = str(home)
    return env


async def _session(params: StdioServerParameters, work):
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w, read_timeout_seconds=TIMEOUT) as s:
            init = await asyncio.wait_for(s.initialize(), 300)
            return await work(s, init)


def run_client(home: Path, work, project: str | None = None, command: list[str] | None = None, cwd: Path | None = None):
    """Start the server as a real subprocess and run ``work(session, init_result)`` against it."""
    cmd = command or [str(HEADROOM), "mcp"] + (["--project", project] if project else [])
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=server_env(home), cwd=str(cwd) if cwd else None)
    return asyncio.run(_session(params, work))


def texts(result) -> list[str]:
    return [c.text for c in result.content if c.type == "text"]


def test_tools_over_stdio_with_the_sdk_client(tmp_path):
    home = tmp_path / "home"
    big = github_scenario("paginate-issues.json")
    png = screenshot(800, 500, "PNG")
    # an image original as the proxy stores it, in the same database the server opens
    settings = load_settings({"home": str(home)}, env={})
    sealer = Sealer(load_secret(secret_path(settings.home, settings.secret_key_file)))  # the key the server reads
    store = OriginalsStore(open_database(settings.database_url), 3600, 10**9, sealer)
    data_url = "data:image/png;base64," + base64.b64encode(png).decode()
    image_key = markers.offload_key(data_url)
    store.put(image_key, data_url, "image")

    async def work(s: ClientSession, init):
        out = {"server": init.serverInfo.name, "version": init.serverInfo.version}
        tools = (await s.list_tools()).tools
        out["tools"] = {t.name: t for t in tools}
        c = await s.call_tool("compress", {"text": big, "query": "Which issues are still open?"})
        out["compress"] = (c.isError, texts(c))
        key = markers.find_marker_keys(texts(c)[0])[0]
        out["retrieved"] = texts(await s.call_tool("headroom_retrieve", {"key": key.upper()}))
        out["image"] = (await s.call_tool("headroom_retrieve", {"key": image_key})).content
        unknown = await s.call_tool("headroom_retrieve", {"key": "0" * 24})
        out["unknown"] = (unknown.isError, texts(unknown))
        out["saved"] = texts(
            await s.call_tool("memory_save", {"text": "Integration tests need `make db-up` first", "kind": "rule"})
        )
        out["found"] = texts(await s.call_tool("memory_search", {"query": "make db-up integration tests"}))
        out["empty"] = texts(await s.call_tool("memory_search", {"query": ""}))
        return out

    out = run_client(home, work, project="/src/app")
    assert out["server"] == "headroom" and out["version"] == headroom_core.__version__
    assert list(out["tools"]) == ["headroom_retrieve", "memory_search", "memory_save", "compress"]
    assert out["tools"]["headroom_retrieve"].inputSchema["required"] == ["key"]
    assert out["tools"]["headroom_retrieve"].description == retrieve.TOOL_DESCRIPTION
    is_error, (short, note) = out["compress"]
    assert not is_error and len(short) < len(big) / 3 and note.startswith("[headroom compress: kind=json tokens")
    assert out["retrieved"] == [big]  # byte for byte, key matched case-insensitively
    text, image = out["image"]
    assert (
        text.type == "text"
        and image.type == "image"
        and image.mimeType == "image/png"
        and base64.b64decode(image.data) == png
    )
    is_error, (unknown,) = out["unknown"]
    assert is_error and "no original is stored under key 000000000000000000000000" in unknown
    assert out["saved"][0].startswith("Saved memory ") and "for project /src/app" in out["saved"][0]
    assert "Integration tests need `make db-up` first" in out["found"][0]
    assert "non-empty" in out["empty"][0]
    # the memory is in the shared store, under the project, for the proxy and the other agents
    mem = MemoryStore(open_database(load_settings({"home": str(home)}, env={}).database_url))
    assert [m.text for m in mem.list("/src/app")] == ["Integration tests need `make db-up` first"]
    assert mem.list("global") == []


def test_project_defaults_to_the_directory_the_agent_starts_it_in(tmp_path):
    proj = tmp_path / "repo"
    proj.mkdir()

    async def work(s, init):
        return texts(await s.call_tool("memory_save", {"text": "Use pnpm, never npm"}))

    out = run_client(tmp_path / "home", work, cwd=proj)
    assert f"for project {proj}" in out[0]


# --- install ---------------------------------------------------------------------------------


CLAUDE_JSON = {
    "numStartups": 12,
    "mcpServers": {"github": {"type": "stdio", "command": "npx", "args": ["-y", "@github/mcp"], "env": {"TOKEN": "x"}}},
    "projects": {"/src/app": {"allowedTools": ["Bash(ls:*)"], "mcpServers": {}}},
}
CODEX_TOML = """# my Codex settings
model = "gpt-5-codex"  # keep this comment

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]
"""


def cli(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME") and not k.startswith("HEADROOM_")
    }
    env.update(HOME=str(home), HEADROOM_HOME=str(home / ".headroom"))
    return subprocess.run(
        [str(HEADROOM), "mcp", "install", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


def test_install_dry_run_then_write_then_idempotent_then_remove(tmp_path):
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    claude, codex = home / ".claude.json", home / ".codex" / "config.toml"
    claude_text = json.dumps(CLAUDE_JSON, indent=2) + "\n"
    claude.write_text(claude_text)
    codex.write_text(CODEX_TOML)

    dry = cli(home, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert claude.read_text() == claude_text and codex.read_text() == CODEX_TOML  # nothing written
    added = [ln for ln in dry.stdout.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    removed = [ln for ln in dry.stdout.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    assert f"--- {claude}" in dry.stdout and f"--- {codex}" in dry.stdout
    assert any('"headroom": {' in ln for ln in added) and "+[mcp_servers.headroom]" in added
    assert all(ln[1:].strip() == "}" for ln in removed)  # nothing of the user's goes: at most a brace gains a comma

    done = cli(home)
    assert done.returncode == 0, done.stderr
    data = json.loads(claude.read_text())
    cmd = server_command()
    assert data["mcpServers"]["headroom"] == {"type": "stdio", "command": cmd[0], "args": cmd[1:], "env": {}}
    assert (
        data["mcpServers"]["github"] == CLAUDE_JSON["mcpServers"]["github"]
        and data["projects"] == CLAUDE_JSON["projects"]
    )
    toml_text = codex.read_text()
    assert "# my Codex settings" in toml_text and "# keep this comment" in toml_text
    cfg = tomllib.loads(toml_text)
    assert cfg["mcp_servers"]["headroom"] == {"command": cmd[0], "args": cmd[1:], "startup_timeout_sec": 30}
    assert cfg["mcp_servers"]["docs"] == {"command": "npx", "args": ["-y", "docs-mcp"]}

    again = cli(home)
    assert again.returncode == 0 and again.stdout == "" and "unchanged" in again.stderr

    gone = cli(home, "--remove")
    assert gone.returncode == 0
    assert json.loads(claude.read_text()) == CLAUDE_JSON and claude.read_text() == claude_text
    assert tomllib.loads(codex.read_text()) == tomllib.loads(CODEX_TOML) and "# keep this comment" in codex.read_text()


def test_install_creates_missing_files_and_project_scope(tmp_path):
    home, proj = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    proj.mkdir()
    r = cli(home, "--scope", "project", cwd=proj)
    assert r.returncode == 0, r.stderr
    assert json.loads((proj / ".mcp.json").read_text())["mcpServers"]["headroom"]["args"][-1] == "mcp"
    assert "headroom" in tomllib.loads((proj / ".codex" / "config.toml").read_text())["mcp_servers"]
    assert oct((proj / ".mcp.json").stat().st_mode & 0o777) == "0o600"
    assert not (home / ".claude.json").exists()


def test_install_leaves_a_broken_file_alone(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text("{not json")
    r = cli(home, "--client", "claude")
    assert r.returncode == 2 and "is not valid JSON" in r.stderr
    assert (home / ".claude.json").read_text() == "{not json"
    with pytest.raises(ValueError, match="not valid TOML"):
        p = tmp_path / "c.toml"
        p.write_text("[mcp_servers\n")
        codex_change(p, ["headroom", "mcp"])


def test_registered_command_starts_a_working_server(tmp_path):
    """What ``install`` writes into ``.mcp.json`` is a command the SDK client can start."""
    ch = claude_change(tmp_path / ".mcp.json", server_command())
    ch.write()
    entry = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["headroom"]

    async def work(s, init):
        return [t.name for t in (await s.list_tools()).tools]

    assert "headroom_retrieve" in run_client(
        tmp_path / "home", work, command=[entry["command"], *entry["args"]], cwd=tmp_path
    )
