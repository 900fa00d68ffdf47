"""`RedisStore`: sessions, transcripts, events, the audit chain, checkpoints, leases,
the human queue, the tasks of plan-execute-review runs, blackboards and graph snapshots in
Redis (`redis.asyncio`, the `redis` extra: `pip install 'baton-relay[redis]'`).

Open it with a URL: `redis://[:password@]host:6379/0`, `rediss://...` (TLS) or
`unix:///path/to/redis.sock?db=0`; `?prefix=name:` (or the `prefix` argument, default
`baton:`) names the keys, so that several stores share one database. The client connects on
first use (one client per event loop), retries a dropped connection with backoff, and turns
what Redis reports into `StoreError`s that say what to do.

Keys, each under the prefix `{P}` (`{sid}` a session id, `{tid}` a trace or thread id):

- `{P}session:{sid}` hash: version, record (JSON: user, holder, state, requests, control),
  incoming, created_at, updated_at; `{P}sessions` zset of session ids by updated_at.
- `{P}msg` hash: message number -> `[id, session, run, role, agent, ts]` newline message JSON;
  `{P}msg:n` the last number; `{P}msg:s:{sid}` list of a session's message numbers.
- `{P}ev` hash: event number -> event JSON; `{P}ev:n`; lists `{P}ev:s:{sid}`, `{P}ev:t:{tid}`.
- `{P}audit` hash: chain position -> audit record (JSON); `{P}audit:tip` "seq:hash" of the last
  record; `{P}audit:s:{sid}` list of a session's positions; `{P}audit:anchors` list of the
  anchors (JSON) of the chain's archives, oldest first (`baton.backends.archive`).
- `{P}cp:{sid}` hash: the session's checkpoint; zsets `{P}cps` and `{P}cps:{status}` of
  session ids by updated_at.
- `{P}lease:{key}` strings that expire (PX); expiry is the server's clock.
- `{P}ticket:{id}` hash (card, status, body); `{P}tickets:next`; zsets `{P}tickets` and
  `{P}tickets:{status}` of ticket ids.
- `{P}task` hash: `[run, task id]` -> `[session, status, version, updated_at]` newline task
  JSON; hashes `{P}task:v` (versions) and `{P}task:s` (sessions); lists `{P}tasks`,
  `{P}tasks:s:{sid}`, `{P}tasks:r:{run}` of tasks in the order first saved.
- `{P}bd:{board}` hash: key -> "seq [version, updated_at, writer, value]"; `{P}bv:{board}`
  hash of versions; `{P}bz:{board}` zset of keys by seq; `{P}bseq` hash: board -> last seq
  (kept when the board is deleted).
- `{P}snap:{tid}` hash: snapshot id -> `[run, step, parent, created_at, data]`;
  `{P}snapz:{tid}` zset of ids by seq.
- `{P}op:{token}` the result of a write, kept 5 minutes, so that a write the client retries
  after a dropped connection (its reply lost) is not applied twice.

Atomicity: every write that touches several keys or compares before it writes is one Lua
script, which Redis runs whole with nothing in between: `commit_run` (the session's
compare-and-set on its version, its messages, events, requests, checkpoint and audit records),
`put_checkpoint` (stale and paused rules), `update_human` (expected status), `put_task`,
`write_entry` (compare-and-set and the board's next seq) and `put_snapshot` (seq and
retention). The audit chain's hashes (SHA-256, HMAC with an audit key) are computed here and
linked in the commit script only if the chain's tip is still the one they were computed on;
otherwise the script writes nothing and returns the new tip, and the commit is linked again
(bounded retries). Scripts check everything before their first write.

Scripts build key names from the prefix, so every key of a store must be on one Redis server
(standalone, or a primary with replicas / Sentinel); Redis Cluster is not supported. Redis
keeps data in memory: without persistence (AOF or RDB) a restart loses every session, so run
it with `appendonly yes` for durable runs.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import threading
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from baton.backends import _records as records
from baton.backends._aio import glob_escape, settle
from baton.backends._conflicts import (
    board_conflict,
    board_json,
    check_task_owner,
    check_ticket,
    paused_elsewhere,
    stale_checkpoint,
    task_conflict,
    task_elsewhere,
    ticket_conflict,
    unknown_ticket,
    version_conflict,
)
from baton.backends._records import commit_rows
from baton.backends._redis_outbox import COMMIT_OUTBOX_LUA, RedisOutbox
from baton.backends._snapshots import check_keep_last, kept_json, snapshot_json
from baton.backends.archive import (
    ANCHOR_FIELDS,
    Anchor,
    ArchiveReport,
    Scan,
    anchor_of,
    anchor_row,
    archive,
    verify_store,
)
from baton.backends.audit import (
    GENESIS,
    AuditRecord,
    Unsealed,
    VerifyResult,
    agree,
    link,
    outcome,
    resolve_key,
    retired_ids,
)
from baton.backends.base import (
    BoardEntry,
    Checkpoint,
    CheckpointStatus,
    Fence,
    HumanTicket,
    KeptSnapshot,
    SessionRecord,
    Snapshot,
    TicketStatus,
)
from baton.backends.retention import GcReport, Prune, Retention, Sizes, collect
from baton.backends.sealing import (
    CheckpointKeyProvider,
    RawCheckpoint,
    RekeyReport,
    rekey_store,
    resolve_keys,
)
from baton.core.errors import ConfigError, StoreError
from baton.core.events import EscalationCard, Event
from baton.core.messages import Message
from baton.core.tasks import Task, TaskStatus
from baton.core.urls import unsplit

try:
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import (
        AuthenticationError,
        RedisError,
        ResponseError,
    )
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError as exc:  # pragma: no cover - the extra is part of the dev install
    raise ImportError(
        "the Redis store needs the redis package: pip install 'baton-relay[redis]'"
    ) from exc

T = TypeVar("T")

DEFAULT_PREFIX = "baton:"
"""Key prefix of a store opened without one."""

_OP_TTL_S = 300
"""Seconds the result of a write is kept under its token (a retried write returns it)."""

_TIP_ATTEMPTS = 64
"""Times a commit is linked to a moved audit tip before it gives up."""

_PAGE = 1000
"""Hash fields read per command (transcripts, events, audit records)."""

_RETRIES = 3
"""Times a command is retried on a dropped connection (with exponential backoff)."""

# ---------------------------------------------------------------- Lua scripts
# Every write script takes the prefix as ARGV[1]; those that are not idempotent by themselves
# take a token as ARGV[2] and keep their result under `{P}op:{token}`, so that the client's
# retry of a script whose reply was lost returns that result instead of writing again.

_WRITE_PRELUDE = f"""
local P = ARGV[1]
local op = P .. 'op:' .. ARGV[2]
local done = redis.call('GET', op)
if done then return done end
local function finish(result)
  redis.call('SET', op, result, 'EX', {_OP_TTL_S})
  return result
end
"""

_CHECKPOINT_FUNCTIONS = """
local function save_checkpoint(sid, a)
  local key = P .. 'cp:' .. sid
  local old = redis.call('HGET', key, 'status')
  if old then redis.call('ZREM', P .. 'cps:' .. old, sid) end
  redis.call('HSET', key, 'run_id', ARGV[a], 'seq', ARGV[a + 1], 'status', ARGV[a + 2],
    'data', ARGV[a + 3], 'meta', ARGV[a + 4], 'updated_at', ARGV[a + 5])
  redis.call('ZADD', P .. 'cps', ARGV[a + 5], sid)
  redis.call('ZADD', P .. 'cps:' .. ARGV[a + 2], ARGV[a + 5], sid)
end
local function drop_checkpoint(sid, run)
  local key = P .. 'cp:' .. sid
  local held = redis.call('HMGET', key, 'run_id', 'status')
  if held[1] == run then
    redis.call('DEL', key)
    redis.call('ZREM', P .. 'cps', sid)
    if held[2] then redis.call('ZREM', P .. 'cps:' .. held[2], sid) end
  end
end
"""

# ARGV: 3 session id, 4 version read, 5 expected audit tip ('-': no audit records),
# 6 record, 7 incoming, 8 created_at, 9 updated_at, 10 checkpoint mode ('', 'put', 'drop'),
# 11 run id to drop, 12-17 checkpoint (run, seq, status, data, meta, updated_at), then the
# count and items of: messages (row), events (session, trace, JSON), audit records
# (seq, session, JSON, hash), outbox items (`COMMIT_OUTBOX_LUA`).
_COMMIT = (
    _WRITE_PRELUDE
    + _CHECKPOINT_FUNCTIONS
    + """
local sid = ARGV[3]
local skey = P .. 'session:' .. sid
local stored = tonumber(redis.call('HGET', skey, 'version') or '0')
if stored ~= tonumber(ARGV[4]) then return 'conflict:' .. string.format('%d', stored) end
if ARGV[5] ~= '-' then
  local tip = redis.call('GET', P .. 'audit:tip') or ''
  if tip ~= ARGV[5] then return 'tip:' .. tip end
end
redis.call('HSET', skey, 'version', stored + 1, 'record', ARGV[6], 'incoming', ARGV[7],
  'updated_at', ARGV[9])
redis.call('HSETNX', skey, 'created_at', ARGV[8])
redis.call('ZADD', P .. 'sessions', ARGV[9], sid)
if ARGV[10] == 'put' then
  save_checkpoint(sid, 12)
elseif ARGV[10] == 'drop' then
  drop_checkpoint(sid, ARGV[11])
end
local i = 18
local count = tonumber(ARGV[i])
i = i + 1
for _ = 1, count do
  local n = redis.call('INCR', P .. 'msg:n')
  redis.call('HSET', P .. 'msg', n, ARGV[i])
  redis.call('RPUSH', P .. 'msg:s:' .. sid, n)
  i = i + 1
end
count = tonumber(ARGV[i])
i = i + 1
for _ = 1, count do
  local n = redis.call('INCR', P .. 'ev:n')
  redis.call('HSET', P .. 'ev', n, ARGV[i + 2])
  redis.call('RPUSH', P .. 'ev:s:' .. ARGV[i], n)
  redis.call('RPUSH', P .. 'ev:t:' .. ARGV[i + 1], n)
  i = i + 3
end
count = tonumber(ARGV[i])
i = i + 1
local tip = nil
for _ = 1, count do
  redis.call('HSET', P .. 'audit', ARGV[i], ARGV[i + 2])
  redis.call('RPUSH', P .. 'audit:s:' .. ARGV[i + 1], ARGV[i])
  tip = ARGV[i] .. ':' .. ARGV[i + 3]
  i = i + 4
end
if tip then redis.call('SET', P .. 'audit:tip', tip) end
"""
    + COMMIT_OUTBOX_LUA
    + """
return finish('ok')
"""
)

# Retention (`gc`) of one session. ARGV: 1 prefix, 2 the audit tip the record is linked to
# ('-' for none), 3 session id, then count and numbers of messages, count and (number, trace)
# of events, count and ids of snapshots, then the audit record (seq, JSON, hash; '' for none).
_GC_PRUNE = """
local P, sid = ARGV[1], ARGV[3]
if ARGV[2] ~= '-' then
  local tip = redis.call('GET', P .. 'audit:tip') or ''
  if tip ~= ARGV[2] then return 'tip:' .. tip end
end
local i = 4
local count = tonumber(ARGV[i])
i = i + 1
for _ = 1, count do
  redis.call('HDEL', P .. 'msg', ARGV[i])
  redis.call('LREM', P .. 'msg:s:' .. sid, 1, ARGV[i])
  i = i + 1
end
count = tonumber(ARGV[i])
i = i + 1
for _ = 1, count do
  redis.call('HDEL', P .. 'ev', ARGV[i])
  redis.call('LREM', P .. 'ev:s:' .. sid, 1, ARGV[i])
  redis.call('LREM', P .. 'ev:t:' .. ARGV[i + 1], 1, ARGV[i])
  i = i + 2
end
count = tonumber(ARGV[i])
i = i + 1
for _ = 1, count do
  redis.call('HDEL', P .. 'snap:' .. sid, ARGV[i])
  redis.call('ZREM', P .. 'snapz:' .. sid, ARGV[i])
  i = i + 1
end
if ARGV[i] ~= '' then
  redis.call('HSET', P .. 'audit', ARGV[i], ARGV[i + 1])
  redis.call('RPUSH', P .. 'audit:s:' .. sid, ARGV[i])
  redis.call('SET', P .. 'audit:tip', ARGV[i] .. ':' .. ARGV[i + 2])
end
return 'ok'
"""

# Archive and trim of the audit chain. ARGV: 1 prefix, 2 the seal of the last anchor the new
# one follows, 3 first and 4 last position archived, 5 the hash of the last, 6 the anchor
# (JSON). Refuses ('moved') when another archive got there first, or when the record is not
# the one anchored; then deletes the records and the positions from the sessions' lists
# (a prefix of each: positions are appended in chain order) and appends the anchor.
_TRIM_AUDIT = f"""
local P = ARGV[1]
local last = redis.call('LINDEX', P .. 'audit:anchors', -1)
local seal, upto = '{GENESIS}', 0
if last then
  local a = cjson.decode(last)
  seal, upto = a.seal, a.seq
end
local first, seq = tonumber(ARGV[3]), tonumber(ARGV[4])
if seal ~= ARGV[2] or first ~= upto + 1 or seq < first then return 'moved' end
local text = redis.call('HGET', P .. 'audit', ARGV[4])
if not text or cjson.decode(text).hash ~= ARGV[5] then return 'moved' end
local counts = {{}}
for n = first, seq do
  local record = redis.call('HGET', P .. 'audit', n)
  if record then
    local sid = cjson.decode(record).session_id
    counts[sid] = (counts[sid] or 0) + 1
    redis.call('HDEL', P .. 'audit', n)
  end
end
for sid, k in pairs(counts) do redis.call('LTRIM', P .. 'audit:s:' .. sid, k, -1) end
redis.call('RPUSH', P .. 'audit:anchors', ARGV[6])
return 'ok'
"""

_SAVE_UNLESS_STALE = """
local sid = ARGV[3]
local old = redis.call('HMGET', P .. 'cp:' .. sid, 'run_id', 'seq', 'status')
if old[1] then
  if old[1] == ARGV[4] then
    if tonumber(ARGV[5]) <= tonumber(old[2]) then return 'stale:' .. old[2] end
  elseif old[3] == 'awaiting_approval' or old[3] == 'interrupted' then
    return 'paused:' .. old[1]
  end
end
save_checkpoint(sid, 4)
return finish('ok')
"""
"""A running checkpoint saved unless stale or over another run's that waits for a person
(ARGV: 3 session id, 4-9 checkpoint)."""

# ARGV: 3 session id, 4-9 checkpoint (run, seq, status, data, meta, updated_at).
_PUT_CHECKPOINT = _WRITE_PRELUDE + _CHECKPOINT_FUNCTIONS + _SAVE_UNLESS_STALE

# ARGV: 3 session id, 4-9 checkpoint (as _PUT_CHECKPOINT), 10 lease key, 11 owner,
# 12 milliseconds: the lease renewed (or taken) and the checkpoint saved in one script.
_PUT_CHECKPOINT_FENCED = (
    _WRITE_PRELUDE
    + _CHECKPOINT_FUNCTIONS
    + """
local lease = P .. 'lease:' .. ARGV[10]
local holder = redis.call('GET', lease)
if holder and holder ~= ARGV[11] then return 'fenced:' .. holder end
redis.call('SET', lease, ARGV[11], 'PX', ARGV[12])
"""
    + _SAVE_UNLESS_STALE
)

# ARGV: 1 prefix, 2 session id, 3 run id.
_DELETE_CHECKPOINT = (
    "local P = ARGV[1]\n" + _CHECKPOINT_FUNCTIONS + "drop_checkpoint(ARGV[2], ARGV[3])\nreturn 1\n"
)

# ARGV: 1 prefix, 2 session id, 3 run id, 4 seq, 5 the data read, 6 the data to write: the
# checkpoint's data is replaced only while it is still the one read (re-sealing).
_SWAP_CHECKPOINT_DATA = """
local key = ARGV[1] .. 'cp:' .. ARGV[2]
local held = redis.call('HMGET', key, 'run_id', 'seq', 'data')
if held[1] ~= ARGV[3] or held[2] ~= ARGV[4] or held[3] ~= ARGV[5] then return 0 end
redis.call('HSET', key, 'data', ARGV[6])
return 1
"""

# KEYS[1] the lease; ARGV: owner, milliseconds.
_ACQUIRE_LEASE = """
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

_RELEASE_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# ARGV: 3 card JSON, 4 body JSON.
_PUSH_HUMAN = (
    _WRITE_PRELUDE
    + """
local id = redis.call('INCR', P .. 'tickets:next')
redis.call('HSET', P .. 'ticket:' .. id, 'card', ARGV[3], 'status', 'open', 'body', ARGV[4])
redis.call('ZADD', P .. 'tickets', id, id)
redis.call('ZADD', P .. 'tickets:open', id, id)
return finish(string.format('%d', id))
"""
)

# ARGV: 3 ticket id, 4 expected status, 5 new status, 6 body JSON.
_UPDATE_HUMAN = (
    _WRITE_PRELUDE
    + """
local key = P .. 'ticket:' .. ARGV[3]
local status = redis.call('HGET', key, 'status')
if not status then return 'missing:' end
if status ~= ARGV[4] then return 'conflict:' .. status end
redis.call('HSET', key, 'status', ARGV[5], 'body', ARGV[6])
redis.call('ZREM', P .. 'tickets:' .. status, ARGV[3])
redis.call('ZADD', P .. 'tickets:' .. ARGV[5], ARGV[3], ARGV[3])
return finish('ok')
"""
)

# ARGV: 3 task field, 4 session id, 5 run id, 6 expected version, 7 row.
_PUT_TASK = (
    _WRITE_PRELUDE
    + """
local f, sid = ARGV[3], ARGV[4]
local owner = redis.call('HGET', P .. 'task:s', f)
if owner and owner ~= sid then return 'elsewhere:' .. owner end
local v = tonumber(redis.call('HGET', P .. 'task:v', f) or '0')
if v ~= tonumber(ARGV[6]) then return 'conflict:' .. string.format('%d', v) end
redis.call('HSET', P .. 'task:v', f, v + 1)
redis.call('HSET', P .. 'task', f, ARGV[7])
if v == 0 then
  redis.call('HSET', P .. 'task:s', f, sid)
  redis.call('RPUSH', P .. 'tasks', f)
  redis.call('RPUSH', P .. 'tasks:s:' .. sid, f)
  redis.call('RPUSH', P .. 'tasks:r:' .. ARGV[5], f)
end
return finish('ok')
"""
)

# ARGV: 3 board, 4 key, 5 expected version, 6 row after the seq.
_WRITE_ENTRY = (
    _WRITE_PRELUDE
    + """
local b, k = ARGV[3], ARGV[4]
local v = tonumber(redis.call('HGET', P .. 'bv:' .. b, k) or '0')
if v ~= tonumber(ARGV[5]) then return 'conflict:' .. string.format('%d', v) end
local seq = string.format('%d', redis.call('HINCRBY', P .. 'bseq', b, 1))
redis.call('HSET', P .. 'bv:' .. b, k, v + 1)
redis.call('HSET', P .. 'bd:' .. b, k, seq .. ' ' .. ARGV[6])
redis.call('ZADD', P .. 'bz:' .. b, seq, k)
return finish('ok:' .. seq)
"""
)

_HMGET_FUNCTION = """
local function hmget(key, fields)
  local out = {}
  for i = 1, #fields, 1000 do
    local got = redis.call('HMGET', key, unpack(fields, i, math.min(i + 999, #fields)))
    for j = 1, #got do out[#out + 1] = got[j] end
  end
  return out
end
"""

# KEYS[1] hash of snapshots, KEYS[2] zset of their seqs; ARGV: id, row, keep_last ('' for all).
# Idempotent: a retried save of one id keeps its seq.
_SNAPSHOT_FUNCTION = """
local function save_snapshot(hash, zset, id, row, keep)
  local seq = redis.call('ZSCORE', zset, id)
  if not seq then
    local top = redis.call('ZREVRANGE', zset, 0, 0, 'WITHSCORES')
    seq = 1
    if top[2] then seq = tonumber(top[2]) + 1 end
  end
  redis.call('HSET', hash, id, row)
  redis.call('ZADD', zset, seq, id)
  if keep ~= '' then
    local old = redis.call('ZRANGE', zset, 0, -(tonumber(keep) + 1))
    for i = 1, #old, 1000 do
      local chunk = {unpack(old, i, math.min(i + 999, #old))}
      redis.call('HDEL', hash, unpack(chunk))
      redis.call('ZREM', zset, unpack(chunk))
    end
  end
  return tonumber(seq)
end
"""
"""`put_snapshot`'s writes: the thread's snapshots (`hash`) and their order (`zset`)."""

_PUT_SNAPSHOT = (
    _SNAPSHOT_FUNCTION + "return save_snapshot(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])\n"
)

# ARGV: as _PUT_CHECKPOINT_FENCED, then 13 how many snapshots, and per snapshot its thread
# id, id, row and keep_last (or ''): saved in the same script, after the checkpoint.
_PUT_CHECKPOINT_FENCED_SNAPSHOTS = _PUT_CHECKPOINT_FENCED.replace(
    _CHECKPOINT_FUNCTIONS, _CHECKPOINT_FUNCTIONS + _SNAPSHOT_FUNCTION, 1
).replace(
    "save_checkpoint(sid, 4)\n",
    """save_checkpoint(sid, 4)
for i = 14, 13 + 4 * tonumber(ARGV[13]), 4 do
  save_snapshot(P .. 'snap:' .. ARGV[i], P .. 'snapz:' .. ARGV[i], ARGV[i + 1], ARGV[i + 2],
    ARGV[i + 3])
end
""",
    1,
)

# KEYS[1] a list of hash fields, KEYS[2] the hash; ARGV: first and last index (LRANGE).
_GATHER = (
    _HMGET_FUNCTION
    + """
local ids = redis.call('LRANGE', KEYS[1], ARGV[1], ARGV[2])
return hmget(KEYS[2], ids)
"""
)

# KEYS[1] a zset, KEYS[2] a hash; ARGV: ZRANGE's arguments. Returns member, score, value, ...
_GATHER_ZSET = (
    _HMGET_FUNCTION
    + """
local found = redis.call(ARGV[1], KEYS[1], ARGV[2], ARGV[3], 'WITHSCORES')
local ids = {}
for i = 1, #found, 2 do ids[#ids + 1] = found[i] end
local rows = hmget(KEYS[2], ids)
local out = {}
for i = 1, #ids do
  out[#out + 1] = ids[i]
  out[#out + 1] = found[2 * i]
  out[#out + 1] = rows[i]
end
return out
"""
)


class _Client:
    """One event loop's connection pool and its scripts."""

    def __init__(self, client: Any) -> None:
        self.redis = client
        register = client.register_script
        self.commit = register(_COMMIT)
        self.put_checkpoint = register(_PUT_CHECKPOINT)
        self.put_checkpoint_fenced = register(_PUT_CHECKPOINT_FENCED)
        self.put_checkpoint_fenced_snapshots = register(_PUT_CHECKPOINT_FENCED_SNAPSHOTS)
        self.delete_checkpoint = register(_DELETE_CHECKPOINT)
        self.swap_checkpoint_data = register(_SWAP_CHECKPOINT_DATA)
        self.acquire_lease = register(_ACQUIRE_LEASE)
        self.release_lease = register(_RELEASE_LEASE)
        self.push_human = register(_PUSH_HUMAN)
        self.update_human = register(_UPDATE_HUMAN)
        self.put_task = register(_PUT_TASK)
        self.write_entry = register(_WRITE_ENTRY)
        self.put_snapshot = register(_PUT_SNAPSHOT)
        self.gather = register(_GATHER)
        self.gather_zset = register(_GATHER_ZSET)
        self.trim_audit = register(_TRIM_AUDIT)


def _token() -> str:
    return uuid.uuid4().hex


def _ms(seconds: float) -> int:
    """Milliseconds for PX (at least 1: Redis refuses 0)."""
    return max(1, math.ceil(seconds * 1000))


def _num(value: float) -> str:
    """A float as text that reads back exactly (JSON, and a Redis zset score)."""
    return repr(float(value))


def _anchor(text: str) -> Anchor:
    """An archive anchor from its JSON in `{P}audit:anchors`."""
    try:
        fields = json.loads(text)
        return anchor_of([fields[f] for f in ANCHOR_FIELDS])
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"a stored audit anchor cannot be read ({exc}): {text!r}") from None


def _parse_tip(text: str | None) -> tuple[int, str]:
    if not text:
        return 0, GENESIS
    seq, _, digest = text.partition(":")
    return int(seq), digest


def _tip_text(seq: int, digest: str) -> str:
    return "" if seq == 0 else f"{seq}:{digest}"


def _split_url(url: str, prefix: str) -> tuple[str, str]:
    """(the URL without Baton's `prefix` query parameter, the key prefix to use)."""
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(
            f"bad Redis URL {url!r}: use 'redis://host:6379/0', 'rediss://host:6379/0' (TLS) "
            "or 'unix:///path/to/redis.sock'"
        )
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    given = [v for k, v in query if k == "prefix"]
    if given:
        if prefix not in (DEFAULT_PREFIX, given[-1]):
            raise ConfigError(
                f"the Redis store URL names prefix {given[-1]!r} but prefix={prefix!r} was "
                "passed too; give it in one place"
            )
        prefix = given[-1]
        rest = urlencode([(k, v) for k, v in query if k != "prefix"])
        url = unsplit(parts._replace(query=rest))
    if not isinstance(prefix, str) or not prefix:
        raise ConfigError(
            f"RedisStore(prefix={prefix!r}): give a non-empty key prefix, e.g. 'baton:' (drop() "
            "deletes every key under it)"
        )
    return url, prefix


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


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class RedisStore(RedisOutbox):
    """A `Store` in Redis, with the `Tasks`, `Blackboard`, `Snapshots` and `AuditTrail`
    capabilities; several processes may share it (`shared` is True).

    `RedisStore(url, prefix="baton:", audit_key=None, checkpoint_keys=None)`: every key starts
    with `prefix`; `audit_key` (else `$BATON_AUDIT_KEY`) seals the audit chain with
    HMAC-SHA256; `checkpoint_keys` (else `$BATON_CHECKPOINT_KEY`) encrypts checkpoint state
    (`baton.backends.sealing`). Nothing connects until the first call. `drop()` deletes every
    key under the prefix; `close()` closes the connections (later calls raise `StoreError`).
    """

    shared = True

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        audit_key: str | bytes | None = None,
        checkpoint_keys: CheckpointKeyProvider | str | None = None,
    ) -> None:
        self.url = url
        connect_url, self.prefix = _split_url(url, prefix)
        """Every key of the store starts with it."""
        self.audit_key = resolve_key(audit_key)
        """HMAC key of the audit chain (`audit_key`, else `$BATON_AUDIT_KEY`), or None."""
        self.checkpoint_keys = resolve_keys(checkpoint_keys)
        """Keys that seal checkpoint state (`checkpoint_keys`, else `$BATON_CHECKPOINT_KEY`),
        or None: checkpoints are then stored in clear (the kernel masks their secrets)."""
        self.seals_checkpoints = self.checkpoint_keys is not None
        """Every checkpoint saved is encrypted (`baton.backends.sealing.SealedCheckpoints`)."""
        self.where = _where(connect_url)
        """host:port (or socket path) of the server, for messages."""
        self._connect_url = connect_url
        try:
            aioredis.connection.parse_url(connect_url)
        except ValueError as exc:
            raise ConfigError(f"bad Redis URL {_redacted(url)!r}: {exc}") from exc
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Client] = (
            weakref.WeakKeyDictionary()
        )
        self._mutex = threading.Lock()
        self._closed = False
        self._tip: tuple[int, str] | None = None
        """The audit chain's tip as this store last saw it (a commit links to it first)."""

    # ------------------------------------------------------------------ plumbing
    def _client(self) -> _Client:
        """The client of the running event loop (made on first use: a redis.asyncio pool
        belongs to one loop, and `run_sync` runs each call in a loop of its own)."""
        if self._closed:
            raise StoreError(f"the Redis store at {self.where} is closed; open a new RedisStore")
        loop = asyncio.get_running_loop()
        with self._mutex:
            found = self._clients.get(loop)
            if found is None:
                # a client holds its loop, so the weak keys alone never let a dead loop go
                for dead in [old for old in self._clients if old.is_closed()]:
                    del self._clients[dead]
                client = aioredis.Redis.from_url(
                    self._connect_url,  # options in the URL's query win over these
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
                found = self._clients[loop] = _Client(client)
            return found

    def _key(self, *parts: str) -> str:
        return self.prefix + "".join(parts)

    async def _run(
        self, action: str, work: Callable[[_Client], Awaitable[T]], *, write: bool = False
    ) -> T:
        """`work(client)` with Redis errors turned into `StoreError`s; a write runs to its end
        even when its caller is cancelled (`settle`)."""
        client = self._client()

        async def guarded() -> T:
            try:
                return await work(client)
            except StoreError:
                raise
            except UnicodeEncodeError as exc:
                raise StoreError(
                    f"Redis store {self.where}: {action}: a value holds text that is not valid "
                    f"Unicode ({exc.reason} at position {exc.start}, a lone surrogate); nothing "
                    "was written. Clean it first (baton.core.text.clean_value)"
                ) from exc
            except RedisError as exc:
                raise StoreError(self._explain(action, exc)) from exc
            except OSError as exc:
                raise StoreError(self._explain(action, exc)) from exc

        if write:
            return await settle(guarded())
        return await guarded()

    def _explain(self, action: str, exc: BaseException) -> str:
        text = str(exc) or type(exc).__name__
        if isinstance(exc, AuthenticationError):
            return (
                f"Redis at {self.where} refused the credentials of the store URL ({text}) "
                f"during {action}: fix the user or password in the URL"
            )
        if isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError)):
            return (
                f"Redis at {self.where} is unreachable ({text}) during {action}, after "
                f"{_RETRIES} retries: start it or fix the store URL"
            )
        low = text.lower()
        where = f"Redis store {self.where} (prefix {self.prefix!r}): {action} failed ({text})"
        if isinstance(exc, ResponseError):
            if low.startswith("readonly"):
                return f"{where}: the URL names a read-only replica; point it at the primary"
            if low.startswith("oom"):
                return (
                    f"{where}: Redis is out of memory (maxmemory); raise maxmemory or free "
                    "keys, and use a noeviction policy so that no run's data is evicted"
                )
            if "wrongtype" in low:
                return (
                    f"{where}: a key under the prefix holds another type than the store "
                    "wrote; another program uses the prefix: give the store a prefix of its own"
                )
        return f"{where}; check the server (redis-cli ping) and retry"

    def _corrupt(self, what: str, key: object, exc: Exception) -> StoreError:
        return StoreError(
            f"Redis store {self.where} (prefix {self.prefix!r}): record {key!r} of {what} "
            f"cannot be read ({exc}); it was written by something else than this Baton "
            "version, or edited; delete it, or give the store a prefix of its own"
        )

    def _decoded(self, decode: Callable[..., T], *stored: Any) -> T:
        """`decode(*stored)` (`baton.backends._records`), or the store's `StoreError` when
        the record cannot be read."""
        try:
            return decode(*stored)
        except records.Unreadable as exc:
            raise self._corrupt(exc.table, exc.key, exc.cause) from exc.cause

    async def _write(
        self, script: str, *args: Any, done: Callable[[], None] | None = None
    ) -> tuple[str, str]:
        """Run the write script of `_Client` named `script` (the prefix and a fresh token go
        first); its reply `kind:rest` as (kind, rest). `done` runs with a reply `ok`, with the
        write, so that a caller cancelled meanwhile still sees it."""

        async def work(c: _Client) -> str:
            got = str(await getattr(c, script)(args=[self.prefix, _token(), *args]))
            if got == "ok" and done is not None:
                done()
            return got

        kind, _, rest = (await self._run(script, work, write=True)).partition(":")
        return kind, rest

    async def _hash(self, action: str, key: str) -> dict[str, str]:
        """The fields of hash `key` (none when it does not exist)."""

        async def work(c: _Client) -> dict[str, str]:
            found: dict[str, str] = await c.redis.hgetall(key)
            return found

        return await self._run(action, work)

    async def _field(self, action: str, key: str, field: str) -> str | None:
        """One field of hash `key`, or None."""

        async def work(c: _Client) -> str | None:
            found: str | None = await c.redis.hget(key, field)
            return found

        return await self._run(action, work)

    async def _hashes(
        self, action: str, index: str, family: str, stop: int = -1, *, newest: bool = False
    ) -> list[tuple[str, dict[str, str]]]:
        """(member, fields of hash `{P}{family}{member}`) for the members of zset `{P}{index}`
        by score (the highest first with `newest`, up to position `stop`); a member whose hash
        is gone meanwhile is left out."""

        async def work(c: _Client) -> list[tuple[str, dict[str, str]]]:
            order = c.redis.zrevrange if newest else c.redis.zrange
            members: list[str] = await order(self._key(index), 0, stop)
            pipe = c.redis.pipeline(transaction=False)
            for member in members:
                pipe.hgetall(self._key(family, member))
            found = zip(members, await pipe.execute(), strict=True)
            return [(member, fields) for member, fields in found if fields]

        return await self._run(action, work)

    async def drop(self) -> None:
        """Delete every key under the prefix (SCAN and UNLINK), e.g. after a test. Keys of
        other prefixes are left alone, unless they start with this one."""
        pattern = glob_escape(self.prefix) + "*"

        async def work(c: _Client) -> None:
            batch: list[str] = []
            async for key in c.redis.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    await c.redis.unlink(*batch)
                    batch = []
            if batch:
                await c.redis.unlink(*batch)

        self._tip = None
        await self._run("drop", work, write=True)

    # ------------------------------------------------------------------ sessions
    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, or None if it does not exist."""

        fields = await self._hash("get_session", self._key("session:", session_id))
        return self._decoded(records.session_from_hash, session_id, fields) if fields else None

    async def commit_run(
        self,
        session: SessionRecord,
        messages: list[Message],
        events: list[Event],
        *,
        run_id: str | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        """Save the session, append messages and events with their audit records, and save
        `checkpoint` (or delete `run_id`'s checkpoint), in one script.

        Compare-and-set: raises `ConflictError` (nothing written) unless the stored version
        equals `session.version` (0 for a session not stored yet); on success
        `session.version` is incremented in place. The first commit of a session sets its
        `created_at`; later ones keep it.
        """
        sid, read = session.session_id, session.version
        record, incoming = records.session_hash(session)
        rows = commit_rows(session, messages, events, self.checkpoint_keys, checkpoint)
        head: list[Any] = [self.prefix, _token(), sid, read]
        body: list[Any] = [record, incoming, _num(session.created_at), _num(session.updated_at)]
        if rows.checkpoint is not None:
            body += ["put", "", *_checkpoint_fields(rows.checkpoint)]
        else:
            body += ["drop" if run_id is not None else "", run_id or "", "", "", "", "", "", ""]
        body += [len(rows.messages), *map(records.message_line, rows.messages), len(rows.events)]
        for _, event_sid, trace_id, _, _, text, _ in rows.events:
            body += [event_sid, trace_id, text]
        unsealed = rows.audit
        outbox: list[Any] = [len(rows.outbox)]
        for iid, kind, key, event_sid, event_run, ts, text, at in rows.outbox:
            outbox += [iid, kind, key, event_sid, event_run, _num(ts), text, _num(at)]

        async def work(c: _Client) -> None:
            tip = self._tip
            if tip is None and unsealed:
                tip = _parse_tip(await c.redis.get(self._key("audit:tip")))
            for attempt in range(_TIP_ATTEMPTS):
                audit: list[Any] = [0]
                expected = "-"
                last: tuple[int, str] | None = None
                if unsealed:
                    assert tip is not None
                    expected = _tip_text(*tip)
                    chained = link(unsealed, tip[0], tip[1], self.audit_key)
                    audit = [len(chained)]
                    for r in chained:
                        audit += [r.seq, r.session_id, records.audit_json(r), r.hash]
                    last = (chained[-1].seq, chained[-1].hash)
                head[4:] = [expected]
                result = await c.commit(args=[*head, *body, *audit, *outbox])
                kind, _, rest = str(result).partition(":")
                if kind == "ok":
                    if last is not None:
                        self._tip = last
                    session.version = read + 1  # with the write: a cancelled caller sees it
                    return
                if kind == "conflict":
                    raise version_conflict(sid, read, int(rest))
                tip = self._tip = _parse_tip(rest)  # the chain moved on: link again after it
                if attempt >= 2:
                    await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))
            raise StoreError(
                f"Redis store {self.where}: commit_run of session {sid!r} lost the audit chain's "
                f"tip to other writers {_TIP_ATTEMPTS} times in a row; nothing was written. "
                "Retry the commit"
            )

        await self._run("commit_run", work, write=True)

    async def get_messages(self, session_id: str, limit: int | None = None) -> list[Message]:
        """The session's transcript, oldest first (the last `limit` messages if given)."""
        if limit is not None and limit <= 0:
            return []
        start = 0 if limit is None else -limit
        rows = await self._gather("get_messages", self._key("msg:s:", session_id), "msg", start)
        lines = [row for row in rows if row is not None]
        return [
            self._decoded(records.message, session_id, line.partition("\n")[2]) for line in lines
        ]

    async def _gather(
        self, action: str, index: str, table: str, start: int = 0, stop: int = -1
    ) -> list[str | None]:
        """The values of hash `{P}{table}` named by list `index` (LRANGE start..stop), in
        order; None for one no longer stored."""

        async def work(c: _Client) -> list[str | None]:
            rows: list[str | None] = await c.gather(
                keys=[index, self._key(table)], args=[start, stop]
            )
            return rows

        return await self._run(action, work)

    async def get_events(
        self, session_id: str | None = None, trace_id: str | None = None
    ) -> list[Event]:
        """Stored events of a session and/or trace, in order."""
        if session_id is not None:
            rows = await self._gather("get_events", self._key("ev:s:", session_id), "ev")
        elif trace_id is not None:
            rows = await self._gather("get_events", self._key("ev:t:", trace_id), "ev")
        else:
            rows = [text for _, text in await self._numbered("get_events", "ev", "ev:n")]
        found = [self._decoded(records.event, text[:80], text) for text in rows if text is not None]
        return [e for e in found if trace_id is None or e.trace_id == trace_id]

    async def _numbered(
        self, action: str, table: str, counter: str | None, last: int | None = None
    ) -> list[tuple[int, str]]:
        """(number, value) of hash `{P}{table}` for numbers 1..last (`last`, else the value of
        `{P}{counter}`), in order; numbers no longer stored are skipped."""

        async def work(c: _Client) -> list[tuple[int, str]]:
            top = last
            if top is None:
                assert counter is not None
                top = int(await c.redis.get(self._key(counter)) or 0)
            return await self._range(c, table, 1, top)

        return await self._run(action, work)

    async def _range(self, c: _Client, table: str, first: int, last: int) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        key = self._key(table)
        pages = [list(range(n, min(n + _PAGE, last + 1))) for n in range(first, last + 1, _PAGE)]
        for i in range(0, len(pages), 16):  # 16 pages per round trip
            pipe = c.redis.pipeline(transaction=False)
            for page in pages[i : i + 16]:
                pipe.hmget(key, page)
            for page, values in zip(pages[i : i + 16], await pipe.execute(), strict=True):
                out += [(n, v) for n, v in zip(page, values, strict=True) if v is not None]
        return out

    async def list_sessions(self, limit: int = 100) -> list[SessionRecord]:
        """Most recently updated sessions first."""
        if limit <= 0:
            return []
        found = await self._hashes("list_sessions", "sessions", "session:", limit - 1, newest=True)
        return [self._decoded(records.session_from_hash, sid, fields) for sid, fields in found]

    # ------------------------------------------------------------------ audit
    async def audit_records(
        self, session_id: str | None = None, limit: int | None = None
    ) -> list[AuditRecord]:
        """Audit records in chain order (the last `limit` if given; one session's if given)."""
        if limit is not None and limit <= 0:
            return []
        if session_id is not None:
            start = 0 if limit is None else -limit
            rows = await self._gather(
                "audit_records", self._key("audit:s:", session_id), "audit", start
            )
            return [records.audit_record_of_json(0, text) for text in rows if text is not None]

        async def work(c: _Client) -> list[tuple[int, str]]:
            head = _parse_tip(await c.redis.get(self._key("audit:tip")))[0]
            last = await c.redis.lindex(self._key("audit:anchors"), -1)
            start = _anchor(last).seq + 1 if last else 1  # archived records are gone
            first = start if limit is None else max(start, head - limit + 1)
            return await self._range(c, "audit", first, head)

        found = await self._run("audit_records", work)
        return [records.audit_record_of_json(seq, text) for seq, text in found]

    async def verify_audit(self, anchor: tuple[int, str] | None = None) -> VerifyResult:
        """Verify the whole audit chain (keyed with `audit_key` if set), then that the stored
        events and messages are exactly the ones it records, in order.

        The chain's tip and the event and message counters are read in one command (MGET):
        a commit writes them together, so what is read up to them is one consistent state,
        and commits meanwhile do not show as tampering.
        """

        async def read(c: _Client) -> tuple[list[Any], list[Any], list[Any], list[Anchor]]:
            pipe = c.redis.pipeline(transaction=True)  # one state: a trim changes both
            pipe.mget(self._key("audit:tip"), self._key("ev:n"), self._key("msg:n"))
            pipe.lrange(self._key("audit:anchors"), 0, -1)
            (tip, events, messages), anchored = await pipe.execute()
            anchors = [_anchor(text) for text in anchored]
            first = anchors[-1].seq + 1 if anchors else 1
            return (
                await self._range(c, "audit", first, _parse_tip(tip)[0]),
                await self._range(c, "ev", 1, int(events or 0)),
                await self._range(c, "msg", 1, int(messages or 0)),
                anchors,
            )

        audit, events, messages, anchors = await self._run("verify_audit", read)
        chained = [records.audit_record_of_json(seq, text) for seq, text in audit]
        chain = verify_store(chained, anchors, anchor=anchor, key=self.audit_key)
        if not chain.ok:
            return chain
        rows = agree(
            chained,
            [records.event_row_of_json(seq, text) for seq, text in events],
            [records.message_row_of_line(seq, text) for seq, text in messages],
            records_again=chained,
            head_seq=chain.head_seq,
            retired=retired_ids(chained),
        )
        return outcome(chain, rows)

    # ------------------------------------------------------------------ leases
    async def acquire_lease(self, key: str, owner: str, ttl_s: float) -> bool:
        """Hold `key` for `ttl_s` seconds as `owner` (renews when `owner` already holds it);
        False while another owner's lease is live. One script, hence atomic across
        processes; expiry by the server's clock."""

        async def work(c: _Client) -> bool:
            got = await c.acquire_lease(keys=[self._key("lease:", key)], args=[owner, _ms(ttl_s)])
            return bool(got)

        return await self._run("acquire_lease", work, write=True)

    async def release_lease(self, key: str, owner: str) -> None:
        """Give `key` up if `owner` holds it."""

        async def work(c: _Client) -> None:
            await c.release_lease(keys=[self._key("lease:", key)], args=[owner])

        await self._run("release_lease", work, write=True)

    # ------------------------------------------------------------------ checkpoints
    async def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Save the session's latest checkpoint: its state as JSON (`state_json()`) and `meta`.

        A stale save (same run, seq not above the stored one) and a save of another run while
        the stored one waits for a person raise `ConflictError`. One script, hence atomic
        across processes.
        """
        cp = checkpoint
        fields = _checkpoint_fields(records.checkpoint_row(self.checkpoint_keys, cp))
        kind, rest = await self._write("put_checkpoint", cp.session_id, *fields)
        if kind == "stale":
            raise stale_checkpoint(cp, int(rest))
        if kind == "paused":
            raise paused_elsewhere(cp, rest)

    async def put_checkpoint_fenced(
        self, checkpoint: Checkpoint, fence: Fence, snapshots: Sequence[KeptSnapshot] = ()
    ) -> bool:
        """Renew the run's lease and save its checkpoint in one script, one round trip
        (`FencedCheckpoints`); False, nothing saved, while another owner's lease is live.

        The step's graph snapshots are saved by the same script, after the checkpoint."""
        cp = checkpoint
        fields = _checkpoint_fields(records.checkpoint_row(self.checkpoint_keys, cp))
        lease = (fence.key, fence.owner, _ms(fence.ttl_s))
        shots: list[Any] = []
        for kept in snapshots:
            s = kept.snapshot
            row = records.snapshot_line(s, kept_json(kept))
            keep = "" if kept.keep_last is None else kept.keep_last
            shots += [s.thread_id, s.id, row, keep]
        script = "put_checkpoint_fenced_snapshots" if snapshots else "put_checkpoint_fenced"
        extra = [len(snapshots), *shots] if snapshots else []
        kind, rest = await self._write(script, cp.session_id, *fields, *lease, *extra)
        if kind == "fenced":
            return False
        if kind == "stale":
            raise stale_checkpoint(cp, int(rest))
        if kind == "paused":
            raise paused_elsewhere(cp, rest)
        return True

    async def get_checkpoint(self, session_id: str) -> Checkpoint | None:
        """The session's checkpoint (state as JSON in `data`), or None."""
        fields = await self._hash("get_checkpoint", self._key("cp:", session_id))
        return self._checkpoint(session_id, fields) if fields else None

    async def list_checkpoints(self, status: CheckpointStatus | None = None) -> list[Checkpoint]:
        """Checkpoints of unfinished runs (state as JSON in `data`), least recently saved
        first."""
        index = "cps" if status is None else f"cps:{status}"
        found = await self._hashes("list_checkpoints", index, "cp:")
        out = [self._checkpoint(sid, fields) for sid, fields in found]
        out = [cp for cp in out if status is None or cp.status == status]  # moved meanwhile
        out.sort(key=lambda cp: (cp.updated_at, cp.session_id))
        return out

    def _checkpoint(self, sid: str, fields: dict[str, str]) -> Checkpoint:
        return self._decoded(records.checkpoint_from_hash, self.checkpoint_keys, sid, fields)

    async def delete_checkpoint(self, session_id: str, run_id: str) -> None:
        """Drop the session's checkpoint if it belongs to `run_id` (no error if absent)."""

        async def work(c: _Client) -> None:
            await c.delete_checkpoint(args=[self.prefix, session_id, run_id])

        await self._run("delete_checkpoint", work, write=True)

    async def rekey_checkpoints(self) -> RekeyReport:
        """Seal every stored checkpoint with the current checkpoint key (those in clear and
        those under an older key); a checkpoint a run saves meanwhile is never overwritten.
        After a complete report (`report.complete`) the older keys may be dropped."""
        return await rekey_store(self)

    async def _raw_checkpoints(self, session_id: str | None = None) -> list[RawCheckpoint]:
        """Checkpoint hashes as stored (data not opened): every one, or the session's."""

        async def work(c: _Client) -> list[tuple[str, list[str | None]]]:
            if session_id is None:
                sids: list[str] = await c.redis.zrange(self._key("cps"), 0, -1)
            else:
                sids = [session_id]
            pipe = c.redis.pipeline(transaction=False)
            for sid in sids:
                pipe.hmget(self._key("cp:", sid), "run_id", "seq", "data")
            return list(zip(sids, await pipe.execute(), strict=True))

        out = []
        for sid, (run, seq, data) in await self._run("rekey_checkpoints", work):
            if run is None or seq is None or data is None:
                continue  # finished meanwhile
            try:
                out.append(RawCheckpoint(sid, run, int(seq), data))
            except ValueError as exc:
                raise self._corrupt("checkpoint of session", sid, exc) from exc
        return out

    async def _swap_checkpoint_data(self, row: RawCheckpoint, data: str) -> bool:
        """Write `data` as the checkpoint's data if the stored one is still `row`; one
        script."""

        async def work(c: _Client) -> bool:
            args = [self.prefix, row.session_id, row.run_id, str(row.seq), row.data, data]
            return bool(await c.swap_checkpoint_data(args=args))

        return await self._run("rekey_checkpoints", work, write=True)

    # ------------------------------------------------------------------ human queue
    async def push_human(self, card: EscalationCard) -> int:
        """Put an escalation card in the human queue; returns its ticket id."""
        text = card.model_dump_json()
        body = records.ticket_body(HumanTicket(0, card), time.time())
        kind, _ = await self._write("push_human", text, body)
        return int(kind)

    async def list_human(self, status: str | None = "open") -> list[HumanTicket]:
        """Tickets in the human queue, oldest first."""
        index = "tickets" if status is None else f"tickets:{status}"
        found = await self._hashes("list_human", index, "ticket:")
        out = [self._decoded(records.ticket_from_hash, int(i), fields) for i, fields in found]
        return [t for t in out if status is None or t.status == status]

    async def get_human(self, ticket_id: int) -> HumanTicket | None:
        """One ticket, or None."""
        if not records.is_ticket_id(ticket_id):
            return None
        fields = await self._hash("get_human", self._key("ticket:", str(ticket_id)))
        return self._decoded(records.ticket_from_hash, ticket_id, fields) if fields else None

    async def update_human(self, ticket: HumanTicket, expect: TicketStatus) -> None:
        """Save the ticket's status, claimed_by, answer and note if its stored status is still
        `expect` (else `ConflictError`); stamps `updated_at`, on `ticket` too. One script,
        hence atomic across processes: two people claiming one ticket cannot both succeed."""
        check_ticket(ticket)
        if not records.is_ticket_id(ticket.id):
            raise unknown_ticket(ticket.id)
        t = time.time()
        body = records.ticket_body(ticket, t)

        def stamp() -> None:
            ticket.updated_at = t  # with the write, as `commit_run` does

        args = (str(ticket.id), expect, ticket.status, body)
        kind, rest = await self._write("update_human", *args, done=stamp)
        if kind == "missing":
            raise unknown_ticket(ticket.id)
        if kind == "conflict":
            raise ticket_conflict(ticket, expect, rest)

    # ------------------------------------------------------------------ tasks
    async def put_task(
        self, session_id: str, run_id: str, task: Task, expected_version: int
    ) -> None:
        """Save `task` as JSON if its stored version is `expected_version` (else
        `ConflictError`); sets `task.version`, `task.session_id` and `task.run_id`. One script,
        hence atomic across processes."""
        check_task_owner(session_id, run_id, task)
        tid, new = task.task_id, expected_version + 1
        data = records.task_data(session_id, run_id, task, new)
        line = records.task_line(session_id, task.status, new, time.time(), data)
        field = records.task_field(run_id, tid)

        def stamp() -> None:  # with the write, as `commit_run` does
            task.version, task.session_id, task.run_id = new, session_id, run_id

        args = (field, session_id, run_id, expected_version, line)
        kind, rest = await self._write("put_task", *args, done=stamp)
        if kind == "elsewhere":
            raise task_elsewhere(run_id, tid, rest, session_id)
        if kind == "conflict":
            raise task_conflict(run_id, tid, expected_version, int(rest))

    async def get_task(self, run_id: str, task_id: str) -> Task | None:
        """The stored task (with its version), or None."""
        field = records.task_field(run_id, task_id)
        row = await self._field("get_task", self._key("task"), field)
        return None if row is None else self._decoded(records.task_from_line, field, row)

    async def list_tasks(
        self,
        session_id: str | None = None,
        run_id: str | None = None,
        status: TaskStatus | None = None,
    ) -> list[Task]:
        """Stored tasks matching every filter given, in the order they were first saved."""
        if run_id is not None:
            index = self._key("tasks:r:", run_id)
        elif session_id is not None:
            index = self._key("tasks:s:", session_id)
        else:
            index = self._key("tasks")

        async def work(c: _Client) -> list[tuple[str, str | None]]:
            fields: list[str] = await c.redis.lrange(index, 0, -1)
            rows = await c.redis.hmget(self._key("task"), fields) if fields else []
            return list(zip(fields, rows, strict=True))

        found = await self._run("list_tasks", work)
        tasks = [self._decoded(records.task_from_line, f, row) for f, row in found if row]
        return [
            t
            for t in tasks
            if (session_id is None or t.session_id == session_id)
            and (status is None or t.status == status)
        ]

    # ------------------------------------------------------------------ blackboard
    async def read_board(self, board: str) -> dict[str, BoardEntry]:
        """Every entry of the board, by key in key order."""
        rows = await self._hash("read_board", self._key("bd:", board))
        return {key: self._board_entry(board, key, rows[key]) for key in sorted(rows)}

    async def read_entry(self, board: str, key: str) -> BoardEntry | None:
        """The entry, or None."""
        row = await self._field("read_entry", self._key("bd:", board), key)
        return None if row is None else self._board_entry(board, key, row)

    async def write_entry(
        self, board: str, key: str, value: Any, expected_version: int, *, writer: str = ""
    ) -> BoardEntry:
        """Save `value` as JSON if the entry's stored version is `expected_version` (else
        `ConflictError`); returns the new entry.

        One script: the version is compared and the board's next seq taken there, so of two
        processes that read one version one writes and the other gets `ConflictError`, and
        seqs never repeat.
        """
        text = board_json(board, key, value)
        new = expected_version + 1
        t = time.time()
        row = records.board_line(new, t, writer, text)
        kind, rest = await self._write("write_entry", board, key, expected_version, row)
        if kind == "conflict":
            raise board_conflict(board, key, expected_version, int(rest))
        return BoardEntry(board, key, json.loads(text), new, int(rest), writer, t)

    async def board_changes(self, board: str, since_seq: int = 0) -> list[BoardEntry]:
        """The entries last written after `since_seq`, oldest write first."""

        async def work(c: _Client) -> list[str | None]:
            found: list[str | None] = await c.gather_zset(
                keys=[self._key("bz:", board), self._key("bd:", board)],
                args=["ZRANGEBYSCORE", f"({int(since_seq)}", "+inf"],
            )
            return found

        flat = await self._run("board_changes", work)
        out: list[BoardEntry] = []
        for i in range(0, len(flat), 3):
            key, row = flat[i], flat[i + 2]
            if key is not None and row is not None:
                out.append(self._board_entry(board, key, row))
        return out

    async def delete_board(self, board: str) -> None:
        """Drop the board's entries (its seq is kept)."""

        async def work(c: _Client) -> None:
            keys = [self._key(family, board) for family in ("bd:", "bv:", "bz:")]
            await c.redis.delete(*keys)

        await self._run("delete_board", work, write=True)

    def _board_entry(self, board: str, key: str, line: str) -> BoardEntry:
        return self._decoded(records.board_entry_from_line, board, key, line)

    # ------------------------------------------------------------------ graph snapshots
    async def put_snapshot(self, snapshot: Snapshot, keep_last: int | None = None) -> Snapshot:
        """Save the snapshot with its data as JSON (a stored id is replaced and keeps its
        seq), then drop the thread's oldest beyond `keep_last`; returns the stored snapshot.

        One script: the thread's next seq is taken there, so two processes saving snapshots
        of one thread never get the same seq.
        """
        check_keep_last(keep_last)
        text = snapshot_json(snapshot)
        s = snapshot
        row = records.snapshot_line(s, text)

        async def work(c: _Client) -> int:
            got = await c.put_snapshot(
                keys=[self._key("snap:", s.thread_id), self._key("snapz:", s.thread_id)],
                args=[s.id, row, "" if keep_last is None else keep_last],
            )
            return int(got)

        return records.stored_snapshot(s, text, await self._run("put_snapshot", work, write=True))

    async def get_snapshot(self, thread_id: str, snapshot_id: str) -> Snapshot | None:
        """The snapshot, or None."""

        async def work(c: _Client) -> list[Any]:
            pipe = c.redis.pipeline(transaction=True)
            pipe.hget(self._key("snap:", thread_id), snapshot_id)
            pipe.zscore(self._key("snapz:", thread_id), snapshot_id)
            found: list[Any] = await pipe.execute()
            return found

        row, seq = await self._run("get_snapshot", work)
        if row is None or seq is None:
            return None
        return self._snapshot(thread_id, snapshot_id, seq, row)

    async def list_snapshots(self, thread_id: str, limit: int | None = None) -> list[Snapshot]:
        """The thread's snapshots, newest first (the newest `limit` if given)."""
        if limit is not None and limit <= 0:
            return []

        async def work(c: _Client) -> list[str | None]:
            found: list[str | None] = await c.gather_zset(
                keys=[self._key("snapz:", thread_id), self._key("snap:", thread_id)],
                args=["ZREVRANGE", 0, -1 if limit is None else limit - 1],
            )
            return found

        flat = await self._run("list_snapshots", work)
        out: list[Snapshot] = []
        for i in range(0, len(flat), 3):
            sid, seq, row = flat[i], flat[i + 1], flat[i + 2]
            if sid is not None and seq is not None and row is not None:
                out.append(self._snapshot(thread_id, sid, seq, row))
        return out

    async def delete_snapshots(self, thread_id: str) -> None:
        """Drop the thread's snapshots."""

        async def work(c: _Client) -> None:
            await c.redis.delete(self._key("snap:", thread_id), self._key("snapz:", thread_id))

        await self._run("delete_snapshots", work, write=True)

    def _snapshot(self, thread_id: str, sid: str, seq: Any, line: str) -> Snapshot:
        return self._decoded(records.snapshot_from_line, thread_id, sid, seq, line)

    # ------------------------------------------------------------------ retention
    async def gc(self, policy: Retention, *, dry_run: bool = False) -> GcReport:
        """Delete what `policy` does not keep (`baton.backends.retention`), each session's
        rows and its `retention` audit record in one script. Sizes are `MEMORY USAGE`
        summed over the keys under the store's prefix."""
        sizes = Sizes(self._gc_bytes, f"MEMORY USAGE of the keys under {self.prefix!r}")
        return await collect(self, policy, dry_run, self._gc_prune, sizes)

    async def _gc_bytes(self) -> int | None:
        async def work(c: _Client) -> int:
            pattern = re.sub(r"([*?\[\]\\])", r"\\\1", self.prefix) + "*"  # the prefix, literally
            total, keys = 0, [k async for k in c.redis.scan_iter(match=pattern, count=500)]
            for i in range(0, len(keys), 500):
                pipe = c.redis.pipeline(transaction=False)
                for key in keys[i : i + 500]:
                    pipe.memory_usage(key)
                total += sum(int(n or 0) for n in await pipe.execute())
            return total

        return await self._run("gc", work)

    async def _gc_prune(self, prune: Prune, item: Unsealed | None) -> None:
        sid = prune.session_id

        async def numbered(c: _Client, table: str, ids: tuple[str, ...]) -> list[Any]:
            """(number, row) of the session's `table` rows whose id is in `ids`."""
            if not ids:
                return []
            nums = await c.redis.lrange(self._key(f"{table}:s:", sid), 0, -1)
            rows = await c.redis.hmget(self._key(table), nums) if nums else []
            wanted, out = set(ids), []
            for n, row in zip(nums, rows, strict=True):
                text = None if row is None else row.partition("\n")[0] if table == "msg" else row
                head = json.loads(text) if text else None
                rid = head[0] if isinstance(head, list) else (head or {}).get("id")
                if rid in wanted:
                    out.append((n, head))
            return out

        async def work(c: _Client) -> None:
            msgs = await numbered(c, "msg", prune.messages)
            evs = await numbered(c, "ev", prune.events)
            body: list[Any] = [len(msgs), *(n for n, _ in msgs), len(evs)]
            for n, event in evs:
                body += [n, event.get("trace_id", "")]
            body += [len(prune.snapshots), *prune.snapshots]
            script = c.redis.register_script(_GC_PRUNE)
            for _ in range(_TIP_ATTEMPTS):
                expected = "-"
                audit: list[Any] = ["", "", ""]
                if item is not None:
                    tip = _parse_tip(await c.redis.get(self._key("audit:tip")))
                    expected = _tip_text(*tip)
                    (r,) = link([item], tip[0], tip[1], self.audit_key)
                    audit = [r.seq, records.audit_json(r), r.hash]
                result = str(await script(args=[self.prefix, expected, sid, *body, *audit]))
                if result == "ok":
                    if item is not None:
                        self._tip = (int(audit[0]), str(audit[2]))
                    return
            raise StoreError(
                f"Redis store {self.where}: gc of session {sid!r} lost the audit chain's tip to "
                f"other writers {_TIP_ATTEMPTS} times in a row; nothing was deleted. Run it again"
            )

        await self._run("gc", work, write=True)

    # ------------------------------------------------------------------ audit archive
    async def audit_anchors(self) -> list[Anchor]:
        """The store's audit archive anchors, oldest first (`baton.backends.archive`)."""

        async def work(c: _Client) -> list[str]:
            found: list[str] = await c.redis.lrange(self._key("audit:anchors"), 0, -1)
            return found

        return [_anchor(text) for text in await self._run("audit_anchors", work)]

    async def archive_audit(
        self,
        to: str | Path,
        *,
        max_age_s: float | None = None,
        keep: int | None = None,
        dry_run: bool = False,
    ) -> ArchiveReport:
        """Archive the audit chain's oldest records to the new JSONL file `to`, then record
        the anchor and delete them in one script (`baton.backends.archive`)."""
        return await archive(
            to,
            max_age_s=max_age_s,
            keep=keep,
            dry_run=dry_run,
            key=self.audit_key,
            scan=self._archive_scan,
            trim=self._archive_trim,
            size=self._gc_bytes,
            measured=f"MEMORY USAGE of the keys under {self.prefix!r}",
        )

    async def _archive_scan(self) -> Scan:
        anchors = await self.audit_anchors()

        async def work(c: _Client) -> tuple[list[Any], list[Any], list[Any]]:
            tip, events, messages = await c.redis.mget(
                self._key("audit:tip"), self._key("ev:n"), self._key("msg:n")
            )
            first = anchors[-1].seq + 1 if anchors else 1
            return (
                await self._range(c, "audit", first, _parse_tip(tip)[0]),
                await self._range(c, "ev", 1, int(events or 0)),
                await self._range(c, "msg", 1, int(messages or 0)),
            )

        audit, events, messages = await self._run("archive_audit", work)
        stored = {records.event_row_of_json(n, text).id for n, text in events}
        stored |= {records.message_row_of_line(n, text).id for n, text in messages}
        chain = [records.audit_record_of_json(seq, text) for seq, text in audit]
        return Scan(chain, anchors, stored)

    async def _archive_trim(self, anchor: Anchor, previous: Anchor | None) -> None:
        text = json.dumps(dict(zip(ANCHOR_FIELDS, anchor_row(anchor), strict=True)))
        seal = GENESIS if previous is None else previous.seal

        async def work(c: _Client) -> str:
            args = [self.prefix, seal, anchor.first_seq, anchor.seq, anchor.hash, text]
            return str(await c.trim_audit(args=args))

        if await self._run("archive_audit", work, write=True) != "ok":
            raise StoreError(
                f"Redis store {self.where}: archive_audit: another archive of the audit chain "
                "was made meanwhile, or the chain changed; nothing was deleted. Run it again"
            )

    # ------------------------------------------------------------------ lifecycle
    async def close(self) -> None:
        """Close the connections of the running event loop's client (those of other loops
        are let go); later calls raise `StoreError`. Closing twice is harmless."""
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
        if mine is not None:
            client = mine.redis
            closing = getattr(client, "aclose", None) or client.close  # redis < 5.0.1: close
            with suppress(RedisError, OSError):  # a dead connection: nothing left to release
                await closing()

    def __repr__(self) -> str:
        return f"RedisStore({_redacted(self.url)!r}, prefix={self.prefix!r})"


def _checkpoint_fields(row: tuple[Any, ...]) -> list[Any]:
    """A checkpoint row (`baton.backends._records.checkpoint_row`) as the scripts take it:
    run, seq, status, data, meta, updated_at."""
    _, run_id, seq, status, data, meta, updated_at = row
    return [run_id, seq, status, data, meta, _num(updated_at)]
