"""Every record type as the persistent stores write it and read it back: sessions, messages,
events, checkpoints, human tickets, tasks, board entries, snapshots and audit records.

SQLite and PostgreSQL keep one row per record with the same columns (`*_COLUMNS`); Redis
keeps hash fields and JSON lists (its key layout is in `baton.backends.redis_store`). Pure
functions, no I/O: the three stores encode alike and refuse the same values with the same
errors. A decoder that meets a record it cannot read raises `Unreadable` (where it lies and
why); each store turns that into a `StoreError` that names the store and says what to do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from baton.backends.audit import (
    AuditRecord,
    EventRow,
    MessageRow,
    Unsealed,
    message_digest,
    prepare,
)
from baton.backends.base import (
    BoardEntry,
    Checkpoint,
    HumanTicket,
    SessionRecord,
    Snapshot,
)
from baton.backends.outbox import outbox_rows
from baton.backends.sealing import CheckpointKeyProvider, opened, stored_data
from baton.core.errors import StoreError
from baton.core.events import EscalationCard, Event, event_from_json
from baton.core.messages import Message
from baton.core.payload import HandoffPayload
from baton.core.tasks import Task

Row = Sequence[Any]
"""A stored row: a tuple from sqlite3, an asyncpg Record."""


class Unreadable(Exception):
    """A stored record that cannot be decoded: its table (or kind), its key, and the cause."""

    def __init__(self, table: str, key: object, cause: Exception) -> None:
        super().__init__(f"{table} {key!r}: {cause}")
        self.table = table
        self.key = key
        self.cause = cause


def _json(value: Any, what: str) -> str:
    """`value` as JSON text (non-ASCII kept); `StoreError` naming `what` if it is not JSON."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"{what} cannot be saved as JSON ({exc}); keep its values to strings, numbers, "
            "booleans, None, lists and dicts with string keys"
        ) from exc


def _object(value: Any, name: str) -> dict[str, Any]:
    """`value` (a JSON object, or its text) as a dict; `ValueError` for anything else."""
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise ValueError(f"{name} is a {type(value).__name__}, not an object")
    return value


# ---------------------------------------------------------------- sessions
SESSION_COLUMNS = (
    "id, user_id, holder, holder_since, incoming, state, created_at, updated_at, version, "
    "requests, control"
)


def session_row(session: SessionRecord) -> tuple[Any, ...]:
    """The session's row as its commit stores it (at the version after `session.version`)."""
    what = f"session {session.session_id!r} state"
    incoming = None if session.incoming is None else session.incoming.model_dump_json()
    return (
        session.session_id,
        session.user_id,
        session.holder,
        session.holder_since,
        incoming,
        _json(session.state, what),
        float(session.created_at),
        float(session.updated_at),
        session.version + 1,
        _json(session.requests, what),
        _json(session.control, what),
    )


def session(row: Row) -> SessionRecord:
    """A session from its row (`SESSION_COLUMNS`)."""
    sid, user_id, holder, since, incoming, state, created, updated, version, reqs, ctl = row
    try:
        return SessionRecord(
            session_id=sid,
            user_id=user_id,
            holder=holder,
            holder_since=since,
            incoming=None if incoming is None else HandoffPayload.model_validate_json(incoming),
            state=_object(state, "state"),
            created_at=created,
            updated_at=updated,
            version=int(version),
            requests=_object(reqs, "requests"),
            control=_object(ctl, "control"),
        )
    except ValueError as exc:  # (a pydantic ValidationError is a ValueError)
        raise Unreadable("sessions", sid, exc) from exc


def session_hash(session: SessionRecord) -> tuple[str, str]:
    """(record, incoming) as Redis keeps a session: its fields as one JSON object, and the
    payload it received ('' for none)."""
    record = {
        "user_id": session.user_id,
        "holder": session.holder,
        "holder_since": session.holder_since,
        "state": session.state,
        "requests": session.requests,
        "control": session.control,
    }
    what = f"session {session.session_id!r} state"
    incoming = "" if session.incoming is None else session.incoming.model_dump_json()
    return _json(record, what), incoming


def session_from_hash(sid: str, fields: dict[str, str]) -> SessionRecord:
    """A session from its Redis hash (`session_hash`, version and times)."""
    try:
        record = _object(fields["record"], "record")
        row = (
            sid,
            record["user_id"],
            record["holder"],
            record["holder_since"],
            fields.get("incoming") or None,
            record["state"],
            float(fields["created_at"]),
            float(fields["updated_at"]),
            fields["version"],
            record["requests"],
            record.get("control", {}),  # (absent from records of older releases)
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise Unreadable("sessions", sid, exc) from exc
    return session(row)


# ---------------------------------------------------------------- messages and events
def message_row(session_id: str, m: Message) -> tuple[Any, ...]:
    """(id, session_id, run_id, role, agent, data, ts) of a message committed to a session."""
    return (m.id, session_id, m.run_id, m.role, m.agent, m.model_dump_json(), float(m.ts))


def message_digests(rows: Sequence[Row]) -> list[tuple[str, str]]:
    """(id, digest) of each message row, for the commit's audit record."""
    return [(r[0], message_digest(r[0], r[1], r[2], r[3], r[4], r[6], r[5])) for r in rows]


def message(key: object, data: str) -> Message:
    """A message from its stored JSON."""
    try:
        return Message.model_validate_json(data)
    except ValidationError as exc:
        raise Unreadable("messages", key, exc) from exc


def event_row(e: Event, text: str) -> tuple[Any, ...]:
    """(id, session_id, trace_id, run_id, type, data, ts) of an event stored as `text`."""
    return (e.id, e.session_id, e.trace_id, e.run_id, e.type, text, float(e.ts))


def event(key: object, data: str) -> Event:
    """An event from its stored JSON."""
    try:
        return event_from_json(data)
    except ValidationError as exc:
        raise Unreadable("events", key, exc) from exc


def message_line(row: Row) -> str:
    """A message row as Redis keeps it: its columns as a JSON list, a newline, its JSON."""
    mid, sid, run_id, role, agent, data, ts = row
    return f"{json.dumps([mid, sid, run_id, role, agent, ts], ensure_ascii=False)}\n{data}"


def message_row_of_line(seq: int, text: str) -> MessageRow:
    """A Redis message line as the audit check compares it (empty columns if unreadable)."""
    columns, _, data = text.partition("\n")
    try:
        mid, sid, run_id, role, agent, ts = json.loads(columns)
        return MessageRow(seq, mid, sid, run_id, role, agent, ts, data)
    except (TypeError, ValueError):
        return MessageRow(seq, "", "", None, "", None, 0.0, data)


def event_row_of_json(seq: int, text: str) -> EventRow:
    """A Redis event as the audit check compares it: its columns from its own JSON."""
    try:
        e = json.loads(text)
        return EventRow(
            seq, e["id"], e["type"], e["session_id"], e["trace_id"], e["run_id"], e["ts"], text
        )
    except (KeyError, TypeError, ValueError):
        return EventRow(seq, "", "", "", "", "", 0.0, text)


# ---------------------------------------------------------------- a run's commit
@dataclass(frozen=True, slots=True)
class CommitRows:
    """What one `commit_run` writes beside the session, encoded before any lock is taken."""

    messages: list[tuple[Any, ...]]
    """`message_row` of each message."""
    events: list[tuple[Any, ...]]
    """`event_row` of each event (its JSON at index 5)."""
    audit: list[Unsealed]
    """The audit records' bodies; only linking them needs the chain's tip."""
    checkpoint: tuple[Any, ...] | None
    """`checkpoint_row` of the checkpoint committed with the run, if any."""
    outbox: list[tuple[Any, ...]] = field(default_factory=list)
    """`outbox_rows` of the notifiable events (`baton.backends.outbox`)."""


def commit_rows(
    session: SessionRecord,
    messages: Sequence[Message],
    events: Sequence[Event],
    keys: CheckpointKeyProvider | None,
    checkpoint: Checkpoint | None,
) -> CommitRows:
    """What a commit of `session` writes beside the session itself. The last event's audit
    record carries the digests of the messages committed with it."""
    sid = session.session_id
    message_rows = [message_row(sid, m) for m in messages]
    texts = [e.model_dump_json() for e in events]
    return CommitRows(
        message_rows,
        [event_row(e, text) for e, text in zip(events, texts, strict=True)],
        prepare(events, texts, messages=message_digests(message_rows), session_id=sid),
        None if checkpoint is None else checkpoint_row(keys, checkpoint),
        outbox_rows(events, texts),
    )


# ---------------------------------------------------------------- checkpoints
CHECKPOINT_COLUMNS = "session_id, run_id, seq, status, data, meta, updated_at"


def checkpoint_row(keys: CheckpointKeyProvider | None, cp: Checkpoint) -> tuple[Any, ...]:
    """The checkpoint's row (`CHECKPOINT_COLUMNS`), its state sealed when there are keys."""
    where = f"checkpoint of session {cp.session_id!r} (run {cp.run_id!r}, seq {cp.seq})"
    try:
        data = cp.state_json()
    except ValueError as exc:
        raise StoreError(f"{where} cannot be saved: {exc}; give it a state") from exc
    meta = _json(cp.meta, f"{where}: meta")
    sealed = stored_data(keys, cp, data)
    return (cp.session_id, cp.run_id, cp.seq, cp.status, sealed, meta, float(cp.updated_at))


def checkpoint(keys: CheckpointKeyProvider | None, row: Row) -> Checkpoint:
    """A checkpoint from its row, its data opened with `keys` (`baton.backends.sealing`)."""
    sid, run_id, seq, status, data, meta, updated = row
    try:
        cp = Checkpoint(
            session_id=sid,
            run_id=run_id,
            seq=int(seq),
            status=status,
            data=data,
            meta=_object(meta, "meta"),
            updated_at=float(updated),
        )
    except (TypeError, ValueError) as exc:
        raise Unreadable("checkpoints", sid, exc) from exc
    return opened(keys, cp)


def checkpoint_from_hash(
    keys: CheckpointKeyProvider | None, sid: str, fields: dict[str, str]
) -> Checkpoint:
    """A checkpoint from its Redis hash (the fields of `CHECKPOINT_COLUMNS` but the session)."""
    try:
        row = [sid, *(fields[f] for f in ("run_id", "seq", "status", "data", "meta", "updated_at"))]
    except KeyError as exc:
        raise Unreadable("checkpoints", sid, exc) from exc
    return checkpoint(keys, row)


# ---------------------------------------------------------------- the human queue
TICKET_COLUMNS = "id, card, status, claimed_by, answer, note, updated_at"


def is_ticket_id(value: object) -> bool:
    """Whether `value` can be a ticket id (an int that fits a BIGINT, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def ticket(row: Row) -> HumanTicket:
    """A ticket from its row (`TICKET_COLUMNS`)."""
    ticket_id, card, status, claimed_by, answer, note, updated = row
    try:
        return HumanTicket(
            id=int(ticket_id),
            card=EscalationCard.model_validate_json(card),
            status=status,
            claimed_by=claimed_by,
            answer=answer,
            note=note,
            updated_at=float(updated),
        )
    except (TypeError, ValueError) as exc:
        raise Unreadable("human_queue", ticket_id, exc) from exc


def ticket_body(t: HumanTicket, updated_at: float) -> str:
    """What Redis keeps of a ticket beside its card and status: [claimed_by, answer, note,
    updated_at]."""
    return json.dumps([t.claimed_by, t.answer, t.note, updated_at], ensure_ascii=False)


def ticket_from_hash(ticket_id: int, fields: dict[str, str]) -> HumanTicket:
    """A ticket from its Redis hash (card, status, `ticket_body`)."""
    try:
        claimed_by, answer, note, updated = json.loads(fields["body"])
        row = (ticket_id, fields["card"], fields["status"], claimed_by, answer, note, updated)
    except (KeyError, TypeError, ValueError) as exc:
        raise Unreadable("human_queue", ticket_id, exc) from exc
    return ticket(row)


# ---------------------------------------------------------------- tasks
TASK_COLUMNS = "run_id, task_id, session_id, status, version, data, updated_at"


def task_data(session_id: str, run_id: str, task: Task, version: int) -> str:
    """The task's JSON as saved at `version` under (session, run)."""
    saved = {"version": version, "session_id": session_id, "run_id": run_id}
    return task.model_copy(update=saved).model_dump_json()


def task(row: Row) -> Task:
    """A task from its row (`TASK_COLUMNS`); the columns, which compare-and-set and the
    filters used, win over its JSON."""
    run_id, task_id, session_id, _, version, data, _ = row
    try:
        found = Task.model_validate_json(data)
    except ValidationError as exc:
        raise Unreadable("tasks", f"{run_id}/{task_id}", exc) from exc
    found.version, found.session_id, found.run_id = int(version), session_id, run_id
    return found


def task_field(run_id: str, task_id: str) -> str:
    """The Redis hash field of a (run, task id): JSON, so that no two pairs share one."""
    return json.dumps([run_id, task_id], ensure_ascii=False)


def task_line(session_id: str, status: str, version: int, at: float, data: str) -> str:
    """A task as Redis keeps it: [session, status, version, updated_at], a newline, its
    JSON."""
    return json.dumps([session_id, status, version, at], ensure_ascii=False) + "\n" + data


def task_from_line(field: str, line: str) -> Task:
    """A task from its Redis hash field (`task_field`) and value (`task_line`)."""
    columns, _, data = line.partition("\n")
    try:
        session_id, status, version, at = json.loads(columns)
        run_id, task_id = json.loads(field)
    except (TypeError, ValueError) as exc:
        raise Unreadable("tasks", field, exc) from exc
    return task((run_id, task_id, session_id, status, version, data, at))


# ---------------------------------------------------------------- blackboards
BOARD_COLUMNS = "board, key, value, version, seq, writer, updated_at"


def board_entry(row: Row) -> BoardEntry:
    """A board entry from its row (`BOARD_COLUMNS`), its value decoded afresh."""
    board, key, text, version, seq, writer, updated = row
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise Unreadable("board", f"{board}/{key}", exc) from exc
    return BoardEntry(board, key, value, int(version), int(seq), writer, float(updated))


def board_line(version: int, at: float, writer: str, text: str) -> str:
    """A board entry as Redis keeps it after its seq: [version, updated_at, writer, value]."""
    return f"[{version},{float(at)!r},{json.dumps(writer, ensure_ascii=False)},{text}]"


def board_entry_from_line(board: str, key: str, line: str) -> BoardEntry:
    """A board entry from its Redis value: its seq, a space, `board_line`."""
    seq, _, rest = line.partition(" ")
    try:
        version, updated, writer, value = json.loads(rest)
        return BoardEntry(board, key, value, int(version), int(seq), writer, float(updated))
    except (TypeError, ValueError) as exc:
        raise Unreadable("board", f"{board}/{key}", exc) from exc


# ---------------------------------------------------------------- graph snapshots
SNAPSHOT_COLUMNS = "thread_id, id, seq, run_id, step, parent_id, data, created_at"


def snapshot(row: Row) -> Snapshot:
    """A snapshot from its row (`SNAPSHOT_COLUMNS`), its data decoded afresh."""
    thread_id, sid, seq, run_id, step, parent_id, text, created = row
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise Unreadable("snapshots", f"{thread_id}/{sid}", exc) from exc
    return Snapshot(thread_id, sid, run_id, int(step), parent_id, data, int(seq), created)


def stored_snapshot(s: Snapshot, text: str, seq: int) -> Snapshot:
    """The snapshot as a store returns it once saved: its data as stored, its seq."""
    return Snapshot(
        s.thread_id, s.id, s.run_id, s.step, s.parent_id, json.loads(text), seq, s.created_at
    )


def snapshot_line(s: Snapshot, text: str) -> str:
    """A snapshot as Redis keeps it: [run, step, parent, created_at, data]."""
    run, parent = (json.dumps(v, ensure_ascii=False) for v in (s.run_id, s.parent_id))
    return f"[{run},{json.dumps(s.step)},{parent},{float(s.created_at)!r},{text}]"


def snapshot_from_line(thread_id: str, sid: str, seq: Any, line: str) -> Snapshot:
    """A snapshot from its Redis value (`snapshot_line`) and zset score."""
    try:
        run_id, step, parent_id, created, data = json.loads(line)
        return Snapshot(thread_id, sid, run_id, step, parent_id, data, int(float(seq)), created)
    except (TypeError, ValueError) as exc:
        raise Unreadable("snapshots", f"{thread_id}/{sid}", exc) from exc


# ---------------------------------------------------------------- audit records
AUDIT_FIELDS = (
    "seq",
    "event_id",
    "type",
    "session_id",
    "trace_id",
    "ts",
    "data",
    "prev_hash",
    "hash",
    "messages",
)
AUDIT_COLUMNS = ", ".join(AUDIT_FIELDS)


def audit_row(r: AuditRecord) -> tuple[Any, ...]:
    """The record's row (`AUDIT_COLUMNS`)."""
    return tuple(float(r.ts) if f == "ts" else getattr(r, f) for f in AUDIT_FIELDS)


def audit_record(row: Row) -> AuditRecord:
    """A record from its row; one with a value of the wrong type is kept as it is, so that
    `verify` reports the record as edited instead of failing to read it."""
    fields = dict(zip(AUDIT_FIELDS, row, strict=True))
    try:
        return AuditRecord.model_validate(fields)
    except ValidationError:
        return AuditRecord(**fields)


def audit_json(r: AuditRecord) -> str:
    """A record as Redis keeps it: its fields as one JSON object."""
    return json.dumps({f: getattr(r, f) for f in AUDIT_FIELDS}, ensure_ascii=False)


def audit_record_of_json(seq: int, text: str) -> AuditRecord:
    """A record from its Redis JSON; one that cannot be read whole comes back with empty
    fields, so that `verify` reports it as edited instead of failing to read it."""
    try:
        fields = json.loads(text)
        if not isinstance(fields, dict):
            raise ValueError("not an object")
    except ValueError:
        fields = {}
    if not fields:
        return AuditRecord(
            seq=seq,
            event_id="",
            type="",
            session_id="",
            trace_id="",
            ts=0.0,
            data=text,
            prev_hash="",
            hash="",
        )
    try:
        return AuditRecord.model_validate(fields)
    except ValidationError:
        values = {f: fields.get(f, "") for f in AUDIT_FIELDS}
        if not isinstance(values["seq"], int):
            values["seq"] = seq
        return AuditRecord(**values)
