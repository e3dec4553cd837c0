"""The memory store: save (with near-duplicate merging and secret redaction), update, delete,
list, search (embeddings, or text until the model is loaded), use tracking, archiving, stats,
export and import. Every read and write is scoped to one project.

Works on any SQLAlchemy database (SQLite by default, PostgreSQL for teams: several proxy
processes share one database). Vectors are float32 bytes in ``memories.embedding``, searched
with numpy (a dot product of L2-normalised vectors is their cosine). Each process keeps the
vectors of the projects it served in memory and reloads a project's vectors when that project's
rows changed (row count or newest ``updated_at``, one indexed query per search), so memories
saved by another process are found on the next request.
"""

from __future__ import annotations

import builtins  # `list` in this module's class is a method: annotations say builtins.list
import hashlib
import re
import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator

import numpy as np
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.compress.embeddings import MODEL_NAME, Embedder
from headroom_core.errors import UsageError
from headroom_core.memory import ranking
from headroom_core.memory.models import KINDS, Memory
from headroom_core.memory.redact import redact

MAX_TEXT_CHARS = 2000  # one memory is one statement; longer texts are refused with a reason
ID_HEX = 12


def to_bytes(vec: np.ndarray) -> bytes:
    """A vector as float32 little-endian bytes (the ``memories.embedding`` column)."""
    return np.asarray(vec, dtype="<f4").tobytes()


def from_bytes(raw: bytes) -> np.ndarray:
    """The inverse of :func:`to_bytes`."""
    return np.frombuffer(raw, dtype="<f4")


class MemoryInputError(ValueError, UsageError):
    """A memory could not be saved or changed as asked; the message says what was wrong."""


def utcnow() -> datetime:
    """Naive UTC now (the store's time convention)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def normalize_id(raw: Any) -> str | None:
    """A memory id from what a model or user typed (``3F9A…``, ``[m:3f9a…]``, ``memory 3f9a…``),
    or None when it is not 12 hex digits."""
    if not isinstance(raw, str):
        return None
    s = raw.strip().strip("[]").lower()
    for prefix in ("memory:", "memory ", "m:", "id:", "id "):
        if s.startswith(prefix):
            s = s[len(prefix) :].strip()
    return s if len(s) == ID_HEX and all(c in "0123456789abcdef" for c in s) else None


def text_hash(text: str) -> str:
    """SHA-256 hex of ``text`` lowercased with whitespace collapsed (exact-duplicate check)."""
    return hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()


@dataclass(frozen=True)
class MemoryView:
    """A memory as read from the store (detached from any database session)."""

    id: str
    text: str
    kind: str
    project: str
    source: str
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None
    evidence: int
    value: float
    archived: bool

    @classmethod
    def of(cls, m: Memory) -> "MemoryView":
        return cls(
            m.id,
            m.text,
            m.kind,
            m.project,
            m.source,
            m.created_at,
            m.updated_at,
            m.last_used_at,
            m.evidence,
            m.value,
            m.archived,
        )

    @property
    def last_touched(self) -> datetime:
        """The later of last use and last update (where recency and value decay count from)."""
        return max(self.updated_at, self.last_used_at or self.updated_at)

    def record(self) -> dict[str, Any]:
        """The export form (JSON-able; times as ISO 8601 UTC)."""
        iso = lambda t: t.isoformat() + "Z" if t else None  # noqa: E731
        return {
            "id": self.id, "text": self.text, "kind": self.kind, "project": self.project, "source": self.source,
            "created_at": iso(self.created_at), "updated_at": iso(self.updated_at), "last_used_at": iso(self.last_used_at),
            "evidence": self.evidence, "value": round(self.value, 6), "archived": self.archived,
        }  # fmt: skip


@dataclass(frozen=True)
class SaveOutcome:
    """What :meth:`MemoryStore.save` did: ``action`` is ``"added"`` or ``"merged"`` (into a
    near-duplicate, whose ``similarity`` is given; 1.0 for an exact duplicate); ``redacted``
    names the secrets removed from the text."""

    memory: MemoryView
    action: str
    similarity: float | None = None
    redacted: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hit:
    """A search result: the memory, its similarity to the query and its ranking score."""

    memory: MemoryView
    similarity: float
    score: float


@dataclass(frozen=True)
class SearchResult:
    """Hits, best first; ``mode`` is ``"vector"`` (embeddings) or ``"text"`` (model not loaded)."""

    hits: tuple[Hit, ...]
    mode: str


@dataclass(frozen=True)
class ProjectStats:
    """Per project: active and archived counts, counts per kind (active), evidence total,
    mean stored value (active) and the newest update."""

    project: str
    active: int
    archived: int
    kinds: dict[str, int]
    evidence: int
    mean_value: float
    last_updated: datetime | None


@dataclass
class _Vectors:
    version: tuple[int, datetime | None]
    ids: list[str] = field(default_factory=list)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))


class MemoryStore:
    """Memories on ``sessions`` (a session factory of a migrated database).

    ``embedder`` may be None or not yet loaded: then saving checks exact duplicates only, and
    search is text search. Thresholds: ``dedup_similarity`` (cosine at or above which a new
    memory merges into an existing one; 0.92 by default), ``half_life_days`` (recency and
    value decay), ``archive_below`` / ``archive_min_age_days`` (see :meth:`maintain`).
    Methods raise SQLAlchemy errors when the database fails, and :class:`MemoryInputError` for
    bad input.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        embedder: Embedder | None = None,
        *,
        dedup_similarity: float = 0.92,
        half_life_days: float = 30.0,
        archive_below: float = 0.05,
        archive_min_age_days: float = 30.0,
    ) -> None:
        self.sessions = sessions
        self.embedder = embedder
        self.dedup_similarity = dedup_similarity
        self.half_life_days = half_life_days
        self.archive_below = archive_below
        self.archive_min_age_days = archive_min_age_days
        self._vectors: dict[str, _Vectors] = {}
        self._terms: dict[str, tuple[tuple[int, datetime | None], list[tuple[str, frozenset[str]]]]] = {}
        self._lock = threading.Lock()

    # -- embeddings ------------------------------------------------------------------------

    @property
    def vector_mode(self) -> bool:
        """True when searches use embeddings (the model is loaded)."""
        return self.embedder is not None and self.embedder.loaded

    def _embed(self, texts: list[str]) -> np.ndarray | None:
        if not texts or not self.vector_mode:
            return None
        assert self.embedder is not None
        return self.embedder.embed(texts)

    def _project_vectors(self, s: Session, project: str) -> _Vectors:
        """The project's active vectors. Unchanged rows (same count and newest ``updated_at``) use
        the cached matrix; otherwise only rows updated since the cached newest time are read and
        merged, and when the count still differs (deletions, archiving) everything is reloaded.
        Rows without a vector (saved before the model was loaded, or by another model) are
        embedded and written back."""
        version = self._version(s, project)
        with self._lock:
            cached = self._vectors.get(project)
        if cached is not None and cached.version == version:
            return cached
        cols = (Memory.id, Memory.text, Memory.embedding, Memory.embedding_model)
        active = (Memory.project == project, Memory.archived.is_(False))
        out = None
        if cached is not None and cached.version[1] is not None and cached.ids:
            changed = self._vectors_of(
                s.execute(select(*cols).where(*active, Memory.updated_at >= cached.version[1])).all()
            )
            pos = {mid: i for i, mid in enumerate(cached.ids)}
            ids, matrix = list(cached.ids), cached.matrix.copy()
            extra_ids, extra = [], []
            for mid, v in changed:
                if mid in pos:
                    matrix[pos[mid]] = v
                else:
                    extra_ids.append(mid)
                    extra.append(v)
            if extra:
                ids += extra_ids
                matrix = np.vstack([matrix, np.vstack(extra).astype(np.float32)])
            if len(ids) == version[0]:
                out = _Vectors(version, ids, matrix)
        if out is None:
            pairs = self._vectors_of(s.execute(select(*cols).where(*active)).all())
            ids = [mid for mid, _ in pairs]
            matrix = (
                np.vstack([v for _, v in pairs]).astype(np.float32) if pairs else np.zeros((0, 0), dtype=np.float32)
            )
            out = _Vectors(version, ids, matrix)
        with self._lock:
            self._vectors[project] = out
        return out

    def _vectors_of(self, rows) -> list[tuple[str, np.ndarray]]:
        """``(id, vector)`` for rows of (id, text, embedding, embedding_model); missing vectors are
        computed and stored; rows that cannot be embedded now are left out."""
        missing = [(r.id, r.text) for r in rows if r.embedding is None or r.embedding_model != MODEL_NAME]
        fresh: dict[str, np.ndarray] = {}
        if missing:
            vecs = self._embed([t for _, t in missing])
            if vecs is not None:
                with self.sessions.begin() as w:
                    for (mid, _), v in zip(missing, vecs):
                        fresh[mid] = v
                        w.execute(
                            update(Memory)
                            .where(Memory.id == mid)
                            .values(embedding=to_bytes(v), embedding_model=MODEL_NAME)
                        )
        out = []
        for r in rows:
            if r.id in fresh:
                out.append((r.id, fresh[r.id]))
            elif r.embedding is not None and r.embedding_model == MODEL_NAME:
                out.append((r.id, from_bytes(r.embedding)))
        return out

    def _similar(self, s: Session, project: str, vec: np.ndarray, top: int) -> list[tuple[str, float]]:
        pv = self._project_vectors(s, project)
        if not pv.ids:
            return []
        sims = pv.matrix @ vec
        k = min(top, len(pv.ids))
        idx = np.argpartition(-sims, k - 1)[:k]
        idx = idx[np.argsort(-sims[idx])]
        return [(pv.ids[i], float(sims[i])) for i in idx]

    # -- writes ----------------------------------------------------------------------------

    @staticmethod
    def _clean(text: Any, kind: Any) -> tuple[str, str, tuple[str, ...]]:
        if not isinstance(text, str) or not text.strip():
            raise MemoryInputError('the memory needs a non-empty "text" (one self-contained statement)')
        text = " ".join(text.split()) if "\n" not in text.strip() else text.strip()
        if len(text) > MAX_TEXT_CHARS:
            raise MemoryInputError(
                f"the text has {len(text)} characters; a memory holds at most {MAX_TEXT_CHARS}: save one statement"
            )
        if kind is None or kind == "":
            kind = "fact"
        if not isinstance(kind, str) or kind.strip().lower() not in KINDS:
            raise MemoryInputError(f'"kind" must be one of {", ".join(KINDS)}; got {str(kind)[:40]!r}')
        red = redact(text)
        if not re.search(r"\w", re.sub(r"\[REDACTED:[^\]]*\]", "", red.text)):
            raise MemoryInputError("the text is only a secret; secrets are never stored")
        return red.text, kind.strip().lower(), red.found

    def save(
        self, project: str, text: object, kind: str | None = "fact", source: str = "", now: datetime | None = None
    ) -> SaveOutcome:
        """Save a memory in ``project``, or merge it into an existing near-duplicate (cosine >=
        ``dedup_similarity``, or the same normalised text): evidence +1, value gained, the newer
        wording kept, un-archived. Secrets are redacted first. Raises :class:`MemoryInputError`
        for a text that is not a string, empty or too long, an unknown kind, or a text that is only a secret."""
        clean, kind_, found = self._clean(text, kind)
        now = now or utcnow()
        h = text_hash(clean)
        vec = self._embed([clean])
        v = vec[0] if vec is not None else None
        with self.sessions.begin() as s:
            target, sim = None, None
            exact = s.scalars(select(Memory).where(Memory.project == project, Memory.text_hash == h).limit(1)).first()
            if exact is not None:
                target, sim = exact, 1.0
            elif v is not None:
                best = self._similar(s, project, v, 1)
                if best and best[0][1] >= self.dedup_similarity:
                    target, sim = s.get(Memory, best[0][0]), best[0][1]
            if target is not None:
                current = ranking.decayed_value(
                    target.value,
                    max(target.updated_at, target.last_used_at or target.updated_at),
                    now,
                    self.half_life_days,
                )
                target.evidence += 1
                target.value = ranking.gained(current)
                target.updated_at = now
                target.archived = False
                target.kind = kind_ if kind else target.kind
                if target.text != clean:
                    target.text, target.text_hash = clean, h
                    target.embedding = to_bytes(v) if v is not None else None
                    target.embedding_model = MODEL_NAME if v is not None else None
                if source:
                    target.source = source[:64]
                s.flush()
                return SaveOutcome(MemoryView.of(target), "merged", sim, found)
            m = Memory(
                id=secrets.token_hex(ID_HEX // 2), text=clean, text_hash=h, kind=kind_, project=project, source=(source or "unknown")[:64],
                created_at=now, updated_at=now, last_used_at=None, evidence=1, value=ranking.INITIAL_VALUE, archived=False,
                embedding=to_bytes(v) if v is not None else None, embedding_model=MODEL_NAME if v is not None else None,
            )  # fmt: skip
            s.add(m)
            s.flush()
            return SaveOutcome(MemoryView.of(m), "added", None, found)

    def update(
        self,
        project: str,
        memory_id: str,
        text: str | None = None,
        kind: str | None = None,
        now: datetime | None = None,
    ) -> MemoryView | None:
        """Change the text and/or kind of memory ``memory_id`` of ``project``; None when the
        project has no such memory. Raises :class:`MemoryInputError` when neither is given or a
        value is invalid."""
        if text is None and kind is None:
            raise MemoryInputError('give a new "text" and/or "kind"')
        now = now or utcnow()
        with self.sessions.begin() as s:
            m = s.get(Memory, memory_id)
            if m is None or m.project != project:
                return None
            clean, kind_, _ = self._clean(text if text is not None else m.text, kind if kind is not None else m.kind)
            if clean != m.text:
                vec = self._embed([clean])
                m.text, m.text_hash = clean, text_hash(clean)
                m.embedding = to_bytes(vec[0]) if vec is not None else None
                m.embedding_model = MODEL_NAME if vec is not None else None
            m.kind = kind_
            m.updated_at = now
            m.archived = False
            s.flush()
            return MemoryView.of(m)

    def delete(self, project: str, memory_id: str) -> bool:
        """Delete memory ``memory_id`` of ``project``; False when the project has no such memory."""
        with self.sessions.begin() as s:
            m = s.get(Memory, memory_id)
            if m is None or m.project != project:
                return False
            s.delete(m)
            return True

    def touch(self, ids: Iterable[str], now: datetime | None = None) -> None:
        """Record a use of each memory in ``ids``: its value gains (after decay), ``last_used_at``
        becomes ``now``."""
        now = now or utcnow()
        ids = list(dict.fromkeys(ids))
        if not ids:
            return
        with self.sessions.begin() as s:
            for m in s.scalars(select(Memory).where(Memory.id.in_(ids))):
                current = ranking.decayed_value(
                    m.value, max(m.updated_at, m.last_used_at or m.updated_at), now, self.half_life_days
                )
                m.value = ranking.gained(current)
                m.last_used_at = now

    def maintain(self, now: datetime | None = None) -> int:
        """Archive memories whose decayed value is below ``archive_below`` and that are at least
        ``archive_min_age_days`` old (all projects). Returns how many were archived."""
        now = now or utcnow()
        n = 0
        with self.sessions.begin() as s:
            for m in s.scalars(select(Memory).where(Memory.archived.is_(False))):
                v = ranking.decayed_value(
                    m.value, max(m.updated_at, m.last_used_at or m.updated_at), now, self.half_life_days
                )
                if ranking.should_archive(v, m.created_at, now, self.archive_below, self.archive_min_age_days):
                    m.archived = True
                    n += 1
        return n

    # -- reads -----------------------------------------------------------------------------

    def get(self, project: str, memory_id: str) -> MemoryView | None:
        """Memory ``memory_id`` if it belongs to ``project``."""
        with self.sessions() as s:
            m = s.get(Memory, memory_id)
            return MemoryView.of(m) if m is not None and m.project == project else None

    def list(
        self, project: str | None, kind: str | None = None, limit: int = 50, include_archived: bool = False
    ) -> list[MemoryView]:
        """Memories of ``project`` (None: every project), newest update first."""
        q = select(Memory).order_by(Memory.updated_at.desc(), Memory.id).limit(max(1, limit))
        if project is not None:
            q = q.where(Memory.project == project)
        if kind:
            q = q.where(Memory.kind == kind)
        if not include_archived:
            q = q.where(Memory.archived.is_(False))
        with self.sessions() as s:
            return [MemoryView.of(m) for m in s.scalars(q)]

    def search(
        self, project: str, query: str, limit: int = 5, min_similarity: float = 0.0, now: datetime | None = None
    ) -> SearchResult:
        """The ``limit`` best active memories of ``project`` for ``query``, ranked by
        :func:`ranking.score`; memories under ``min_similarity`` are left out. Uses embeddings
        when the model is loaded, else text search (``mode`` says which)."""
        now = now or utcnow()
        if not query.strip() or limit <= 0:
            return SearchResult((), "vector" if self.vector_mode else "text")
        qv = self._embed([query]) if self.vector_mode else None
        with self.sessions() as s:
            if qv is not None:
                cands = [
                    (i, sim) for i, sim in self._similar(s, project, qv[0], max(50, limit * 5)) if sim >= min_similarity
                ]
                mode = "vector"
            else:
                cands = self._text_candidates(s, project, query, min_similarity)
                mode = "text"
            if not cands:
                return SearchResult((), mode)
            sims = dict(cands)
            rows = {m.id: MemoryView.of(m) for m in s.scalars(select(Memory).where(Memory.id.in_(list(sims))))}
        hits = []
        for mid, sim in sims.items():
            mv = rows.get(mid)
            if mv is None or mv.archived:
                continue
            rec = ranking.recency(mv.last_touched, now, self.half_life_days)
            val = ranking.decayed_value(mv.value, mv.last_touched, now, self.half_life_days)
            hits.append(Hit(mv, sim, ranking.score(sim, rec, val)))
        hits.sort(key=lambda h: (-h.score, h.memory.id))
        return SearchResult(tuple(hits[:limit]), mode)

    def _version(self, s: Session, project: str) -> tuple[int, datetime | None]:
        """(active row count, newest ``updated_at``) of ``project``: changes whenever any process
        adds, changes, archives or deletes one of its memories."""
        return tuple(
            s.execute(
                select(func.count(Memory.id), func.max(Memory.updated_at)).where(
                    Memory.project == project, Memory.archived.is_(False)
                )
            ).one()
        )  # type: ignore[return-value]

    def _project_terms(self, s: Session, project: str) -> builtins.list[tuple[str, frozenset[str]]]:
        """``(id, terms)`` of the project's active memories, cached until the project changes."""
        version = self._version(s, project)
        with self._lock:
            cached = self._terms.get(project)
        if cached is not None and cached[0] == version:
            return cached[1]
        rows = s.execute(
            select(Memory.id, Memory.text).where(Memory.project == project, Memory.archived.is_(False))
        ).all()
        out = [(r.id, ranking.terms(r.text)) for r in rows]
        with self._lock:
            self._terms[project] = (version, out)
        return out

    def _text_candidates(
        self, s: Session, project: str, query: str, min_similarity: float
    ) -> builtins.list[tuple[str, float]]:
        qt = ranking.terms(query)
        if not qt:
            return []
        out = []
        for mid, tt in self._project_terms(s, project):
            if qt.isdisjoint(tt):
                continue
            sim = ranking.text_similarity(qt, tt)
            if sim >= min_similarity:
                out.append((mid, sim))
        out.sort(key=lambda x: -x[1])
        return out[:200]

    def stats(self, project: str | None = None) -> builtins.list[ProjectStats]:
        """Per-project figures (one project, or all), largest project first."""
        q = select(
            Memory.project,
            Memory.archived,
            Memory.kind,
            func.count(),
            func.sum(Memory.evidence),
            func.sum(Memory.value),
            func.max(Memory.updated_at),
        ).group_by(Memory.project, Memory.archived, Memory.kind)
        if project is not None:
            q = q.where(Memory.project == project)
        acc: dict[str, dict[str, Any]] = {}
        with self.sessions() as s:
            for proj, archived, kind, n, ev, val, last in s.execute(q):
                a = acc.setdefault(
                    proj, {"active": 0, "archived": 0, "kinds": {}, "evidence": 0, "value": 0.0, "last": None}
                )
                if archived:
                    a["archived"] += n
                else:
                    a["active"] += n
                    a["kinds"][kind] = a["kinds"].get(kind, 0) + n
                    a["value"] += float(val or 0)
                a["evidence"] += int(ev or 0)
                a["last"] = max(filter(None, (a["last"], last)), default=None)
        out = [
            ProjectStats(
                p,
                a["active"],
                a["archived"],
                a["kinds"],
                a["evidence"],
                a["value"] / a["active"] if a["active"] else 0.0,
                a["last"],
            )
            for p, a in acc.items()
        ]
        out.sort(key=lambda x: (-(x.active + x.archived), x.project))
        return out

    # -- export / import -------------------------------------------------------------------

    def export(self, project: str | None = None) -> Iterator[dict[str, Any]]:
        """Every memory of ``project`` (None: all), archived ones included, as export records
        (:meth:`MemoryView.record`), oldest first."""
        q = select(Memory).order_by(Memory.created_at, Memory.id)
        if project is not None:
            q = q.where(Memory.project == project)
        with self.sessions() as s:
            for m in s.scalars(q):
                yield MemoryView.of(m).record()

    def import_records(self, records: Iterable[dict[str, Any]], project: str | None = None) -> dict[str, int]:
        """Import export records into ``project`` (None: each record's own project; a record
        without one is invalid: nothing is pooled in a shared bucket). Each goes through :meth:`save` (redaction, duplicate merging); a new memory
        keeps the record's kind, times, evidence, value and archived flag. Returns counts of
        ``added``, ``merged`` and ``invalid`` records."""
        counts = {"added": 0, "merged": 0, "invalid": 0}
        for rec in records:
            if not isinstance(rec, dict):
                counts["invalid"] += 1
                continue
            proj = project or str(rec.get("project") or "").strip()
            if not proj:
                counts["invalid"] += 1
                continue
            try:
                out = self.save(proj, rec.get("text"), rec.get("kind") or "fact", str(rec.get("source") or "import"))
            except MemoryInputError:
                counts["invalid"] += 1
                continue
            counts[out.action] += 1
            if out.action == "added":
                self._restore(out.memory.id, rec)
        return counts

    def _restore(self, memory_id: str, rec: dict[str, Any]) -> None:
        def when(k: str) -> datetime | None:
            v = rec.get(k)
            if not isinstance(v, str):
                return None
            try:
                t = datetime.fromisoformat(v.replace("Z", "+00:00"))
            except ValueError:
                return None
            return t.astimezone(timezone.utc).replace(tzinfo=None) if t.tzinfo else t

        with self.sessions.begin() as s:
            m = s.get(Memory, memory_id)
            if m is None:
                return
            m.created_at = when("created_at") or m.created_at
            m.updated_at = when("updated_at") or m.updated_at
            m.last_used_at = when("last_used_at")
            if isinstance(rec.get("evidence"), int) and rec["evidence"] > 0:
                m.evidence = rec["evidence"]
            if isinstance(rec.get("value"), (int, float)) and 0 <= rec["value"] <= 1:
                m.value = float(rec["value"])
            m.archived = bool(rec.get("archived", False))
