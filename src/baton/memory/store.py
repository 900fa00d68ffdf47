"""`Memory`: long-term memories per user and per agent, kept in Qdrant.

Local mode (a folder on disk, no server; `.baton/memory` by default) or a Qdrant server URL,
with the same code. Vectors come from the embedded sentence encoder
(`baton.routing.encoders.default_encoder`) or any `Encoder`. Every text is redacted before it
is stored. A search is scoped: a user's memories reach only that user's searches (a run
without a user id reads none), an agent's lessons only that agent's.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qdrant_client import AsyncQdrantClient, models

from baton.core.errors import BatonError
from baton.core.text import clean_text
from baton.memory import hooks
from baton.memory.records import Kind, MemoryRecord, Provenance, Recalled, rank
from baton.routing.encoders import Encoder, default_encoder
from baton.runtime.redact import Redactor

if TYPE_CHECKING:
    from types import TracebackType

    from baton.backends.base import Store
    from baton.runtime.blueprint import Blueprint
    from baton.runtime.kernel import Kernel
    from baton.runtime.result import RunStatus
    from baton.runtime.state import RunState

log = logging.getLogger("baton.memory")

DEFAULT_PATH = ".baton/memory"
DAY = 86400.0
_NEVER = 1e18
"""`expires` of a memory without a TTL (a range filter needs a number)."""
_NAMESPACE = uuid.UUID("6f1f2a1e-5b0c-4f7e-9d3e-0b8a6c1d2e3f")


class MemoryStoreError(BatonError):
    """The memory's vector store cannot be opened or read."""


class Memory:
    """Long-term memory of a team: per-user facts and preferences, per-agent lessons.

    `Team(..., memory=Memory())` gives every agent with a model a `remember` tool, recalls the
    memories relevant to the user's message into each agent's system prompt (quoted data with
    provenance, within `budget_tokens`), and after each completed run keeps what its
    `remember` calls (and, with `summarise=True`, the summariser) left to remember.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        encoder: Encoder | None = None,
        collection: str = "memories",
        k: int = 5,
        budget_tokens: int = 300,
        min_similarity: float = 0.2,
        half_life_s: float = 30 * DAY,
        ttl_s: float | None = None,
        summarise: bool = False,
        agents: Sequence[str] | None = None,
        redactor: Redactor | None = None,
        audit: Store | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if path is not None and url is not None:
            raise ValueError("Memory takes a folder (path) or a Qdrant server (url), not both")
        if k < 1 or budget_tokens < 1 or half_life_s <= 0:
            raise ValueError("Memory needs k >= 1, budget_tokens >= 1 and half_life_s > 0")
        self.url = url
        self.path = None if url is not None else Path(path or DEFAULT_PATH)
        self._api_key = api_key
        self.encoder = encoder or default_encoder()
        self.collection = collection
        self.k = k
        """How many memories are recalled for a turn at most."""
        self.budget_tokens = budget_tokens
        """Tokens the recalled block may take in a system prompt."""
        self.min_similarity = min_similarity
        """Memories less similar to the user's message are never recalled."""
        self.half_life_s = half_life_s
        """Idle time after which a memory ranks at half its similarity."""
        self.ttl_s = ttl_s
        """Default time to live of a new memory; None: it never expires."""
        self.summarise = summarise
        """Ask the team's summariser for facts and lessons at the end of each completed run."""
        self.agents = frozenset(agents) if agents is not None else None
        """The agents that get the `remember` tool and recalls; None: every agent."""
        self.redactor = redactor or Redactor()
        """Redacts texts stored through `remember` (a team's run uses the team's redactor)."""
        self.audit = audit
        """A store that keeps `forget`'s `memory_forgotten` events (its audit trail chains
        them); None: `forget` logs them only."""
        self.clock = clock
        self._client: AsyncQdrantClient | None = None
        self._opening = asyncio.Lock()

    @property
    def where(self) -> str:
        """The folder or server URL, for messages."""
        return self.url if self.url is not None else str(self.path)

    # ------------------------------------------------------------------ the engine
    async def _db(self) -> AsyncQdrantClient:
        if self._client is not None:
            return self._client
        async with self._opening:
            if self._client is None:
                self._client = await self._open()
        return self._client

    async def _open(self) -> AsyncQdrantClient:
        client: AsyncQdrantClient | None = None
        try:
            if self.url is not None:
                client = AsyncQdrantClient(url=self.url, api_key=self._api_key)
            else:
                assert self.path is not None
                self.path.mkdir(parents=True, exist_ok=True)
                client = AsyncQdrantClient(path=str(self.path))
            if not await client.collection_exists(self.collection):
                await client.create_collection(
                    self.collection,
                    vectors_config=models.VectorParams(
                        size=self.encoder.dim, distance=models.Distance.COSINE
                    ),
                )
            info = await client.get_collection(self.collection)
        except Exception as exc:
            if client is not None:  # a half-opened folder is released for the next try
                await client.close()
            todo = (
                "check that the Qdrant server is running and reachable, and its api_key"
                if self.url is not None
                else "a folder is used by one process at a time: close the other Memory, or "
                "use a Qdrant server (Memory(url=...)) to share one"
            )
            raise MemoryStoreError(
                f"the memory at {self.where} cannot be opened ({type(exc).__name__}: {exc}); {todo}"
            ) from exc
        size = getattr(info.config.params.vectors, "size", None)
        if size != self.encoder.dim:
            await client.close()
            raise MemoryStoreError(
                f"the memory at {self.where} holds {size}-dimensional vectors, but the encoder "
                f"{self.encoder.name} makes {self.encoder.dim}: open it with the encoder that "
                "wrote it, or use another folder or collection"
            )
        return client

    async def _vector(self, text: str) -> list[float]:
        rows = await asyncio.to_thread(self.encoder.encode, [clean_text(text)])
        return [float(x) for x in rows[0]]

    # ------------------------------------------------------------------ writing
    async def remember(
        self,
        text: str,
        *,
        user_id: str | None = None,
        agent: str | None = None,
        kind: Kind = "fact",
        provenance: Provenance | None = None,
        ttl_s: float | None = None,
        redactor: Redactor | None = None,
    ) -> MemoryRecord:
        """Keep `text` (redacted first) for `user_id` and/or `agent`. The same text for the
        same scope is one memory: remembering it again makes it fresh."""
        if user_id is None and agent is None:
            raise ValueError("a memory belongs to a user, an agent or both: give user_id or agent")
        clean = (redactor or self.redactor).redact_text(clean_text(text)).strip()
        if not clean:
            raise ValueError("nothing to remember: the text is empty")
        now = self.clock()
        ttl = ttl_s if ttl_s is not None else self.ttl_s
        key = "\x00".join([user_id or "", agent or "", kind, clean])
        record = MemoryRecord(
            id=str(uuid.uuid5(_NAMESPACE, key)),
            text=clean,
            kind=kind,
            user_id=user_id,
            agent=agent,
            provenance=provenance or Provenance(who="user"),
            created_at=now,
            expires_at=None if ttl is None else now + ttl,
            last_used=now,
        )
        point = models.PointStruct(
            id=record.id, vector=await self._vector(clean), payload=_payload(record)
        )
        await (await self._db()).upsert(self.collection, points=[point])
        return record

    # ------------------------------------------------------------------ reading
    async def search(
        self,
        query: str,
        *,
        user_id: str | None,
        agent: str | None = None,
        k: int | None = None,
        touch: bool = True,
    ) -> list[Recalled]:
        """The memories for `user_id` (and `agent`) most relevant to `query`, best first:
        similarity weighed by decay, unexpired, at least `min_similarity` similar. `touch`:
        mark them used now (they rank as fresh again). No user id: only the agent's own
        memories for every user."""
        scope = _scope(user_id, agent)
        if scope is None:
            return []
        now = self.clock()
        wanted = k or self.k
        db = await self._db()
        found = await db.query_points(
            self.collection,
            query=await self._vector(query),
            query_filter=models.Filter(
                must=[models.FieldCondition(key="expires", range=models.Range(gt=now))],
                should=scope,
            ),
            limit=wanted * 4,  # decay may reorder: rank among more than k
            with_payload=True,
        )
        hits = []
        for p in found.points:
            if p.score < self.min_similarity or p.payload is None:
                continue
            record = MemoryRecord.model_validate(p.payload["record"])
            hits.append(Recalled(record=record, similarity=p.score, score=0.0))
        hits = [
            r.model_copy(update={"score": rank(r.similarity, r.record, now, self.half_life_s)})
            for r in hits
        ]
        hits.sort(key=lambda r: r.score, reverse=True)
        hits = hits[:wanted]
        if touch:
            for r in hits:
                used = r.record.model_copy(update={"last_used": now, "uses": r.record.uses + 1})
                await db.set_payload(self.collection, payload=_payload(used), points=[used.id])
        return hits

    async def count(self, user_id: str | None = None) -> int:
        """How many memories are kept (about `user_id`, if given), expired ones included
        until `purge_expired`."""
        where = None if user_id is None else _of_user(user_id)
        found = await (await self._db()).count(self.collection, count_filter=where, exact=True)
        return found.count

    async def purge_expired(self) -> int:
        """Delete the memories whose time to live is over; returns how many."""
        expired = models.Filter(
            must=[models.FieldCondition(key="expires", range=models.Range(lte=self.clock()))]
        )
        return await self._delete(expired)

    async def _delete(self, where: models.Filter) -> int:
        db = await self._db()
        n = (await db.count(self.collection, count_filter=where, exact=True)).count
        if n:
            await db.delete(self.collection, points_selector=models.FilterSelector(filter=where))
        return n

    async def forget(self, user_id: str, *, by: str | None = None) -> int:
        """Delete everything kept about `user_id`; returns how many memories were deleted.
        Audited: a `memory_forgotten` event is stored in `audit` (whose audit trail chains
        it) and logged."""
        if not user_id:
            raise ValueError("forget needs the user id whose memories to delete")
        deleted = await self._delete(_of_user(user_id))
        await hooks.audit_forget(self, user_id, deleted, by)
        return deleted

    # ------------------------------------------------------------------ the kernel's hooks
    async def recall(self, run: RunState, agent: str) -> str | None:
        """`MemoryHook.recall`: the block of memories for `agent`'s turn in `run`."""
        return await hooks.recall(self, run, agent)

    async def after_run(self, kernel: Kernel, run: RunState, status: RunStatus) -> None:
        """`MemoryHook.after_run`: keep what the run's `remember` calls (and the summariser)
        left to remember; a failure is logged and costs the memories, never the run."""
        await hooks.after_run(self, kernel, run, status)

    def blueprint_part(self, agents: Sequence[str]) -> Blueprint:
        """The `remember` tool for `agents` (those this memory serves)."""
        from baton.memory.tool import remember_blueprint

        return remember_blueprint([a for a in agents if self.serves(a)])

    def serves(self, agent: str) -> bool:
        """Whether `agent` gets the `remember` tool and recalls."""
        return self.agents is None or agent in self.agents

    # ------------------------------------------------------------------ lifetime
    async def aclose(self) -> None:
        """Close the engine (a folder is free for another process after this)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def __aenter__(self) -> Memory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _payload(record: MemoryRecord) -> dict[str, Any]:
    """The point's payload: the record, and its scope and expiry as filterable fields."""
    return {
        "record": record.model_dump(mode="json"),
        "user": record.user_id or "",
        "agent": record.agent or "",
        "expires": record.expires_at if record.expires_at is not None else _NEVER,
    }


def _match(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def _of_user(user_id: str) -> models.Filter:
    return models.Filter(must=[_match("user", user_id)])


def _scope(user_id: str | None, agent: str | None) -> list[models.Condition] | None:
    """Which memories a search may read: the user's own (for every agent, or this agent),
    and this agent's memories for every user. None: nothing."""
    scope: list[models.Condition] = []
    if user_id:
        agents = [""] if agent is None else ["", agent]
        scope.append(
            models.Filter(
                must=[
                    _match("user", user_id),
                    models.FieldCondition(key="agent", match=models.MatchAny(any=agents)),
                ]
            )
        )
    if agent is not None:
        scope.append(models.Filter(must=[_match("user", ""), _match("agent", agent)]))
    return scope or None
