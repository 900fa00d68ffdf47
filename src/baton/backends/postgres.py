"""`PostgresStore`: sessions, transcripts, events, the audit chain, checkpoints, leases,
the human queue, the tasks of plan-execute-review runs, blackboards and graph snapshots in
PostgreSQL (`asyncpg`, the `postgres` extra: `pip install 'baton-relay[postgres]'`).

Open it with a URL: `postgresql://user[:password]@host:5432/dbname` (or `postgres://...`);
`?schema=name` (or the `schema` argument, default `baton`) names the schema that holds the
store's tables, so that several stores share one database. Other query parameters go to
asyncpg (`sslmode`, `connect_timeout`, ...). Nothing connects until the first call; each
event loop gets a connection pool of its own (a pool belongs to one loop, and `run_sync`
runs each call in a loop of its own).

The schema and its tables are created on first use. Migrations are versioned in the table
`schema_version` (one row per applied version) and applied in order in one transaction under
an advisory lock, so that processes starting together migrate once; a database migrated by
a newer Baton is refused with a `StoreError` that says to upgrade.

Atomicity, across any number of processes:

- `commit_run` is one transaction: the session's compare-and-set on its version (a
  conditional insert or update of its row), its checkpoint, its messages, events and audit
  records. The audit chain's tip is read and extended under a transaction-level advisory
  lock (one per schema), so concurrent commits chain one after another, and the rows of
  `events` and `messages` are numbered in chain order.
- `put_checkpoint`, `update_human`, `put_task` and `acquire_lease` are each
  one conditional statement.
- `write_entry` takes the board's next seq first (locking the board's seq row until it
  commits), then compares the entry's version and writes it: writers of one board go one
  at a time, so of two that read one version one writes and the other gets
  `ConflictError`, and no update is lost.
- `put_snapshot` takes the thread's next seq and applies retention under an advisory lock
  per thread.

Leases expire by the server's clock (the same for every process). JSON is stored
as text, so values read back exactly as they were written (key order, int versus float).
PostgreSQL text cannot hold the NUL character: a name or id holding one is refused with a
`StoreError` (inside JSON it is escaped and stored as any other character); text with a lone
surrogate is refused too.

Every asyncpg or connection error becomes a `StoreError` that names the server (without the
password) and says what to do. When a connection turns out dead (a server restart,
`pg_terminate_backend`), the pool replaces all its connections, and the call is made once
more on a fresh one if that is safe: a read, or a write whose connection died before its
COMMIT was sent (the server rolled it back). A write whose connection died while its COMMIT
was under way raises a `StoreError` that says it may or may not be stored.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import threading
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from baton.backends import _records as records
from baton.backends._aio import settle
from baton.backends._conflicts import (
    board_conflict,
    board_json,
    refused_checkpoint,
    version_conflict,
)
from baton.backends._postgres_commit import columns as as_columns
from baton.backends._postgres_commit import statement as one_statement
from baton.backends._postgres_outbox import OUTBOX_MIGRATION, PostgresOutbox
from baton.backends._records import AUDIT_COLUMNS, AUDIT_FIELDS, SESSION_COLUMNS, commit_rows
from baton.backends._snapshots import kept_json
from baton.backends._sql import (
    AUDIT_TIP,
    CHECKPOINT_NEWER,
    CHECKPOINT_UPSERT,
    DROP_CHECKPOINT,
    EVENT_ROWS,
    INSERT_ANCHOR,
    INSERT_AUDIT,
    INSERT_EVENTS,
    INSERT_MESSAGES,
    KEEP_LAST_SNAPSHOTS,
    MESSAGE_ROWS,
    NEXT_BOARD_SEQ,
    NEXT_SNAPSHOT_SEQ,
    SAVE_CHECKPOINT,
    SELECT_ANCHORS,
    SNAPSHOT_SEQ,
    STORED_CHECKPOINT,
    TRIM_AUDIT,
    UPSERT_ENTRY,
    UPSERT_SNAPSHOT,
    SQLStore,
    numbered,
)
from baton.backends.archive import (
    Anchor,
    ArchiveReport,
    anchor_of,
    anchor_row,
    archive,
    verify_store,
)
from baton.backends.audit import (
    GENESIS,
    EventRow,
    MessageRow,
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
    Fence,
    KeptSnapshot,
    SessionRecord,
    Snapshot,
)
from baton.backends.outbox import INSERT_OUTBOX
from baton.backends.retention import GcReport, Prune, Retention, Sizes, collect
from baton.backends.sealing import CheckpointKeyProvider, resolve_keys
from baton.core.errors import ConfigError, StoreError
from baton.core.events import EscalationCard, Event
from baton.core.messages import Message

try:
    import asyncpg  # type: ignore[import-untyped]
    from asyncpg import exceptions as pgerr
except ImportError as exc:  # pragma: no cover - the extra is part of the dev install
    raise ImportError(
        "the PostgreSQL store needs the asyncpg package: pip install 'baton-relay[postgres]'"
    ) from exc

T = TypeVar("T")

log = logging.getLogger("baton.store")

SCHEMA_VERSION = 5
"""Version of the table layout, kept in the table `schema_version`."""

DEFAULT_SCHEMA = "baton"
"""Schema of a store opened without one."""

_SCHEMES = ("postgresql://", "postgres://")

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
"""Schema names the store accepts: plain identifiers (quoted in SQL, so case is kept)."""

_PRUNE_EVERY = 256
"""Expired leases are deleted once every this many acquisitions."""

_NOW = "extract(epoch from clock_timestamp())::float8"


_FENCED_CHECKPOINT = f"""
WITH lease AS (
  INSERT INTO leases (key, owner, expires_at) VALUES ($1, $2, {_NOW} + $3::float8)
  ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
  WHERE leases.expires_at <= {_NOW} OR leases.owner = excluded.owner
  RETURNING 1
), saved AS (
  INSERT INTO checkpoints ({records.CHECKPOINT_COLUMNS})
  SELECT $4::text, $5::text, $6::bigint, $7::text, $8::text, $9::text, $10::float8
  WHERE EXISTS (SELECT 1 FROM lease)
  {CHECKPOINT_UPSERT} {CHECKPOINT_NEWER}
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM lease) AS held, EXISTS (SELECT 1 FROM saved) AS saved,
  (SELECT seq FROM checkpoints WHERE session_id = $4) AS seq,
  (SELECT run_id FROM checkpoints WHERE session_id = $4) AS run_id
"""
"""`put_checkpoint_fenced` as one statement: the lease renewed (or taken) and, only then, the
checkpoint saved unless stale or another run's waits for a person (`PUT_CHECKPOINT`); the
stored seq and run read from the statement's snapshot, i.e. before it (for the conflict)."""

_FENCED_WITH_SNAPSHOT = _FENCED_CHECKPOINT.replace(
    "\nSELECT EXISTS",
    f"""
, snap AS (
  INSERT INTO snapshots ({records.SNAPSHOT_COLUMNS})
  SELECT $11::text, $12::text, COALESCE(
      (SELECT seq FROM snapshots WHERE thread_id = $11 AND id = $12),
      (SELECT COALESCE(MAX(seq), 0) + 1 FROM snapshots WHERE thread_id = $11)),
    $13::text, $14::bigint, $15::text, $16::text, $17::float8
  WHERE EXISTS (SELECT 1 FROM saved)
  ON CONFLICT (thread_id, id) DO UPDATE SET seq = excluded.seq, run_id = excluded.run_id,
    step = excluded.step, parent_id = excluded.parent_id, data = excluded.data,
    created_at = excluded.created_at
  RETURNING 1
), pruned AS (
  DELETE FROM snapshots WHERE $18::bigint IS NOT NULL AND EXISTS (SELECT 1 FROM snap)
    AND thread_id = $11 AND id <> $12 AND seq <= (SELECT seq FROM snapshots
      WHERE thread_id = $11 AND id <> $12 ORDER BY seq DESC LIMIT 1 OFFSET $18::bigint - 1)
)
SELECT EXISTS""",
    1,
)
"""`_FENCED_CHECKPOINT` with one graph snapshot saved in the same statement, only if the
checkpoint was: its seq kept when its id is stored, else the thread's next; then, with
`keep_last` ($18), the thread's other snapshots beyond the newest `keep_last - 1` deleted
(the statement sees the table as before it, hence the snapshot saved is left out of the
count and kept). No lock: two writers taking one seq fail on the unique (thread_id, seq)
index, and the save is made again under `put_snapshot`'s lock."""


async def _released(conn: Any) -> None:
    """What a connection needs before it goes back to the pool. asyncpg's default reset
    sends `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL` after every
    use, a round trip per store call, for session state this store never leaves: its locks
    are transaction-scoped (`pg_advisory_xact_lock`), it opens no cursor, listens to nothing
    and sets nothing (the search path is a connection setting). Only an unfinished
    transaction (a rollback that failed) is undone."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


async def _lease(conn: Any, key: str, owner: str, ttl_s: float, prune: bool) -> bool:
    """`acquire_lease` on `conn` (within the caller's transaction)."""
    got = await conn.fetchval(
        "INSERT INTO leases (key, owner, expires_at) "
        f"VALUES ($1, $2, {_NOW} + $3::float8) "
        "ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, "
        "expires_at = excluded.expires_at "
        f"WHERE leases.expires_at <= {_NOW} OR leases.owner = excluded.owner RETURNING 1",
        key,
        owner,
        float(ttl_s),
    )
    if prune:
        await conn.execute(f"DELETE FROM leases WHERE expires_at <= {_NOW}")
    return got is not None


"""The server's clock in seconds since the epoch: what leases expire by."""

_CLOSE_TIMEOUT_S = 10.0
"""How long `close` waits for connections in use before it terminates them."""

# Steps that take a database from version `v - 1` to version `v`, keyed by `v`, run with the
# store's schema first on the search path. Later releases append entries here; never edit a
# released one. Text that is compared or sorted is COLLATE "C" (code point order, as the
# other stores sort).
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE sessions (
            id TEXT COLLATE "C" PRIMARY KEY,
            user_id TEXT,
            holder TEXT,
            holder_since TEXT,
            incoming TEXT,
            state TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            version BIGINT NOT NULL,
            requests TEXT NOT NULL DEFAULT '{}',
            pos BIGINT GENERATED ALWAYS AS IDENTITY
        )""",
        "CREATE INDEX sessions_updated ON sessions (updated_at DESC, pos)",
        """CREATE TABLE messages (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT COLLATE "C" NOT NULL UNIQUE,
            session_id TEXT COLLATE "C" NOT NULL,
            run_id TEXT,
            role TEXT NOT NULL,
            agent TEXT,
            data TEXT NOT NULL,
            ts DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX messages_session ON messages (session_id, seq)",
        """CREATE TABLE events (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL,
            session_id TEXT COLLATE "C" NOT NULL,
            trace_id TEXT COLLATE "C" NOT NULL,
            run_id TEXT NOT NULL,
            type TEXT NOT NULL,
            data TEXT NOT NULL,
            ts DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX events_session ON events (session_id, seq)",
        "CREATE INDEX events_trace ON events (trace_id, seq)",
        # The hash-chained audit trail (see `baton.backends.audit`); seq is the chain
        # position. Rows are append-only: updates and deletes are refused by a trigger.
        """CREATE TABLE audit (
            seq BIGINT PRIMARY KEY,
            event_id TEXT NOT NULL,
            type TEXT NOT NULL,
            session_id TEXT COLLATE "C" NOT NULL,
            trace_id TEXT NOT NULL,
            ts DOUBLE PRECISION NOT NULL,
            data TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL,
            messages TEXT NOT NULL DEFAULT ''
        )""",
        "CREATE INDEX audit_session ON audit (session_id, seq)",
        """CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'audit records are append-only';
        END
        $$""",
        """CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
        FOR EACH ROW EXECUTE FUNCTION audit_append_only()""",
        """CREATE TABLE checkpoints (
            session_id TEXT COLLATE "C" PRIMARY KEY,
            run_id TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            status TEXT NOT NULL,
            data TEXT NOT NULL,
            meta TEXT NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX checkpoints_status ON checkpoints (status, updated_at)",
        """CREATE TABLE locks (
            key TEXT COLLATE "C" PRIMARY KEY,
            expires_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX locks_expiry ON locks (expires_at)",
        """CREATE TABLE leases (
            key TEXT COLLATE "C" PRIMARY KEY,
            owner TEXT COLLATE "C" NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX leases_expiry ON leases (expires_at)",
        """CREATE TABLE human_queue (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id TEXT NOT NULL,
            trace_id TEXT NOT NULL,
            card TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'open',
            claimed_by TEXT,
            answer TEXT,
            note TEXT NOT NULL DEFAULT '',
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX human_queue_status ON human_queue (status, id)",
        # Tasks of plan-execute-review runs: one row per (run, task id), the task as JSON,
        # saved compare-and-set on its version; pos keeps the order of first save.
        """CREATE TABLE tasks (
            run_id TEXT COLLATE "C" NOT NULL,
            task_id TEXT COLLATE "C" NOT NULL,
            session_id TEXT COLLATE "C" NOT NULL,
            status TEXT NOT NULL,
            version BIGINT NOT NULL,
            data TEXT NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            pos BIGINT GENERATED ALWAYS AS IDENTITY,
            PRIMARY KEY (run_id, task_id)
        )""",
        "CREATE INDEX tasks_session ON tasks (session_id, pos)",
        "CREATE INDEX tasks_status ON tasks (status, pos)",
        "CREATE INDEX tasks_order ON tasks (pos)",
        # Blackboards: one row per (board, key), the value as JSON; seq is the board-wide
        # number of the write that left the row as it is. board_seqs keeps each board's last
        # seq, also once its entries are deleted, so a reader's since_seq stays valid.
        """CREATE TABLE board (
            board TEXT COLLATE "C" NOT NULL,
            key TEXT COLLATE "C" NOT NULL,
            value TEXT NOT NULL,
            version BIGINT NOT NULL,
            seq BIGINT NOT NULL,
            writer TEXT NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (board, key)
        )""",
        "CREATE INDEX board_changes ON board (board, seq)",
        """CREATE TABLE board_seqs (
            board TEXT COLLATE "C" PRIMARY KEY,
            seq BIGINT NOT NULL
        )""",
        # Graph snapshots: one row per (thread, snapshot id), the data as JSON; seq numbers a
        # thread's snapshots in the order first saved (a replaced row keeps it).
        """CREATE TABLE snapshots (
            thread_id TEXT COLLATE "C" NOT NULL,
            id TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            run_id TEXT NOT NULL,
            step BIGINT NOT NULL,
            parent_id TEXT,
            data TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (thread_id, id)
        )""",
        "CREATE UNIQUE INDEX snapshots_seq ON snapshots (thread_id, seq)",
    ),
    2: (
        # The kernel's control slots (pending needs, slot provenance), as JSON, apart from the
        # business slots in `state` that hand-offs and tools write.
        "ALTER TABLE sessions ADD COLUMN control TEXT NOT NULL DEFAULT '{}'",
    ),
    3: (
        # Nothing claims locks through the store (the kernel keeps a run's duplicate
        # hand-off locks in the run): the table goes, its index with it.
        "DROP TABLE IF EXISTS locks",
    ),
    4: (
        # Archive and trim of the audit chain (`baton.backends.archive`): one sealed anchor
        # per archive, append-only; an anchor must follow the last one and name a stored
        # record by its hash. The audit table then lets go of the records at or below the
        # last anchor, and of nothing else. The functions keep the store's schema as their
        # search path, so a session with another search path cannot point them elsewhere.
        """CREATE TABLE audit_anchor (
            first_seq BIGINT NOT NULL,
            seq BIGINT PRIMARY KEY,
            hash TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            archived_at DOUBLE PRECISION NOT NULL,
            prev_seal TEXT NOT NULL,
            seal TEXT NOT NULL
        )""",
        f"""CREATE FUNCTION audit_anchor_follows() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        DECLARE
            last_seq BIGINT;
            last_seal TEXT;
        BEGIN
            SELECT seq, seal INTO last_seq, last_seal FROM audit_anchor
                ORDER BY seq DESC LIMIT 1;
            IF NEW.first_seq <> COALESCE(last_seq, 0) + 1 OR NEW.seq < NEW.first_seq
                OR NEW.prev_seal <> COALESCE(last_seal, '{GENESIS}')
                OR NOT EXISTS (SELECT 1 FROM audit WHERE seq = NEW.seq AND hash = NEW.hash)
            THEN
                RAISE EXCEPTION 'an audit anchor must follow the last one and name a stored '
                    'audit record by its hash';
            END IF;
            RETURN NEW;
        END
        $$""",
        """CREATE TRIGGER audit_anchor_follows BEFORE INSERT ON audit_anchor
        FOR EACH ROW EXECUTE FUNCTION audit_anchor_follows()""",
        """CREATE FUNCTION audit_anchor_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'audit anchors are append-only';
        END
        $$""",
        """CREATE TRIGGER audit_anchor_append_only BEFORE UPDATE OR DELETE ON audit_anchor
        FOR EACH ROW EXECUTE FUNCTION audit_anchor_append_only()""",
        """CREATE TRIGGER audit_anchor_no_truncate BEFORE TRUNCATE ON audit_anchor
        FOR EACH STATEMENT EXECUTE FUNCTION audit_anchor_append_only()""",
        """CREATE OR REPLACE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        BEGIN
            IF TG_OP = 'DELETE' THEN
                IF OLD.seq <= (SELECT COALESCE(MAX(seq), 0) FROM audit_anchor) THEN
                    RETURN OLD;
                END IF;
            END IF;
            RAISE EXCEPTION 'audit records are append-only';
        END
        $$""",
        """CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
        FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only()""",
    ),
    5: (
        # The outbox (`baton.backends.outbox`): notifiable events written with the run's
        # commit, and their delivery state.
        *OUTBOX_MIGRATION,
    ),
}

_LOST: tuple[type[BaseException], ...] = (
    ConnectionError,  # reset, refused, broken pipe
    pgerr.ConnectionDoesNotExistError,
    pgerr.PostgresConnectionError,  # SQLSTATE class 08
    pgerr.AdminShutdownError,  # pg_terminate_backend, a server shutting down
    pgerr.CrashShutdownError,
    pgerr.CannotConnectNowError,  # a server starting up or in recovery
    pgerr.InternalClientError,  # a connection whose server side died while it was idle
)
"""Errors of a connection that died or could not be made: nothing was done on it, or (a
read) doing it again is harmless."""

_UNREACHABLE: tuple[type[BaseException], ...] = (
    *_LOST,
    OSError,
    pgerr.InterfaceError,
    TimeoutError,
    asyncio.TimeoutError,
)


def _lost(exc: BaseException) -> bool:
    """Whether `exc` says the connection died (or could not be made)."""
    if isinstance(exc, _LOST):
        return True
    return isinstance(exc, pgerr.InterfaceError) and "closed" in str(exc)


@asynccontextmanager
async def _transaction(conn: Any, **options: Any) -> AsyncIterator[None]:
    """A transaction on `conn`. An error inside it is raised as it is (asyncpg's own context
    manager raises an InterfaceError instead when the connection died meanwhile)."""
    tr = conn.transaction(**options)
    await tr.start()
    try:
        yield
    except BaseException:
        with suppress(Exception):  # a dead connection rolled back by itself
            await tr.rollback()
        raise
    await tr.commit()


class _Retry(Exception):
    """A call failed on a connection that died before its transaction could commit (a read:
    at any point): nothing was written, so it may be made again (the error is the cause)."""


class _Unsure(Exception):
    """A write's connection died while its COMMIT was under way: the write may or may not be
    stored (the error is the cause)."""


class _Pool:
    """One event loop's connection pool (made on first use)."""

    __slots__ = ("closer", "commits", "lock", "pool")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.commits = asyncio.Lock()
        """The loop's commits, one at a time (`_postgres_commit`)."""
        self.pool: Any = None
        self.closer: AsyncGenerator[None, None] | None = None
        """Closes the pool when its loop shuts down (`_closer`)."""


async def _closer(pool: Any) -> AsyncGenerator[None, None]:
    """Started once in the pool's loop and left suspended: a loop that shuts down (as
    `asyncio.run` and `run_sync` do, after each call) closes its unfinished async generators
    while it still runs, and this one then closes the pool's connections cleanly, instead of
    leaving them open until garbage collection."""
    try:
        yield
    finally:
        await _close_quietly(pool)


def _quote(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _lock_key(*parts: str) -> int:
    """A stable signed 64-bit key for `pg_advisory_xact_lock` (a collision only makes two
    unrelated writers wait for each other)."""
    text = "\x1f".join(parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True)


def _split_url(url: str, schema: str | None) -> tuple[str, str]:
    """(the URL without Baton's `schema` query parameter, the schema to use)."""
    if not isinstance(url, str) or not url.startswith(_SCHEMES):
        raise ConfigError(
            f"bad PostgreSQL URL {_redacted(url) if isinstance(url, str) else url!r}: use "
            "'postgresql://user[:password]@host:5432/dbname' (or 'postgres://...'), with "
            "'?schema=name' to pick the schema"
        )
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    given = [v for k, v in query if k == "schema"]
    if given:
        if schema is not None and schema != given[-1]:
            raise ConfigError(
                f"the PostgreSQL store URL names schema {given[-1]!r} but schema={schema!r} was "
                "passed too; give it in one place"
            )
        schema = given[-1]
        rest = urlencode([(k, v) for k, v in query if k != "schema"])
        url = urlunsplit(parts._replace(query=rest))
    if schema is None:
        schema = DEFAULT_SCHEMA
    if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
        raise ConfigError(
            f"PostgresStore(schema={schema!r}): give a schema name of letters, digits and "
            "underscores that does not start with a digit, at most 63 characters, e.g. 'baton' "
            "(drop() drops the whole schema)"
        )
    if schema.lower().startswith("pg_"):
        raise ConfigError(
            f"PostgresStore(schema={schema!r}): names starting with 'pg_' are reserved by "
            "PostgreSQL; pick another, e.g. 'baton'"
        )
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise ConfigError(f"bad PostgreSQL URL {_redacted(url)!r}: {exc}") from exc
    return url, schema


def _redacted(url: str) -> str:
    """`url` without its password (in the user part or the query)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            host = netloc.rpartition("@")[2]
            netloc = f"{parts.username or ''}:***@{host}"
        query = parse_qsl(parts.query, keep_blank_values=True)
        if any(k == "password" for k, _ in query):
            redacted = [(k, "***" if k == "password" else v) for k, v in query]
            return urlunsplit(parts._replace(netloc=netloc, query=urlencode(redacted)))
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "<a PostgreSQL URL that cannot be parsed>"


def _unicode_error(exc: BaseException) -> UnicodeEncodeError | None:
    """The UnicodeEncodeError behind `exc` (asyncpg wraps the one it meets encoding an
    argument in a `DataError`), or None."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return None
        if isinstance(seen, UnicodeEncodeError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class PostgresStore(SQLStore, PostgresOutbox):
    """A `Store` in PostgreSQL, with the `Tasks`, `Blackboard`, `Snapshots` and `AuditTrail`
    capabilities; several processes may share it (`shared` is True).

    `PostgresStore(url, schema=None, audit_key=None, checkpoint_keys=None, pool_min=1,
    pool_max=10, command_timeout_s=30.0, connect_timeout_s=10.0)`: every table lives in
    `schema` (else the URL's `?schema=`, else `baton`), created on first use; `audit_key` (else
    `$BATON_AUDIT_KEY`) seals the audit chain with HMAC-SHA256; `checkpoint_keys` (else
    `$BATON_CHECKPOINT_KEY`) encrypts checkpoint state (`baton.backends.sealing`). Each event
    loop that uses the
    store gets a pool of `pool_min` to `pool_max` connections; a statement that runs longer
    than `command_timeout_s` (None: no limit), or a connection not made within
    `connect_timeout_s`, fails with `StoreError`. `drop()` drops the schema with everything in
    it; `close()` closes the connections (later calls raise `StoreError`).
    """

    shared = True
    _FIRST_SAVED = "pos"
    _ALL_ROWS = None  # LIMIT NULL

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        audit_key: str | bytes | None = None,
        checkpoint_keys: CheckpointKeyProvider | str | None = None,
        pool_min: int = 1,
        pool_max: int = 10,
        command_timeout_s: float | None = 30.0,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.url = url
        dsn, self.schema = _split_url(url, schema)
        """The schema that holds the store's tables."""
        if pool_max < 1 or pool_min < 0 or pool_min > pool_max:
            raise ConfigError(
                f"PostgresStore(pool_min={pool_min}, pool_max={pool_max}): give "
                "0 <= pool_min <= pool_max and pool_max >= 1"
            )
        if command_timeout_s is not None and command_timeout_s <= 0:
            raise ConfigError(
                f"PostgresStore(command_timeout_s={command_timeout_s}): give a positive number "
                "of seconds, or None for no limit"
            )
        if connect_timeout_s <= 0:
            raise ConfigError(
                f"PostgresStore(connect_timeout_s={connect_timeout_s}): give a positive number "
                "of seconds"
            )
        self.audit_key = resolve_key(audit_key)
        """HMAC key of the audit chain (`audit_key`, else `$BATON_AUDIT_KEY`), or None."""
        self.checkpoint_keys = resolve_keys(checkpoint_keys)
        """Keys that seal checkpoint state (`checkpoint_keys`, else `$BATON_CHECKPOINT_KEY`),
        or None: checkpoints are then stored in clear (the kernel masks their secrets)."""
        self.seals_checkpoints = self.checkpoint_keys is not None
        """Every checkpoint saved is encrypted (`baton.backends.sealing.SealedCheckpoints`)."""
        self.where = _redacted(dsn)
        """The server's URL without the password, for messages."""
        self.pool_min = pool_min
        self.pool_max = pool_max
        self.command_timeout_s = command_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._dsn = dsn
        self._quoted = _quote(self.schema)
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool] = (
            weakref.WeakKeyDictionary()
        )
        self._mutex = threading.Lock()
        self._closed = False
        self._migrated = False
        self._leases = 0
        self._chain_tip: tuple[int, str] | None = None
        """The audit chain's tip after this store's last commit: where the next commit's
        records are chained from when it is made in one statement (`_commit_at_once`)."""

    # ------------------------------------------------------------------ plumbing
    def _holder(self) -> _Pool:
        if self._closed:
            raise self._closed_error()
        loop = asyncio.get_running_loop()
        with self._mutex:
            found = self._pools.get(loop)
            if found is None:
                # a pool holds its loop, so the weak keys alone never let a dead loop go
                for dead in [old for old in self._pools if old.is_closed()]:
                    pool = self._pools.pop(dead).pool
                    if pool is not None:
                        with suppress(Exception):  # its loop is gone: nothing to wait for
                            pool.terminate()
                found = self._pools[loop] = _Pool()
            return found

    async def _pool(self, *, migrate: bool = True) -> Any:
        """The running loop's pool (made on first use), with the schema migrated unless
        `migrate` is False."""
        holder = self._holder()
        pool = holder.pool
        if pool is not None and (self._migrated or not migrate):
            return pool
        async with holder.lock:
            if holder.pool is None:
                holder.pool = await self._connect()
                holder.closer = _closer(holder.pool)
                await holder.closer.__anext__()
            if migrate and not self._migrated:
                await self._migrate(holder.pool)
                self._migrated = True
            return holder.pool

    async def _connect(self) -> Any:
        pool = asyncpg.create_pool(
            self._dsn,
            min_size=self.pool_min,
            max_size=self.pool_max,
            command_timeout=self.command_timeout_s,
            timeout=self.connect_timeout_s,
            server_settings={"search_path": self._quoted},
            reset=_released,
        )
        try:
            await pool
        except BaseException:
            with suppress(Exception):
                pool.terminate()
            raise
        return pool

    async def _migrate(self, pool: Any) -> None:
        """Create the schema and its tables, or bring them to `SCHEMA_VERSION`."""
        conn = await pool.acquire()
        try:
            found = await self._schema_version(conn)
            if found == SCHEMA_VERSION:
                return
            async with _transaction(conn):
                # one process at a time; re-read under the lock: another may have migrated
                await conn.execute(
                    "SELECT pg_advisory_xact_lock($1::bigint)", _lock_key("migrate", self.schema)
                )
                exists = await conn.fetchval(
                    "SELECT 1 FROM pg_namespace WHERE nspname = $1", self.schema
                )
                if not exists:
                    await conn.execute(f"CREATE SCHEMA {self._quoted}")
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                    "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                )
                found = await self._schema_version(conn)
                for version in range(found + 1, SCHEMA_VERSION + 1):
                    for step in _MIGRATIONS[version]:
                        await conn.execute(step)
                    await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", version)
        finally:
            with suppress(Exception):  # a connection that cannot be reset is dropped
                await pool.release(conn)

    async def _schema_version(self, conn: Any) -> int:
        """The schema's version (0 for none); `StoreError` for one newer than this code."""
        table = await conn.fetchval(
            "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 "
            "AND tablename = 'schema_version'",
            self.schema,
        )
        if table is None:
            return 0
        found = int(await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version"))
        if found > SCHEMA_VERSION:
            raise StoreError(
                f"the PostgreSQL store {self.where} (schema {self.schema!r}) has schema version "
                f"{found}, newer than this Baton understands ({SCHEMA_VERSION}); upgrade Baton, "
                "or use another schema (?schema=...)"
            )
        return found

    async def _attempt(
        self, work: Callable[[Any], Awaitable[T]], write: bool, migrate: bool, single: bool
    ) -> T:
        """`work(connection)` once: in a transaction for a write, unless it is one statement
        (`single`: atomic by itself, so no BEGIN and COMMIT round trips). `_Retry` when the
        connection died before a write could commit (or during a read), `_Unsure` when it
        died while the write was committing (for a single statement: while it ran)."""
        try:
            pool = await self._pool(migrate=migrate)
        except Exception as exc:
            if not _lost(exc):
                raise
            await self._expire()
            raise _Retry from exc
        try:
            conn = await pool.acquire()
        except Exception as exc:
            if not _lost(exc):
                raise
            await pool.expire_connections()
            raise _Retry from exc
        try:
            if not write or single:
                try:
                    return await work(conn)
                except Exception as exc:
                    if _lost(exc):
                        raise (_Unsure if write else _Retry) from exc
                    raise
            tr = conn.transaction()
            try:
                await tr.start()
                result = await work(conn)
            except BaseException as exc:
                with suppress(Exception):  # a dead connection rolled back by itself
                    await tr.rollback()
                if _lost(exc):  # died before COMMIT: the server rolled it back
                    raise _Retry from exc
                raise
            try:
                await tr.commit()
            except Exception as exc:
                if _lost(exc):
                    raise _Unsure from exc
                raise
            return result
        except (_Retry, _Unsure):
            # the server restarted or killed connections: the idle ones are most likely dead
            # too, so every connection of the pool is replaced (on its next use)
            await pool.expire_connections()
            raise
        finally:
            with suppress(Exception):  # a connection that cannot be reset is dropped
                await pool.release(conn)

    async def _expire(self) -> None:
        """Have the running loop's pool (if any) replace its connections on their next use."""
        with suppress(RuntimeError, StoreError):
            pool = self._holder().pool
            if pool is not None:
                await pool.expire_connections()

    async def _run(
        self,
        action: str,
        work: Callable[[Any], Awaitable[T]],
        *,
        write: bool = False,
        migrate: bool = True,
        done: Callable[[T], None] | None = None,
        single: bool = False,
        stored: Callable[[Any], Awaitable[T | None]] | None = None,
        idempotent: bool = False,
    ) -> T:
        """`work(connection)` with asyncpg errors turned into `StoreError`s. A write runs in a
        transaction, to its end even when its caller is cancelled (`settle`), and `done` is
        called with its result once it is committed (so that a cancelled caller's objects
        still learn of the commit). A call whose connection turns out dead is made once more
        on a fresh one: a read in any case, a write when the connection died before its
        COMMIT was sent (the server rolled it back); a write whose connection died during its
        COMMIT raises a `StoreError` that says it may have been stored.

        A `single` write is one statement, atomic by itself, run without BEGIN and COMMIT
        (two round trips fewer). Its connection dying while it runs leaves it unknown
        whether it was stored: `stored(connection)` reads that on a fresh connection (the
        write's result when it is there, None when not: then it is made once more). An
        `idempotent` single write (a lease renewed or released by its owner) is simply made
        once more: making it twice is making it once."""

        async def once() -> T:
            try:
                return await self._attempt(work, write, migrate, single)
            except _Unsure as exc:
                if stored is None and not idempotent:
                    raise
                if stored is not None:
                    found = await self._attempt(stored, False, migrate, False)
                    if found is not None:
                        return found
                log.warning(
                    "PostgreSQL at %s dropped the connection (%s) during %s, which %s: "
                    "connecting again and trying once more",
                    self.where,
                    exc.__cause__ or exc,
                    action,
                    "is safe to repeat" if stored is None else "was not stored",
                )
            except _Retry as exc:
                log.warning(
                    "PostgreSQL at %s dropped the connection (%s) during %s; nothing was "
                    "written: connecting again and trying once more",
                    self.where,
                    exc.__cause__ or exc,
                    action,
                )
            try:
                return await self._attempt(work, write, migrate, single)
            except _Retry as exc:
                raise (exc.__cause__ or exc) from None

        async def guarded() -> T:
            try:
                result = await once()
            except StoreError:
                raise
            except _Unsure as exc:
                cause = exc.__cause__ or exc
                raise StoreError(
                    f"PostgreSQL at {self.where} dropped the connection ({cause}) while "
                    f"{action} was committing: it may or may not be stored. Read it again "
                    "(get_session, get_checkpoint, ...) before retrying; the next call connects "
                    "again"
                ) from cause
            except Exception as exc:
                raise StoreError(self._explain(action, exc, write)) from exc
            if done is not None:
                done(result)
            return result

        if write:
            return await settle(guarded())
        return await guarded()

    def _explain(self, action: str, exc: BaseException, write: bool) -> str:
        text = str(exc) or type(exc).__name__
        nothing = "; nothing was written" if write else ""
        where = f"PostgreSQL store {self.where} (schema {self.schema!r}): {action} failed"
        bad = _unicode_error(exc)
        if bad is not None:
            return (
                f"{where}: a value holds text that is not valid Unicode ({bad.reason} at "
                f"position {bad.start}, a lone surrogate){nothing}. Clean it first "
                "(baton.core.text.clean_value)"
            )
        if isinstance(exc, pgerr.CharacterNotInRepertoireError) and "0x00" in text:
            return (
                f"{where}: a name or id holds the NUL character (\\x00), which PostgreSQL text "
                f"cannot hold{nothing}. Remove it (text.replace('\\x00', ''))"
            )
        if isinstance(
            exc, (pgerr.InvalidPasswordError, pgerr.InvalidAuthorizationSpecificationError)
        ):
            return (
                f"PostgreSQL at {self.where} refused the credentials of the store URL ({text}) "
                f"during {action}: fix the user or password in the URL, or pg_hba.conf"
            )
        if isinstance(exc, pgerr.InvalidCatalogNameError):
            return (
                f"PostgreSQL at {self.where}: the database of the store URL does not exist "
                f"({text}) during {action}: create it (createdb) or fix the URL"
            )
        if isinstance(exc, pgerr.TooManyConnectionsError):
            return (
                f"PostgreSQL at {self.where} has no connection left ({text}) during {action}: "
                "lower pool_max, or raise the server's max_connections"
            )
        if isinstance(exc, pgerr.InsufficientPrivilegeError):
            return (
                f"{where} ({text}): the user of the store URL lacks a privilege on the "
                f"database or on schema {self.schema!r}; grant it, or use another schema"
            )
        if isinstance(exc, pgerr.ReadOnlySQLTransactionError):
            return f"{where} ({text}): the URL names a read-only server; point it at the primary"
        if isinstance(exc, pgerr.UniqueViolationError):
            return (
                f"{where} ({text}): a row with the same id is already stored; do not commit it "
                f"twice{nothing}"
            )
        if isinstance(exc, (pgerr.UndefinedTableError, pgerr.InvalidSchemaNameError)):
            return (
                f"{where} ({text}): the store's tables are gone (the schema was dropped "
                "meanwhile?); open a new PostgresStore to create them again"
            )
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) and not isinstance(
            exc, pgerr.PostgresError
        ):
            return (
                f"{where}: PostgreSQL at {self.where} did not answer in time (connecting: "
                f"connect_timeout_s={self.connect_timeout_s:g}; a statement: "
                f"command_timeout_s={self.command_timeout_s}){nothing}; check the server and "
                "its locks, or raise the timeout"
            )
        if isinstance(exc, pgerr.QueryCanceledError):
            return (
                f"{where} ({text}): the statement was cancelled (a statement_timeout or "
                f"lock_timeout of the server){nothing}; retry"
            )
        if isinstance(exc, _UNREACHABLE):
            return (
                f"PostgreSQL at {self.where} is unreachable or dropped the connection ({text}) "
                f"during {action}{nothing}: start it or fix the store URL; the next call "
                "connects again"
            )
        if isinstance(exc, pgerr.DataError):
            return f"{where}: a value cannot be stored ({text}){nothing}"
        return f"{where} ({text}){nothing}; check the server (pg_isready) and retry"

    def _corrupt(self, table: str, key: object, exc: Exception) -> StoreError:
        return StoreError(
            f"PostgreSQL store {self.where} (schema {self.schema!r}): row {key!r} of table "
            f"{table!r} cannot be read ({exc}); it was written by something else than this "
            "Baton version, or edited; delete it, or give the store a schema of its own"
        )

    def _closed_error(self) -> StoreError:
        return StoreError(
            f"the PostgreSQL store {self.where} (schema {self.schema!r}) is closed; open a new "
            "PostgresStore"
        )

    async def _query(self, action: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one statement (`?` placeholders)."""

        async def work(conn: Any) -> list[Any]:
            rows: list[Any] = await conn.fetch(numbered(sql), *params)
            return rows

        return await self._run(action, work)

    async def _change(
        self,
        action: str,
        sql: str,
        params: Sequence[Any] = (),
        done: Callable[[int], None] | None = None,
    ) -> int:
        """Run one write statement (`?` placeholders); the number of rows it changed."""

        async def work(conn: Any) -> int:
            status: str = await conn.execute(numbered(sql), *params)  # e.g. "UPDATE 1"
            return int(status.rpartition(" ")[2] or 0)

        return await self._run(action, work, write=True, done=done)

    async def drop(self) -> None:
        """Drop the store's schema with every table in it (e.g. after a test). A later call
        creates it afresh."""

        async def work(conn: Any) -> None:
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1::bigint)", _lock_key("migrate", self.schema)
            )
            await conn.execute(f"DROP SCHEMA IF EXISTS {self._quoted} CASCADE")

        self._migrated = False
        try:
            await self._run("drop", work, write=True, migrate=False)
        finally:
            self._migrated = False

    # ------------------------------------------------------------------ sessions
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
        `checkpoint` (or delete `run_id`'s checkpoint), in one transaction.

        Compare-and-set: raises `ConflictError` (nothing written) unless the stored version
        equals `session.version` (0 for a session not stored yet); on success
        `session.version` is incremented in place. The session's row is inserted (version 0)
        or updated only where it still holds the version read, so two processes committing
        from the same version cannot both succeed. The first commit of a session sets its
        `created_at`; later ones keep it.
        """
        sid, read = session.session_id, session.version
        session_row = records.session_row(session)
        rows = commit_rows(session, messages, events, self.checkpoint_keys, checkpoint)
        audit_lock = _lock_key("audit", self.schema)

        async def write(conn: Any) -> None:
            if read == 0:
                saved = await conn.fetchval(
                    f"INSERT INTO sessions ({SESSION_COLUMNS}) "
                    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
                    "ON CONFLICT (id) DO NOTHING RETURNING 1",
                    *session_row,
                )
            else:
                saved = await conn.fetchval(
                    # created_at is left as it is: the first commit's stays
                    "UPDATE sessions SET user_id = $2, holder = $3, holder_since = $4, "
                    "incoming = $5, state = $6, updated_at = $7, version = $8, requests = $9, "
                    "control = $10 WHERE id = $1 AND version = $11 RETURNING 1",
                    *session_row[:6],
                    *session_row[7:],
                    read,
                )
            if saved is None:
                stored = await conn.fetchval("SELECT version FROM sessions WHERE id = $1", sid)
                raise version_conflict(sid, read, 0 if stored is None else int(stored))
            if rows.checkpoint is not None:
                await conn.execute(numbered(SAVE_CHECKPOINT), *rows.checkpoint)
            elif run_id is not None:
                await conn.execute(numbered(DROP_CHECKPOINT), sid, run_id)
            if rows.audit:
                # messages and events are numbered under the chain's lock: in chain order, and
                # concurrent writers (other processes) chain one after another
                await conn.execute("SELECT pg_advisory_xact_lock($1::bigint)", audit_lock)
            if rows.messages:
                await conn.executemany(numbered(INSERT_MESSAGES), rows.messages)
            if rows.events:
                await conn.executemany(numbered(INSERT_EVENTS), rows.events)
            if rows.outbox:  # notifications commit with the run, or not at all
                await conn.executemany(numbered(INSERT_OUTBOX), rows.outbox)
            if rows.audit:
                tip = await conn.fetchrow(AUDIT_TIP)
                last = (0, GENESIS) if tip is None else (int(tip[0]), str(tip[1]))
                chained = link(rows.audit, *last, self.audit_key)
                await conn.executemany(
                    numbered(INSERT_AUDIT), [records.audit_row(r) for r in chained]
                )
                if chained:  # (a hint for the next commit, checked by it: see above)
                    self._chain_tip = (chained[-1].seq, chained[-1].hash)

        def committed(_: None) -> None:
            session.version = read + 1  # with the commit: a cancelled caller still sees it

        async with self._holder().commits:
            tip: tuple[int, str] | None = self._chain_tip
            for _ in range(2):  # from the tip last seen; if it moved, from where it is now
                if tip is None:
                    break
                got = await self._commit_at_once(session, rows, run_id, tip)
                if got is True:
                    return
                tip = got
            await self._run("commit_run", write, write=True, done=committed)

    async def _commit_at_once(
        self, session: SessionRecord, rows: Any, run_id: str | None, tip: tuple[int, str]
    ) -> Literal[True] | tuple[int, str] | None:
        """`commit_run` as one statement from the chain's tip `tip` (`_postgres_commit`):
        True once committed; nothing written and the tip it found when the chain had moved,
        or None when another writer took the next seq meanwhile. `ConflictError` on a stale
        version."""
        sid, read = session.session_id, session.version
        chained = link(rows.audit, *tip, self.audit_key)
        mode = "save" if rows.checkpoint is not None else "drop" if run_id is not None else ""
        sql = one_statement(
            read == 0,
            mode,
            bool(rows.messages),
            bool(rows.events),
            bool(rows.outbox),
            bool(chained),
        )
        params: list[Any] = [*records.session_row(session), read, tip[0]]
        params.append(_lock_key("audit", self.schema))
        if mode == "save":
            params += rows.checkpoint
        elif mode == "drop":
            params += [sid, run_id]
        for wanted, width in ((rows.messages, 7), (rows.events, 7), (rows.outbox, 8)):
            if wanted:
                params += as_columns(wanted, width)
        if chained:
            params += as_columns([records.audit_row(r) for r in chained], len(AUDIT_FIELDS))

        async def write(conn: Any) -> Any:
            try:
                return await conn.fetchrow(sql, *params)
            except pgerr.UniqueViolationError:
                return None  # another writer took the chain's next seq: the locked way

        async def ran(conn: Any) -> Any:
            """After a lost connection: whether the statement committed."""
            marker = rows.messages[0][0] if rows.messages else None
            found = await conn.fetchval("SELECT version FROM sessions WHERE id = $1", sid)
            if found != read + 1:
                return None
            if marker is not None and not await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM messages WHERE id = $1)", marker
            ):
                return None
            return {"saved": True, "stored": found, "tip": chained[-1].seq if chained else tip[0]}

        def committed(got: Any) -> None:  # with the write: a cancelled caller still sees it
            if got is not None and got["saved"]:
                session.version = read + 1
                if chained:
                    self._chain_tip = (chained[-1].seq, chained[-1].hash)

        got = await self._run(
            "commit_run", write, write=True, single=True, stored=ran, done=committed
        )
        if got is None:
            self._chain_tip = None
            return None
        if not got["saved"]:
            if int(got["tip"]) != tip[0]:  # the chain moved
                self._chain_tip = (int(got["tip"]), got["tip_hash"] or GENESIS)
                return self._chain_tip
            stored = got["stored"]
            raise version_conflict(sid, read, 0 if stored is None else int(stored))
        return True

    # ------------------------------------------------------------------ audit
    async def verify_audit(self, anchor: tuple[int, str] | None = None) -> VerifyResult:
        """Verify the whole audit chain (keyed with `audit_key` if set), then that the stored
        `events` and `messages` rows are exactly the ones it records, in order.

        Reads one snapshot (a repeatable-read transaction) so that commits meanwhile do not
        show as tampering.
        """

        async def read(conn: Any) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
            async with _transaction(conn, isolation="repeatable_read", readonly=True):
                anchored = await conn.fetch(SELECT_ANCHORS)
                audit = await conn.fetch(f"SELECT {AUDIT_COLUMNS} FROM audit ORDER BY seq")
                events = await conn.fetch(f"{EVENT_ROWS} ORDER BY seq")
                messages = await conn.fetch(f"{MESSAGE_ROWS} ORDER BY seq")
            return audit, events, messages, anchored

        audit, events, messages, anchored = await self._run("verify_audit", read)
        chained = [records.audit_record(row) for row in audit]
        anchors = [anchor_of(row) for row in anchored]
        chain = verify_store(chained, anchors, anchor=anchor, key=self.audit_key)
        if not chain.ok:
            return chain
        rows = agree(
            chained,
            [EventRow(*row) for row in events],
            [MessageRow(*row) for row in messages],
            records_again=chained,
            head_seq=chain.head_seq,
            retired=retired_ids(chained),
        )
        return outcome(chain, rows)

    # ------------------------------------------------------------------ leases
    async def acquire_lease(self, key: str, owner: str, ttl_s: float) -> bool:
        """Hold `key` for `ttl_s` seconds as `owner` (renews when `owner` already holds it);
        False while another owner's lease is live. One statement, hence atomic across
        processes; expiry by the server's clock."""
        self._leases += 1
        prune = self._leases % _PRUNE_EVERY == 0

        async def acquire(conn: Any) -> bool:
            return await _lease(conn, key, owner, ttl_s, prune)

        # one statement, without BEGIN and COMMIT, except when it prunes expired leases too
        return await self._run(
            "acquire_lease", acquire, write=True, single=not prune, idempotent=True
        )

    async def release_lease(self, key: str, owner: str) -> None:
        """Give `key` up if `owner` holds it (one statement, without BEGIN and COMMIT)."""

        async def release(conn: Any) -> None:
            await conn.execute("DELETE FROM leases WHERE key = $1 AND owner = $2", key, owner)

        await self._run("release_lease", release, write=True, single=True, idempotent=True)

    async def put_checkpoint_fenced(
        self, checkpoint: Checkpoint, fence: Fence, snapshots: Sequence[KeptSnapshot] = ()
    ) -> bool:
        """Renew the run's lease and save its checkpoint, with the step's graph snapshot, in
        one statement, one round trip (`FencedCheckpoints`; several snapshots: one
        transaction). False, nothing saved, while another owner's lease is live."""
        cp = checkpoint
        row = records.checkpoint_row(self.checkpoint_keys, cp)
        texts = [kept_json(kept) for kept in snapshots]

        lease = (fence.key, fence.owner, fence.ttl_s)

        def result(got: Any) -> tuple[bool, bool, Any]:
            stored = (got["seq"], got["run_id"]) if got["run_id"] is not None else None
            return bool(got["held"]), bool(got["saved"]), stored

        async def write(conn: Any) -> tuple[bool, bool, Any]:
            if not snapshots:
                return result(await conn.fetchrow(_FENCED_CHECKPOINT, *lease, *row))
            if len(snapshots) == 1:
                s, keep = snapshots[0].snapshot, snapshots[0].keep_last
                shot = (s.thread_id, s.id, s.run_id, s.step, s.parent_id, texts[0], s.created_at)
                try:
                    return result(
                        await conn.fetchrow(_FENCED_WITH_SNAPSHOT, *lease, *row, *shot, keep)
                    )
                except pgerr.UniqueViolationError:
                    pass  # another writer took the seq meanwhile: again, under the lock
            async with conn.transaction():
                got = result(await conn.fetchrow(_FENCED_CHECKPOINT, *lease, *row))
                if got[1]:
                    for kept, text in zip(snapshots, texts, strict=True):
                        await self._save_snapshot(conn, kept.snapshot, text, kept.keep_last)
                return got

        async def ran(conn: Any) -> tuple[bool, bool, Any] | None:
            found = await conn.fetchrow(numbered(STORED_CHECKPOINT), cp.session_id)
            if found is not None and (found["seq"], found["run_id"]) == (cp.seq, cp.run_id):
                return True, True, None  # the statement ran: the lease was renewed with it
            return None

        held, saved, stored = await self._run(
            "put_checkpoint", write, write=True, single=True, stored=ran
        )
        if held and not saved:
            raise refused_checkpoint(cp, stored)
        return held

    # ------------------------------------------------------------------ human queue
    async def push_human(self, card: EscalationCard) -> int:
        """Put an escalation card in the human queue; returns its ticket id."""
        text = card.model_dump_json()
        row = (card.session_id, card.trace_id, text, float(card.created_at), time.time())

        async def push(conn: Any) -> int:
            ticket = await conn.fetchval(
                "INSERT INTO human_queue (session_id, trace_id, card, created_at, updated_at) "
                "VALUES ($1, $2, $3, $4, $5) RETURNING id",
                *row,
            )
            return int(ticket)

        return await self._run("push_human", push, write=True)

    # ------------------------------------------------------------------ blackboard
    async def write_entry(
        self, board: str, key: str, value: Any, expected_version: int, *, writer: str = ""
    ) -> BoardEntry:
        """Save `value` as JSON if the entry's stored version is `expected_version` (else
        `ConflictError`); returns the new entry.

        One transaction: it first takes the board's next seq, which locks the board's seq row
        until it commits, then compares the entry's version and writes it. Writers of one
        board thus go one at a time: of two that read one version one writes and the other
        gets `ConflictError`, and seqs never repeat.
        """
        text = board_json(board, key, value)
        new = expected_version + 1

        async def save(conn: Any) -> BoardEntry:
            seq = await conn.fetchval(f"{numbered(NEXT_BOARD_SEQ)} RETURNING seq", board)
            found = await conn.fetchval(
                "SELECT version FROM board WHERE board = $1 AND key = $2", board, key
            )
            stored = 0 if found is None else int(found)
            if stored != expected_version:
                raise board_conflict(board, key, expected_version, stored)  # rolls back
            t = time.time()
            await conn.execute(numbered(UPSERT_ENTRY), board, key, text, new, seq, writer, t)
            return BoardEntry(board, key, json.loads(text), new, int(seq), writer, t)

        return await self._run("write_entry", save, write=True)

    # ------------------------------------------------------------------ graph snapshots
    async def put_snapshot(self, snapshot: Snapshot, keep_last: int | None = None) -> Snapshot:
        """Save the snapshot with its data as JSON (a stored id is replaced and keeps its
        seq), then drop the thread's oldest beyond `keep_last`; returns the stored snapshot.

        One transaction under an advisory lock per thread: the thread's next seq is taken
        there, so two processes saving snapshots of one thread never get the same seq.
        """
        text = kept_json(KeptSnapshot(snapshot, keep_last))

        async def save(conn: Any) -> int:
            return await self._save_snapshot(conn, snapshot, text, keep_last)

        seq = await self._run("put_snapshot", save, write=True)
        return records.stored_snapshot(snapshot, text, seq)

    async def _save_snapshot(self, conn: Any, s: Snapshot, text: str, keep_last: int | None) -> int:
        """`put_snapshot`'s writes, within the caller's transaction; the snapshot's seq."""
        tid = s.thread_id
        await conn.execute(
            "SELECT pg_advisory_xact_lock($1::bigint)", _lock_key("snapshots", self.schema, tid)
        )
        seq = await conn.fetchval(numbered(SNAPSHOT_SEQ), tid, s.id)
        if seq is None:
            seq = await conn.fetchval(numbered(NEXT_SNAPSHOT_SEQ), tid)
        row = (tid, s.id, seq, s.run_id, s.step, s.parent_id, text, float(s.created_at))
        await conn.execute(numbered(UPSERT_SNAPSHOT), *row)
        if keep_last is not None:
            await conn.execute(numbered(KEEP_LAST_SNAPSHOTS), tid, tid, keep_last)
        return int(seq)

    # ------------------------------------------------------------------ retention
    async def gc(self, policy: Retention, *, dry_run: bool = False) -> GcReport:
        """Delete what `policy` does not keep (`baton.backends.retention`), each session's
        rows and its `retention` audit record in one transaction. Sizes are
        `pg_total_relation_size` of the schema's tables (VACUUM makes freed space reusable;
        VACUUM FULL gives it back to the file system)."""
        what = f"pg_total_relation_size of schema {self.schema}'s tables (with indexes, TOAST)"
        return await collect(self, policy, dry_run, self._gc_prune, Sizes(self._gc_bytes, what))

    async def _gc_bytes(self) -> int | None:
        rows = await self._query(
            "gc",
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ? "
            "AND c.relkind = 'r'",
            (self.schema,),
        )
        return int(rows[0][0])

    async def _gc_prune(self, prune: Prune, item: Unsealed | None) -> None:
        sid = prune.session_id

        async def write(conn: Any) -> None:
            for table, column, ids in (
                ("messages", "session_id", prune.messages),
                ("events", "session_id", prune.events),
                ("snapshots", "thread_id", prune.snapshots),
            ):
                if ids:
                    await conn.execute(
                        f"DELETE FROM {table} WHERE {column} = $1 AND id = ANY($2::text[])",
                        sid,
                        list(ids),
                    )
            if item is None:
                return
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1::bigint)", _lock_key("audit", self.schema)
            )
            tip = await conn.fetchrow("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")
            last = (0, GENESIS) if tip is None else (int(tip[0]), str(tip[1]))
            (r,) = link([item], *last, self.audit_key)
            await conn.execute(numbered(INSERT_AUDIT), *records.audit_row(r))

        await self._run("gc", write, write=True)

    # ------------------------------------------------------------------ audit archive
    async def archive_audit(
        self,
        to: str | Path,
        *,
        max_age_s: float | None = None,
        keep: int | None = None,
        dry_run: bool = False,
    ) -> ArchiveReport:
        """Archive the audit chain's oldest records to the new JSONL file `to`, then record
        the anchor and delete them in one transaction (`baton.backends.archive`)."""
        return await archive(
            to,
            max_age_s=max_age_s,
            keep=keep,
            dry_run=dry_run,
            key=self.audit_key,
            scan=self._archive_scan,
            trim=self._archive_trim,
            size=self._gc_bytes,
            measured=f"pg_total_relation_size of schema {self.schema}'s tables",
        )

    async def _archive_trim(self, anchor: Anchor, previous: Anchor | None) -> None:
        async def write(conn: Any) -> None:
            # under the chain's lock; the trigger checks the anchor follows the last one
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1::bigint)", _lock_key("audit", self.schema)
            )
            await conn.execute(numbered(INSERT_ANCHOR), *anchor_row(anchor))
            await conn.execute(numbered(TRIM_AUDIT), anchor.seq)

        await self._run("archive_audit", write, write=True)

    # ------------------------------------------------------------------ lifecycle
    async def close(self) -> None:
        """Close the connections (waiting up to 10 s for those in use, then terminating
        them); later calls raise `StoreError`. Closing twice is harmless."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            pools = [(loop, h.pool) for loop, h in self._pools.items() if h.pool is not None]
            self._pools = weakref.WeakKeyDictionary()
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, pool in pools:
            if loop is running:
                await _close_quietly(pool)
            elif not loop.is_closed():
                with suppress(RuntimeError):  # the loop closed meanwhile
                    asyncio.run_coroutine_threadsafe(_close_quietly(pool), loop)
            else:
                with suppress(Exception):
                    pool.terminate()

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r}, schema={self.schema!r})"


async def _close_quietly(pool: Any) -> None:
    """Close a pool from its own loop (for `close` called from another one)."""
    try:
        await asyncio.wait_for(pool.close(), _CLOSE_TIMEOUT_S)
    except Exception:
        with suppress(Exception):
            pool.terminate()
