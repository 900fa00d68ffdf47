"""`KnowledgeBase`: documents chunked by structure, searched by meaning and by words.

Vectors from the embedded sentence encoder (or any `Encoder`) live in Qdrant, local mode (a
folder, no server) by default or a Qdrant server with the same code; a BM25 index finds ids,
codes and rare words; hybrid search fuses both by reciprocal rank. A SQLite manifest in the
folder records each file's content hash and chunks, so re-ingesting replaces changed files,
drops deleted ones, and resumes where an interrupted ingestion stopped.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from baton.core.text import blank, clean_text
from baton.knowledge import ingestion
from baton.knowledge.catalog import Catalog, check_where, top
from baton.knowledge.chunking import chunk_text
from baton.knowledge.documents import DEFAULT_MAX_MB
from baton.knowledge.errors import KnowledgeBaseError
from baton.knowledge.lexical import LexicalIndex
from baton.knowledge.locking import FolderLock
from baton.knowledge.manifest import ChunkRow, Manifest
from baton.knowledge.passages import Citation, IngestReport, Passage
from baton.knowledge.vectorstore import InUse, VectorStore
from baton.routing.encoders import Encoder, default_encoder

if TYPE_CHECKING:
    from types import TracebackType

    import numpy as np
    import numpy.typing as npt

T = TypeVar("T")
Mode = Literal["vector", "lexical", "hybrid"]

DEFAULT_ROOT = ".baton/kb"
"""Where a knowledge base's folder is when no path is given: `.baton/kb/<name>`."""

QUERY_CHARS = 2000
"""A longer query is cut to its first this many characters (the encoder reads ~128 tokens
anyway, and BM25 over thousands of query terms would only be slow)."""

RRF_K = 60
"""The constant of reciprocal rank fusion: score = sum over lists of 1 / (RRF_K + rank)."""

_NAMESPACE = uuid.UUID("3c1b7a52-8f0e-4d5b-a1c9-2e7f6d4b9a10")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


@dataclass
class _Index:
    """What a search reads, swapped whole after every change."""

    catalog: Catalog
    matrix: npt.NDArray[np.float32] | None  # local mode: row i is catalog.ids[i]'s vector
    lexical: LexicalIndex


class KnowledgeBase:
    """Documents to search, kept in a folder (`.baton/kb/<name>`) or on a Qdrant server.

    `ingest` reads Markdown, plain text, HTML and PDF files or folders; `search` finds
    `Passage`s by meaning (`mode="vector"`), by words, ids and codes (`"lexical"`), or both
    fused (`"hybrid"`, the default), each with its `Citation`. Found text is quoted data.
    """

    def __init__(
        self,
        name: str,
        path: str | Path | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        encoder: Encoder | None = None,
        chunk_tokens: int = 300,
        overlap_tokens: int = 40,
        max_file_mb: float = DEFAULT_MAX_MB,
        lock_timeout_s: float = 60.0,
        batch: int = 64,
    ) -> None:
        if not _NAME.match(name):
            raise ValueError(
                f"invalid knowledge base name {name!r}: use letters, digits, '_', '-' and '.'"
            )
        if chunk_tokens < 1 or not 0 <= overlap_tokens < chunk_tokens:
            raise ValueError("KnowledgeBase needs chunk_tokens >= 1 and 0 <= overlap_tokens < it")
        self.name = name
        self.path = Path(path) if path is not None else Path(DEFAULT_ROOT) / name
        """The folder: the local Qdrant storage (without url), the manifest, the lexical
        index and the lock file."""
        self.url = url
        self.encoder = encoder or default_encoder()
        self.chunk_tokens = chunk_tokens
        self.overlap_tokens = overlap_tokens
        self.max_file_mb = max_file_mb
        self.lock_timeout_s = lock_timeout_s
        """How long to wait for another process using the folder before giving up."""
        self.batch = batch
        """Texts per encoder call and points per upsert while ingesting."""
        self._store = VectorStore(self.path, url, api_key, f"kb_{name}", self.encoder.dim)
        self._manifest: Manifest | None = None
        self._lock = FolderLock(self.path / "kb.lock")
        self._index: _Index | None = None
        self._vectors: dict[str, npt.NDArray[np.float32]] = {}
        self._opening = asyncio.Lock()
        self._writing = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def where(self) -> str:
        """The folder (local mode) or the server URL and the folder, for messages."""
        return str(self.path) if self.url is None else f"{self.url} (manifest in {self.path})"

    # ------------------------------------------------------------------ opening
    def _damaged(self, detail: str) -> KnowledgeBaseError:
        return KnowledgeBaseError(
            f"the knowledge base {self.name!r} at {self.where} is damaged or incomplete "
            f"({detail}): rebuild it with `baton kb ingest PATH --kb {self.name} --path "
            f"{self.path} --rebuild` (KnowledgeBase.ingest(PATH, rebuild=True)), or delete the "
            f"folder {self.path} and ingest again"
        )

    async def _open(self, create: bool) -> _Index:
        if self._index is not None:
            return self._index
        async with self._opening:
            if self._index is None:
                try:
                    self._index = await self._load(create)
                except BaseException:
                    await self._release()
                    raise
        return self._index

    async def _load(self, create: bool) -> _Index:
        manifest_file = self.path / "manifest.sqlite3"
        if not create and not manifest_file.is_file():
            if self._store.local and self._store.has_storage():
                raise self._damaged(f"the manifest {manifest_file} is missing")
            raise KnowledgeBaseError(
                f"no knowledge base {self.name!r} at {self.path}: create it with "
                f"`baton kb ingest PATH --kb {self.name} --path {self.path}` "
                "(KnowledgeBase.ingest), or give the folder it was built in"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        if self._store.local:  # Qdrant's local engine admits one client per folder anyway
            await self._acquire()
        if (
            create
            and not manifest_file.exists()
            and self._store.local
            and self._store.has_storage()
        ):
            raise self._damaged(f"the manifest {manifest_file} is missing")
        try:
            manifest = self._manifest = await asyncio.to_thread(Manifest, self.path, create=True)
        except KnowledgeBaseError as exc:
            raise self._damaged(str(exc)) from exc
        written_by = manifest.get_meta("encoder")
        if written_by is not None and written_by != self.encoder.name:
            raise KnowledgeBaseError(
                f"the knowledge base {self.name!r} at {self.where} was built with the encoder "
                f"{written_by}, not {self.encoder.name}: open it with that encoder, or rebuild "
                "it (`baton kb ingest PATH --kb NAME --rebuild`)"
            )
        _, chunks = manifest.count()
        try:
            exists = await self._store.open(create=True)
        except InUse as exc:
            raise KnowledgeBaseError(
                f"the knowledge base at {self.path} is open in another client ({exc}): close "
                "it there, or use a Qdrant server (KnowledgeBase(url=...)) to share one"
            ) from exc
        except Exception as exc:
            if not self._store.local:
                raise KnowledgeBaseError(
                    f"the Qdrant server at {self.url} cannot be used ({type(exc).__name__}: "
                    f"{exc}): check that it runs and is reachable, and the api_key"
                ) from exc
            raise self._damaged(f"Qdrant cannot open it: {type(exc).__name__}: {exc}") from exc
        if not exists and chunks:
            raise self._damaged(f"the collection {self._store.collection} is missing")
        if written_by is None:
            manifest.set_meta("encoder", self.encoder.name)
            manifest.set_meta("name", self.name)
        return await self._rebuild_index(load_vectors=True)

    async def _acquire(self) -> None:
        try:
            await asyncio.to_thread(self._lock.acquire, self.lock_timeout_s)
        except TimeoutError:
            raise KnowledgeBaseError(
                f"the knowledge base at {self.path} is in use by another process (ingesting or "
                f"searching) and stayed so for {self.lock_timeout_s:g} s: wait for it to "
                "finish and try again, or raise lock_timeout_s (`--wait`)"
            ) from None

    async def _rebuild_index(self, load_vectors: bool = False) -> _Index:
        """The search structures from the manifest (and, in local mode, the vectors)."""
        import numpy as np

        manifest = self._need_manifest()
        rows = await asyncio.to_thread(lambda: list(manifest.done()))
        catalog = Catalog([(r.id, r.source, r.heading) for r in rows])
        matrix = None
        if self._store.local:
            if load_vectors:
                try:
                    stored = await self._store.vectors()
                except Exception as exc:
                    raise self._damaged(f"its vectors cannot be read: {exc}") from exc
                self._vectors = {k: np.asarray(v, dtype=np.float32) for k, v in stored.items()}
            missing = [i for i in catalog.ids if i not in self._vectors]
            if missing:
                raise self._damaged(
                    f"{len(missing)} chunks of the manifest are missing from the vector index"
                )
            if catalog.ids:
                matrix = np.stack([self._vectors[i] for i in catalog.ids]).astype(np.float32)
            else:
                matrix = np.zeros((0, self.encoder.dim), dtype=np.float32)
        lexical = LexicalIndex(self.path)
        generation = manifest.generation()
        if not await asyncio.to_thread(lexical.load, generation, len(rows)):
            texts = [_indexed_text(r.heading, r.text) for r in rows]
            await asyncio.to_thread(lexical.build, texts, generation)
        return _Index(catalog, matrix, lexical)

    def _need_manifest(self) -> Manifest:
        assert self._manifest is not None, "the knowledge base is not open"
        return self._manifest

    async def _release(self) -> None:
        await self._store.close()
        if self._manifest is not None:
            self._manifest.close()
            self._manifest = None
        self._lock.release()
        self._index = None
        self._vectors = {}

    # ------------------------------------------------------------------ writing
    async def ingest(
        self,
        path: str | Path,
        *,
        progress: bool = False,
        rebuild: bool = False,
        on_file: Callable[[str, int], None] | None = None,
    ) -> IngestReport:
        """Index a file, or every supported file under a folder: new and changed files are
        (re)chunked and stored, unchanged ones skipped, files gone from the folder dropped.
        `rebuild`: delete the whole index first. `progress`: show a rich progress bar.
        `on_file(source, chunks)` is called after each file is committed."""
        target = Path(path)
        if not target.exists():
            raise KnowledgeBaseError(f"{target} does not exist: nothing to ingest")
        if rebuild:
            await self._wipe()
        await self._open(create=True)
        async with self._writing:
            if not self._store.local:  # local mode holds the folder's lock while open
                await self._acquire()
            try:
                return await ingestion.ingest(self, target, progress=progress, on_file=on_file)
            finally:
                if not self._store.local:
                    self._lock.release()

    async def _wipe(self) -> None:
        """Delete the index: the collection (on a server), the manifest, the lexical index."""
        if self._store.url is not None:
            await self._open(create=True)
            await self._store.drop()
        await self._release()
        if self.path.exists():
            await self._acquire()
            try:
                for child in self.path.iterdir():
                    if child.name == "kb.lock":
                        continue
                    if child.is_dir():
                        shutil.rmtree(child)
                    else:
                        child.unlink()
            finally:
                self._lock.release()

    def _chunk_rows(self, source: str, text: str, headings: Any, sha256: str) -> list[ChunkRow]:
        chunks = chunk_text(text, headings, budget=self.chunk_tokens, overlap=self.overlap_tokens)
        return [
            ChunkRow(
                id=str(uuid.uuid5(_NAMESPACE, f"{self.name}\x00{source}\x00{c.index}\x00{sha256}")),
                source=source,
                index=c.index,
                start=c.start,
                end=c.end,
                heading=c.heading,
                sha256=_sha(c.text),
                text=c.text,
            )
            for c in chunks
        ]

    async def _store_file(self, source: str, sha256: str, rows: list[ChunkRow]) -> None:
        """Store one file's chunks: pending in the manifest, vectors upserted, old chunks
        deleted, then committed."""
        import numpy as np

        manifest = self._need_manifest()
        old = await asyncio.to_thread(manifest.chunk_ids, source)
        await asyncio.to_thread(manifest.begin, source, sha256, rows)
        fresh: dict[str, npt.NDArray[np.float32]] = {}
        for i in range(0, len(rows), self.batch):
            part = rows[i : i + self.batch]
            texts = [_indexed_text(r.heading, r.text) for r in part]
            vectors = await asyncio.to_thread(self.encoder.encode, texts)
            vectors = np.asarray(vectors, dtype=np.float32)
            await self._store.upsert(
                [r.id for r in part], vectors, [_payload(self.name, r, sha256) for r in part]
            )
            fresh.update(zip([r.id for r in part], vectors, strict=True))
        keep = {r.id for r in rows}
        stale = [i for i in old if i not in keep]
        await self._store.delete(stale)
        await asyncio.to_thread(manifest.commit, source, keep)
        for pid in stale:
            self._vectors.pop(pid, None)
        if self._store.local:
            self._vectors.update(fresh)

    async def _drop_file(self, source: str) -> None:
        manifest = self._need_manifest()
        ids = await asyncio.to_thread(manifest.chunk_ids, source)
        await self._store.delete(ids)
        await asyncio.to_thread(manifest.drop, source)
        for pid in ids:
            self._vectors.pop(pid, None)

    async def _refresh(self) -> None:
        self._index = await self._rebuild_index()

    async def remove(self, source: str | Path) -> int:
        """Drop the chunks of `source` (as it was ingested); returns how many were dropped."""
        await self._open(create=False)
        name = _source_name(source)
        async with self._writing:
            manifest = self._need_manifest()
            if name not in await asyncio.to_thread(manifest.files):
                return 0
            n = len(await asyncio.to_thread(manifest.chunk_ids, name))
            if not self._store.local:
                await self._acquire()
            try:
                await self._drop_file(name)
                await self._refresh()
            finally:
                if not self._store.local:
                    self._lock.release()
            return n

    # ------------------------------------------------------------------ reading
    async def search(
        self,
        query: str,
        k: int = 5,
        *,
        mode: Mode = "hybrid",
        where: Mapping[str, str | Sequence[str]] | None = None,
    ) -> list[Passage]:
        """The `k` passages that best answer `query`, best first. `mode`: "vector" (by
        meaning), "lexical" (BM25 over words, ids and codes) or "hybrid" (both, fused by
        reciprocal rank). `where`: only chunks of these sources (`{"source": path}`) or
        under a heading (`{"heading": title}`; a list of values accepts any)."""
        if mode not in ("vector", "lexical", "hybrid"):
            raise ValueError(f"unknown search mode {mode!r}: vector, lexical or hybrid")
        if k < 1:
            raise ValueError("search needs k >= 1")
        filters = check_where(where)
        index = await self._open(create=False)
        text = clean_text(query)[:QUERY_CHARS]
        if blank(text) or not len(index.catalog):
            return []
        pool = max(k, 50) if mode == "hybrid" else k
        lists: list[list[tuple[str, float]]] = []
        if mode in ("vector", "hybrid"):
            lists.append(await self._vector_hits(index, text, pool, filters))
        if mode in ("lexical", "hybrid"):
            lists.append(await asyncio.to_thread(_lexical_hits, index, text, pool, filters))
        ranked = _fuse(lists)[:k] if mode == "hybrid" else lists[0][:k]
        manifest = self._need_manifest()
        rows = await asyncio.to_thread(manifest.lookup, [i for i, _ in ranked])
        return [
            Passage(
                id=r.id,
                kb=self.name,
                text=r.text,
                source=r.source,
                heading=list(r.heading),
                start=r.start,
                end=r.end,
                score=score,
                sha256=r.sha256,
            )
            for pid, score in ranked
            if (r := rows.get(pid)) is not None
        ]

    async def _vector_hits(
        self, index: _Index, text: str, k: int, where: Mapping[str, list[str]]
    ) -> list[tuple[str, float]]:
        if index.matrix is None:  # a server: its own index
            vector = await asyncio.to_thread(self.encoder.encode, [text])
            return await self._store.query([float(x) for x in vector[0]], k, where)

        def run() -> list[tuple[str, float]]:
            assert index.matrix is not None
            q = self.encoder.encode([text])[0]
            scores = index.matrix @ q
            hits = top(scores, k, index.catalog.mask(where), float("-inf"))
            return [(index.catalog.ids[i], s) for i, s in hits]

        return await asyncio.to_thread(run)

    async def verify(self, citation: Citation) -> bool:
        """Whether the cited chunk exists in this knowledge base with the same source,
        offsets and text (its sha256 still matches)."""
        if citation.kb != self.name:
            return False
        await self._open(create=False)
        try:
            payload = await self._store.payload(citation.chunk_id)
        except Exception:  # not a valid point id: it cannot exist
            return False
        if payload is None:
            return False
        text = str(payload.get("text", ""))
        return (
            payload.get("source") == citation.source
            and payload.get("start") == citation.start
            and payload.get("end") == citation.end
            and payload.get("sha256") == citation.sha256
            and _sha(text) == citation.sha256
        )

    async def stats(self) -> dict[str, Any]:
        """Name, where, files and chunks indexed, the encoder, the chunking budget."""
        await self._open(create=False)
        files, chunks = await asyncio.to_thread(self._need_manifest().count)
        return {
            "name": self.name,
            "where": self.where,
            "mode": "local" if self._store.local else "server",
            "files": files,
            "chunks": chunks,
            "encoder": self.encoder.name,
            "chunk_tokens": self.chunk_tokens,
            "overlap_tokens": self.overlap_tokens,
        }

    # ------------------------------------------------------------------ lifetime
    async def close(self) -> None:
        """Close the index: the folder is free for another process after this."""
        async with self._opening:
            await self._release()

    aclose = close

    async def __aenter__(self) -> KnowledgeBase:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # ------------------------------------------------------------------ sync faces
    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on this knowledge base's own event loop thread (the sync faces share
        one loop, so an open index stays open between calls)."""
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name=f"kb-{self.name}", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def ingest_sync(self, path: str | Path, **kwargs: Any) -> IngestReport:
        """`ingest` for scripts (not inside a running event loop of the same thread)."""
        return self._run(self.ingest(path, **kwargs))

    def search_sync(self, query: str, k: int = 5, **kwargs: Any) -> list[Passage]:
        """`search` for scripts."""
        return self._run(self.search(query, k, **kwargs))

    def remove_sync(self, source: str | Path) -> int:
        """`remove` for scripts."""
        return self._run(self.remove(source))

    def stats_sync(self) -> dict[str, Any]:
        """`stats` for scripts."""
        return self._run(self.stats())

    def verify_sync(self, citation: Citation) -> bool:
        """`verify` for scripts."""
        return self._run(self.verify(citation))

    def close_sync(self) -> None:
        """`close` for scripts; also stops the sync faces' event loop."""
        if self._loop is None:
            asyncio.run(self.close())
            return
        self._run(self.close())
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join()
        loop.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close_sync()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _indexed_text(heading: Sequence[str], text: str) -> str:
    """What the encoder and BM25 read: the heading path, then the chunk."""
    return " > ".join(heading) + "\n" + text if heading else text


def _payload(kb: str, row: ChunkRow, file_sha256: str) -> dict[str, Any]:
    return {
        "kb": kb,
        "source": row.source,
        "heading": list(row.heading),
        "index": row.index,
        "start": row.start,
        "end": row.end,
        "sha256": row.sha256,
        "file_sha256": file_sha256,
        "text": row.text,
    }


def _source_name(source: str | Path) -> str:
    return PurePosixPath(Path(source).as_posix()).as_posix()


def _lexical_hits(
    index: _Index, text: str, k: int, where: Mapping[str, list[str]]
) -> list[tuple[str, float]]:
    scores = index.lexical.scores(text)
    if scores is None:
        return []
    hits = top(scores, k, index.catalog.mask(where), 0.0)
    return [(index.catalog.ids[i], s) for i, s in hits]


def _fuse(lists: Sequence[Sequence[tuple[str, float]]]) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: each list adds 1 / (RRF_K + rank) to its items' scores."""
    scores: dict[str, float] = {}
    for hits in lists:
        for rank, (pid, _) in enumerate(hits, 1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
