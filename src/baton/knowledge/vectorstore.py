"""The knowledge base's Qdrant collection, in local mode (a folder) or on a server.

Every point is a chunk: its vector and a payload of source, heading path, offsets, text and
hashes. In local mode the vectors are read back once when the knowledge base opens (see
`baton.knowledge.catalog` for why search does not go through Qdrant's local engine).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qdrant_client import AsyncQdrantClient, models

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@contextmanager
def _quiet() -> Iterator[None]:
    """Local mode warns above 20,000 points that its search is slow; the knowledge base does
    not search through it in local mode (see baton.knowledge.catalog): the warning is noise."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Local mode is not recommended", category=UserWarning
        )
        yield


_BATCH = 256


class InUse(Exception):
    """Another client holds the local folder."""


class VectorStore:
    """One collection of chunk vectors and payloads."""

    def __init__(
        self, folder: Path, url: str | None, api_key: str | None, collection: str, dim: int
    ) -> None:
        self.folder, self.url, self.api_key = folder, url, api_key
        self.collection, self.dim = collection, dim
        self._client: AsyncQdrantClient | None = None

    @property
    def local(self) -> bool:
        """Whether this is local mode (a folder, no server)."""
        return self.url is None

    def has_storage(self) -> bool:
        """Whether the local folder holds a Qdrant storage (any trace of one)."""
        return (self.folder / "meta.json").exists() or (self.folder / "collection").exists()

    @property
    def client(self) -> AsyncQdrantClient:
        """The open client."""
        assert self._client is not None, "the vector store is not open"
        return self._client

    async def open(self, create: bool) -> bool:
        """Connect; create the collection if `create`. Returns whether the collection exists.
        Raises `InUse` for a folder held by another client, anything else as it comes."""
        if self.local:
            try:
                with _quiet():
                    self._client = AsyncQdrantClient(path=str(self.folder))
            except RuntimeError as exc:
                if "already accessed" in str(exc):
                    raise InUse(str(exc)) from exc
                raise
        else:
            self._client = AsyncQdrantClient(url=self.url, api_key=self.api_key)
        exists = await self.client.collection_exists(self.collection)
        if not exists and create:
            await self.client.create_collection(
                self.collection,
                vectors_config=models.VectorParams(size=self.dim, distance=models.Distance.COSINE),
            )
            if not self.local:  # local mode has no payload indexes (it warns)
                for key in ("source", "heading"):
                    await self.client.create_payload_index(
                        self.collection, key, models.PayloadSchemaType.KEYWORD
                    )
            exists = True
        if exists:
            info = await self.client.get_collection(self.collection)
            size = getattr(info.config.params.vectors, "size", None)
            if size != self.dim:
                raise ValueError(f"the collection holds {size}-dimensional vectors, not {self.dim}")
        return exists

    async def close(self) -> None:
        """Release the folder or the connection."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def drop(self) -> None:
        """Delete the collection (a rebuild on a server)."""
        if await self.client.collection_exists(self.collection):
            await self.client.delete_collection(self.collection)

    async def upsert(
        self,
        ids: Sequence[str],
        vectors: npt.NDArray[np.float32],
        payloads: Sequence[dict[str, Any]],
    ) -> None:
        """Store points (the same id again replaces it)."""
        for i in range(0, len(ids), _BATCH):
            points = [
                models.PointStruct(id=pid, vector=vec.tolist(), payload=payload)
                for pid, vec, payload in zip(
                    ids[i : i + _BATCH],
                    vectors[i : i + _BATCH],
                    payloads[i : i + _BATCH],
                    strict=True,
                )
            ]
            with _quiet():
                await self.client.upsert(self.collection, points=points, wait=True)

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete points (unknown ids are ignored)."""
        for i in range(0, len(ids), _BATCH):
            await self.client.delete(
                self.collection,
                points_selector=models.PointIdsList(points=list(ids[i : i + _BATCH])),
                wait=True,
            )

    async def count(self) -> int:
        """Points stored."""
        return (await self.client.count(self.collection, exact=True)).count

    async def vectors(self) -> dict[str, list[float]]:
        """Every point's vector, by id."""
        out: dict[str, list[float]] = {}
        offset: Any = None
        while True:
            points, offset = await self.client.scroll(
                self.collection, limit=2048, offset=offset, with_vectors=True, with_payload=False
            )
            for p in points:
                out[str(p.id)] = p.vector  # type: ignore[assignment]
            if offset is None:
                return out

    async def payload(self, pid: str) -> dict[str, Any] | None:
        """The payload of point `pid`; None if there is none."""
        found = await self.client.retrieve(self.collection, ids=[pid], with_payload=True)
        return dict(found[0].payload or {}) if found else None

    async def query(
        self, vector: Sequence[float], limit: int, where: Mapping[str, list[str]]
    ) -> list[tuple[str, float]]:
        """(id, cosine similarity) of the nearest points passing `where` (server mode)."""
        must: list[models.Condition] = [
            models.FieldCondition(key=key, match=models.MatchAny(any=values))
            for key, values in where.items()
        ]
        found = await self.client.query_points(
            self.collection,
            query=list(vector),
            limit=limit,
            query_filter=models.Filter(must=must) if must else None,
        )
        return [(str(p.id), float(p.score)) for p in found.points]
