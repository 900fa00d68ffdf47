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
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from baton.core.text import blank, clean_text
from baton.knowledge import ingestion
from baton.knowledge.catalog import Catalog, check_where, top
from baton.knowledge.chunking import READING_VERSION, chunk_text
from baton.knowledge.documents import DEFAULT_MAX_MB
from baton.knowledge.errors import KnowledgeBaseError
from baton.knowledge.lexical import LexicalIndex
from baton.knowledge.locking import FolderLock
from baton.knowledge.manifest import ChunkRow, Manifest
from baton.knowledge.passages import Citation, IngestReport, Passage
from baton.knowledge.ranking import fuse, lexical_hits
from baton.knowledge.sync import SyncFaces
from baton.knowledge.vectorcache import VectorCache
from baton.knowledge.vectorstore import InUse, VectorStore
from baton.routing.encoders import Encoder, default_encoder

if TYPE_CHECKING:
    from types import TracebackType

    import numpy as np
    import numpy.typing as npt

    from baton.tools import Tool

Mode = Literal["vector", "lexical", "hybrid"]

DEFAULT_ROOT = ".baton/kb"
"""Where a knowledge base's folder is when no path is given: `.baton/kb/<name>`."""

QUERY_CHARS = 2000
"""A longer query is cut to its first this many characters: a query is a question, not a
document, and encoding (or scoring BM25 over) 100k characters would make a search slow."""

_NAMESPACE = uuid.UUID("3c1b7a52-8f0e-4d5b-a1c9-2e7f6d4b9a10")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


@dataclass
class _Index:
    """What a search reads, swapped whole after every change."""

    catalog: Catalog
    matrix: npt.NDArray[np.float32] | None  # local mode: row i is catalog.ids[i]'s vector
    lexical: LexicalIndex


class KnowledgeBase(SyncFaces):
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
        self._fresh: dict[str, npt.NDArray[np.float32]] = {}  # stored, not yet in _index
        self._opening = asyncio.Lock()
        self._writing = asyncio.Lock()

    @property
    def where(self) -> str:
        """The folder (local mode) or the server URL and the folder, for messages."""
        return str(self.path) if self.url is None else f"{self.url} (manifest in {self.path})"

    # ------------------------------------------------------------------ opening
    def _damaged(self, detail: str) -> KnowledgeBaseError:
        # on a server, deleting the folder would leave the collection's old points behind
        folder = "" if self.url else f", or delete the folder {self.path} and ingest again"
        return KnowledgeBaseError(
            f"the knowledge base {self.name!r} at {self.where} is damaged or incomplete "
            f"({detail}): rebuild it with `baton kb ingest PATH --kb {self.name} --path "
            f"{self.path} --rebuild` (KnowledgeBase.ingest(PATH, rebuild=True)){folder}"
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
            exists = await self._store.open(create=not chunks)
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
            who = (
                "another KnowledgeBase object of this process (share one object per folder, "
                "or close the other first)"
                if self._lock.held_here()
                else "another process (ingesting or searching)"
            )
            raise KnowledgeBaseError(
                f"the knowledge base at {self.path} is in use by {who} and stayed so for "
                f"{self.lock_timeout_s:g} s: wait for it to finish and try again, or raise "
                "lock_timeout_s (`--wait`)"
            ) from None

    async def _rebuild_index(self, load_vectors: bool = False) -> _Index:
        """The search structures from the manifest (and, in local mode, the vectors)."""

        manifest = self._need_manifest()
        rows = await asyncio.to_thread(manifest.done)
        catalog = Catalog([(r.id, r.source, r.heading) for r in rows])
        generation = manifest.generation()
        matrix = None
        if self._store.local:
            cache = VectorCache(self.path)
            dim = self.encoder.dim
            if load_vectors or self._index is None or self._index.matrix is None:
                matrix = await asyncio.to_thread(cache.load, generation, catalog.ids, dim)
                if matrix is not None and await self._store.count() < len(catalog):
                    raise self._damaged(
                        f"Qdrant holds fewer points than the manifest's {len(catalog)} chunks"
                    )
                if matrix is None:
                    matrix = await self._stored_vectors(catalog)
                    await asyncio.to_thread(cache.save, generation, catalog.ids, matrix)
            else:
                matrix = self._assemble(catalog, self._index)
                await asyncio.to_thread(cache.save, generation, catalog.ids, matrix)
            self._fresh = {}
        lexical = LexicalIndex(self.path)
        if not await asyncio.to_thread(lexical.load, generation, len(rows)):
            texts = [_indexed_text(r.heading, r.text) for r in rows]
            await asyncio.to_thread(lexical.build, texts, generation)
        return _Index(catalog, matrix, lexical)

    async def _stored_vectors(self, catalog: Catalog) -> npt.NDArray[np.float32]:
        """The vectors of `catalog`'s chunks, read back from Qdrant, in catalog order."""
        import numpy as np

        try:
            stored = await self._store.vectors()
        except Exception as exc:
            raise self._damaged(f"its vectors cannot be read: {exc}") from exc
        missing = sum(1 for i in catalog.ids if i not in stored)
        if missing:
            raise self._damaged(f"{missing} chunks of the manifest are missing from Qdrant")
        matrix = np.zeros((len(catalog), self.encoder.dim), dtype=np.float32)
        for row, pid in enumerate(catalog.ids):
            matrix[row] = stored[pid]
        return matrix

    def _assemble(self, catalog: Catalog, old: _Index) -> npt.NDArray[np.float32]:
        """The matrix for `catalog` from the previous one and the vectors just stored."""
        import numpy as np

        assert old.matrix is not None
        matrix = np.empty((len(catalog), self.encoder.dim), dtype=np.float32)
        kept_to, kept_from = [], []
        for row, pid in enumerate(catalog.ids):
            vector = self._fresh.get(pid)
            if vector is not None:
                matrix[row] = vector
            elif (was := old.catalog.row.get(pid)) is not None:
                kept_to.append(row)
                kept_from.append(was)
            else:
                raise self._damaged(f"the vector of chunk {pid} is missing")
        matrix[kept_to] = old.matrix[kept_from]
        return matrix

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
        self._fresh = {}

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
        await self._release()
        if self._store.url is not None:  # the store alone: the manifest may be the damage
            try:
                await self._store.open(create=False)
                await self._store.drop()
            except Exception as exc:
                raise KnowledgeBaseError(
                    f"the collection {self._store.collection} on {self.url} cannot be "
                    f"deleted for a rebuild ({type(exc).__name__}: {exc})"
                ) from exc
            finally:
                await self._store.close()
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

    def _chunk_rows(self, source: str, text: str, headings: Any, version: str) -> list[ChunkRow]:
        chunks = chunk_text(text, headings, budget=self.chunk_tokens, overlap=self.overlap_tokens)
        return [
            ChunkRow(
                id=str(
                    uuid.uuid5(_NAMESPACE, f"{self.name}\x00{source}\x00{c.index}\x00{version}")
                ),
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

    def _version(self, file_sha256: str) -> str:
        """What makes a file's chunks current: its bytes, how files are read and chunked
        (`chunking.READING_VERSION`) and this base's chunk budget and overlap. When any of
        them changes, the next ingest chunks the file again."""
        settings = f"{file_sha256}\x00{READING_VERSION}\x00{self.chunk_tokens}"
        return _sha(f"{settings}\x00{self.overlap_tokens}")

    async def _store_file(
        self, source: str, version: str, rows: list[ChunkRow], file_sha256: str
    ) -> None:
        """Store one file's chunks: pending in the manifest, vectors upserted, old chunks
        deleted, then committed."""
        import numpy as np

        manifest = self._need_manifest()
        old = await asyncio.to_thread(manifest.chunk_ids, source)
        await asyncio.to_thread(manifest.begin, source, version, rows)
        fresh: dict[str, npt.NDArray[np.float32]] = {}
        for i in range(0, len(rows), self.batch):
            part = rows[i : i + self.batch]
            texts = [_indexed_text(r.heading, r.text) for r in part]
            vectors = await asyncio.to_thread(self.encoder.encode, texts)
            vectors = np.asarray(vectors, dtype=np.float32)
            await self._store.upsert(
                [r.id for r in part], vectors, [_payload(self.name, r, file_sha256) for r in part]
            )
            fresh.update(zip([r.id for r in part], vectors, strict=True))
        keep = {r.id for r in rows}
        stale = [i for i in old if i not in keep]
        await self._store.delete(stale)
        await asyncio.to_thread(manifest.commit, source, keep)
        if self._store.local:
            self._fresh.update(fresh)

    async def _drop_file(self, source: str) -> None:
        manifest = self._need_manifest()
        ids = await asyncio.to_thread(manifest.chunk_ids, source)
        await self._store.delete(ids)
        await asyncio.to_thread(manifest.drop, source)

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
        where: Mapping[str, str | PurePath | Sequence[str | PurePath]] | None = None,
    ) -> list[Passage]:
        """The `k` passages that best answer `query`, best first. `mode`: "vector" (by
        meaning), "lexical" (BM25 over words, ids and codes) or "hybrid" (both, fused by
        reciprocal rank, with chunks holding an id or code of the query verbatim as a
        third list). `where`: only chunks of these sources (`{"source": path}`) or
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
        lex = (index.catalog, index.lexical)
        if mode in ("vector", "hybrid"):
            lists.append(await self._vector_hits(index, text, pool, filters))
        if mode in ("lexical", "hybrid"):
            lists.append(await asyncio.to_thread(lexical_hits, *lex, text, pool, filters))
        if mode == "hybrid":  # a third list: chunks holding the query's ids verbatim
            lists.append(await asyncio.to_thread(lexical_hits, *lex, text, pool, filters, True))
        ranked = fuse(lists)[:k] if mode == "hybrid" else lists[0][:k]
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
        """Name, where, files and chunks indexed (and points in Qdrant: the same number
        unless an ingestion was interrupted), the encoder, the chunking budget."""
        await self._open(create=False)
        files, chunks = await asyncio.to_thread(self._need_manifest().count)
        return {
            "name": self.name,
            "where": self.where,
            "mode": "local" if self._store.local else "server",
            "files": files,
            "chunks": chunks,
            "points": await self._store.count(),
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

    # ------------------------------------------------------------------ as tools
    def as_tool(
        self,
        name: str,
        description: str,
        *,
        k: int = 4,
        budget_tokens: int = 400,
        mode: Mode = "hybrid",
    ) -> Tool:
        """A tool that searches this knowledge base and answers with the facts of its top
        `k` passages, each with its citation, within `budget_tokens`
        (`baton.knowledge.tool.search_tool`)."""
        from baton.knowledge.tool import search_tool

        return search_tool(self, name, description, k=k, budget_tokens=budget_tokens, mode=mode)

    async def chunk(self, chunk_id: str) -> Passage | None:
        """The stored passage with this id (score 0), or None when there is none."""
        await self._open(create=False)
        try:
            payload = await self._store.payload(chunk_id)
        except Exception:  # not a valid point id: it cannot exist
            return None
        if payload is None:
            return None
        return Passage(
            id=chunk_id,
            kb=self.name,
            text=str(payload.get("text", "")),
            source=str(payload.get("source", "")),
            heading=[str(h) for h in payload.get("heading") or []],
            start=int(payload.get("start", 0)),
            end=int(payload.get("end", 0)),
            score=0.0,
            sha256=str(payload.get("sha256", "")),
        )


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
