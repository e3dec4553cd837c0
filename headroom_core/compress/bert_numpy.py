"""A BERT sentence encoder in numpy, for plain sentence-transformers folders such as the
packaged all-MiniLM-L6-v2 (``BertModel`` weights, mean pooling, L2 normalisation).

Why not sentence-transformers or torch: loading the model through them costs about 415-460 MiB
of resident memory in the proxy (torch, transformers, and the scipy, scikit-learn and sympy they
import), for a 22-million-parameter model whose weights are 87 MiB. This module needs numpy,
``tokenizers`` and ``safetensors`` (already installed with transformers) and reads the same
folder: about 130 MiB once loaded.

What it computes is what sentence-transformers 3/4 computes for such a folder (so the vectors
are the same to about 1e-6; ``tests/test_footprint.py`` compares them):

* ``models.Transformer``: inputs stripped; the folder's ``tokenizer.json`` (the fast BERT
  tokenizer: lower-casing normaliser, WordPiece, ``[CLS] … [SEP]``), truncated to
  ``max_seq_length`` word pieces (``sentence_bert_config.json``), padded to the longest in the
  batch; then the BERT encoder of Devlin et al. 2019 (``transformers``' ``BertModel``): word +
  position + token-type embeddings, LayerNorm, and per layer self-attention (scaled dot product,
  padding masked with float32's lowest value), output projection, residual LayerNorm, a GELU
  feed-forward layer (the exact, erf-based GELU), residual LayerNorm; ``layer_norm_eps`` from
  ``config.json``;
* ``models.Pooling`` with ``pooling_mode_mean_tokens``: the attention-masked mean of the last
  hidden states (mask sum clamped at 1e-9);
* ``models.Normalize``: L2 normalisation.

Texts are batched longest first, as ``SentenceTransformer.encode`` does. numpy has no ``erf``:
it is computed in float64 with the Chebyshev fit of ``erfc`` from Numerical Recipes (Press et
al., 2nd ed., §6.2; fractional error below 1.2e-7), far under float32 noise.
Folders of another kind (Dense layers, CLS pooling, another architecture) are refused with
``ValueError``; the caller then uses sentence-transformers itself.
"""

from __future__ import annotations

import json
import math
import os
from typing import Sequence

import numpy as np

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"


def plain_pipeline(path: str) -> tuple[int, bool]:
    """``(max_seq_length, normalize)`` of the folder at ``path`` when its ``modules.json`` is
    Transformer, mean Pooling and optionally Normalize over a BERT model; raises ``ValueError``
    otherwise."""
    try:
        with open(os.path.join(path, "modules.json"), encoding="utf-8") as f:
            modules = json.load(f)
        types = [m["type"] for m in modules]
        if types not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]) or modules[0].get("path", "") != "":
            raise ValueError(f"modules {types}")
        with open(os.path.join(path, modules[1]["path"], "config.json"), encoding="utf-8") as f:
            pooling = json.load(f)
        modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v]
        if modes != ["pooling_mode_mean_tokens"]:
            raise ValueError(f"pooling {modes}")
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu" or cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"model {cfg.get('model_type')}/{cfg.get('hidden_act')}")
        with open(os.path.join(path, "sentence_bert_config.json"), encoding="utf-8") as f:
            st_cfg = json.load(f)
        if not os.path.isfile(os.path.join(path, "tokenizer.json")) or not os.path.isfile(os.path.join(path, "model.safetensors")):
            raise ValueError("tokenizer.json or model.safetensors missing")
        return int(st_cfg.get("max_seq_length") or 512), len(types) == 3
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"not a plain sentence-transformers folder: {e}") from e


# Abramowitz and Stegun 7.1.26: erf(z) = 1 - (a1 t + … + a5 t^5) exp(-z^2), t = 1 / (1 + p z),
# z >= 0, absolute error at most 1.5e-7 (float32's own resolution near 1).
_P = np.float32(0.3275911)
_A = tuple(np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))


def _gelu(x: np.ndarray) -> np.ndarray:
    """The exact (erf) GELU, ``x * (1 + erf(x / sqrt 2)) / 2``, in float32, computed in place
    as far as possible (this is the largest elementwise step of the encoder)."""
    z = np.abs(x) * np.float32(1.0 / math.sqrt(2.0))
    t = z * _P
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * _A[0]
    for a in _A[1:]:
        poly += a
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # erfc(|x| / sqrt 2)
    np.copysign(poly, x, out=poly)  # erf(x / sqrt 2) = sign(x) * (1 - erfc) …
    poly = np.sign(x, dtype=np.float32) - poly  # … written as sign(x) - sign(x) * erfc
    poly += 1.0
    poly *= x
    poly *= np.float32(0.5)
    return poly


def _gelu_blocks(x: np.ndarray, rows: int = 32) -> np.ndarray:
    """:func:`_gelu` over a 2-D array, ``rows`` rows at a time, into ``x`` itself: its dozen
    elementwise passes then run in the CPU cache (2-3 times faster than over the whole array)."""
    for i in range(0, x.shape[0], rows):
        x[i : i + rows] = _gelu(x[i : i + rows])
    return x


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


class BertSentenceEncoder:
    """``encode`` like ``SentenceTransformer.encode`` for a plain BERT folder (module docstring).

    Raises ``ValueError`` for another kind of folder, ``OSError`` when its files cannot be read.
    """

    def __init__(self, path: str) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.max_seq_length, self.normalize = plain_pipeline(path)
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        self.heads = int(cfg["num_attention_heads"])
        self.layers = int(cfg["num_hidden_layers"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.hidden = int(cfg["hidden_size"])
        w = {k.removeprefix("bert."): v.astype(np.float32, copy=False) for k, v in load_file(os.path.join(path, "model.safetensors")).items()}
        self.w = w
        # pre-transposed projections: x @ W.T as x @ Wt
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense", "intermediate.dense", "output.dense"):
                w[p + name + ".weight"] = np.ascontiguousarray(w[p + name + ".weight"].T)
        tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=self.max_seq_length)
        pad = tok.token_to_id("[PAD]")
        tok.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")
        self.tokenizer = tok

    def _forward(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        w, eps = self.w, self.eps
        n, length = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length][None] + w["embeddings.token_type_embeddings.weight"][types]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        hd = self.hidden // self.heads
        bias = ((1.0 - mask.astype(np.float32)) * np.finfo(np.float32).min)[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(hd))
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def proj(v: np.ndarray, name: str) -> np.ndarray:
                # one 2-D matrix product (a single BLAS sgemm), not a stack of small ones
                flat = np.ascontiguousarray(v).reshape(-1, v.shape[-1]) @ w[p + name + ".weight"]
                flat += w[p + name + ".bias"]
                return flat.reshape(*v.shape[:-1], flat.shape[-1])

            def split(v: np.ndarray) -> np.ndarray:
                return v.reshape(n, length, self.heads, hd).transpose(0, 2, 1, 3)

            q = split(proj(x, "attention.self.query"))
            k = split(proj(x, "attention.self.key"))
            v = split(proj(x, "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = scores - scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(n, length, self.hidden)
            x = _layer_norm(proj(ctx, "attention.output.dense") + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
            h = proj(x, "intermediate.dense")
            _gelu_blocks(h.reshape(-1, h.shape[-1]))
            x = _layer_norm(proj(h, "output.dense") + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
        return x

    def encode(
        self,
        sentences: Sequence[str],
        batch_size: int = 32,
        normalize_embeddings: bool = False,
        convert_to_numpy: bool = True,
        show_progress_bar: bool = False,
    ) -> np.ndarray:
        """float32 array ``(len(sentences), hidden size)``; rows L2-normalised when the folder
        ends with Normalize or ``normalize_embeddings`` is set."""
        texts = [str(s).strip() for s in sentences]
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            enc = self.tokenizer.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            types = np.array([e.type_ids for e in enc], dtype=np.int64)
            hidden = self._forward(ids, mask, types)
            m = mask[:, :, None].astype(np.float32)
            vecs = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
            if self.normalize or normalize_embeddings:
                vecs = vecs / np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
            out[idx] = vecs
        return out
