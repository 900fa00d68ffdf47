"""`RedisStreamsBus`: the bus across processes and machines, on Redis Streams (`redis.asyncio`,
the `redis` extra: `pip install 'baton-relay[redis]'`), with the semantics of `MemoryBus`.

Open it with a URL: `redis://[:password@]host:6379/0`, `rediss://...` (TLS) or
`unix:///path/to/redis.sock?db=0`. Baton's own query parameters (`prefix`, `partitions`,
`claim_idle_s`, `max_deliveries`, `result_ttl_s`, `group`) are read and removed before
connecting; the others are redis-py's. Every client and worker of one deployment must use the
same prefix and number of partitions.

Keys, each under `{B}` = `{prefix}:bus:` (`{pN}` is partition N, a Redis Cluster hash tag, so
that a partition's keys share a slot):

- `{B}{pN}` the partition's stream, read through the consumer group `group`; an entry holds
  the envelope's request id (`id`), session id (`s`) and JSON (`e`, `baton.bus.wire`).
  Acknowledged entries are deleted (XACK + XDEL).
- `{B}{pN}:lease` the consumer that reads the partition now (SET PX `claim_idle_s`, renewed by
  every `receive`); `{B}consumers` zset of live consumers by when their heartbeat expires.
- `{B}{pN}:n` envelopes published on the partition and not settled (`pending()` sums them):
  incremented on publish, decremented when the entry leaves the group's pending list (XACK
  returns 1 once per entry, so a second acknowledgement changes nothing); an entry another
  program added (its fields are not the bus's) is not counted.
- `{B}{pN}:failed` hash: entry id -> the error of a failed delivery to hand out again.
- `{B}{pN}:acked:{n}:{session id}:{request id}` (`n`: the session id's length in bytes,
  `wire.scoped`) an acknowledged request of the session (kept `result_ttl_s`): a copy
  published again is acknowledged without being handed out. (`{B}{pN}:done:{request id}`,
  by request id alone, is an older version's, honoured for the entries it wrote.)
- `{B}{pN}:last:{session id}` the id of the envelope last published for the session.
- `{B}dlq` stream of dead letters (partition, entry, envelope, error, deliveries, time).
- `{B}wake` a short stream that wakes blocked consumers (partitions given up, or a turn
  published on a partition nobody holds); `{B}result:{n}:{session id}:{request id}` a
  result (JSON, kept `result_ttl_s`), announced on the channel `{B}results` by request id.

An entry that is not an envelope of its partition (written by hand or by another program,
not UTF-8, not JSON, a field of the wrong type, over `wire.MAX_ENVELOPE_BYTES`, a session of
another partition) is never handed to a worker: `receive` fails it as a worker fails a turn,
so after `max_deliveries` it is a dead letter with the reason, and the partition goes on.
Replies of the receive script and the dead-letter stream are read as bytes for that reason.

Receiving is one Lua script (run whole by Redis, with nothing in between): renew the
consumer's heartbeat and leases, take free partitions up to its fair share
(ceil(partitions / live consumers)), give up those beyond it that have nothing pending and
hand out no new entry from the others beyond it (they drain, then are given up), then per
partition held: entries pending under another consumer (it lost the partition: it stopped
or died) and failed ones, in stream order, claimed with XCLAIM (the delivery counter rises, so
`retry_count` does) or moved to `{B}dlq` after `max_deliveries`; its own entries idle past
`claim_idle_s` (a lost acknowledgement, claimed again without raising the counter); then new
entries (XREADGROUP `>`). When there is nothing, `receive` blocks in XREAD on the held streams
(which consumes nothing) for at most `claim_idle_s / 3` at a time, renewing in between.

The scripts build key names from the prefix and span partitions, so every key of a bus must be
on one Redis server (standalone, or a primary with replicas / Sentinel). Without persistence
(AOF or RDB) a restart of Redis loses the queued turns: run it with `appendonly yes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from baton.backends._aio import glob_escape, settle
from baton.bus import wire
from baton.bus.base import (
    BusError,
    DeadLetter,
    Delivery,
    Envelope,
    EnvelopeError,
    TurnResult,
    partition_of,
)
from baton.core.errors import ConfigError
from baton.core.urls import unsplit

try:
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff
    from redis.client import NEVER_DECODE
    from redis.exceptions import AuthenticationError, NoScriptError, RedisError, ResponseError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError as exc:  # pragma: no cover - the extra is part of the dev install
    raise ImportError(
        "the Redis Streams bus needs the redis package: pip install 'baton-relay[redis]'"
    ) from exc

T = TypeVar("T")

log = logging.getLogger("baton.bus")

DEFAULT_PREFIX = "baton"
"""Key prefix of a bus opened without one (its keys start with `baton:bus:`)."""

_RETRIES = 3
"""Times a command is retried on a dropped connection (with exponential backoff)."""

_MAX_CONNECTIONS = 64
"""Connections per event loop (the URL's `max_connections` wins); calls beyond wait."""

_POOL_WAIT_S = 30.0
"""Seconds a call waits for a free connection before it fails."""

_MAX_BLOCK_S = 10.0
"""Longest single blocking read (well under the socket timeout)."""

_POLL_S = 5.0
"""While waiting for a result, how often it is read again anyway (a safety net: after a
dropped connection every waiter reads it again as soon as the subscription is back)."""

_URL_PARAMS = ("prefix", "partitions", "claim_idle_s", "max_deliveries", "result_ttl_s", "group")
"""Query parameters of a bus URL that are Baton's (removed before connecting)."""

# ---------------------------------------------------------------- Lua scripts
# Every script takes the key namespace `{prefix}:bus:` as ARGV[1] and the group as ARGV[2].

_COMMON = f"""
local MAX_E, RAW_BYTES = {wire.MAX_ENVELOPE_BYTES}, {4 * wire.RAW_CHARS}
"""
_COMMON += """
local B, G = ARGV[1], ARGV[2]
local function pkey(i, suffix) return B .. '{p' .. i .. '}' .. suffix end
-- an acknowledged request of a session (wire.scoped: no two (session, request) share it)
local function acked_key(i, sid, rid)
  return pkey(i, ':acked:' .. #sid .. ':' .. sid .. ':' .. rid)
end
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function ensure_group(s)
  if redis.call('EXISTS', s) == 0 then
    redis.call('XGROUP', 'CREATE', s, G, '0', 'MKSTREAM')
  end
end
local function wake()
  redis.call('XADD', B .. 'wake', 'MAXLEN', '16', '*', 'w', '1')
end
local function field(fields, name)
  for j = 1, #fields, 2 do
    if fields[j] == name then return fields[j + 1] end
  end
  return nil
end
-- whether a bus's publish wrote the entry, so that it is counted in `:n`: its fields are
-- exactly id, e (an older version) or id, s, e; an entry another program wrote is not
local function ours(fields)
  if not fields then return true end -- gone from the stream: it was read, so it was ours
  local n = #fields
  return fields[1] == 'id' and ((n == 4 and fields[3] == 'e') or
    (n == 6 and fields[3] == 's' and fields[5] == 'e'))
end
-- the entry leaves the group's pending list: counted as settled once (XACK says whether)
local function settle(i, s, id, gone, fields)
  if (redis.call('XACK', s, G, id) == 1 or gone) and ours(fields) then
    redis.call('DECR', pkey(i, ':n'))
  end
  redis.call('XDEL', s, id)
  redis.call('HDEL', pkey(i, ':failed'), id)
end
-- an entry over the size of any envelope keeps only its start in the dead letter (to show)
local function dead_letter(i, s, id, err, deliveries, now)
  local e = redis.call('XRANGE', s, id, id)
  local fields = e[1] and e[1][2]
  if fields then
    local body = field(fields, 'e') or ''
    local size = #body
    if size > MAX_E then body = string.sub(body, 1, RAW_BYTES) end
    redis.call('XADD', B .. 'dlq', '*', 'p', i, 'entry', id, 'e', body, 'size', size,
      'error', err, 'deliveries', deliveries, 'at', now)
  end
  settle(i, s, id, false, fields)
end
"""

# ARGV: 3 partition, 4 envelope id, 5 envelope JSON, 6 session id, 7 ttl (s).
_PUBLISH = (
    _COMMON
    + """
local i = ARGV[3]
local s = pkey(i, '')
ensure_group(s)
local id = redis.call('XADD', s, '*', 'id', ARGV[4], 's', ARGV[6], 'e', ARGV[5])
redis.call('INCR', pkey(i, ':n'))
redis.call('SET', pkey(i, ':last:' .. ARGV[6]), ARGV[4], 'EX', ARGV[7])
if redis.call('EXISTS', pkey(i, ':lease')) == 0 then wake() end
return id
"""
)

# ARGV: 3 consumer, 4 partitions, 5 lease (ms), 6 count, 7 max deliveries, 8 scan own idle
# entries ('1'), 9 rotation.
# Returns {share, {held...}, {{partition, entry id, deliveries, envelope JSON (false when the
# entry has none, or one too big), its size in bytes (-1: none), the entry's session id and
# request id fields (false when absent)}...}, settled without a hand-out (skipped or
# dead-lettered), {{stream, last id}...} (when nothing was handed out), the wake stream's last
# id}.
_RECEIVE = (
    _COMMON
    + """
local me = ARGV[3]
local parts = tonumber(ARGV[4])
local lease = tonumber(ARGV[5])
local count = tonumber(ARGV[6])
local maxd = tonumber(ARGV[7])
local scan = ARGV[8] == '1'
local rotate = tonumber(ARGV[9])
local now = server_ms()

-- heartbeat, fair share, leases
local consumers = B .. 'consumers'
redis.call('ZADD', consumers, now + lease, me)
redis.call('ZREMRANGEBYSCORE', consumers, '-inf', now)
local live = redis.call('ZCARD', consumers)
local share = math.ceil(parts / math.max(live, 1))
local held, free = {}, {}
for i = 0, parts - 1 do
  local key = pkey(i, ':lease')
  local owner = redis.call('GET', key)
  if owner == me then
    redis.call('PEXPIRE', key, lease)
    held[#held + 1] = i
  elseif not owner then
    free[#free + 1] = i
  end
end
for _, i in ipairs(free) do
  if #held >= share then break end
  redis.call('SET', pkey(i, ':lease'), me, 'PX', lease)
  held[#held + 1] = i
end
local function unsettled(i)
  local s = pkey(i, '')
  if redis.call('EXISTS', s) == 0 then return 0 end
  local ok, info = pcall(redis.call, 'XPENDING', s, G)
  if not ok then return 0 end
  return tonumber(info[1])
end
local gave = false
while #held > share do
  local extra = nil
  for j = #held, 1, -1 do
    if unsettled(held[j]) == 0 then extra = j break end
  end
  if not extra then break end -- the others wait until its deliveries there are settled
  redis.call('DEL', pkey(held[extra], ':lease'))
  table.remove(held, extra)
  gave = true
end
if gave then wake() end
-- partitions still beyond the share are draining: no new entry is handed out from them, so
-- their deliveries settle and the next receive gives them up (a new consumer gets its share
-- under load, and no session is ever on two consumers)
local draining = {}
for j = share + 1, #held do draining[held[j]] = true end
if count <= 0 then return {share, held, {}, 0, {}, ''} end

local out = {}
local settled = 0
local function id_lt(a, b)
  local am, as = string.match(a, '(%d+)-(%d+)')
  local bm, bs = string.match(b, '(%d+)-(%d+)')
  am, bm = tonumber(am), tonumber(bm)
  if am ~= bm then return am < bm end
  return tonumber(as) < tonumber(bs)
end
local function hand_out(i, s, id, fields, deliveries)
  local rid, sid = field(fields, 'id'), field(fields, 's')
  local done = nil
  if rid and sid then
    done = acked_key(i, sid, rid)
  elseif rid then -- an entry of an older version: its acknowledgement was by request id
    done = pkey(i, ':done:' .. rid)
  end
  if done and redis.call('EXISTS', done) == 1 then
    settle(i, s, id, false, fields) -- acknowledged before (published twice): skipped
    settled = settled + 1
    return
  end
  local e = field(fields, 'e')
  local size = e and #e or -1
  if size > MAX_E then e = nil end -- not sent: the worker reads it as too big
  out[#out + 1] = {i, id, deliveries, e or false, size, sid or false, rid or false}
end

local function collect(i)
  local s = pkey(i, '')
  if redis.call('EXISTS', s) == 0 then
    ensure_group(s)
    return
  end
  local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', s, G)
  if not ok then -- a stream another program made (XADD): the group reads it from its start
    redis.call('XGROUP', 'CREATE', s, G, '0')
    consumers = {}
  end
  local fkey = pkey(i, ':failed')
  local need = count - #out
  -- to hand out again first, in stream order: failed entries, and those of other consumers
  local again = {}
  for _, id in ipairs(redis.call('HKEYS', fkey)) do
    local p = redis.call('XPENDING', s, G, id, id, 1)
    if p[1] then
      again[#again + 1] = {id, tonumber(p[1][4])}
    else
      redis.call('HDEL', fkey, id)
    end
  end
  for _, c in ipairs(consumers) do
    local name, pend = field(c, 'name'), tonumber(field(c, 'pending'))
    if name ~= me then
      if pend == 0 then
        redis.call('XGROUP', 'DELCONSUMER', s, G, name)
      else
        for _, r in ipairs(redis.call('XPENDING', s, G, '-', '+', need, name)) do
          if redis.call('HEXISTS', fkey, r[1]) == 0 then
            again[#again + 1] = {r[1], tonumber(r[4])}
          end
        end
      end
    end
  end
  table.sort(again, function(a, b) return id_lt(a[1], b[1]) end)
  for _, a in ipairs(again) do
    if #out >= count then break end
    local id, n = a[1], a[2]
    if n >= maxd then
      local err = redis.call('HGET', fkey, id) or ('not acknowledged after ' .. n ..
        ' deliveries (the consumers that took it stopped)')
      dead_letter(i, s, id, err, n, now)
      settled = settled + 1
    else
      local got = redis.call('XCLAIM', s, G, me, 0, id)
      redis.call('HDEL', fkey, id)
      if got[1] then
        hand_out(i, s, id, got[1][2], n + 1)
      else -- deleted from the stream meanwhile
        settle(i, s, id, true, nil)
        settled = settled + 1
      end
    end
  end
  -- its own deliveries idle past the lease: handed out again as they were
  if scan and #out < count then
    local rows = redis.call('XPENDING', s, G, 'IDLE', lease, '-', '+', count - #out, me)
    for _, r in ipairs(rows) do
      if #out >= count then break end
      local id = r[1]
      if redis.call('HEXISTS', fkey, id) == 0 then
        redis.call('XCLAIM', s, G, me, 0, id, 'JUSTID')
        local e = redis.call('XRANGE', s, id, id)
        if e[1] then
          hand_out(i, s, id, e[1][2], tonumber(r[4]))
        else
          settle(i, s, id, true, nil)
          settled = settled + 1
        end
      end
    end
  end
  -- then new entries, in order
  while #out < count and not draining[i] do
    local got = redis.call('XREADGROUP', 'GROUP', G, me, 'COUNT', count - #out, 'STREAMS', s,
      '>')
    if not got or not got[1] or #got[1][2] == 0 then break end
    for _, e in ipairs(got[1][2]) do hand_out(i, s, e[1], e[2], 1) end
  end
end

local n = #held
for k = 0, n - 1 do
  if #out >= count then break end
  collect(held[((rotate + k) % n) + 1])
end

local lasts, wake_last = {}, ''
if #out == 0 then
  for _, i in ipairs(held) do
    local s = pkey(i, '')
    local last = redis.call('XREVRANGE', s, '+', '-', 'COUNT', 1)
    lasts[#lasts + 1] = {s, last[1] and last[1][1] or '0-0'}
  end
  local w = redis.call('XREVRANGE', B .. 'wake', '+', '-', 'COUNT', 1)
  wake_last = w[1] and w[1][1] or '0-0'
end
return {share, held, out, settled, lasts, wake_last}
"""
)

# ARGV: 3 partition, 4 entry id, 5 envelope id, 6 ttl (s), 7 session id.
_ACK = (
    _COMMON
    + """
local i = ARGV[3]
redis.call('SET', acked_key(i, ARGV[7], ARGV[5]), '1', 'EX', ARGV[6])
local s = pkey(i, '')
local e = redis.call('XRANGE', s, ARGV[4], ARGV[4])
settle(i, s, ARGV[4], false, e[1] and e[1][2])
return 1
"""
)

# ARGV: 3 partition, 4 entry id, 5 consumer, 6 error, 7 max deliveries.
_FAIL = (
    _COMMON
    + """
local i = ARGV[3]
local s, id = pkey(i, ''), ARGV[4]
if redis.call('EXISTS', s) == 0 then return 'gone' end
local p = redis.call('XPENDING', s, G, id, id, 1)
if not p[1] or p[1][2] ~= ARGV[5] or redis.call('HEXISTS', pkey(i, ':failed'), id) == 1 then
  return 'gone'
end
if tonumber(p[1][4]) >= tonumber(ARGV[7]) then
  dead_letter(i, s, id, ARGV[6], tonumber(p[1][4]), server_ms())
  return 'dead'
end
redis.call('HSET', pkey(i, ':failed'), id, ARGV[6])
return 'retry'
"""
)

# ARGV: 3 consumer, 4 partitions.
_RELEASE = (
    _COMMON
    + """
redis.call('ZREM', B .. 'consumers', ARGV[3])
local gave = 0
for i = 0, tonumber(ARGV[4]) - 1 do
  local key = pkey(i, ':lease')
  if redis.call('GET', key) == ARGV[3] then
    redis.call('DEL', key)
    gave = gave + 1
  end
end
if gave > 0 then wake() end
return gave
"""
)

# ARGV: 3 dead letter id, 4 partition, 5 envelope id, 6 envelope JSON, 7 session id, 8 ttl.
_REQUEUE = (
    _COMMON
    + """
if redis.call('XDEL', B .. 'dlq', ARGV[3]) == 0 then return false end
local i = ARGV[4]
local s = pkey(i, '')
ensure_group(s)
local id = redis.call('XADD', s, '*', 'id', ARGV[5], 's', ARGV[7], 'e', ARGV[6])
redis.call('INCR', pkey(i, ':n'))
redis.call('SET', pkey(i, ':last:' .. ARGV[7]), ARGV[5], 'EX', ARGV[8])
if redis.call('EXISTS', pkey(i, ':lease')) == 0 then wake() end
return id
"""
)


@dataclass(frozen=True, slots=True)
class _Token:
    """Where a delivery lives: its partition and stream entry."""

    partition: int
    entry: str


class _Client:
    """One event loop's connection pool, its scripts and the result waiters."""

    def __init__(self, client: Any) -> None:
        self.redis = client
        register = client.register_script
        self.publish = register(_PUBLISH)
        self.receive = register(_RECEIVE)
        self.ack = register(_ACK)
        self.fail = register(_FAIL)
        self.release = register(_RELEASE)
        self.requeue = register(_REQUEUE)
        self.waiters: dict[str, list[asyncio.Future[None]]] = {}
        """Request id -> who waits for a result of that id (in whichever session: each
        reads its own session's result when woken)."""
        self.listener: asyncio.Task[None] | None = None
        self.subscribed = asyncio.Event()

    async def raw(self, script: Any, args: list[Any]) -> Any:
        """`script(args)` with its reply left as bytes: a stream entry may hold anything, and
        one that is not UTF-8 must not make the whole reply unreadable."""
        command = ("EVALSHA", script.sha, 0, *args)
        try:
            return await self.redis.execute_command(*command, **{NEVER_DECODE: True})
        except NoScriptError:  # a restarted or flushed server: load it again
            await self.redis.script_load(script.script)
            return await self.redis.execute_command(*command, **{NEVER_DECODE: True})


def _redacted(url: str) -> str:
    """The URL without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _where(url: str) -> str:
    """host:port (or the socket path) of a Redis URL, without credentials."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path or url
    try:
        port = parts.port or 6379
    except ValueError:
        port = 6379
    return f"{parts.hostname or 'localhost'}:{port}"


def _split_url(url: str) -> tuple[str, dict[str, str]]:
    """(the URL without Baton's query parameters, those parameters)."""
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(
            f"bad Redis bus URL {url!r}: use 'redis://host:6379/0', 'rediss://host:6379/0' "
            "(TLS) or 'unix:///path/to/redis.sock'"
        )
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in _URL_PARAMS}
    rest = urlencode([(k, v) for k, v in query if k not in _URL_PARAMS])
    return unsplit(parts._replace(query=rest)), ours


def _pick(name: str, given: Any, default: Any, in_url: dict[str, str], convert: Any) -> Any:
    """The parameter `name`: from the URL unless the argument says otherwise."""
    if name not in in_url:
        return given
    try:
        value = convert(in_url[name])
    except ValueError:
        raise ConfigError(
            f"bad bus URL parameter {name}={in_url[name]!r}: expected a "
            f"{'number' if convert is float else 'whole number' if convert is int else 'name'}"
        ) from None
    if given != default and given != value:
        raise ConfigError(
            f"the bus URL names {name}={value!r} but {name}={given!r} was passed too; give it "
            "in one place"
        )
    return value


def _text(value: Any) -> str:
    """A reply field read as bytes, as text (what is not UTF-8 shown as escapes)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return "" if value is None else str(value)


class RedisStreamsBus:
    """A `Bus` in Redis Streams, shared by the clients and workers of several processes.

    `RedisStreamsBus(url, prefix="baton", partitions=8, claim_idle_s=30.0, max_deliveries=5,
    result_ttl_s=86400, group="workers")`: the keys start with `{prefix}:bus:`; sessions
    spread over `partitions` streams, each read by one consumer at a time (it holds the
    partition while it keeps receiving: a lease of `claim_idle_s`). A consumer silent for
    `claim_idle_s` is presumed dead: its partitions and unacknowledged deliveries go to the
    next consumer that receives. An envelope delivered `max_deliveries` times without success
    goes to the dead-letter stream. Results and the ids of acknowledged envelopes are kept
    `result_ttl_s`. Nothing connects until the first call; `close()` closes the connections;
    `drop()` deletes every key of the bus.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        partitions: int = 8,
        claim_idle_s: float = 30.0,
        max_deliveries: int = 5,
        result_ttl_s: float = 86400,
        group: str = "workers",
    ) -> None:
        connect_url, params = _split_url(url)
        prefix = _pick("prefix", prefix, DEFAULT_PREFIX, params, str)
        partitions = _pick("partitions", partitions, 8, params, int)
        claim_idle_s = _pick("claim_idle_s", claim_idle_s, 30.0, params, float)
        max_deliveries = _pick("max_deliveries", max_deliveries, 5, params, int)
        result_ttl_s = _pick("result_ttl_s", result_ttl_s, 86400, params, float)
        group = _pick("group", group, "workers", params, str)
        if not isinstance(prefix, str) or not prefix.strip(":"):
            raise ConfigError(
                f"RedisStreamsBus(prefix={prefix!r}): give a non-empty key prefix, e.g. 'baton' "
                "(drop() deletes every key of the bus under it)"
            )
        if partitions < 1:
            raise ConfigError("partitions must be at least 1")
        if not (claim_idle_s > 0 and math.isfinite(claim_idle_s)):
            raise ConfigError("claim_idle_s must be positive (seconds)")
        if max_deliveries < 1:
            raise ConfigError("max_deliveries must be at least 1")
        if not (result_ttl_s >= 1 and math.isfinite(result_ttl_s)):
            raise ConfigError("result_ttl_s must be at least 1 (seconds)")
        if not group:
            raise ConfigError("group must be a non-empty name")
        self.url = _redacted(url)
        """The bus URL as given, without its password (safe to log)."""
        self.prefix = prefix
        self.partitions = partitions
        self.claim_idle_s = float(claim_idle_s)
        self.max_deliveries = max_deliveries
        self.result_ttl_s = result_ttl_s
        self.group = group
        self.where = _where(connect_url)
        """host:port (or socket path) of the server, for messages."""
        self.keys = prefix.rstrip(":") + ":bus:"
        """Every key of the bus starts with it."""
        self._connect_url = connect_url
        try:
            aioredis.connection.parse_url(connect_url)
        except ValueError as exc:
            raise ConfigError(f"bad Redis bus URL {self.url!r}: {exc}") from exc
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Client] = (
            weakref.WeakKeyDictionary()
        )
        self._mutex = threading.Lock()
        self._closed = False
        self._next_scan: dict[str, float] = {}
        """Consumer -> when its own idle deliveries are looked for next."""
        self._rotate: dict[str, int] = {}

    # ------------------------------------------------------------------ plumbing
    def _client(self) -> _Client:
        """The client of the running event loop (made on first use: a redis.asyncio pool
        belongs to one loop)."""
        if self._closed:
            raise BusError(f"the Redis bus at {self.where} is closed; open a new RedisStreamsBus")
        loop = asyncio.get_running_loop()
        with self._mutex:
            found = self._clients.get(loop)
            if found is None:
                for dead in [old for old in self._clients if old.is_closed()]:
                    del self._clients[dead]
                # a blocking pool: calls beyond `max_connections` wait for a connection
                pool = aioredis.BlockingConnectionPool.from_url(
                    self._connect_url,  # options in the URL's query win over these
                    max_connections=_MAX_CONNECTIONS,
                    timeout=_POOL_WAIT_S,
                    decode_responses=True,
                    socket_connect_timeout=5.0,
                    socket_timeout=30.0,
                    # keep-alive is a TCP option (a unix socket's connection refuses it)
                    **(
                        {}
                        if self._connect_url.startswith("unix://")
                        else {"socket_keepalive": True}
                    ),
                    retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), _RETRIES),
                    retry_on_error=[RedisConnectionError, RedisTimeoutError],
                )
                client = aioredis.Redis(connection_pool=pool)
                client.auto_close_connection_pool = True  # closing the client closes the pool
                found = self._clients[loop] = _Client(client)
            return found

    def _pkey(self, partition: int, suffix: str = "") -> str:
        return f"{self.keys}{{p{partition}}}{suffix}"

    async def _run(
        self, action: str, work: Callable[[_Client], Awaitable[T]], *, write: bool = False
    ) -> T:
        """`work(client)` with Redis errors turned into `BusError`s; a write runs to its end
        even when its caller is cancelled."""
        client = self._client()

        async def guarded() -> T:
            try:
                return await work(client)
            except BusError:
                raise
            except (RedisError, OSError) as exc:
                raise BusError(self._explain(action, exc)) from exc
            except UnicodeDecodeError as exc:  # a key of the bus holds bytes it never wrote
                raise self._corrupt(f"a reply to {action}", self.keys + "*", exc) from exc

        if write:
            return await settle(guarded())
        return await guarded()

    def _explain(self, action: str, exc: BaseException) -> str:
        text = str(exc) or type(exc).__name__
        if isinstance(exc, AuthenticationError):
            return (
                f"Redis at {self.where} refused the credentials of the bus URL {self.url} "
                f"({text}) during {action}: fix the user or password in the URL"
            )
        if "no connection available" in text.lower():
            return (
                f"the Redis bus {self.url}: every connection stayed busy for {_POOL_WAIT_S:g}s "
                f"during {action}; raise max_connections in the bus URL (now "
                f"{_MAX_CONNECTIONS} by default) or check the server's latency"
            )
        if isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError)):
            return (
                f"the Redis bus {self.url} is unreachable ({text}) during {action}, after "
                f"{_RETRIES} retries: start Redis or fix the bus URL; nothing acknowledged is "
                "lost"
            )
        low = text.lower()
        where = f"Redis bus {self.url} (keys {self.keys}*): {action} failed ({text})"
        if isinstance(exc, ResponseError):
            if low.startswith("readonly"):
                return f"{where}: the URL names a read-only replica; point it at the primary"
            if low.startswith("oom"):
                return (
                    f"{where}: Redis is out of memory (maxmemory); raise maxmemory or free "
                    "keys, and use a noeviction policy so that no queued turn is evicted"
                )
            if "wrongtype" in low or "nogroup" in low:
                return (
                    f"{where}: a key of the bus holds something else than the bus wrote; "
                    "another program uses the prefix: give the bus a prefix of its own"
                )
            if "unknown command" in low or "syntax" in low:
                return f"{where}: the bus needs Redis 6.2 or later"
        return f"{where}; check the server (redis-cli ping) and retry"

    def _corrupt(self, what: str, key: object, exc: Exception) -> BusError:
        return BusError(
            f"Redis bus {self.url}: {what} {key!r} cannot be read ({exc}); it was written by "
            "something else than this Baton version, or edited; delete it, or give the bus a "
            "prefix of its own"
        )

    def _read(self, row: list[Any]) -> Delivery:
        """A delivery from a row of the receive script; `EnvelopeError` (why) when its entry
        is not an envelope of the partition it sits on."""
        part, entry, deliveries, body, size, sid, rid = row
        token = _Token(int(part), _text(entry))
        if body is None:
            if int(size) < 0:
                raise EnvelopeError(
                    "the stream entry has no envelope (no field 'e'); it was not written by a "
                    "Baton bus"
                )
            raise EnvelopeError(wire.too_big(int(size)))
        envelope = wire.decode(body)
        if (sid is not None and sid != envelope.session_id.encode("utf-8")) or (
            rid is not None and rid != envelope.id.encode("utf-8")
        ):
            raise EnvelopeError(
                f"the stream entry names session {_text(sid)!r}, request {_text(rid)!r}, but "
                f"its envelope is request {envelope.id!r} of session {envelope.session_id!r}: "
                "it was edited or forged"
            )
        home = partition_of(envelope.session_id, self.partitions)
        if home != token.partition:
            raise EnvelopeError(
                f"the envelope of session {envelope.session_id!r} sits on partition "
                f"{token.partition}, but the session's turns go to partition {home} of "
                f"{self.partitions}: it was written by hand, or by a client with another "
                "number of partitions (every client and worker of a deployment must use the "
                "same); `baton dlq retry` publishes it on the right one"
            )
        return Delivery(envelope, int(deliveries) - 1, token)

    async def _refuse(self, consumer: str, row: list[Any], error: str) -> None:
        """Fail an entry that is not an envelope, as a worker fails a turn: handed out
        again first, then, after `max_deliveries`, a dead letter with `error`."""
        token = _Token(int(row[0]), _text(row[1]))
        reason = f"EnvelopeError: {error}"
        dead = await self._fail(consumer, token, reason)
        if dead:
            log.error(
                "bus %s: entry %s of partition %d moved to the dead-letter queue: %s "
                "(baton dlq list)",
                self.url,
                token.entry,
                token.partition,
                reason,
            )

    # ------------------------------------------------------------------ publishing
    async def publish(self, envelope: Envelope) -> str:
        """Queue the envelope on its session's partition; returns its stream entry id. Raises
        `EnvelopeError` for an envelope that could not be read back (`baton.bus.wire`)."""
        body = wire.encode(envelope)
        index = partition_of(envelope.session_id, self.partitions)
        args = [
            self.keys,
            self.group,
            index,
            envelope.id,
            body,
            envelope.session_id,
            math.ceil(self.result_ttl_s),
        ]

        async def work(c: _Client) -> str:
            return str(await c.publish(args=args))

        return await self._run("publish", work, write=True)

    # ------------------------------------------------------------------ receiving
    async def receive(self, consumer: str, count: int = 16, block_s: float = 1.0) -> list[Delivery]:
        """Up to `count` deliveries for `consumer`, waiting up to `block_s` for one.

        Every call renews the consumer's hold on its partitions (call it at least every
        `claim_idle_s`; `count=0` only renews). Per partition: first the deliveries to hand out
        again (failed, or taken over from a consumer that stopped; `retry_count` raised), then
        its own deliveries unacknowledged for `claim_idle_s` (handed out again as they were: a
        lost acknowledgement), then new entries in order."""
        lease_ms = max(1, math.ceil(self.claim_idle_s * 1000))
        deadline = -1.0
        while True:
            t = time.monotonic()
            scan = count > 0 and t >= self._next_scan.get(consumer, 0.0)
            if scan:
                self._next_scan[consumer] = t + self.claim_idle_s / 3
            rotate = self._rotate[consumer] = self._rotate.get(consumer, -1) + 1
            args = [
                self.keys,
                self.group,
                consumer,
                self.partitions,
                lease_ms,
                max(count, 0),
                self.max_deliveries,
                "1" if scan else "0",
                rotate,
            ]

            async def work(c: _Client, args: list[Any] = args) -> Any:
                return await c.raw(c.receive, args)

            reply = await self._run("receive", work)
            _share, _held, rows, settled, lasts, wake_last = reply
            if count <= 0:
                return []
            out: list[Delivery] = []
            refused = 0
            for row in rows:
                try:
                    out.append(self._read(row))
                except EnvelopeError as exc:  # not a turn: nothing for a worker to run
                    await self._refuse(consumer, row, str(exc))
                    refused += 1
            if out:
                return out
            if refused:
                continue  # handed out again at once, until it is a dead letter
            if block_s <= 0:
                return out
            if int(settled) > 0:
                continue  # skipped or dead-lettered entries: look again at once
            if deadline < 0:
                deadline = t + block_s
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            # wait for a new entry on a held partition, or a wake-up; renew before the lease
            # runs out (consumes nothing: the next round hands it out)
            wait_s = min(left, self.claim_idle_s / 3, _MAX_BLOCK_S)
            streams = {_text(stream): _text(last) for stream, last in lasts}
            streams[self.keys + "wake"] = _text(wake_last)

            block_ms = max(1, math.floor(wait_s * 1000))

            async def block(
                c: _Client, streams: dict[str, str] = streams, block_ms: int = block_ms
            ) -> Any:
                return await c.redis.xread(streams, count=1, block=block_ms)

            await self._run("receive", block)

    # ------------------------------------------------------------------ settling
    def _token(self, delivery: Delivery) -> _Token:
        token = delivery.token
        if not isinstance(token, _Token) or not 0 <= token.partition < self.partitions:
            raise ValueError("not a delivery of this bus")
        return token

    async def ack(self, consumer: str, delivery: Delivery) -> None:
        """The delivery is done: never delivered again (its session and request id are
        remembered for `result_ttl_s`, so a copy published again is skipped)."""
        token = self._token(delivery)
        args = [
            self.keys,
            self.group,
            token.partition,
            token.entry,
            delivery.envelope.id,
            math.ceil(self.result_ttl_s),
            delivery.envelope.session_id,
        ]

        async def work(c: _Client) -> None:
            await c.ack(args=args)

        await self._run("ack", work, write=True)

    async def fail(self, consumer: str, delivery: Delivery, error: str) -> bool:
        """Hand the delivery out again (before the partition's new entries, `retry_count`
        raised), or after `max_deliveries` move it to the dead-letter stream (True). A
        delivery the consumer no longer holds (settled, or taken over) is left alone (False)."""
        return await self._fail(consumer, self._token(delivery), error)

    async def _fail(self, consumer: str, token: _Token, error: str) -> bool:
        args = [
            self.keys,
            self.group,
            token.partition,
            token.entry,
            consumer,
            error,
            self.max_deliveries,
        ]

        async def work(c: _Client) -> str:
            return str(await c.fail(args=args))

        return await self._run("fail", work, write=True) == "dead"

    async def release(self, consumer: str) -> None:
        """Give the consumer's partitions up now; its unsettled deliveries go, first, to the
        consumer that takes each partition next (`retry_count` raised)."""
        self._next_scan.pop(consumer, None)
        self._rotate.pop(consumer, None)
        args = [self.keys, self.group, consumer, self.partitions]

        async def work(c: _Client) -> None:
            await c.release(args=args)

        await self._run("release", work, write=True)

    # ------------------------------------------------------------------ results
    async def put_result(self, result: TurnResult) -> None:
        """Record a request's result under (its session, its request id) for `result_ttl_s`
        and wake whoever waits for it (the announcement names the request id only)."""
        text = json.dumps(dataclasses.asdict(result))
        key = self._result_key(result.session_id, result.request_id)

        async def work(c: _Client) -> None:
            async with c.redis.pipeline(transaction=False) as pipe:
                pipe.set(key, text, ex=math.ceil(self.result_ttl_s))
                pipe.publish(self.keys + "results", result.request_id)
                await pipe.execute()

        await self._run("put_result", work, write=True)

    async def last_request(self, session_id: str) -> str | None:
        """The id of the envelope last published for the session, or None."""
        key = self._pkey(partition_of(session_id, self.partitions), ":last:" + session_id)

        async def work(c: _Client) -> str | None:
            found = await c.redis.get(key)
            return None if found is None else str(found)

        return await self._run("last_request", work)

    async def get_result(
        self, session_id: str, request_id: str, wait_s: float = 0.0
    ) -> TurnResult | None:
        """The result of the session's request `request_id`, waiting up to `wait_s` for it;
        None if there is none yet."""
        found = await self._result(session_id, request_id)
        if found is not None or wait_s <= 0:
            return found
        deadline = time.monotonic() + wait_s
        c = self._client()
        self._listen(c)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = c.waiters.setdefault(request_id, [])
        waiters.append(waiter)
        try:
            if not c.subscribed.is_set():  # announcements reach us from here on
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(c.subscribed.wait(), min(wait_s, _POLL_S))
            while True:
                found = await self._result(session_id, request_id)
                left = deadline - time.monotonic()
                if found is not None or left <= 0:
                    return found
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(waiter), min(left, _POLL_S))
                if waiter.done():
                    waiter = asyncio.get_running_loop().create_future()
                    c.waiters.setdefault(request_id, []).append(waiter)
        finally:
            mine = c.waiters.get(request_id)
            if mine is not None:
                with contextlib.suppress(ValueError):
                    mine.remove(waiter)
                if not mine:
                    del c.waiters[request_id]

    def _result_key(self, session_id: str, request_id: str) -> str:
        return self.keys + "result:" + wire.scoped(session_id, request_id)

    async def _result(self, session_id: str, request_id: str) -> TurnResult | None:
        # `result:{request id}` is where an older version kept results (by request id alone):
        # still read in the first `result_ttl_s` after an upgrade, for its own session only
        keys = [self._result_key(session_id, request_id), self.keys + "result:" + request_id]

        async def work(c: _Client) -> list[Any]:
            return list(await c.redis.mget(keys))

        for text in await self._run("get_result", work):
            if text is None:
                continue
            try:
                found = TurnResult(**json.loads(text))
            except (TypeError, ValueError) as exc:
                raise self._corrupt("result", (session_id, request_id), exc) from exc
            if found.session_id == session_id and found.request_id == request_id:
                return found  # anything else under the key is not this request's result
        return None

    def _listen(self, c: _Client) -> None:
        """Start the loop's subscription to result announcements (once)."""
        if c.listener is None or c.listener.done():
            c.listener = asyncio.get_running_loop().create_task(self._listener(c))

    async def _listener(self, c: _Client) -> None:
        channel = self.keys + "results"
        backoff = 0.05
        while True:
            pubsub = c.redis.pubsub()
            try:
                await pubsub.subscribe(channel)
                while True:
                    message = await pubsub.get_message(timeout=None)
                    if message is None:
                        continue
                    kind = message.get("type")
                    if kind == "subscribe":  # first, or again after a reconnection
                        c.subscribed.set()
                        backoff = 0.05
                        # announcements may have been lost meanwhile: every waiter looks again
                        waiting, c.waiters = c.waiters, {}
                        for waiters in waiting.values():
                            for waiter in waiters:
                                if not waiter.done():
                                    waiter.set_result(None)
                    elif kind == "message":
                        for waiter in c.waiters.pop(str(message.get("data")), ()):
                            if not waiter.done():
                                waiter.set_result(None)
            except (RedisError, OSError, UnicodeDecodeError):  # a foreign non-UTF-8 message too
                c.subscribed.clear()
                await asyncio.sleep(backoff)  # waiters read the result on their own meanwhile
                backoff = min(backoff * 2, 2.0)
            finally:
                with contextlib.suppress(RedisError, OSError, RuntimeError):
                    await pubsub.aclose()

    # ------------------------------------------------------------------ dead letters
    async def _dlq_range(self, action: str, low: str, high: str, count: int | None) -> list[Any]:
        """Rows of the dead-letter stream as bytes (an unreadable entry's copy may be
        anything)."""
        command: list[Any] = ["XRANGE", self.keys + "dlq", low, high]
        if count is not None:
            command += ["COUNT", count]

        async def work(c: _Client) -> list[Any]:
            return list(await c.redis.execute_command(*command, **{NEVER_DECODE: True}))

        return await self._run(action, work)

    def _letter(self, dead_id: Any, fields: dict[bytes, bytes]) -> DeadLetter:
        body = fields.get(b"e", b"")
        try:
            envelope: Envelope | None = wire.decode(body)
            raw = ""
        except EnvelopeError:
            envelope, raw = None, wire.shown(body)
        try:
            return DeadLetter(
                id=_text(dead_id),
                envelope=envelope,
                error=_text(fields.get(b"error")),
                deliveries=int(fields.get(b"deliveries", 0)),
                failed_at=int(fields.get(b"at", 0)) / 1000,
                raw=raw,
            )
        except ValueError as exc:
            raise self._corrupt("dead letter", _text(dead_id), exc) from exc

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """The dead-letter stream, oldest first; an entry that was not an envelope is listed
        with `envelope=None` and what it held (`raw`)."""
        if limit <= 0:
            return []
        rows = await self._dlq_range("dead_letters", "-", "+", limit)
        return [self._letter(dead_id, fields) for dead_id, fields in rows]

    async def requeue(self, dead_id: str) -> Envelope:
        """Publish a dead letter's envelope again (deliveries start over, on the partition of
        its session); drop the letter. `EnvelopeError` for a letter that holds no envelope."""
        unknown = LookupError(f"no dead letter {dead_id!r} on {self.url} (see `baton dlq list`)")
        try:
            rows = await self._dlq_range("requeue", dead_id, dead_id, None)
        except BusError as exc:
            if "invalid stream id" in str(exc).lower():
                raise unknown from None
            raise
        if not rows:
            raise unknown
        letter = self._letter(*rows[0])
        envelope = letter.envelope
        if envelope is None:
            raise EnvelopeError(
                f"dead letter {dead_id!r} holds no envelope to publish again ({letter.error}); "
                "it stays in the dead-letter queue as the record of what was found"
            )
        args = [
            self.keys,
            self.group,
            dead_id,
            partition_of(envelope.session_id, self.partitions),
            envelope.id,
            wire.encode(envelope),
            envelope.session_id,
            math.ceil(self.result_ttl_s),
        ]

        async def work(c: _Client) -> Any:
            return await c.requeue(args=args)

        if not await self._run("requeue", work, write=True):
            raise unknown  # requeued by someone else meanwhile
        return envelope

    async def pending(self) -> int:
        """Envelopes published and not yet acknowledged (queued or in flight)."""
        keys = [self._pkey(i, ":n") for i in range(self.partitions)]

        async def work(c: _Client) -> list[Any]:
            return list(await c.redis.mget(keys))

        return sum(int(n) for n in await self._run("pending", work) if n is not None)

    # ------------------------------------------------------------------ lifecycle
    async def drop(self) -> None:
        """Delete every key of the bus (SCAN and UNLINK of `{prefix}:bus:*`), e.g. after a
        test. Other keys under the prefix (a store's) are left alone."""
        pattern = glob_escape(self.keys) + "*"

        async def work(c: _Client) -> None:
            batch: list[str] = []
            async for key in c.redis.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    await c.redis.unlink(*batch)
                    batch = []
            if batch:
                await c.redis.unlink(*batch)

        await self._run("drop", work, write=True)

    async def close(self) -> None:
        """Close the connections of the running event loop's client (those of other loops
        are let go); later calls raise `BusError`. Closing twice is harmless."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            try:
                loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            mine = None if loop is None else self._clients.get(loop)
            self._clients = weakref.WeakKeyDictionary()
        if mine is None:
            return
        for waiters in mine.waiters.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
        if mine.listener is not None:
            mine.listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, RedisError, OSError):
                await mine.listener
        client = mine.redis
        closing = getattr(client, "aclose", None) or client.close  # redis < 5.0.1: close
        with contextlib.suppress(RedisError, OSError):
            await closing()

    def __repr__(self) -> str:
        return (
            f"RedisStreamsBus({self.url!r}, prefix={self.prefix!r}, partitions={self.partitions})"
        )
