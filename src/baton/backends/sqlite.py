"""`SQLiteStore`: sessions, transcripts, events, checkpoints, leases, the human queue,
the tasks of plan-execute-review runs, blackboards and graph snapshots in one SQLite file.

Open it with a URL: `sqlite:///relative/path.db` (relative to the working directory),
`sqlite:////absolute/path.db`, or `sqlite:///:memory:` (a private in-memory database).
Several processes may share one file: WAL lets readers run while one writer commits, the
busy timeout makes writers wait for each other, commits compare and set the session's version
under the write lock, lease, checkpoint and task writes are single atomic
statements, and a blackboard write compares and sets its entry's version and takes the
board's next seq in one transaction.
The sqlite3 calls run in one worker thread per store, so a writer waiting for the lock never
freezes the event loop.

`SQLiteStore(url, read_only=True)` opens an existing file for reading only (to verify the
audit chain of an evidence copy): nothing is migrated or written, not even the WAL setting.

`SQLiteStore(url, checkpoint_keys=...)` (else `$BATON_CHECKPOINT_KEY`) encrypts the state of
every checkpoint it saves (`baton.backends.sealing`).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Generic, TypeVar

from baton.backends import _records as records
from baton.backends._conflicts import (
    board_conflict,
    board_json,
    refused_checkpoint,
    version_conflict,
)
from baton.backends._records import AUDIT_COLUMNS, SESSION_COLUMNS, commit_rows
from baton.backends._snapshots import check_keep_last, kept_json, snapshot_json
from baton.backends._sql import (
    AUDIT_TIP,
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
    PUT_CHECKPOINT,
    SAVE_CHECKPOINT,
    SELECT_ANCHORS,
    SNAPSHOT_SEQ,
    STORED_CHECKPOINT,
    TRIM_AUDIT,
    UPSERT_ENTRY,
    UPSERT_SNAPSHOT,
    SQLStore,
)
from baton.backends._sqlite_outbox import OUTBOX_TABLE, SQLiteOutbox
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
    AuditRecord,
    EventRow,
    MessageRow,
    Unsealed,
    VerifyResult,
    agree,
    link,
    message_digest,
    messages_only,
    outcome,
    record_body,
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

SCHEMA_VERSION = 12
"""Version of the table layout, kept in `PRAGMA user_version`."""

_MEMORY = ":memory:"
_PREFIX = "sqlite:///"
_PRUNE_EVERY = 256
"""Expired leases are deleted once every this many acquisitions."""

_AUDIT_PAGE = 1000
"""Audit records read per query while verifying."""

_AUDIT_COLUMNS_V2 = AUDIT_COLUMNS.replace("messages", "'' AS messages")
"""The audit columns of a store (read only) from before messages were audited (schema 2, 3)."""

_MIGRATION_KEY: ContextVar[bytes | None] = ContextVar("_MIGRATION_KEY", default=None)
"""The audit key of the store being migrated (the records a migration appends are keyed)."""

Migration = str | Callable[[sqlite3.Connection], None]
"""One migration step: an SQL statement, or a function run on the connection."""

# Steps that take a database from version `v - 1` to version `v`, keyed by `v`.
# Later releases append entries here; never edit a released one.
_MIGRATIONS: dict[int, tuple[Migration, ...]] = {
    1: (
        """CREATE TABLE IF NOT EXISTS sessions (
            id TEXT PRIMARY KEY,
            user_id TEXT,
            holder TEXT,
            holder_since TEXT,
            incoming TEXT,
            state TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS sessions_updated ON sessions (updated_at)",
        """CREATE TABLE IF NOT EXISTS messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            session_id TEXT NOT NULL,
            run_id TEXT,
            role TEXT NOT NULL,
            agent TEXT,
            data TEXT NOT NULL,
            ts REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS messages_session ON messages (session_id, seq)",
        """CREATE TABLE IF NOT EXISTS events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            trace_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            type TEXT NOT NULL,
            data TEXT NOT NULL,
            ts REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS events_session ON events (session_id, seq)",
        "CREATE INDEX IF NOT EXISTS events_trace ON events (trace_id, seq)",
        """CREATE TABLE IF NOT EXISTS human_queue (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            trace_id TEXT NOT NULL,
            card TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'open',
            created_at REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS human_queue_status ON human_queue (status, id)",
        """CREATE TABLE IF NOT EXISTS locks (
            key TEXT PRIMARY KEY,
            expires_at REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS locks_expiry ON locks (expires_at)",
    ),
    2: (
        # The hash-chained audit trail (see `baton.backends.audit`); seq is the chain position.
        """CREATE TABLE IF NOT EXISTS audit (
            seq INTEGER PRIMARY KEY,
            event_id TEXT NOT NULL,
            type TEXT NOT NULL,
            session_id TEXT NOT NULL,
            trace_id TEXT NOT NULL,
            ts REAL NOT NULL,
            data TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS audit_session ON audit (session_id, seq)",
        """CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END""",
        """CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END""",
        lambda conn: _backfill_audit(conn),  # defined below
    ),
    3: (
        # Resumable runs: versioned sessions (compare-and-set commits), the checkpoint of each
        # unfinished run, leases (one runner per session), and answers in the human queue.
        "ALTER TABLE sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 0",
        """CREATE TABLE IF NOT EXISTS checkpoints (
            session_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            status TEXT NOT NULL,
            data TEXT NOT NULL,
            meta TEXT NOT NULL,
            updated_at REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS checkpoints_status ON checkpoints (status, updated_at)",
        """CREATE TABLE IF NOT EXISTS leases (
            key TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            expires_at REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS leases_expiry ON leases (expires_at)",
        "ALTER TABLE human_queue ADD COLUMN claimed_by TEXT",
        "ALTER TABLE human_queue ADD COLUMN answer TEXT",
        "ALTER TABLE human_queue ADD COLUMN note TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE human_queue ADD COLUMN updated_at REAL NOT NULL DEFAULT 0",
        "UPDATE human_queue SET updated_at = created_at",
    ),
    4: (
        # The audit chain covers messages: a record carries the digests of the messages
        # committed with it; the messages already stored are chained at the end, as they are
        # now (nothing vouches for them before this migration).
        "ALTER TABLE audit ADD COLUMN messages TEXT NOT NULL DEFAULT ''",
        lambda conn: _backfill_message_audit(conn),  # defined below
    ),
    5: (
        # Tasks of plan-execute-review runs: one row per (run, task id), the task as JSON,
        # saved compare-and-set on its version; status is a column so listings filter on it.
        """CREATE TABLE IF NOT EXISTS tasks (
            run_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            status TEXT NOT NULL,
            version INTEGER NOT NULL,
            data TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (run_id, task_id)
        )""",
        "CREATE INDEX IF NOT EXISTS tasks_session ON tasks (session_id)",
        "CREATE INDEX IF NOT EXISTS tasks_status ON tasks (status)",
    ),
    6: (
        # Blackboards: one row per (board, key), the value as JSON, written compare-and-set on
        # its version; seq is the board-wide number of the write that left the row as it is.
        # board_seqs keeps each board's last seq, also once its entries are deleted, so that
        # a reader's since_seq stays valid when the board is written again.
        """CREATE TABLE IF NOT EXISTS board (
            board TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            version INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            writer TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (board, key)
        )""",
        "CREATE INDEX IF NOT EXISTS board_changes ON board (board, seq)",
        """CREATE TABLE IF NOT EXISTS board_seqs (
            board TEXT PRIMARY KEY,
            seq INTEGER NOT NULL
        )""",
    ),
    7: (
        # Graph snapshots: one row per (thread, snapshot id), the data as JSON; seq numbers a
        # thread's snapshots in the order first saved (a replaced row keeps it), which is the
        # order listings and retention (keep_last) go by.
        """CREATE TABLE IF NOT EXISTS snapshots (
            thread_id TEXT NOT NULL,
            id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            run_id TEXT NOT NULL,
            step INTEGER NOT NULL,
            parent_id TEXT,
            data TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (thread_id, id)
        )""",
        "CREATE UNIQUE INDEX IF NOT EXISTS snapshots_seq ON snapshots (thread_id, seq)",
    ),
    8: (
        # The requests a session's runs answered (request id -> run id, as JSON), committed
        # with the run: a request delivered twice (a bus redelivery) runs once.
        "ALTER TABLE sessions ADD COLUMN requests TEXT NOT NULL DEFAULT '{}'",
    ),
    9: (
        # The kernel's control slots (pending needs, slot provenance), as JSON, apart from the
        # business slots in `state` that hand-offs and tools write.
        "ALTER TABLE sessions ADD COLUMN control TEXT NOT NULL DEFAULT '{}'",
    ),
    10: (
        # Nothing claims locks through the store (the kernel keeps a run's duplicate
        # hand-off locks in the run): the table goes, its index with it.
        "DROP TABLE IF EXISTS locks",
    ),
    11: (
        # Archive and trim of the audit chain (`baton.backends.archive`): one sealed anchor
        # per archive, append-only; an anchor must follow the last one and name a stored
        # record by its hash. The audit table then lets go of the records at or below the
        # last anchor, and of nothing else.
        """CREATE TABLE IF NOT EXISTS audit_anchor (
            first_seq INTEGER NOT NULL,
            seq INTEGER PRIMARY KEY,
            hash TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            archived_at REAL NOT NULL,
            prev_seal TEXT NOT NULL,
            seal TEXT NOT NULL
        )""",
        """CREATE TRIGGER IF NOT EXISTS audit_anchor_no_update BEFORE UPDATE ON audit_anchor
        BEGIN SELECT RAISE(ABORT, 'audit anchors are append-only'); END""",
        """CREATE TRIGGER IF NOT EXISTS audit_anchor_no_delete BEFORE DELETE ON audit_anchor
        BEGIN SELECT RAISE(ABORT, 'audit anchors are append-only'); END""",
        f"""CREATE TRIGGER IF NOT EXISTS audit_anchor_follows BEFORE INSERT ON audit_anchor
        WHEN NEW.first_seq != COALESCE((SELECT MAX(seq) FROM audit_anchor), 0) + 1
            OR NEW.seq < NEW.first_seq
            OR NEW.prev_seal != COALESCE(
                (SELECT seal FROM audit_anchor ORDER BY seq DESC LIMIT 1), '{GENESIS}')
            OR NOT EXISTS (SELECT 1 FROM audit WHERE seq = NEW.seq AND hash = NEW.hash)
        BEGIN SELECT RAISE(ABORT, 'an audit anchor must follow the last one and name a stored
            audit record by its hash'); END""",
        "DROP TRIGGER IF EXISTS audit_no_delete",
        """CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
        WHEN OLD.seq > COALESCE((SELECT MAX(seq) FROM audit_anchor), 0)
        BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END""",
    ),
    12: (
        # The outbox (`baton.backends.outbox`): notifiable events written with the run's
        # commit, and their delivery state.
        OUTBOX_TABLE,
        "CREATE INDEX IF NOT EXISTS outbox_due ON outbox (status, next_at)",
        "CREATE INDEX IF NOT EXISTS outbox_rate ON outbox (kind, key, ts)",
    ),
}

_SESSION_COLUMNS_V8 = SESSION_COLUMNS.replace("control", "'{}' AS control")
"""The session columns of a store (read only) from before control slots were kept (8)."""
_SESSION_COLUMNS_V7 = _SESSION_COLUMNS_V8.replace("requests,", "'{}' AS requests,")
"""The session columns of a store (read only) from before requests were kept (schema < 8)."""


def _audit_tip(conn: sqlite3.Connection) -> tuple[int, str]:
    """(seq, hash) of the last audit record, or (0, GENESIS) for an empty chain."""
    row = conn.execute(AUDIT_TIP).fetchone()
    return (0, GENESIS) if row is None else (int(row[0]), str(row[1]))


def _insert_audit(conn: sqlite3.Connection, chained: Sequence[AuditRecord]) -> None:
    conn.executemany(
        "INSERT INTO audit (seq, event_id, type, session_id, trace_id, ts, data, prev_hash, "
        "hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                r.seq,
                r.event_id,
                r.type,
                r.session_id,
                r.trace_id,
                r.ts,
                r.data,
                r.prev_hash,
                r.hash,
            )
            for r in chained
        ],
    )


def _backfill_audit(conn: sqlite3.Connection) -> None:
    """Chain the events a version-1 database already holds, in the order they were stored."""
    seq, prev = _audit_tip(conn)
    after = 0
    while True:
        rows = conn.execute(
            "SELECT seq, id, type, session_id, trace_id, ts, data FROM events WHERE seq > ? "
            "ORDER BY seq LIMIT ?",
            (after, _AUDIT_PAGE),
        ).fetchall()
        if not rows:
            return
        items = [
            Unsealed(eid, kind, sid, tid, ts, data, record_body(eid, kind, sid, tid, ts, data))
            for _, eid, kind, sid, tid, ts, data in rows
        ]
        chained = link(items, seq, prev)
        _insert_audit(conn, chained)
        seq, prev, after = chained[-1].seq, chained[-1].hash, rows[-1][0]


def _append_audit(conn: sqlite3.Connection, chained: Sequence[AuditRecord]) -> None:
    """Insert chained records (schema 4: with the digests of their messages)."""
    conn.executemany(INSERT_AUDIT, [records.audit_row(r) for r in chained])


def _pages(conn: sqlite3.Connection, select: str) -> Iterator[tuple[Any, ...]]:
    """The rows of `select` (seq first) in seq order, read page by page."""
    sql = f"{select} WHERE seq > ? ORDER BY seq LIMIT ?"
    after = 0
    while True:
        rows = conn.execute(sql, (after, _AUDIT_PAGE)).fetchall()
        if not rows:
            return
        yield from rows
        after = rows[-1][0]


def _backfill_message_audit(conn: sqlite3.Connection) -> None:
    """Chain the messages a schema-3 database already holds, in the order they were stored:
    one record of type `messages` per page of them, after the chain's tip."""
    seq, prev = _audit_tip(conn)
    key = _MIGRATION_KEY.get()
    after = 0
    while True:
        rows = conn.execute(
            "SELECT seq, id, session_id, run_id, role, agent, ts, data FROM messages "
            "WHERE seq > ? ORDER BY seq LIMIT ?",
            (after, _AUDIT_PAGE),
        ).fetchall()
        if not rows:
            return
        entries = [
            (mid, message_digest(mid, sid, run, role, agent, ts, data))
            for _, mid, sid, run, role, agent, ts, data in rows
        ]
        item = messages_only(entries, note="stored before messages were audited")
        chained = link([item], seq, prev, key)
        _append_audit(conn, chained)
        seq, prev, after = chained[-1].seq, chained[-1].hash, rows[-1][0]


T = TypeVar("T")


class _Call(Generic[T]):
    """One piece of work for a store's worker thread, and its outcome for the awaiting loop."""

    __slots__ = ("error", "finished", "loop", "result", "waiter", "work")

    result: T

    def __init__(self, loop: asyncio.AbstractEventLoop, work: Callable[[], T]) -> None:
        self.loop = loop
        self.work = work
        self.waiter: asyncio.Future[None] = loop.create_future()
        self.finished = False
        self.error: BaseException | None = None

    def run(self) -> None:
        """In the worker thread: do the work, then wake the awaiting coroutine."""
        try:
            self.result = self.work()
        except BaseException as exc:  # handed to the awaiting coroutine, which raises it
            self.error = exc
        self.finished = True
        # a closed loop (RuntimeError) has nobody left waiting for the outcome
        with suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        if not self.waiter.done():
            self.waiter.set_result(None)

    async def outcome(self) -> T:
        """The work's result (or error) once it has ended.

        A cancellation does not cut the wait short: the work runs on in the thread whatever
        the loop does, so the caller learns how it ended (a transaction committed or rolled
        back whole) before the cancellation goes on.
        """
        cancelled: asyncio.CancelledError | None = None
        while not self.finished:
            try:
                await self.waiter
            except asyncio.CancelledError as exc:
                cancelled = exc
                if not self.finished:  # the cancellation cancelled the waiter: wait anew
                    self.waiter = self.loop.create_future()
        if cancelled is not None:
            raise cancelled
        error, self.error = self.error, None  # no reference cycle through the traceback
        if error is not None:
            raise error
        return self.result


def parse_sqlite_url(url: str) -> str:
    """The database path of a `sqlite:///...` URL: absolute, or ':memory:'."""
    if not isinstance(url, str) or not url.startswith(_PREFIX):
        raise ConfigError(
            f"bad SQLite URL {url!r}: use 'sqlite:///relative/path.db', "
            "'sqlite:////absolute/path.db' or 'sqlite:///:memory:'"
        )
    raw = url[len(_PREFIX) :]
    if raw == _MEMORY:
        return _MEMORY
    if not raw or raw.endswith(("/", "\\")):
        raise ConfigError(
            f"SQLite URL {url!r} names no file: add a file name, e.g. 'sqlite:///.baton/baton.db'"
        )
    return str(Path(raw).expanduser().resolve())


class SQLiteStore(SQLStore, SQLiteOutbox):
    """A `Store` in a SQLite file (WAL mode); several processes may share the file.

    `shared` is True: runs in other processes may reach the same sessions, so they hold a
    lease per session (a private `sqlite:///:memory:` database is not shared, and says so).
    """

    shared = True

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_s: float = 5.0,
        read_only: bool = False,
        audit_key: str | bytes | None = None,
        checkpoint_keys: CheckpointKeyProvider | str | None = None,
    ) -> None:
        self.url = url
        self.path = parse_sqlite_url(url)
        """Absolute path of the database file, or ':memory:'."""
        self.busy_timeout_s = busy_timeout_s
        """How long a write waits for another connection's write lock before failing."""
        self.shared = self.path != _MEMORY
        """Whether other processes reach this data: True for a file, False for ':memory:'."""
        self.read_only = read_only
        """Opened for reading only: no migration, no write (an evidence copy may be 0444)."""
        self.audit_key = resolve_key(audit_key)
        """HMAC key of the audit chain (`audit_key`, else `$BATON_AUDIT_KEY`), or None."""
        self.checkpoint_keys = resolve_keys(checkpoint_keys)
        """Keys that seal checkpoint state (`checkpoint_keys`, else `$BATON_CHECKPOINT_KEY`),
        or None: checkpoints are then stored in clear (the kernel masks their secrets)."""
        self.seals_checkpoints = self.checkpoint_keys is not None
        """Every checkpoint saved is encrypted (`baton.backends.sealing.SealedCheckpoints`)."""
        self._mutex = threading.Lock()
        """Held around every use of the connection, whichever thread uses it."""
        self._pool_mutex = threading.Lock()
        """Held while work is queued, so that nothing is queued behind `close`."""
        self._pool: ThreadPoolExecutor | None = None
        """The worker thread, started by the first call that needs it."""
        self._closed = False
        self._leases = 0
        self._schema = SCHEMA_VERSION
        self._audit_select = AUDIT_COLUMNS
        """The audit columns to select (a read-only file of schema 2 or 3 has no messages)."""
        self._conn: sqlite3.Connection | None = (
            self._open_read_only() if read_only else self._open()
        )
        try:
            self._setup()
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    def _open(self) -> sqlite3.Connection:
        if self.path != _MEMORY:
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the directory for the SQLite store {self.path}: {exc}; "
                    "check the path in the store URL and the directory permissions"
                ) from exc
        # One connection per store, used by the store's one worker thread (`_run`), not on the
        # event loop: a write waits up to `busy_timeout_s` while another connection holds the
        # write lock, and that wait must not freeze every coroutine of the process. The hop to
        # the thread and back costs microseconds, nothing against a model call. The thread
        # runs the calls one at a time in the order they came, each transaction within one
        # call, so coroutines sharing the store cannot interleave their writes; the mutex
        # guards the connection against the opening thread and other threads too (hence
        # check_same_thread=False).
        with self._errors("open"):
            return sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_s,
                isolation_level=None,  # autocommit; transactions are explicit BEGIN/COMMIT
                check_same_thread=False,
            )

    def _open_read_only(self) -> sqlite3.Connection:
        """A read-only connection that creates and changes nothing beside the file either.

        Without a `-wal` file next to it (nobody has the store open, or an evidence copy) the
        file is opened immutable: SQLite then creates no `-wal`/`-shm` files and takes no
        locks, so a file in a read-only directory opens too. With one, the file is opened
        `mode=ro` so that commits still in the WAL are read.
        """
        if self.path == _MEMORY:
            raise StoreError("a read-only SQLite store needs a file, not ':memory:'")
        path = Path(self.path)
        if not path.is_file():
            raise StoreError(f"no SQLite store at {path}: the file does not exist")
        live = Path(f"{self.path}-wal").exists()
        uri = f"{path.as_uri()}?mode=ro{'' if live else '&immutable=1'}"
        with self._errors("open"):
            return sqlite3.connect(
                uri,
                uri=True,
                timeout=self.busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )

    # ------------------------------------------------------------------ plumbing
    def _setup(self) -> None:
        conn = self._db()
        if self.read_only:
            self._setup_read_only(conn)
            return
        with self._errors("open"):
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            if self._schema_version(conn) < SCHEMA_VERSION:
                with self._transaction(conn):
                    # re-read under the write lock: another process may have migrated meanwhile
                    found = self._schema_version(conn)
                    token = _MIGRATION_KEY.set(self.audit_key)
                    try:
                        for version in range(found + 1, SCHEMA_VERSION + 1):
                            for step in _MIGRATIONS[version]:
                                if isinstance(step, str):
                                    conn.execute(step)
                                else:
                                    step(conn)
                    finally:
                        _MIGRATION_KEY.reset(token)
                    if found < SCHEMA_VERSION:
                        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _setup_read_only(self, conn: sqlite3.Connection) -> None:
        """Check that the file is a Baton store, and note what its schema holds; no writes."""
        with self._errors("open"):
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            found = self._schema_version(conn)
            tables = {
                str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            if found == 0 or "events" not in tables:
                if Path(self.path).stat().st_size == 0:
                    what = "the file is empty (0 bytes)"
                elif not tables:
                    what = (
                        "it holds no tables (a copy of a store in use needs its -wal file "
                        "beside it, or copy the store after it is closed)"
                    )
                else:
                    what = "it holds no Baton tables (schema version 0)"
                raise StoreError(
                    f"{self.path} is not a Baton store: {what}; pass the URL of a store "
                    "that `baton run` wrote (nothing was written to the file)"
                )
            self._schema = found
            self._lacking = frozenset(
                {"tasks", "board", "snapshots", "audit_anchor", "outbox"} - tables
            )
            if "audit" in tables:
                columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(audit)")}
                if "messages" not in columns:
                    self._audit_select = _AUDIT_COLUMNS_V2

    def _audited(self, action: str) -> bool:
        """Whether the store has an audit table (raises if not); True when its records carry
        message digests (schema 4 and later)."""
        if self._schema < 2:
            raise StoreError(
                f"SQLite store {self.path}: {action}: schema version {self._schema} predates "
                "the audit chain; open the store read-write once (on a copy) to chain its events"
            )
        return self._audit_select == AUDIT_COLUMNS

    def _schema_version(self, conn: sqlite3.Connection) -> int:
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if found > SCHEMA_VERSION:
            raise StoreError(
                f"the SQLite store {self.path} has schema version {found}, newer than this "
                f"Baton understands ({SCHEMA_VERSION}); upgrade Baton or use another file"
            )
        return found

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise self._closed_error()
        return self._conn

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        # IMMEDIATE takes the write lock up front, so two writers wait on the busy timeout
        # instead of failing when a read lock would have to be upgraded.
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may already have rolled back (disk full, ...)
                conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Turn sqlite3 errors into `StoreError`s that say what to do."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(self._explain(action, exc)) from exc

    def _explain(self, action: str, exc: sqlite3.Error) -> str:
        text = str(exc)
        low = text.lower()
        where = f"SQLite store {self.path}: {action} failed ({text})"
        if "locked" in low or "busy" in low:
            return (
                f"{where}: another connection held the write lock for more than "
                f"{self.busy_timeout_s:g}s; retry, or raise busy_timeout_s"
            )
        if "not a database" in low or "malformed" in low or "corrupt" in low:
            return (
                f"{where}: the file is not a readable SQLite database; restore a backup or "
                "delete the file (its sessions and history will be lost)"
            )
        if self.read_only and ("readonly" in low or "read-only" in low):
            return f"{where}: the store was opened read-only (read_only=True)"
        if "unable to open" in low or "readonly" in low or "read-only" in low:
            return (
                f"{where}: check that the path names a file (not a directory) and that this "
                "process may read and write it and its directory"
            )
        if isinstance(exc, sqlite3.IntegrityError):
            return f"{where}: a row with the same id is already stored; do not commit it twice"
        return f"{where}; check the file, or delete it to start afresh"

    def _corrupt(self, table: str, key: object, exc: Exception) -> StoreError:
        return StoreError(
            f"SQLite store {self.path}: row {key!r} of table {table!r} cannot be read ({exc}); "
            "the file is damaged or was written by an incompatible Baton version; restore a "
            "backup or delete the file"
        )

    def _closed_error(self) -> StoreError:
        return StoreError(f"the SQLite store {self.path} is closed; open a new SQLiteStore")

    async def _run(self, action: str, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(connection)` in the store's worker thread, under the mutex, with sqlite3
        errors turned into `StoreError`s; the event loop goes on meanwhile.

        Calls run one at a time, in the order they were made, from any thread or event loop.
        A cancelled caller still waits for `work` to end (`_Call.outcome`): when the
        cancellation reaches the caller's caller, a commit is stored whole or not at all, and
        a committed `SessionRecord` has its new version.
        """

        def locked() -> T:
            with self._mutex, self._errors(action):
                return work(self._db())

        call = _Call(asyncio.get_running_loop(), locked)
        with self._pool_mutex:
            if self._closed:
                raise self._closed_error()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="baton-sqlite")
            self._pool.submit(call.run)
        return await call.outcome()

    async def _query(self, action: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one statement."""
        return await self._run(action, lambda conn: conn.execute(sql, params).fetchall())

    async def _change(
        self,
        action: str,
        sql: str,
        params: Sequence[Any] = (),
        done: Callable[[int], None] | None = None,
    ) -> int:
        """Run one write statement; the number of rows it changed (`done` is called with it
        in the thread, with the write, so that a caller cancelled meanwhile still sees it)."""

        def write(conn: sqlite3.Connection) -> int:
            changed = conn.execute(sql, params).rowcount
            if done is not None:
                done(changed)
            return changed

        return await self._run(action, write)

    def _session_columns(self) -> str:
        """The session columns to select (a read-only file of an older schema has no
        requests or control column)."""
        if self._schema >= 9:
            return SESSION_COLUMNS
        return _SESSION_COLUMNS_V8 if self._schema == 8 else _SESSION_COLUMNS_V7

    def _predates(self, table: str, action: str) -> StoreError:
        what = {
            "tasks": "tasks",
            "board": "blackboards",
            "snapshots": "graph snapshots",
            "outbox": "the outbox",
        }[table]
        return StoreError(
            f"SQLite store {self.path}: {action}: schema version {self._schema} predates "
            f"{what} and the store was opened read-only; open it read-write once (on a copy) "
            "to add them"
        )

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
        """Save the session, append messages and events, and save `checkpoint` (or delete
        `run_id`'s checkpoint), in one transaction.

        Compare-and-set: raises `ConflictError` (nothing written) unless the stored version
        equals `session.version` (0 for a session not stored yet); on success
        `session.version` is incremented in place. The version is read and written under the
        write lock, so two processes committing from the same version cannot both succeed.
        The first commit of a session sets its `created_at`; later ones keep it.
        """
        sid, read = session.session_id, session.version
        session_row = records.session_row(session)
        rows = commit_rows(session, messages, events, self.checkpoint_keys, checkpoint)

        def write(conn: sqlite3.Connection) -> None:
            with self._transaction(conn):
                row = conn.execute("SELECT version FROM sessions WHERE id = ?", (sid,)).fetchone()
                stored = 0 if row is None else int(row[0])
                if stored != read:
                    raise version_conflict(sid, read, stored)  # rolls the transaction back
                conn.execute(
                    f"INSERT INTO sessions ({SESSION_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, "
                    "holder = excluded.holder, holder_since = excluded.holder_since, "
                    "incoming = excluded.incoming, state = excluded.state, "
                    "updated_at = excluded.updated_at, version = excluded.version, "
                    "requests = excluded.requests, control = excluded.control",
                    session_row,
                )
                if rows.checkpoint is not None:
                    conn.execute(SAVE_CHECKPOINT, rows.checkpoint)
                elif run_id is not None:
                    conn.execute(DROP_CHECKPOINT, (sid, run_id))
                conn.executemany(INSERT_MESSAGES, rows.messages)
                conn.executemany(INSERT_EVENTS, rows.events)
                if rows.outbox:  # notifications commit with the run, or not at all
                    conn.executemany(INSERT_OUTBOX, rows.outbox)
                if rows.audit:
                    # linked under the write lock: concurrent writers chain one after another
                    _append_audit(conn, link(rows.audit, *_audit_tip(conn), self.audit_key))
            # set with the commit, in the thread: a caller cancelled meanwhile still sees it
            session.version = read + 1

        await self._run("commit_run", write)

    # ------------------------------------------------------------------ audit
    def _audit_columns(self, action: str) -> str:
        self._audited(action)
        return self._audit_select

    async def verify_audit(self, anchor: tuple[int, str] | None = None) -> VerifyResult:
        """Verify the whole audit chain (keyed with `audit_key` if set), then that the stored
        `events` and `messages` rows are exactly the ones it records, in order.

        Reads one snapshot (a read transaction) so that commits meanwhile do not show as
        tampering. `messages` is None in the result for a store opened read-only whose schema
        predates message auditing (its messages were not checked).
        """
        covered = self._audited("verify_audit")

        def check(conn: sqlite3.Connection) -> tuple[VerifyResult, VerifyResult | None]:
            conn.execute("BEGIN")
            try:
                anchors = (
                    []
                    if "audit_anchor" in self._lacking
                    else [anchor_of(row) for row in conn.execute(SELECT_ANCHORS)]
                )
                chain = verify_store(
                    self._audit_pages(conn), anchors, anchor=anchor, key=self.audit_key
                )
                if not chain.ok:
                    return chain, None
                return chain, agree(
                    self._audit_pages(conn),
                    (EventRow(*row) for row in _pages(conn, EVENT_ROWS)),
                    (MessageRow(*row) for row in _pages(conn, MESSAGE_ROWS)) if covered else None,
                    records_again=self._audit_pages(conn),
                    head_seq=chain.head_seq,
                    retired=retired_ids(self._audit_pages(conn)),
                )
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")

        return outcome(*await self._run("verify_audit", check))

    def _audit_pages(self, conn: sqlite3.Connection) -> Iterator[AuditRecord]:
        rows = _pages(conn, f"SELECT {self._audit_select} FROM audit")
        return map(records.audit_record, rows)

    # ------------------------------------------------------------------ leases
    async def acquire_lease(self, key: str, owner: str, ttl_s: float) -> bool:
        """Hold `key` for `ttl_s` seconds as `owner` (renews when `owner` already holds it);
        False while another owner's lease is live.

        One statement, hence atomic across processes; expiry uses wall-clock time because
        other processes sharing the file must agree on it.
        """

        def acquire(conn: sqlite3.Connection) -> bool:
            return self._lease(conn, key, owner, ttl_s)

        return await self._run("acquire_lease", acquire)

    def _lease(self, conn: sqlite3.Connection, key: str, owner: str, ttl_s: float) -> bool:
        t = time.time()
        cur = conn.execute(
            "INSERT INTO leases (key, owner, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, "
            "expires_at = excluded.expires_at "
            "WHERE leases.expires_at <= ? OR leases.owner = excluded.owner",
            (key, owner, t + ttl_s, t),
        )
        acquired = cur.rowcount == 1
        self._leases += 1
        if self._leases % _PRUNE_EVERY == 0:
            conn.execute("DELETE FROM leases WHERE expires_at <= ?", (t,))
        return acquired

    async def put_checkpoint_fenced(
        self, checkpoint: Checkpoint, fence: Fence, snapshots: Sequence[KeptSnapshot] = ()
    ) -> bool:
        """Renew the run's lease, save its checkpoint and the step's graph snapshots in one
        transaction, in one trip to the store's thread (`FencedCheckpoints`); False, nothing
        saved, while another owner's lease is live."""
        cp = checkpoint
        row = records.checkpoint_row(self.checkpoint_keys, cp)
        if snapshots:
            self._needs("snapshots", "put_checkpoint_fenced")
        texts = [kept_json(kept) for kept in snapshots]

        def write(conn: sqlite3.Connection) -> tuple[bool, bool, Any]:
            with self._transaction(conn):
                if not self._lease(conn, fence.key, fence.owner, fence.ttl_s):
                    return False, False, None
                if not conn.execute(PUT_CHECKPOINT, row).rowcount:
                    stored = conn.execute(STORED_CHECKPOINT, (cp.session_id,)).fetchone()
                    return True, False, stored  # (the lease renewal commits alone)
                for kept, text in zip(snapshots, texts, strict=True):
                    _save_snapshot(conn, kept.snapshot, text, kept.keep_last)
                return True, True, None

        held, saved, stored = await self._run("put_checkpoint", write)
        if held and not saved:
            raise refused_checkpoint(cp, stored)
        return held

    # ------------------------------------------------------------------ human queue
    async def push_human(self, card: EscalationCard) -> int:
        """Put an escalation card in the human queue; returns its ticket id."""
        text = card.model_dump_json()

        def push(conn: sqlite3.Connection) -> int | None:
            cur = conn.execute(
                "INSERT INTO human_queue (session_id, trace_id, card, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (card.session_id, card.trace_id, text, card.created_at, time.time()),
            )
            return cur.lastrowid

        ticket = await self._run("push_human", push)
        if ticket is None:  # pragma: no cover - sqlite3 always sets it after an INSERT
            raise StoreError(f"SQLite store {self.path}: push_human got no ticket id")
        return ticket

    # ------------------------------------------------------------------ blackboard
    async def write_entry(
        self, board: str, key: str, value: Any, expected_version: int, *, writer: str = ""
    ) -> BoardEntry:
        """Save `value` as JSON if the entry's stored version is `expected_version` (else
        `ConflictError`); returns the new entry.

        One transaction under the write lock: the version is compared and the board's next
        seq taken there, so of two processes that read one version one writes and the other
        gets `ConflictError`, and seqs never repeat.
        """
        self._needs("board", "write_entry")
        text = board_json(board, key, value)
        new = expected_version + 1

        def save(conn: sqlite3.Connection) -> BoardEntry:
            with self._transaction(conn):
                row = conn.execute(
                    "SELECT version FROM board WHERE board = ? AND key = ?", (board, key)
                ).fetchone()
                stored = 0 if row is None else int(row[0])
                if stored != expected_version:
                    raise board_conflict(board, key, expected_version, stored)  # rolls back
                conn.execute(NEXT_BOARD_SEQ, (board,))
                [seq] = conn.execute(
                    "SELECT seq FROM board_seqs WHERE board = ?", (board,)
                ).fetchone()
                t = time.time()
                conn.execute(UPSERT_ENTRY, (board, key, text, new, seq, writer, t))
            return BoardEntry(board, key, json.loads(text), new, int(seq), writer, t)

        return await self._run("write_entry", save)

    # ------------------------------------------------------------------ graph snapshots
    async def put_snapshot(self, snapshot: Snapshot, keep_last: int | None = None) -> Snapshot:
        """Save the snapshot with its data as JSON (a stored id is replaced and keeps its
        seq), then drop the thread's oldest beyond `keep_last`; returns the stored snapshot.

        One transaction under the write lock: the thread's next seq is taken there, so two
        processes saving snapshots of one thread never get the same seq.
        """
        check_keep_last(keep_last)
        text = snapshot_json(snapshot)
        self._needs("snapshots", "put_snapshot")
        s = snapshot

        def save(conn: sqlite3.Connection) -> int:
            with self._transaction(conn):
                return _save_snapshot(conn, s, text, keep_last)

        return records.stored_snapshot(s, text, await self._run("put_snapshot", save))

    # ------------------------------------------------------------------ retention
    async def gc(self, policy: Retention, *, dry_run: bool = False) -> GcReport:
        """Delete what `policy` does not keep (`baton.backends.retention`), each session's
        rows and its `retention` audit record in one transaction. Sizes are the pages in use
        (VACUUM gives the freed ones back to the file system)."""
        sizes = Sizes(self._gc_bytes, "SQLite pages in use (page_count - freelist) x page_size")
        return await collect(self, policy, dry_run, self._gc_prune, sizes)

    async def _gc_bytes(self) -> int | None:
        sql = "SELECT (page_count - freelist_count) * page_size FROM pragma_page_count(), "
        rows = await self._query("gc", sql + "pragma_freelist_count(), pragma_page_size()")
        return int(rows[0][0])

    async def _gc_prune(self, prune: Prune, item: Unsealed | None) -> None:
        def write(conn: sqlite3.Connection) -> None:
            sid = prune.session_id
            with self._transaction(conn):
                for table, column, ids in (
                    ("messages", "session_id", prune.messages),
                    ("events", "session_id", prune.events),
                    ("snapshots", "thread_id", prune.snapshots),
                ):
                    conn.executemany(
                        f"DELETE FROM {table} WHERE {column} = ? AND id = ?",
                        [(sid, i) for i in ids],
                    )
                if item is not None:
                    _append_audit(conn, link([item], *_audit_tip(conn), self.audit_key))

        await self._run("gc", write)

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
        self._needs("audit_anchor", "archive_audit")
        return await archive(
            to,
            max_age_s=max_age_s,
            keep=keep,
            dry_run=dry_run,
            key=self.audit_key,
            scan=self._archive_scan,
            trim=self._archive_trim,
            size=self._gc_bytes,
            measured="SQLite pages in use (page_count - freelist) x page_size",
        )

    async def _archive_trim(self, anchor: Anchor, previous: Anchor | None) -> None:
        def write(conn: sqlite3.Connection) -> None:
            with self._transaction(conn):
                # the trigger checks the anchor follows `previous` and names a stored record
                conn.execute(INSERT_ANCHOR, anchor_row(anchor))
                conn.execute(TRIM_AUDIT, (anchor.seq,))

        await self._run("archive_audit", write)

    async def close(self) -> None:
        """Close the connection once the calls already made are done, and stop the worker
        thread; later calls raise `StoreError`. Closing twice is harmless."""
        with self._pool_mutex:
            if self._closed:
                return
            self._closed = True
            pool, self._pool = self._pool, None
            if pool is not None:  # queued last: the work already queued runs first
                call = _Call(asyncio.get_running_loop(), self._disconnect)
                pool.submit(call.run)
        if pool is None:
            self._disconnect()
            return
        try:
            await call.outcome()
        finally:
            pool.shutdown(wait=True)  # the thread has nothing left to do: it ends at once

    def _disconnect(self) -> None:
        with self._mutex:
            conn, self._conn = self._conn, None
        if conn is not None:
            with self._errors("close"):
                conn.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r})"


def _save_snapshot(conn: sqlite3.Connection, s: Snapshot, text: str, keep_last: int | None) -> int:
    """`put_snapshot`'s writes, within the caller's transaction; the snapshot's seq."""
    tid = s.thread_id
    found = conn.execute(SNAPSHOT_SEQ, (tid, s.id)).fetchone()
    [seq] = found if found is not None else conn.execute(NEXT_SNAPSHOT_SEQ, (tid,)).fetchone()
    row = (tid, s.id, seq, s.run_id, s.step, s.parent_id, text, s.created_at)
    conn.execute(UPSERT_SNAPSHOT, row)
    if keep_last is not None:
        conn.execute(KEEP_LAST_SNAPSHOTS, (tid, tid, keep_last))
    return int(seq)
