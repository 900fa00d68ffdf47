"""`PostgresStore.commit_run` as one statement: one round trip, no BEGIN and COMMIT.

A run's commit writes the session (compare-and-set on its version), its checkpoint, its
messages, events and outbox entries, and their audit records, whose hash chain continues from
the chain's tip. The tip must be known before the statement is sent (the records are chained
and keyed here, not in the server), so the statement is made from the tip this process saw
last, and checks it:

- the session row is written only while the chain's tip is still that one, and everything
  else only where the session row was written;
- the chain's lock (`pg_advisory_xact_lock`, the one the locked commit takes) is taken before
  any message, event or audit row: rows are numbered in chain order as there;
- a writer that extended the chain after this statement's snapshot was taken makes its audit
  insert fail on the primary key (seq), and the statement writes nothing.

When the tip moved (another process committed), nothing was written and the statement says
where the tip is now: the commit is made once more from there. When that fails too, or the
insert failed, the store commits the locked way (a transaction that reads the tip under the
lock). The commits of one process go one at a time (they would anyway, on the chain's lock),
each from the tip the one before left: a process that commits alone pays one round trip per
commit; processes committing together pay a second one when another committed in between.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from baton.backends import _records as records

_TIP = "COALESCE((SELECT seq FROM audit ORDER BY seq DESC LIMIT 1), 0)"

# (column, SQL type) of each table a commit appends to, in the order of their rows
_MESSAGES = (
    ("id", "text"),
    ("session_id", "text"),
    ("run_id", "text"),
    ("role", "text"),
    ("agent", "text"),
    ("data", "text"),
    ("ts", "float8"),
)
_EVENTS = (
    ("id", "text"),
    ("session_id", "text"),
    ("trace_id", "text"),
    ("run_id", "text"),
    ("type", "text"),
    ("data", "text"),
    ("ts", "float8"),
)
_OUTBOX = (
    ("id", "text"),
    ("kind", "text"),
    ("key", "text"),
    ("session_id", "text"),
    ("run_id", "text"),
    ("ts", "float8"),
    ("event", "text"),
    ("created_at", "float8"),
)
_AUDIT = tuple(
    (name, "bigint" if name == "seq" else "float8" if name == "ts" else "text")
    for name in records.AUDIT_FIELDS
)


def _append(table: str, columns: tuple[tuple[str, str], ...], first: int, tail: str = "") -> str:
    """An insert of rows given column by column as arrays ($first, ...), in their order,
    only once the chain's lock is held."""
    names = ", ".join(name for name, _ in columns)
    arrays = ", ".join(f"${first + i}::{kind}[]" for i, (_, kind) in enumerate(columns))
    return (
        f"INSERT INTO {table} ({names}) SELECT {names} FROM unnest({arrays}) WITH ORDINALITY "
        f"AS r({names}, n) WHERE EXISTS (SELECT 1 FROM locked) ORDER BY n{tail}"
    )


@lru_cache(maxsize=64)
def statement(
    new: bool, checkpoint: str, messages: bool, events: bool, outbox: bool, audit: bool
) -> str:
    """The commit's statement for what it writes (`checkpoint`: "save", "drop" or "").
    Parameters: $1-$11 the session row (`SESSION_COLUMNS`), $12 the version read, $13 the
    chain's tip seq expected, $14 the chain's lock key, then the checkpoint's (its row, or the
    session and run id to drop), then each table's columns as arrays."""
    parts: list[str] = []
    if new:
        session = (
            f"INSERT INTO sessions ({records.SESSION_COLUMNS}) SELECT $1::text, $2::text, "
            "$3::text, $4::text, $5::text, $6::text, $7::float8, $8::float8, $9::bigint, "
            f"$10::text, $11::text WHERE {_TIP} = $13::bigint AND $12::bigint = 0 "
            "ON CONFLICT (id) DO NOTHING RETURNING 1"
        )
    else:
        session = (
            "UPDATE sessions SET user_id = $2, holder = $3, holder_since = $4, incoming = $5, "
            "state = $6, updated_at = $8, version = $9, requests = $10, control = $11 "
            f"WHERE id = $1 AND version = $12 AND {_TIP} = $13::bigint "
            # created_at ($7) stays the first commit's; named so the numbering is shared
            "AND $7::float8 IS NOT NULL RETURNING 1"
        )
    parts.append(f"saved AS ({session})")
    parts.append("locked AS (SELECT pg_advisory_xact_lock($14::bigint) FROM saved)")
    at = 15
    if checkpoint == "save":
        parts.append(
            f"cp AS (INSERT INTO checkpoints ({records.CHECKPOINT_COLUMNS}) SELECT $15::text, "
            "$16::text, $17::bigint, $18::text, $19::text, $20::text, $21::float8 "
            "WHERE EXISTS (SELECT 1 FROM locked) ON CONFLICT (session_id) DO UPDATE SET "
            "run_id = excluded.run_id, seq = excluded.seq, status = excluded.status, "
            "data = excluded.data, meta = excluded.meta, updated_at = excluded.updated_at)"
        )
        at = 22
    elif checkpoint == "drop":
        parts.append(
            "cp AS (DELETE FROM checkpoints WHERE session_id = $15 AND run_id = $16 "
            "AND EXISTS (SELECT 1 FROM locked))"
        )
        at = 17
    for wanted, name, table, columns, tail in (
        (messages, "m", "messages", _MESSAGES, ""),
        (events, "e", "events", _EVENTS, ""),
        (outbox, "o", "outbox", _OUTBOX, " ON CONFLICT (id) DO NOTHING"),
        (audit, "a", "audit", _AUDIT, ""),
    ):
        if wanted:
            parts.append(f"{name} AS ({_append(table, columns, at, tail)})")
            at += len(columns)
    return (
        f"WITH {', '.join(parts)} SELECT EXISTS (SELECT 1 FROM saved) AS saved, "
        f"(SELECT version FROM sessions WHERE id = $1) AS stored, {_TIP} AS tip, "
        "(SELECT hash FROM audit ORDER BY seq DESC LIMIT 1) AS tip_hash"
    )


def columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows as `width` column arrays (the statement's unnest parameters)."""
    if not rows:
        return [[] for _ in range(width)]
    return [list(column) for column in zip(*rows, strict=True)]
