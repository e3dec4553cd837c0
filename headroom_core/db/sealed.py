"""Secrets at rest: the local key, authenticated encryption of stored text, keyed hashes.

What the proxy must keep byte-exact (offloaded originals, compressed results, the bytes it
forwarded) holds tool output, which may hold credentials or private code. It is stored sealed:
AES-256-GCM (``cryptography``'s ``AESGCM``; NIST SP 800-38D) with a random 96-bit nonce per
value and the row's identity as associated data, so a sealed value cannot be moved to another
row. Hashes used as lookup keys (content hashes, client identities) are HMAC-SHA256 (RFC 2104)
under the same secret, so a database reader cannot confirm a guessed content by hashing it.

The secret is 32 random bytes in a file readable by its owner only (``<home>/secret.key``
unless ``secret_key_file`` names another). Proxies that must read each other's rows (a team on
one PostgreSQL) share the file; a proxy with another key reads nothing of theirs (a sealed value
it cannot open is treated as absent). Sub-keys are derived with HKDF-SHA256 (RFC 5869).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from headroom_core.errors import EnvironmentProblem

SECRET_BYTES = 32
NONCE_BYTES = 12
#: First byte of every sealed value: the format version (so a later format can be told apart).
FORMAT = b"\x01"


class SecretError(RuntimeError, EnvironmentProblem):
    """The secret key file cannot be read or created, or is not 32 bytes; the message names it."""


def load_secret(path: Path) -> bytes:
    """The 32-byte secret in ``path``, created (mode 0600, folder 0700 if new) when missing.

    Raises :class:`SecretError` when the file is unreadable, has another size, or cannot be
    created.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        # written whole under a private name, then linked into place: proxies of a team starting
        # at once on one key file agree on one key, and none reads a half-written file
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            data = secrets.token_bytes(SECRET_BYTES)
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                f.write(data)
            os.link(tmp, path)
        except FileExistsError:  # another process created it a moment ago
            return load_secret(path)
        except OSError as e:
            raise SecretError(f"cannot create the secret key file {path}: {e}") from e
        finally:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:  # a read-only folder (EROFS even for a missing file): nothing to remove
                pass
        return data
    except OSError as e:
        raise SecretError(f"cannot read the secret key file {path}: {e}") from e
    if len(data) != SECRET_BYTES:
        raise SecretError(
            f"the secret key file {path} holds {len(data)} bytes, not {SECRET_BYTES}: restore it or remove it (stored originals become unreadable)"
        )
    return data


def _derive(secret: bytes, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"headroom " + purpose).derive(secret)


class Sealer:
    """Seals and opens stored text, and makes keyed hashes, under one secret (32 bytes).

    ``seal(text, row)`` returns ``FORMAT + nonce + ciphertext`` (bytes); ``open(blob, row)`` the
    text, or None when the blob was sealed under another key or for another ``row`` (never
    raises for that: the value is then treated as absent). Text is encoded UTF-8 with
    ``surrogatepass``, so any JSON string (lone surrogates included) round-trips.
    """

    def __init__(self, secret: bytes) -> None:
        if len(secret) != SECRET_BYTES:
            raise SecretError(f"a secret must be {SECRET_BYTES} bytes, not {len(secret)}")
        self._aead = AESGCM(_derive(secret, b"seal v1"))
        self._mac = _derive(secret, b"hash v1")
        # keyed once: each digest copies it (a request hashes every message it carries; keying
        # a new HMAC each time was a third of a digest's cost)
        self._keyed = hmac.new(self._mac, digestmod=hashlib.sha256)

    def seal(self, text: str, row: str) -> bytes:
        """``text`` encrypted and authenticated for the row named ``row``."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        return FORMAT + nonce + self._aead.encrypt(nonce, text.encode("utf-8", "surrogatepass"), row.encode())

    def open(self, blob: bytes | None, row: str) -> str | None:
        """The text sealed in ``blob`` for ``row``; None when absent, foreign or damaged."""
        if not blob or blob[:1] != FORMAT or len(blob) < 1 + NONCE_BYTES + 16:
            return None
        try:
            raw = self._aead.decrypt(blob[1 : 1 + NONCE_BYTES], blob[1 + NONCE_BYTES :], row.encode())
        except InvalidTag:
            return None
        return raw.decode("utf-8", "surrogatepass")

    def digest(self, *parts: str | bytes) -> str:
        """HMAC-SHA256 hex (64 digits) of ``parts``, each length-prefixed (no ambiguity)."""
        m = self._keyed.copy()
        for p in parts:
            b = p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass")
            m.update(len(b).to_bytes(8, "big"))
            m.update(b)
        return m.hexdigest()


def secret_path(home: str, configured: str) -> Path:
    """Where the secret lives: ``configured`` (``secret_key_file``) if set, else ``<home>/secret.key``."""
    return Path(configured).expanduser() if configured else Path(home) / "secret.key"
