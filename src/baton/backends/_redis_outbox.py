"""The `Outbox` capability of `RedisStore` (`baton.backends.outbox`): its items are written
by the commit script in the run's own script call; these scripts claim, settle, requeue and
prune them, each atomic on the server.

Keys (under the store's prefix): `ob:{id}` a hash per item; `ob:order` (score: the order
written) lists them; `ob:due` (score: `next_at`) holds the pending ones; `ob:rate:{kind}:{key}`
(score: the event's time) counts them for the guard alert rate.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from baton.backends.outbox import (
    Delivery,
    OutboxItem,
    OutboxStatus,
    deliveries_json,
    deliveries_of,
)
from baton.core.errors import StoreError
from baton.core.ids import now

T = TypeVar("T")

_SCAN = 1000
"""Due items a claim looks at, at most (the earliest due first)."""

# Appended to the commit script (after the audit records): count, then per item its id, kind,
# key, session id, run id, time, event JSON and created_at.
COMMIT_OUTBOX_LUA = """
count = tonumber(ARGV[i])
i = i + 1
for _ = 1, count do
  local id = ARGV[i]
  local key = P .. 'ob:' .. id
  if redis.call('EXISTS', key) == 0 then
    redis.call('HSET', key, 'kind', ARGV[i + 1], 'key', ARGV[i + 2], 'session_id', ARGV[i + 3],
      'run_id', ARGV[i + 4], 'ts', ARGV[i + 5], 'event', ARGV[i + 6], 'status', 'pending',
      'attempts', 0, 'next_at', 0, 'owner', '', 'lease_until', 0, 'deliveries', '[]',
      'created_at', ARGV[i + 7])
    redis.call('ZADD', P .. 'ob:order', redis.call('INCR', P .. 'ob:n'), id)
    redis.call('ZADD', P .. 'ob:due', 0, id)
    redis.call('ZADD', P .. 'ob:rate:' .. ARGV[i + 1] .. ':' .. ARGV[i + 2], ARGV[i + 5], id)
  end
  i = i + 8
end
"""

# ARGV: 1 prefix, 2 owner, 3 lease until, 4 now, 5 limit. Returns the ids claimed, in the
# order they were written.
_CLAIM = f"""
local P, owner, till = ARGV[1], ARGV[2], ARGV[3]
local t, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
local due = redis.call('ZRANGEBYSCORE', P .. 'ob:due', '-inf', t, 'LIMIT', 0, {_SCAN})
local free = {{}}
for _, id in ipairs(due) do
  local h = redis.call('HMGET', P .. 'ob:' .. id, 'owner', 'lease_until', 'status')
  if h[3] == 'pending' and (h[1] == '' or tonumber(h[2]) <= t) then
    table.insert(free, {{tonumber(redis.call('ZSCORE', P .. 'ob:order', id)), id}})
  end
end
table.sort(free, function(a, b) return a[1] < b[1] end)
local out = {{}}
for n = 1, math.min(limit, #free) do
  local id = free[n][2]
  redis.call('HSET', P .. 'ob:' .. id, 'owner', owner, 'lease_until', till)
  table.insert(out, id)
end
return out
"""

# ARGV: 1 prefix, 2 id, 3 owner, 4 status, 5 next_at, 6 deliveries to append (a JSON array).
_SETTLE = """
local P, id = ARGV[1], ARGV[2]
local key = P .. 'ob:' .. id
if redis.call('HGET', key, 'owner') ~= ARGV[3] or ARGV[3] == '' then return 0 end
local log = redis.call('HGET', key, 'deliveries')
if ARGV[6] ~= '[]' then
  if log == '[]' then
    log = ARGV[6]
  else
    log = string.sub(log, 1, -2) .. ',' .. string.sub(ARGV[6], 2)
  end
end
redis.call('HINCRBY', key, 'attempts', 1)
redis.call('HSET', key, 'status', ARGV[4], 'next_at', ARGV[5], 'owner', '', 'lease_until', 0,
  'deliveries', log)
if ARGV[4] == 'pending' then
  redis.call('ZADD', P .. 'ob:due', ARGV[5], id)
else
  redis.call('ZREM', P .. 'ob:due', id)
end
return 1
"""

# ARGV: 1 prefix, 2 id.
_REQUEUE = """
local P, id = ARGV[1], ARGV[2]
local key = P .. 'ob:' .. id
if redis.call('HGET', key, 'status') ~= 'dead' then return 0 end
redis.call('HSET', key, 'status', 'pending', 'attempts', 0, 'next_at', 0)
redis.call('ZADD', P .. 'ob:due', 0, id)
return 1
"""

# ARGV: 1 prefix, 2 before. Returns how many settled items it dropped.
_PRUNE = """
local P, before = ARGV[1], tonumber(ARGV[2])
local gone = 0
for _, id in ipairs(redis.call('ZRANGE', P .. 'ob:order', 0, -1)) do
  local key = P .. 'ob:' .. id
  local h = redis.call('HMGET', key, 'status', 'ts', 'kind', 'key')
  if h[1] and h[1] ~= 'pending' and tonumber(h[2]) < before then
    redis.call('DEL', key)
    redis.call('ZREM', P .. 'ob:order', id)
    redis.call('ZREM', P .. 'ob:due', id)
    redis.call('ZREM', P .. 'ob:rate:' .. h[3] .. ':' .. h[4], id)
    gone = gone + 1
  end
end
return gone
"""


def _item(item_id: str, f: dict[str, str]) -> OutboxItem:
    return OutboxItem(
        id=item_id,
        kind=f["kind"],
        key=f["key"],
        session_id=f["session_id"],
        run_id=f["run_id"],
        ts=float(f["ts"]),
        event=f["event"],
        status=f["status"],  # type: ignore[arg-type]
        attempts=int(f["attempts"]),
        next_at=float(f["next_at"]),
        owner=f["owner"] or None,
        lease_until=float(f["lease_until"]),
        deliveries=deliveries_of(f["deliveries"]),
        created_at=float(f["created_at"]),
    )


class RedisOutbox:
    """`Outbox` over the Redis store's connections."""

    prefix: str

    if TYPE_CHECKING:  # what the store this is mixed into gives (`RedisStore`)

        async def _run(
            self, action: str, work: Callable[[Any], Awaitable[T]], *, write: bool = False
        ) -> T: ...

        def _key(self, *parts: str) -> str: ...

    async def _items(self, c: Any, ids: Sequence[str]) -> list[OutboxItem]:
        pipe = c.redis.pipeline(transaction=False)
        for item_id in ids:
            pipe.hgetall(self._key("ob:", item_id))
        found = zip(ids, await pipe.execute(), strict=True)
        return [_item(item_id, fields) for item_id, fields in found if fields]

    async def claim_outbox(
        self, owner: str, lease_s: float, limit: int = 16, *, at: float | None = None
    ) -> list[OutboxItem]:
        """Lease up to `limit` due, unleased pending items to `owner` (`Outbox`)."""
        if lease_s <= 0 or limit < 1:
            raise StoreError(
                f"claim_outbox needs lease_s > 0 and limit >= 1, got {lease_s}, {limit}"
            )
        if not owner:
            raise StoreError("claim_outbox needs an owner name")
        t = now() if at is None else at

        async def work(c: Any) -> list[OutboxItem]:
            script = c.redis.register_script(_CLAIM)
            args = [self.prefix, owner, repr(t + lease_s), repr(t), limit]
            ids: list[str] = await script(keys=[], args=args)
            return await self._items(c, ids)

        return await self._run("claim_outbox", work, write=True)

    async def settle_outbox(
        self,
        item_id: str,
        owner: str,
        status: OutboxStatus,
        deliveries: Sequence[Delivery],
        *,
        next_at: float = 0.0,
    ) -> bool:
        """Append `deliveries`, count the try, set `status` and free the lease (`Outbox`)."""
        log = deliveries_json(deliveries)

        async def work(c: Any) -> bool:
            script = c.redis.register_script(_SETTLE)
            args = [self.prefix, item_id, owner, status, repr(float(next_at)), log]
            return bool(await script(keys=[], args=args))

        return await self._run("settle_outbox", work, write=True)

    async def requeue_outbox(self, item_id: str) -> bool:
        """Make a dead item pending again, due now (`Outbox`)."""

        async def work(c: Any) -> bool:
            script = c.redis.register_script(_REQUEUE)
            return bool(await script(keys=[], args=[self.prefix, item_id]))

        return await self._run("requeue_outbox", work, write=True)

    async def prune_outbox(self, before: float) -> int:
        """Drop settled items that happened before `before` (`Outbox`)."""

        async def work(c: Any) -> int:
            script = c.redis.register_script(_PRUNE)
            return int(await script(keys=[], args=[self.prefix, repr(float(before))]))

        return await self._run("prune_outbox", work, write=True)

    async def get_outbox(self, item_id: str) -> OutboxItem | None:
        """One item with its delivery log, or None (`Outbox`)."""

        async def work(c: Any) -> list[OutboxItem]:
            return await self._items(c, [item_id])

        items = await self._run("get_outbox", work)
        return items[0] if items else None

    async def list_outbox(
        self, status: OutboxStatus | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        """Items (of `status` if given), oldest first (`Outbox`)."""

        async def work(c: Any) -> list[OutboxItem]:
            ids: list[str] = await c.redis.zrange(self._key("ob:order"), 0, -1)
            items = await self._items(c, ids)
            return [i for i in items if status is None or i.status == status][:limit]

        return await self._run("list_outbox", work)

    async def count_outbox(self, kind: str, key: str, since: float, until: float) -> int:
        """Items of `kind` and `key` that happened in (`since`, `until`] (`Outbox`)."""

        async def work(c: Any) -> int:
            rate = self._key("ob:rate:", kind, ":", key)
            return int(await c.redis.zcount(rate, f"({since!r}", repr(until)))

        return await self._run("count_outbox", work)
