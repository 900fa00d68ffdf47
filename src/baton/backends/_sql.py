"""What the SQLite and PostgreSQL stores share: the statements both dialects agree on, and
every method made of one such statement (reads, deletes, and the compare-and-set writes that
are a single conditional statement).

Statements are written once with `?` placeholders; PostgreSQL numbers them (`numbered`). A
dialect gives `SQLStore` its plumbing: `_query` (the rows of one statement), `_change` (the
rows one write statement changed), `_corrupt` (the error for a stored record that cannot be
read) and the few differences below. What needs a transaction of several statements
(`commit_run`, `write_entry`, `put_snapshot`), the clock of leases and the audit check stay
in each dialect's module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from baton.backends import _records as records
from baton.backends._conflicts import (
    check_task_owner,
    check_ticket,
    refused_checkpoint,
    task_conflict,
    task_elsewhere,
    ticket_conflict,
    unknown_ticket,
)
from baton.backends.archive import ANCHOR_FIELDS, Anchor, Scan, anchor_of
from baton.backends.audit import AuditRecord
from baton.backends.base import (
    BoardEntry,
    Checkpoint,
    CheckpointStatus,
    HumanTicket,
    SessionRecord,
    Snapshot,
    TicketStatus,
)
from baton.backends.sealing import CheckpointKeyProvider, RawCheckpoint, RekeyReport, rekey_store
from baton.core.errors import StoreError
from baton.core.events import Event
from baton.core.messages import Message
from baton.core.tasks import Task, TaskStatus

T = TypeVar("T")

CHECKPOINT_UPSERT = (
    "ON CONFLICT (session_id) DO UPDATE SET run_id = excluded.run_id, seq = excluded.seq, "
    "status = excluded.status, data = excluded.data, meta = excluded.meta, "
    "updated_at = excluded.updated_at"
)
"""What an insert of a checkpoint row does when the session has one: replace it."""

SAVE_CHECKPOINT = (
    f"INSERT INTO checkpoints ({records.CHECKPOINT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
    f"{CHECKPOINT_UPSERT}"
)
"""Save a session's checkpoint whatever it holds (with the run's commit)."""

CHECKPOINT_NEWER = (
    "WHERE (checkpoints.run_id <> excluded.run_id "
    "AND checkpoints.status NOT IN ('awaiting_approval', 'interrupted')) "
    "OR (checkpoints.run_id = excluded.run_id AND checkpoints.seq < excluded.seq)"
)
"""The condition of `CHECKPOINT_UPSERT` for a running save: not stale, and not over another
run that waits for a person."""

PUT_CHECKPOINT = f"{SAVE_CHECKPOINT} {CHECKPOINT_NEWER}"
"""Save a checkpoint unless it is stale or another run's waits for a person."""

STORED_CHECKPOINT = "SELECT seq, run_id FROM checkpoints WHERE session_id = ?"
"""What a refused save is told about the session's checkpoint (`refused_checkpoint`)."""

DROP_CHECKPOINT = "DELETE FROM checkpoints WHERE session_id = ? AND run_id = ?"

INSERT_MESSAGES = (
    "INSERT INTO messages (id, session_id, run_id, role, agent, data, ts) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
INSERT_EVENTS = (
    "INSERT INTO events (id, session_id, trace_id, run_id, type, data, ts) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
INSERT_AUDIT = f"INSERT INTO audit ({records.AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
AUDIT_TIP = "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1"
ANCHOR_COLUMNS = ", ".join(ANCHOR_FIELDS)
SELECT_ANCHORS = f"SELECT {ANCHOR_COLUMNS} FROM audit_anchor ORDER BY seq"
INSERT_ANCHOR = f"INSERT INTO audit_anchor ({ANCHOR_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
TRIM_AUDIT = "DELETE FROM audit WHERE seq <= ?"
"""Delete the archived records; the trigger lets only those at or below the last anchor go."""
STORED_IDS = "SELECT id FROM events UNION ALL SELECT id FROM messages"
"""The ids of the rows the audit chain vouches for that are still stored."""
EVENT_ROWS = "SELECT seq, id, type, session_id, trace_id, run_id, ts, data FROM events"
"""Events as the audit check compares them (`baton.backends.audit.EventRow`)."""
MESSAGE_ROWS = "SELECT seq, id, session_id, run_id, role, agent, ts, data FROM messages"
"""Messages as the audit check compares them (`baton.backends.audit.MessageRow`)."""

UPSERT_ENTRY = (
    f"INSERT INTO board ({records.BOARD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (board, key) DO UPDATE SET value = excluded.value, "
    "version = excluded.version, seq = excluded.seq, writer = excluded.writer, "
    "updated_at = excluded.updated_at"
)
NEXT_BOARD_SEQ = (
    "INSERT INTO board_seqs (board, seq) VALUES (?, 1) "
    "ON CONFLICT (board) DO UPDATE SET seq = board_seqs.seq + 1"
)
SNAPSHOT_SEQ = "SELECT seq FROM snapshots WHERE thread_id = ? AND id = ?"
NEXT_SNAPSHOT_SEQ = "SELECT COALESCE(MAX(seq), 0) + 1 FROM snapshots WHERE thread_id = ?"
UPSERT_SNAPSHOT = (
    f"INSERT INTO snapshots ({records.SNAPSHOT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (thread_id, id) DO UPDATE SET seq = excluded.seq, run_id = excluded.run_id, "
    "step = excluded.step, parent_id = excluded.parent_id, data = excluded.data, "
    "created_at = excluded.created_at"
)
KEEP_LAST_SNAPSHOTS = (
    "DELETE FROM snapshots WHERE thread_id = ? AND seq <= (SELECT seq FROM snapshots "
    "WHERE thread_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)"
)


@lru_cache(maxsize=512)
def numbered(sql: str) -> str:
    """`sql` with its `?` placeholders numbered `$1, $2, ...` (PostgreSQL's style)."""
    first, *rest = sql.split("?")
    return first + "".join(f"${i}{part}" for i, part in enumerate(rest, 1))


def _where(filters: Iterable[tuple[str, Any]]) -> tuple[str, list[Any]]:
    """(` WHERE a = ? AND ...` of the filters given (value not None), their values)."""
    given = [(column, value) for column, value in filters if value is not None]
    if not given:
        return "", []
    return " WHERE " + " AND ".join(f"{c} = ?" for c, _ in given), [v for _, v in given]


class SQLStore:
    """The methods of a SQL store that are one statement in either dialect."""

    checkpoint_keys: CheckpointKeyProvider | None

    _FIRST_SAVED = "rowid"
    """The column that orders rows as first saved (sessions, tasks)."""
    _ALL_ROWS: Any = -1
    """What `LIMIT ?` takes for no limit."""
    _lacking: frozenset[str] = frozenset()
    """Tables the store's schema lacks (a read-only SQLite file of an older version): reads
    find nothing there, writes raise `_predates`."""

    # ------------------------------------------------------------------ a dialect's plumbing
    if TYPE_CHECKING:  # each dialect's store gives these (`SQLiteStore`, `PostgresStore`)

        async def _query(self, action: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
            """The rows of one statement."""

        async def _change(
            self,
            action: str,
            sql: str,
            params: Sequence[Any] = (),
            done: Callable[[int], None] | None = None,
        ) -> int:
            """Run one write statement; the number of rows it changed. `done` is called with that
            number once it is committed, also when the caller is cancelled meanwhile (so that the
            caller's objects learn of the write)."""

        def _corrupt(self, table: str, key: object, exc: Exception) -> StoreError:
            """The error for a stored record that cannot be read."""

    def _predates(self, table: str, action: str) -> StoreError:
        """The error for a write to a table the store's schema lacks (`_lacking`)."""
        return StoreError(f"{action}: this store has no {table} table")

    def _session_columns(self) -> str:
        """The session columns to select."""
        return records.SESSION_COLUMNS

    def _audit_columns(self, action: str) -> str:
        """The audit columns to select (raises where the store has no audit table)."""
        return records.AUDIT_COLUMNS

    def _decoded(self, decode: Callable[[Any], T], rows: Iterable[Any]) -> list[T]:
        """Each row decoded (`baton.backends._records`), or the store's `StoreError` for the
        first that cannot be."""
        try:
            return [decode(row) for row in rows]
        except records.Unreadable as exc:
            raise self._corrupt(exc.table, exc.key, exc.cause) from exc.cause

    def _needs(self, table: str, action: str) -> None:
        """Refuse a write to a table the store's schema lacks."""
        if table in self._lacking:
            raise self._predates(table, action)

    # ------------------------------------------------------------------ sessions
    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, or None if it does not exist."""
        sql = f"SELECT {self._session_columns()} FROM sessions WHERE id = ?"
        rows = await self._query("get_session", sql, (session_id,))
        return self._decoded(records.session, rows)[0] if rows else None

    async def list_sessions(self, limit: int = 100) -> list[SessionRecord]:
        """Most recently updated sessions first."""
        sql = (
            f"SELECT {self._session_columns()} FROM sessions "
            f"ORDER BY updated_at DESC, {self._FIRST_SAVED} LIMIT ?"
        )
        return self._decoded(
            records.session, await self._query("list_sessions", sql, (max(limit, 0),))
        )

    async def get_messages(self, session_id: str, limit: int | None = None) -> list[Message]:
        """The session's transcript, oldest first (the last `limit` messages if given)."""
        if limit is not None and limit <= 0:
            return []
        sql = "SELECT seq, data FROM messages WHERE session_id = ? ORDER BY seq"
        params: tuple[Any, ...] = (session_id,)
        if limit is not None:
            sql = f"SELECT * FROM ({sql} DESC LIMIT ?) AS last ORDER BY seq"
            params = (session_id, limit)
        rows = await self._query("get_messages", sql, params)
        return self._decoded(lambda row: records.message(*row), rows)

    async def get_events(
        self, session_id: str | None = None, trace_id: str | None = None
    ) -> list[Event]:
        """Stored events of a session and/or trace, in order."""
        where, params = _where((("session_id", session_id), ("trace_id", trace_id)))
        rows = await self._query(
            "get_events", f"SELECT seq, data FROM events{where} ORDER BY seq", params
        )
        return self._decoded(lambda row: records.event(*row), rows)

    # ------------------------------------------------------------------ audit
    async def audit_records(
        self, session_id: str | None = None, limit: int | None = None
    ) -> list[AuditRecord]:
        """Audit records in chain order (the last `limit` if given; one session's if given)."""
        columns = self._audit_columns("audit_records")
        if limit is not None and limit <= 0:
            return []
        where, params = _where((("session_id", session_id),))
        sql = f"SELECT {columns} FROM audit{where} ORDER BY seq"
        if limit is not None:
            sql = f"SELECT * FROM ({sql} DESC LIMIT ?) AS last ORDER BY seq"
            params.append(limit)
        return [
            records.audit_record(row) for row in await self._query("audit_records", sql, params)
        ]

    async def audit_anchors(self) -> list[Anchor]:
        """The store's audit archive anchors, oldest first (`baton.backends.archive`)."""
        if "audit_anchor" in self._lacking:
            return []
        return [anchor_of(row) for row in await self._query("audit_anchors", SELECT_ANCHORS)]

    async def _archive_scan(self) -> Scan:
        """What `archive` needs: anchors first, then the chain after them and the stored ids."""
        anchors = await self.audit_anchors()
        chain = await self.audit_records()
        stored = {str(row[0]) for row in await self._query("archive_audit", STORED_IDS)}
        return Scan(chain, anchors, stored)

    # ------------------------------------------------------------------ leases
    async def release_lease(self, key: str, owner: str) -> None:
        """Give `key` up if `owner` holds it."""
        await self._change(
            "release_lease", "DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner)
        )

    # ------------------------------------------------------------------ checkpoints
    async def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Save the session's latest checkpoint: its state as JSON (`state_json()`, sealed
        with checkpoint keys) and `meta`.

        A stale save (same run, seq not above the stored one) and a save of another run while
        the stored one waits for a person raise `ConflictError`. One statement, hence atomic
        across processes.
        """
        cp = checkpoint
        row = records.checkpoint_row(self.checkpoint_keys, cp)
        if await self._change("put_checkpoint", PUT_CHECKPOINT, row):
            return
        stored = await self._query("put_checkpoint", STORED_CHECKPOINT, (cp.session_id,))
        raise refused_checkpoint(cp, stored[0] if stored else None)

    async def get_checkpoint(self, session_id: str) -> Checkpoint | None:
        """The session's checkpoint (state as JSON in `data`), or None."""
        sql = f"SELECT {records.CHECKPOINT_COLUMNS} FROM checkpoints WHERE session_id = ?"
        rows = await self._query("get_checkpoint", sql, (session_id,))
        return self._checkpoints(rows)[0] if rows else None

    async def list_checkpoints(self, status: CheckpointStatus | None = None) -> list[Checkpoint]:
        """Checkpoints of unfinished runs (state as JSON in `data`), least recently saved
        first."""
        where, params = _where((("status", status),))
        sql = f"SELECT {records.CHECKPOINT_COLUMNS} FROM checkpoints{where} "
        rows = await self._query(
            "list_checkpoints", f"{sql}ORDER BY updated_at, session_id", params
        )
        return self._checkpoints(rows)

    def _checkpoints(self, rows: Iterable[Any]) -> list[Checkpoint]:
        return self._decoded(lambda row: records.checkpoint(self.checkpoint_keys, row), rows)

    async def delete_checkpoint(self, session_id: str, run_id: str) -> None:
        """Drop the session's checkpoint if it belongs to `run_id` (no error if absent)."""
        await self._change("delete_checkpoint", DROP_CHECKPOINT, (session_id, run_id))

    async def rekey_checkpoints(self) -> RekeyReport:
        """Seal every stored checkpoint with the current checkpoint key (those in clear and
        those under an older key); a checkpoint a run saves meanwhile is never overwritten.
        After a complete report (`report.complete`) the older keys may be dropped."""
        return await rekey_store(self)

    async def _raw_checkpoints(self, session_id: str | None = None) -> list[RawCheckpoint]:
        """Checkpoint rows as stored (data not opened): every one, or the session's."""
        where, params = _where((("session_id", session_id),))
        sql = f"SELECT session_id, run_id, seq, data FROM checkpoints{where} "
        rows = await self._query(
            "rekey_checkpoints", f"{sql}ORDER BY updated_at, session_id", params
        )
        return [RawCheckpoint(sid, run, int(seq), data) for sid, run, seq, data in rows]

    async def _swap_checkpoint_data(self, row: RawCheckpoint, data: str) -> bool:
        """Write `data` as the row's data if the stored row is still `row`; one statement."""
        sql = (
            "UPDATE checkpoints SET data = ? WHERE session_id = ? AND run_id = ? AND seq = ? "
            "AND data = ?"
        )
        return await self._change("rekey_checkpoints", sql, (data, *row)) == 1

    # ------------------------------------------------------------------ human queue
    async def list_human(self, status: str | None = "open") -> list[HumanTicket]:
        """Tickets in the human queue, oldest first."""
        where, params = _where((("status", status),))
        sql = f"SELECT {records.TICKET_COLUMNS} FROM human_queue{where} ORDER BY id"
        return self._decoded(records.ticket, await self._query("list_human", sql, params))

    async def get_human(self, ticket_id: int) -> HumanTicket | None:
        """One ticket, or None."""
        if not records.is_ticket_id(ticket_id):
            return None
        sql = f"SELECT {records.TICKET_COLUMNS} FROM human_queue WHERE id = ?"
        rows = await self._query("get_human", sql, (ticket_id,))
        return self._decoded(records.ticket, rows)[0] if rows else None

    async def update_human(self, ticket: HumanTicket, expect: TicketStatus) -> None:
        """Save the ticket's status, claimed_by, answer and note if its stored status is still
        `expect` (else `ConflictError`); stamps `updated_at`, on `ticket` too.

        One statement, hence atomic across processes: two people claiming one ticket cannot
        both succeed.
        """
        check_ticket(ticket)
        if not records.is_ticket_id(ticket.id):
            raise unknown_ticket(ticket.id)
        t = time.time()
        fields = (ticket.status, ticket.claimed_by, ticket.answer, ticket.note, t)

        def stamp(changed: int) -> None:
            if changed:
                ticket.updated_at = t  # with the write, as `commit_run` does

        sql = (
            "UPDATE human_queue SET status = ?, claimed_by = ?, answer = ?, note = ?, "
            "updated_at = ? WHERE id = ? AND status = ?"
        )
        if await self._change("update_human", sql, (*fields, ticket.id, expect), stamp):
            return
        sql = "SELECT status FROM human_queue WHERE id = ?"
        stored = await self._query("update_human", sql, (ticket.id,))
        if not stored:
            raise unknown_ticket(ticket.id)
        raise ticket_conflict(ticket, expect, str(stored[0][0]))

    # ------------------------------------------------------------------ tasks
    async def put_task(
        self, session_id: str, run_id: str, task: Task, expected_version: int
    ) -> None:
        """Save `task` as JSON if its stored version is `expected_version` (else
        `ConflictError`); sets `task.version`, `task.session_id` and `task.run_id`.

        One statement, hence atomic across processes: of two writers that read one version,
        one saves and the other gets `ConflictError`.
        """
        check_task_owner(session_id, run_id, task)
        self._needs("tasks", "put_task")
        tid, new = task.task_id, expected_version + 1
        data = records.task_data(session_id, run_id, task, new)
        t = time.time()
        if expected_version == 0:
            sql = (
                f"INSERT INTO tasks ({records.TASK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, task_id) DO NOTHING"
            )
            params: tuple[Any, ...] = (run_id, tid, session_id, task.status, new, data, t)
        else:
            sql = (
                "UPDATE tasks SET status = ?, version = ?, data = ?, updated_at = ? "
                "WHERE run_id = ? AND task_id = ? AND version = ? AND session_id = ?"
            )
            params = (task.status, new, data, t, run_id, tid, expected_version, session_id)

        def stamp(changed: int) -> None:
            if changed:  # with the write, as `commit_run` does
                task.version, task.session_id, task.run_id = new, session_id, run_id

        if await self._change("put_task", sql, params, stamp):
            return
        sql = "SELECT version, session_id FROM tasks WHERE run_id = ? AND task_id = ?"
        stored = await self._query("put_task", sql, (run_id, tid))
        if stored and stored[0][1] != session_id:
            raise task_elsewhere(run_id, tid, str(stored[0][1]), session_id)
        raise task_conflict(run_id, tid, expected_version, int(stored[0][0]) if stored else 0)

    async def get_task(self, run_id: str, task_id: str) -> Task | None:
        """The stored task (with its version), or None."""
        if "tasks" in self._lacking:
            return None
        sql = f"SELECT {records.TASK_COLUMNS} FROM tasks WHERE run_id = ? AND task_id = ?"
        rows = await self._query("get_task", sql, (run_id, task_id))
        return self._decoded(records.task, rows)[0] if rows else None

    async def list_tasks(
        self,
        session_id: str | None = None,
        run_id: str | None = None,
        status: TaskStatus | None = None,
    ) -> list[Task]:
        """Stored tasks matching every filter given, in the order they were first saved."""
        if "tasks" in self._lacking:
            return []
        filters = (("session_id", session_id), ("run_id", run_id), ("status", status))
        where, params = _where(filters)
        sql = f"SELECT {records.TASK_COLUMNS} FROM tasks{where} ORDER BY {self._FIRST_SAVED}"
        return self._decoded(records.task, await self._query("list_tasks", sql, params))

    # ------------------------------------------------------------------ blackboard
    async def read_board(self, board: str) -> dict[str, BoardEntry]:
        """Every entry of the board, by key in key order."""
        entries = await self._entries("read_board", "ORDER BY key", board)
        return {entry.key: entry for entry in entries}

    async def read_entry(self, board: str, key: str) -> BoardEntry | None:
        """The entry, or None."""
        entries = await self._entries("read_entry", "AND key = ?", board, key)
        return entries[0] if entries else None

    async def board_changes(self, board: str, since_seq: int = 0) -> list[BoardEntry]:
        """The entries last written after `since_seq`, oldest write first."""
        return await self._entries("board_changes", "AND seq > ? ORDER BY seq", board, since_seq)

    async def _entries(self, action: str, rest: str, board: str, *params: Any) -> list[BoardEntry]:
        """The board's entries selected by `rest` (after `WHERE board = ?`)."""
        if "board" in self._lacking:
            return []
        sql = f"SELECT {records.BOARD_COLUMNS} FROM board WHERE board = ? {rest}"
        return self._decoded(records.board_entry, await self._query(action, sql, (board, *params)))

    async def delete_board(self, board: str) -> None:
        """Drop the board's entries (its seq is kept)."""
        self._needs("board", "delete_board")
        await self._change("delete_board", "DELETE FROM board WHERE board = ?", (board,))

    # ------------------------------------------------------------------ graph snapshots
    async def get_snapshot(self, thread_id: str, snapshot_id: str) -> Snapshot | None:
        """The snapshot, or None."""
        if "snapshots" in self._lacking:
            return None
        sql = f"SELECT {records.SNAPSHOT_COLUMNS} FROM snapshots WHERE thread_id = ? AND id = ?"
        rows = await self._query("get_snapshot", sql, (thread_id, snapshot_id))
        return self._decoded(records.snapshot, rows)[0] if rows else None

    async def list_snapshots(self, thread_id: str, limit: int | None = None) -> list[Snapshot]:
        """The thread's snapshots, newest first (the newest `limit` if given)."""
        if "snapshots" in self._lacking or (limit is not None and limit <= 0):
            return []
        sql = (
            f"SELECT {records.SNAPSHOT_COLUMNS} FROM snapshots WHERE thread_id = ? "
            "ORDER BY seq DESC LIMIT ?"
        )
        params = (thread_id, self._ALL_ROWS if limit is None else limit)
        return self._decoded(records.snapshot, await self._query("list_snapshots", sql, params))

    async def delete_snapshots(self, thread_id: str) -> None:
        """Drop the thread's snapshots."""
        self._needs("snapshots", "delete_snapshots")
        sql = "DELETE FROM snapshots WHERE thread_id = ?"
        await self._change("delete_snapshots", sql, (thread_id,))
