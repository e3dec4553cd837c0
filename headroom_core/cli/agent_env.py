"""What a wrapped agent's environment needs: the proxy, the local addresses that bypass it,
and the proxy's CA trusted by whatever runtime the agent (and the tools it runs) uses.

Pure functions; ``headroom wrap`` applies them. Every trust variable is set for every agent,
because agents start other programs (a Node agent runs Python tools, git, curl, …).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Addresses that bypass the proxy unless ``--no-proxy`` says otherwise.
LOCAL_NO_PROXY = ("localhost", "127.0.0.1", "::1")

#: Variables naming the proxy CA's certificate alone; the runtime *adds* it to its own roots.
CERT_VARS = (
    "NODE_EXTRA_CA_CERTS",  # Node (Claude Code, Gemini CLI, cursor-agent): added to the bundled roots
)
#: Variables naming a bundle (system roots + the proxy CA): the runtime *replaces* its roots.
BUNDLE_VARS = (
    "SSL_CERT_FILE",  # OpenSSL default paths: Python's ssl/httpx (Aider, SDKs), Go on Linux, Rust native roots
    "REQUESTS_CA_BUNDLE",  # Python requests
    "CURL_CA_BUNDLE",  # curl, also read by requests
    "CODEX_CA_CERTIFICATE",  # Codex CLI (Rust), read before SSL_CERT_FILE
    "GIT_SSL_CAINFO",  # git over HTTPS
    "PIP_CERT",  # pip
    "AWS_CA_BUNDLE",  # boto3/botocore (Bedrock)
    "NPM_CONFIG_CAFILE",  # npm
    "DENO_CERT",  # Deno
)


@dataclass(frozen=True)
class AgentProfile:
    """A known agent: the runtime it is written in and the variables that make it trust the
    proxy (the ones ``headroom wrap`` names in its message; all of them are set anyway)."""

    name: str
    runtime: str  # "node" | "python" | "native" | "unknown"
    trust: tuple[str, ...]
    known: bool = True

    def label(self) -> str:
        """How ``headroom wrap`` names it: ``Claude Code``, ``mytool (a Node program)``,
        ``curl (runtime not recognised)``."""
        if self.known:
            return self.name
        if self.runtime == "unknown":
            return f"{self.name} (runtime not recognised)"
        return f"{self.name} (a {_RUNTIME_WORDS.get(self.runtime, self.runtime)} program)"


_NODE = ("NODE_EXTRA_CA_CERTS",)
_PYTHON = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
#: Antigravity CLI (``agy``, Gemini CLI's successor): a native Go binary with no base-URL setting
#: (google-antigravity/antigravity-cli issues 113, 181: it takes ``HTTPS_PROXY``; Go reads the
#: roots from ``SSL_CERT_FILE`` on Linux). It speaks the Code Assist API
#: (``cloudcode-pa.googleapis.com`` and ``daily-cloudcode-pa…``, ``/v1internal:streamGenerateContent``),
#: which the proxy reads on any host. On macOS Go takes the system keychain's roots instead.
_ANTIGRAVITY = AgentProfile("Antigravity CLI", "native", ("SSL_CERT_FILE",))
PROFILES: dict[str, AgentProfile] = {
    "claude": AgentProfile("Claude Code", "node", _NODE),
    "codex": AgentProfile("Codex CLI", "native", ("CODEX_CA_CERTIFICATE", "SSL_CERT_FILE")),
    "aider": AgentProfile("Aider", "python", _PYTHON),
    # Gemini CLI signed in with Google talks to the Code Assist API at CODE_ASSIST_ENDPOINT
    # (default https://cloudcode-pa.googleapis.com; CODE_ASSIST_API_VERSION v1internal, gemini-cli
    # 0.61 code_assist/server.ts): through HTTPS_PROXY like the Gemini API, nothing else to set
    "gemini": AgentProfile("Gemini CLI", "node", _NODE),
    "cursor-agent": AgentProfile("Cursor Agent", "node", _NODE),
    "agy": _ANTIGRAVITY,
    "antigravity": _ANTIGRAVITY,
}
#: Agent names a user may type whose program has another name (``headroom wrap antigravity`` runs
#: the Antigravity CLI, ``agy``, when no ``antigravity`` program is on the PATH: that one is the
#: editor).
ALIASES: dict[str, str] = {"antigravity": "agy"}
_RUNTIMES = {
    "node": AgentProfile("Node program", "node", _NODE),
    "python": AgentProfile("Python program", "python", _PYTHON),
}
_RUNTIME_WORDS = {"node": "Node", "python": "Python", "native": "native"}


def _interpreter(word: str) -> str | None:
    base = os.path.basename(word).lower()
    if base in ("node", "nodejs", "npx", "bun", "deno"):
        return "node"
    if base.startswith(("python", "pypy")) or base in ("uv", "uvx", "pipx"):
        return "python"
    return None


def agent_command(command: Sequence[str], which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """``command`` with its first word replaced by the program of an agent name in
    :data:`ALIASES` when that name is not itself a program ``which`` finds and the alias is."""
    cmd = list(command)
    alias = ALIASES.get(cmd[0]) if cmd else None
    if alias is not None and which(cmd[0]) is None and which(alias) is not None:
        cmd[0] = alias
    return cmd


def profile_for(command: Sequence[str], which: Callable[[str], str | None] = shutil.which) -> AgentProfile:
    """The profile of ``command``: a known agent by name, else the runtime read from the
    interpreter (``node x.js``, ``python3 y.py``) or the executable's ``#!`` line."""
    if not command:
        raise ValueError("no command to wrap")
    name = os.path.basename(command[0])
    if name in PROFILES:
        return PROFILES[name]
    rt = _interpreter(name)
    if rt is None:
        path = which(command[0])
        if path:
            try:
                with open(path, "rb") as f:
                    first = f.readline(200)
            except OSError:
                first = b""
            if first.startswith(b"#!"):
                for word in first[2:].decode(errors="replace").split():
                    rt = rt or _interpreter(word)
    if rt in _RUNTIMES:
        return AgentProfile(name, rt, _RUNTIMES[rt].trust, known=False)
    return AgentProfile(name, "unknown", ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"), known=False)


def no_proxy_value(base: Mapping[str, str], explicit: str | None) -> str:
    """``explicit`` when given (``""`` sends every host through the proxy, local LLM servers
    too); else the environment's ``NO_PROXY``/``no_proxy`` entries plus :data:`LOCAL_NO_PROXY`."""
    if explicit is not None:
        return explicit
    have = [h.strip() for h in (base.get("NO_PROXY") or base.get("no_proxy") or "").split(",") if h.strip()]
    return ",".join(have + [h for h in LOCAL_NO_PROXY if h not in have])


def bundle_sources(base: Mapping[str, str]) -> tuple[Path | None, tuple[Path, ...]]:
    """What the CA bundle is built from besides the proxy CA: the roots file the user already
    points ``SSL_CERT_FILE`` at (None: the system's), and extra CA files the user had in
    :data:`CERT_VARS`."""
    roots = base.get("SSL_CERT_FILE")
    extra = tuple(Path(base[k]) for k in CERT_VARS if base.get(k) and Path(base[k]).is_file())
    return (Path(roots) if roots and Path(roots).is_file() else None), extra


def agent_env(
    base: Mapping[str, str], *, proxy_url: str, ca_cert: Path, ca_bundle: Path, no_proxy: str | None = None
) -> dict[str, str]:
    """``base`` plus the proxy (upper and lower case, as runtimes differ), ``NO_PROXY``, and
    the CA: :data:`CERT_VARS` name ``ca_cert``, :data:`BUNDLE_VARS` name ``ca_bundle`` (system
    roots + the CA). ``NODE_USE_ENV_PROXY=1`` makes Node ≥ 24 honour the proxy variables in its
    own ``fetch``/``https``; ``HEADROOM_PROXY`` tells child programs they are wrapped."""
    env = dict(base)
    np = no_proxy_value(base, no_proxy)
    for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        env[k] = proxy_url
    for k in ("NO_PROXY", "no_proxy"):
        env[k] = np
    for k in CERT_VARS:
        # a user's own extra CAs are kept: they are in the bundle (see ``bundle_sources``)
        env[k] = str(ca_bundle) if base.get(k) else str(ca_cert)
    for k in BUNDLE_VARS:
        env[k] = str(ca_bundle)
    env["NODE_USE_ENV_PROXY"] = "1"
    env["HEADROOM_PROXY"] = proxy_url
    return env
