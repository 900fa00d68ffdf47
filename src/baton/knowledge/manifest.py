"""The manifest: a SQLite file in the knowledge base's folder that says what is indexed.

Per file: its version (the sha256 of its bytes with the reading and chunking settings,
`KnowledgeBase._version`) and its state; per chunk: id, offsets, heading path and
text. A file's new chunks are written `pending` before they are stored in the vector index
and turn `done` (the file's old chunks deleted) only after, in one transaction: an
interrupted ingestion leaves the file pending, and the next one redoes it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from baton.knowledge.errors import KnowledgeBaseError

F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    """Run `method` holding the manifest's mutex."""

    def run(self: Manifest, *args: Any, **kwargs: Any) -> Any:
        with self._mutex:
            return method(self, *args, **kwargs)

    run.__doc__, run.__name__ = method.__doc__, method.__name__
    return run  # type: ignore[return-value]


FILENAME = "manifest.sqlite3"
"""The manifest's file name in the knowledge base's folder."""

FORMAT = 1
"""The manifest's schema version."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
  source TEXT PRIMARY KEY, sha256 TEXT NOT NULL, state TEXT NOT NULL, updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
  id TEXT PRIMARY KEY, source TEXT NOT NULL, idx INTEGER NOT NULL, start INTEGER NOT NULL,
  "end" INTEGER NOT NULL, heading TEXT NOT NULL, sha256 TEXT NOT NULL, text TEXT NOT NULL,
  state TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_source ON chunks (source);
"""


@dataclass(frozen=True)
class ChunkRow:
    """A chunk as the manifest keeps it."""

    id: str
    source: str
    index: int
    start: int
    end: int
    heading: tuple[str, ...]
    sha256: str
    text: str


class Manifest:
    """The SQLite manifest of one knowledge base: one connection, which searches (in worker
    threads) and an ingestion share, so every call holds a mutex."""

    def __init__(self, folder: Path, *, create: bool) -> None:
        self.path = folder / FILENAME
        self._mutex = threading.RLock()
        if not create and not self.path.is_file():
            raise KnowledgeBaseError(f"missing manifest {self.path}")
        try:
            self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
            self._db.executescript(_SCHEMA)
            self._db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as exc:
            raise KnowledgeBaseError(f"damaged manifest {self.path} ({exc})") from exc

    @_locked
    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    # ------------------------------------------------------------------ meta
    @_locked
    def get_meta(self, key: str) -> str | None:
        """A value of the meta table."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @_locked
    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the meta table."""
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @_locked
    def generation(self) -> int:
        """A counter bumped by every change of the chunks: the lexical index records the
        generation it was built from, so a stale one is rebuilt."""
        return int(self.get_meta("generation") or 0)

    def _bump(self) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (str(self.generation() + 1),)
        )

    # ------------------------------------------------------------------ files
    @_locked
    def files(self) -> dict[str, tuple[str, str]]:
        """source -> (sha256, state) of every file."""
        rows = self._db.execute("SELECT source, sha256, state FROM files")
        return {s: (h, st) for s, h, st in rows}

    @_locked
    def chunk_ids(self, source: str) -> list[str]:
        """Ids of every chunk of `source`, done or pending."""
        rows = self._db.execute("SELECT id FROM chunks WHERE source = ?", (source,))
        return [r[0] for r in rows]

    @_locked
    def begin(self, source: str, sha256: str, chunks: Iterable[ChunkRow]) -> None:
        """Record `source`'s new chunks as pending (before they are stored)."""
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO files VALUES (?, ?, 'pending', ?)",
                (source, sha256, time.time()),
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
                [_row(c) for c in chunks],
            )

    @_locked
    def commit(self, source: str, keep: set[str]) -> None:
        """`source` is indexed: its chunks in `keep` turn done, the others are deleted."""
        with self._db:
            stale = [i for i in self.chunk_ids(source) if i not in keep]
            self._db.executemany("DELETE FROM chunks WHERE id = ?", [(i,) for i in stale])
            self._db.execute("UPDATE chunks SET state = 'done' WHERE source = ?", (source,))
            self._db.execute(
                "UPDATE files SET state = 'done', updated = ? WHERE source = ?",
                (time.time(), source),
            )
            self._bump()

    @_locked
    def drop(self, source: str) -> None:
        """Forget `source` and its chunks."""
        with self._db:
            self._db.execute("DELETE FROM chunks WHERE source = ?", (source,))
            self._db.execute("DELETE FROM files WHERE source = ?", (source,))
            self._bump()

    # ------------------------------------------------------------------ chunks
    @_locked
    def count(self) -> tuple[int, int]:
        """(files, chunks) indexed (done)."""
        files = self._db.execute("SELECT COUNT(*) FROM files WHERE state = 'done'").fetchone()
        chunks = self._db.execute("SELECT COUNT(*) FROM chunks WHERE state = 'done'").fetchone()
        return int(files[0]), int(chunks[0])

    @_locked
    def done(self) -> list[ChunkRow]:
        """Every indexed chunk, in a stable order."""
        rows = self._db.execute(
            'SELECT id, source, idx, start, "end", heading, sha256, text FROM chunks '
            "WHERE state = 'done' ORDER BY source, idx"
        )
        return [
            ChunkRow(r[0], r[1], r[2], r[3], r[4], tuple(json.loads(r[5])), r[6], r[7])
            for r in rows
        ]

    @_locked
    def lookup(self, ids: list[str]) -> dict[str, ChunkRow]:
        """The indexed chunks among `ids`."""
        out: dict[str, ChunkRow] = {}
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows = self._db.execute(
                'SELECT id, source, idx, start, "end", heading, sha256, text FROM chunks '
                f"WHERE state = 'done' AND id IN ({','.join('?' * len(part))})",
                part,
            )
            for r in rows:
                out[r[0]] = ChunkRow(
                    r[0], r[1], r[2], r[3], r[4], tuple(json.loads(r[5])), r[6], r[7]
                )
        return out


def _row(c: ChunkRow) -> tuple[object, ...]:
    heading = json.dumps(list(c.heading), ensure_ascii=False)
    return (c.id, c.source, c.index, c.start, c.end, heading, c.sha256, c.text)
