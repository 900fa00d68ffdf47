"""The hash-chained audit trail: append-only records that prove no stored event or message
was changed.

Every stored event gets one `AuditRecord` holding the event's JSON exactly as the store keeps
it (events are redacted before they reach a store, so the audit holds no more than the events
do), the hash of the record before it (`prev_hash`) and its own
`hash = sha256(prev_hash + body)`. The body is a canonical JSON array of the record's fields
(`[event_id, type, session_id, trace_id, ts]`), a newline, then the event JSON: the array
cannot contain a raw newline, so the split is unambiguous, and the event text is hashed as
stored, not re-serialised. Editing any record breaks its hash; deleting or moving one breaks
the link of the record after it. `verify` walks a chain and names the first record that was
edited, deleted or reordered.

Messages (the transcripts people read) are covered by the record of the commit that stored
them: the last event record of a commit carries, in its `messages` field, the id and
`message_digest` of every message committed with it (a commit with messages and no events gets
a record of type `messages` of its own). A record with messages hashes the array
`[event_id, type, session_id, trace_id, ts, messages]` instead, so records without messages
hash exactly as they always did. `agree` then checks that the stored `events` and `messages`
rows are, in order, exactly what the chain recorded: a forged, deleted or inserted row is named.

With a key (`BATON_AUDIT_KEY`), `hash = HMAC-SHA256(key, prev_hash + body)`: someone who edits
a record and re-hashes the chain after it cannot produce keyed hashes without the key. Records
written before the key was set stay plain sha256; `verify` with the key accepts them only
before the first keyed record (which vouches for them through its `prev_hash`), and fails a
chain with no keyed record at all. Without a key (or an anchor kept elsewhere) a full re-hash
of an edited chain cannot be told from the original.

`seq` is the record's position (1, 2, 3, ...) and is not part of the hash: the chain of
`prev_hash` links fixes the order, and `verify` demands gap-free positions, so any change of
`seq` shows as a gap or a broken link. Keeping it out of the hash is what lets `verify` tell
a moved record (intact, but linked to another predecessor) from an edited one.

Nothing here touches a database: a store builds the records' bodies with `prepare` before it
takes its write lock, chains them to the current tip with `link` inside the transaction that
stores the events, and passes what it reads back to `verify` and `agree`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from baton.core.data import Data
from baton.core.events import Event

GENESIS = "0" * 64
"""`prev_hash` of the first record of every chain."""

KEY_ENV = "BATON_AUDIT_KEY"
"""Environment variable holding the HMAC key of the audit chain (unset: plain sha256)."""

MESSAGES = "messages"
"""`type` of a record that carries only messages (no event): a commit of messages without
events, or the messages a store held before they were audited (schema migration)."""

RETENTION = "retention"
"""`type` of a record that names the events and messages a store's retention deleted
(`baton.backends.retention`): `agree` accepts those rows missing from their tables."""

Tamper = Literal["edited", "deleted", "reordered", "inserted"]
"""What `verify` or `agree` found done to the first bad record or row."""

Table = Literal["events", "messages"]
"""A table whose rows the chain vouches for."""


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """`value` as canonical JSON: sorted keys, no whitespace, UTF-8 text kept as it is."""
    return _CANONICAL.encode(value)


def event_json(event: Event) -> str:
    """The JSON of an event as stores keep it (pydantic: fixed field order, compact, UTF-8)."""
    return event.model_dump_json()


def resolve_key(value: str | bytes | None = None) -> bytes | None:
    """The HMAC key: `value` if given, else `$BATON_AUDIT_KEY`; None when unset or empty."""
    if value is None:
        value = os.environ.get(KEY_ENV)
    if not value:
        return None
    return value if isinstance(value, bytes) else value.encode("utf-8")


def record_body(
    event_id: str,
    type: str,
    session_id: str,
    trace_id: str,
    ts: float,
    data: str,
    messages: str = "",
) -> str:
    """The text a record's hash covers after the previous hash: its fields, newline, event.

    `messages` (the record's message digests, `messages_field`) joins the fields only when not
    empty, so records without messages hash as they did before messages were audited.
    """
    fields: list[Any] = [event_id, type, session_id, trace_id, ts]
    if messages:
        fields.append(messages)
    return canonical_json(fields) + "\n" + data


def chain_hash(prev_hash: str, body: str, key: bytes | None = None) -> str:
    """sha256 (hex) of `prev_hash` followed by `body`; HMAC-SHA256 with `key` if given."""
    text = (prev_hash + body).encode("utf-8")
    if key is None:
        return hashlib.sha256(text).hexdigest()
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def message_digest(
    message_id: str,
    session_id: str,
    run_id: str | None,
    role: str,
    agent: str | None,
    ts: float,
    data: str,
) -> str:
    """sha256 (hex) of a stored message row: its columns and its JSON as stored."""
    text = canonical_json([message_id, session_id, run_id, role, agent, ts]) + "\n" + data
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def messages_field(entries: Sequence[tuple[str, str]]) -> str:
    """The `messages` field of a record: canonical JSON `[[id, digest], ...]`, "" if none."""
    return canonical_json([list(e) for e in entries]) if entries else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord(Data):
    """One link of the audit chain: a stored event (and the messages committed with it) and
    the hashes that bind it in place."""

    seq: int
    """Position in the chain, from 1, without gaps."""
    event_id: str
    """Id of the event ("" for a record of type `messages`)."""
    type: str
    """Event type, e.g. `handoff`, or `messages`."""
    session_id: str
    """Session of the event."""
    trace_id: str
    """Trace of the event's run."""
    ts: float
    """Event time, epoch seconds."""
    data: str
    """The event's JSON as stored (redacted like the event)."""
    prev_hash: str
    """`hash` of the record before (GENESIS for the first)."""
    hash: str
    """sha256(prev_hash + body) in hex, or HMAC-SHA256 with the store's audit key."""
    messages: str = ""
    """`[[message_id, message_digest], ...]` of the messages committed with it, or ""."""

    def body(self) -> str:
        """The canonical text the hash covers (after `prev_hash`)."""
        return record_body(
            self.event_id,
            self.type,
            self.session_id,
            self.trace_id,
            self.ts,
            self.data,
            self.messages,
        )

    def sealed_with(self, key: bytes | None = None) -> Literal["key", "plain"] | None:
        """ "key" when `hash` is the keyed hash of the content, "plain" when it is the plain
        sha256 of it, None when it matches neither (the record was edited)."""
        try:
            body = self.body()
            if key is not None and hmac.compare_digest(
                chain_hash(self.prev_hash, body, key), str(self.hash)
            ):
                return "key"
            if chain_hash(self.prev_hash, body) == self.hash:
                return "plain"
        except (TypeError, ValueError):  # a value no event can hold was written into the record
            pass
        return None

    def intact(self, key: bytes | None = None) -> bool:
        """True when `hash` matches the record's content and `prev_hash` (keyed with `key`
        when given; plain sha256 otherwise)."""
        return self.sealed_with(key) == ("plain" if key is None else "key")

    def event(self) -> dict[str, Any]:
        """The stored event as a dict."""
        data: dict[str, Any] = json.loads(self.data)
        return data

    def message_entries(self) -> list[tuple[str, str]]:
        """(message id, digest) of the messages this record vouches for; ValueError if the
        field is not such a list."""
        if not self.messages:
            return []
        raw = json.loads(self.messages)
        if not isinstance(raw, list) or not all(
            isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e) for e in raw
        ):
            raise ValueError("the messages field is not a list of [id, digest] pairs")
        return [(e[0], e[1]) for e in raw]


@dataclass(frozen=True, slots=True)
class Unsealed:
    """A record's audit fields and hashed body, before it is linked into a chain."""

    event_id: str
    type: str
    session_id: str
    trace_id: str
    ts: float
    data: str
    body: str
    messages: str = ""


def prepare(
    events: Sequence[Event],
    texts: Sequence[str] | None = None,
    *,
    messages: Sequence[tuple[str, str]] = (),
    session_id: str = "",
) -> list[Unsealed]:
    """The audit fields of `events`: the costly part of sealing, done before any lock.

    `texts` are the events' JSON when the caller already has it (`event_json` of each).
    `messages` are (id, `message_digest`) of the messages committed with the events: the last
    event's record carries them, or, without events, a record of type `messages` in
    `session_id`.
    """
    if texts is None:
        texts = [event_json(e) for e in events]
    out = [
        Unsealed(
            e.id,
            e.type,
            e.session_id,
            e.trace_id,
            e.ts,
            data,
            record_body(e.id, e.type, e.session_id, e.trace_id, e.ts, data),
        )
        for e, data in zip(events, texts, strict=True)
    ]
    if messages:
        field = messages_field(messages)
        if out:
            u = out[-1]
            body = record_body(u.event_id, u.type, u.session_id, u.trace_id, u.ts, u.data, field)
            out[-1] = Unsealed(
                u.event_id, u.type, u.session_id, u.trace_id, u.ts, u.data, body, field
            )
        else:
            out.append(messages_only(messages, session_id))
    return out


def messages_only(
    messages: Sequence[tuple[str, str]], session_id: str = "", note: str = "commit"
) -> Unsealed:
    """A record of type `messages` for (id, digest) pairs stored without an event."""
    field = messages_field(messages)
    ts = time.time()
    data = canonical_json({"messages": len(messages), "note": note})
    body = record_body("", MESSAGES, session_id, "", ts, data, field)
    return Unsealed("", MESSAGES, session_id, "", ts, data, body, field)


def link(
    items: Iterable[Unsealed],
    last_seq: int = 0,
    last_hash: str = GENESIS,
    key: bytes | None = None,
) -> list[AuditRecord]:
    """Chain prepared items after the record (`last_seq`, `last_hash`), keyed with `key`."""
    out: list[AuditRecord] = []
    seq, prev = last_seq, last_hash
    for u in items:
        seq += 1
        h = chain_hash(prev, u.body, key)
        out.append(
            AuditRecord(
                seq=seq,
                event_id=u.event_id,
                type=u.type,
                session_id=u.session_id,
                trace_id=u.trace_id,
                ts=u.ts,
                data=u.data,
                prev_hash=prev,
                hash=h,
                messages=u.messages,
            )
        )
        prev = h
    return out


def seal(
    events: Sequence[Event],
    last_seq: int = 0,
    last_hash: str = GENESIS,
    key: bytes | None = None,
) -> list[AuditRecord]:
    """Audit records for `events`, chained after the record (`last_seq`, `last_hash`)."""
    return link(prepare(events), last_seq, last_hash, key)


class VerifyResult(BaseModel):
    """What `verify` (and `agree`) found: an intact chain, or the first bad record and why."""

    ok: bool = Field(description="True when the chain is intact.")
    checked: int = Field(description="Records examined.")
    first_bad_seq: int | None = Field(
        default=None, description="Position of the first edited, deleted or moved record."
    )
    tamper: Tamper | None = Field(
        default=None, description="edited, deleted, reordered or inserted."
    )
    problem: str | None = Field(default=None, description="What is wrong, in words.")
    head_seq: int = Field(default=0, description="Position of the last record checked.")
    head_hash: str = Field(default=GENESIS, description="Hash of the last record checked.")
    keyed: int = Field(default=0, description="Records sealed with the audit key.")
    start_seq: int = Field(
        default=0,
        description="The last archived record: the chain checked starts after it (0: at 1).",
    )
    keyed_from: int | None = Field(
        default=None, description="Position of the first record sealed with the audit key."
    )
    table: Table | None = Field(
        default=None, description="The table of the bad row, when a stored row is at fault."
    )
    row: int | None = Field(
        default=None, description="Position (`seq`) of the bad row in `table`, if stored."
    )
    events: int | None = Field(
        default=None, description="Stored event rows found to agree with the chain."
    )
    messages: int | None = Field(
        default=None,
        description="Stored message rows found to agree with the chain; None when the store "
        "predates message auditing (not checked).",
    )

    @property
    def anchor(self) -> str:
        """`SEQ:HASH` of the chain's head, to keep elsewhere and pass back to `verify`."""
        return f"{self.head_seq}:{self.head_hash}"


def parse_anchor(text: str) -> tuple[int, str]:
    """(seq, hash) from an anchor written `SEQ:HASH`; ValueError if malformed."""
    seq, sep, digest = text.strip().partition(":")
    if not sep or not seq.isdigit() or int(seq) < 1 or len(digest) != 64:
        raise ValueError(f"bad anchor {text!r}: expected SEQ:HASH, e.g. 12:{'ab' * 32}")
    try:
        bytes.fromhex(digest)
    except ValueError:
        raise ValueError(f"bad anchor {text!r}: the hash is not 64 hex digits") from None
    return int(seq), digest.lower()


def verify(
    records: Iterable[AuditRecord],
    *,
    anchor: tuple[int, str] | None = None,
    event_ids: Collection[str] | None = None,
    key: bytes | None = None,
    start: tuple[int, str] | None = None,
) -> VerifyResult:
    """Check a whole chain, read in `seq` order, and name the first bad record.

    - edited: a record's hash does not match its content;
    - deleted: a position is missing, or a record's predecessor is in no stored record;
    - reordered: an intact record follows a record other than the one it was chained to.

    A chain cut at its end still verifies on its own; `anchor` (a `SEQ:HASH` kept from an
    earlier verification) and `event_ids` (every stored event, each needing a record) catch that.

    With `key`, records must be sealed with it (HMAC-SHA256), except plain ones before the
    first keyed record (written before the key was set; the keyed record after them vouches
    for them through its link); a chain with no keyed record fails.

    `start` (seq, hash) is where a chain whose oldest records were archived begins
    (`baton.backends.archive`): its first record must be `seq + 1`, linked to `hash`. An
    `anchor` before `start` cannot be checked here: the result names the archive it needs.
    """
    checked, (prev_seq, prev_hash) = 0, start or (0, GENESIS)
    if anchor is not None and start is not None and anchor[0] < start[0]:
        return VerifyResult(
            ok=False,
            checked=0,
            first_bad_seq=anchor[0],
            problem=f"the anchor names record {anchor[0]}, which was archived (the stored "
            f"chain starts after record {start[0]}): verify it with the archive that holds it "
            "(--archive FILE)",
            head_seq=start[0],
            head_hash=start[1],
        )
    seen: dict[str, int] = {}  # hash -> position, to tell a moved record from a lost one
    ids: set[str] = set()
    anchor_hash: str | None = None
    broken: AuditRecord | None = None  # an intact record linked to an unseen predecessor
    keyed, keyed_from = 0, None
    for r in records:
        if broken is not None:  # only looking for the lost predecessor now
            if r.hash == broken.prev_hash:
                return _reordered(checked, broken, r.seq)
            continue
        checked += 1
        expected = prev_seq + 1
        if r.seq > expected:
            gap = str(expected) if r.seq == expected + 1 else f"{expected} to {r.seq - 1}"
            return _bad(checked, expected, "deleted", f"record {gap} missing (deleted)", prev_seq)
        if r.seq < expected:
            return _bad(
                checked,
                r.seq,
                "reordered",
                f"record {r.seq} comes after record {prev_seq}: positions out of order",
                prev_seq,
            )
        sealed = r.sealed_with(key)
        if sealed is None or (key is None and sealed != "plain"):
            hint = (
                f" (or it was sealed with an audit key: set {KEY_ENV} to verify)"
                if key is None
                else ""
            )
            return _bad(
                checked,
                r.seq,
                "edited",
                f"record {r.seq} ({_what(r)}) was edited: its hash does not match its "
                f"content{hint}",
                prev_seq,
            )
        if sealed == "key":
            keyed += 1
            if keyed_from is None:
                keyed_from = r.seq
        elif key is not None and keyed_from is not None:
            return _bad(
                checked,
                r.seq,
                "edited",
                f"record {r.seq} ({_what(r)}) is not sealed with the audit key although "
                f"record {keyed_from} before it is: it was rewritten by someone without the "
                f"key, or written by a process without {KEY_ENV}",
                prev_seq,
            )
        if r.prev_hash != prev_hash:
            if r.prev_hash in seen:
                return _reordered(checked, r, seen[r.prev_hash])
            broken = r
            continue
        seen[r.hash] = r.seq
        if event_ids is not None:
            ids.add(r.event_id)
        if anchor is not None and r.seq == anchor[0]:
            anchor_hash = r.hash
        prev_seq, prev_hash = r.seq, r.hash
    if anchor is not None and start is not None and anchor[0] == start[0]:
        anchor_hash = start[1]
    if broken is not None:
        return _bad(
            checked,
            broken.seq,
            "deleted",
            f"record {broken.seq} ({_what(broken)}) was chained after a record "
            "that is no longer stored: a record before it was deleted, or rewritten with a new "
            "hash",
            prev_seq,
        )
    if key is not None and checked and keyed_from is None:
        return _bad(
            checked,
            1,
            "edited",
            f"no record is sealed with the audit key ({KEY_ENV}): the chain was written "
            "without it, or rewritten by someone without it",
            prev_seq,
        )
    if anchor is not None:
        seq, digest = anchor
        if prev_seq < seq:
            return _bad(
                checked,
                prev_seq + 1,
                "deleted",
                f"the chain ends at record {prev_seq} but the anchor names record {seq}: "
                f"records {prev_seq + 1} to {seq} were deleted",
                prev_seq,
            )
        if anchor_hash != digest:
            return _bad(
                checked,
                seq,
                "edited",
                f"record {seq} does not have the anchored hash: the chain up to it was rewritten",
                prev_seq,
            )
    if event_ids is not None:
        missing = [e for e in event_ids if e not in ids]
        if missing:
            return _bad(
                checked,
                prev_seq + 1,
                "deleted",
                f"{len(missing)} stored event(s) have no audit record (first: {missing[0]}): "
                f"records after {prev_seq} were deleted",
                prev_seq,
            )
    return VerifyResult(
        ok=True,
        checked=checked,
        head_seq=prev_seq,
        head_hash=prev_hash,
        keyed=keyed,
        keyed_from=keyed_from,
        start_seq=0 if start is None else start[0],
    )


def _what(r: AuditRecord) -> str:
    return f"{r.type} {r.event_id}" if r.event_id else f"{r.type} of session {r.session_id!r}"


def _bad(checked: int, seq: int, tamper: Tamper, problem: str, head: int) -> VerifyResult:
    return VerifyResult(
        ok=False,
        checked=checked,
        first_bad_seq=seq,
        tamper=tamper,
        problem=problem,
        head_seq=head,
    )


def _reordered(checked: int, r: AuditRecord, predecessor_at: int) -> VerifyResult:
    return _bad(
        checked,
        r.seq,
        "reordered",
        f"record {r.seq} ({_what(r)}) is intact but was chained after the record "
        f"now at {predecessor_at}, not after record {r.seq - 1}: records were moved",
        r.seq - 1,
    )


# ------------------------------------------------------------------ stored rows vs chain
@dataclass(frozen=True, slots=True)
class EventRow:
    """A row of a store's `events` table, as read for `agree`."""

    seq: int
    id: str
    type: str
    session_id: str
    trace_id: str
    run_id: str
    ts: float
    data: str


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A row of a store's `messages` table, as read for `agree`."""

    seq: int
    id: str
    session_id: str
    run_id: str | None
    role: str
    agent: str | None
    ts: float
    data: str

    def digest(self) -> str:
        """`message_digest` of the row as stored now."""
        try:
            return message_digest(
                self.id, self.session_id, self.run_id, self.role, self.agent, self.ts, self.data
            )
        except (TypeError, ValueError):  # a value no message can hold was written into it
            return ""


@dataclass(frozen=True, slots=True)
class _Expected:
    record: int  # position of the record that vouches for the row
    id: str
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Found:
    seq: int
    id: str
    label: str
    fields: dict[str, Any]


class _Peek:
    def __init__(self, items: Iterable[Any]) -> None:
        self._it: Iterator[Any] = iter(items)
        self._next: list[Any] = []

    def next(self) -> Any:
        if self._next:
            return self._next.pop()
        return next(self._it, None)

    def peek(self) -> Any:
        if not self._next:
            item = next(self._it, None)
            if item is None:
                return None
            self._next.append(item)
        return self._next[0]


def _event_expected(records: Iterable[AuditRecord]) -> Iterator[_Expected]:
    for r in records:
        if r.type in (MESSAGES, RETENTION):
            continue
        try:
            run_id = json.loads(r.data).get("run_id")
        except (ValueError, AttributeError):
            run_id = None
        yield _Expected(
            r.seq,
            r.event_id,
            {
                "type": r.type,
                "session_id": r.session_id,
                "trace_id": r.trace_id,
                "run_id": run_id,
                "ts": r.ts,
                "data": r.data,
            },
        )


def _event_found(rows: Iterable[EventRow]) -> Iterator[_Found]:
    for e in rows:
        yield _Found(
            e.seq,
            e.id,
            e.type,
            {
                "type": e.type,
                "session_id": e.session_id,
                "trace_id": e.trace_id,
                "run_id": e.run_id,
                "ts": e.ts,
                "data": e.data,
            },
        )


class _BadField(Exception):
    def __init__(self, record: AuditRecord) -> None:
        self.record = record


def _message_expected(records: Iterable[AuditRecord]) -> Iterator[_Expected]:
    for r in records:
        try:
            entries = r.message_entries()
        except ValueError:
            raise _BadField(r) from None
        for mid, digest in entries:
            yield _Expected(r.seq, mid, {"columns or content": digest})


def _message_found(rows: Iterable[MessageRow]) -> Iterator[_Found]:
    for m in rows:
        yield _Found(m.seq, m.id, m.role, {"columns or content": m.digest()})


def agree(
    records: Iterable[AuditRecord],
    events: Iterable[EventRow],
    messages: Iterable[MessageRow] | None = None,
    *,
    records_again: Iterable[AuditRecord] | None = None,
    head_seq: int = 0,
    retired: Collection[str] = (),
) -> VerifyResult:
    """Check that the stored rows are, in order, exactly the ones the chain recorded.

    `records` is an intact chain (check it with `verify` first), read in `seq` order; `events`
    and `messages` are the tables' rows in their `seq` order. `records_again` is the chain
    read a second time (for the messages; `records` is used again when not given, so pass a
    list, or a second iterator). Messages are not checked when `messages` is None (a store
    that predates message auditing). The first row that was edited (a column or its JSON
    changed), deleted (the chain vouches for it, the table lacks it) or inserted (in the
    table, in no record) is named by table and position. Rows after the last one the chain
    vouches for are either inserted or left behind by records cut from the chain's end
    (`head_seq`, the chain's last position): they are reported as records deleted after it.
    `retired` are the ids the chain's `retention` records name (`retired_ids`): rows a
    store's retention deleted, not expected in the tables.
    """
    found = _match(
        "events", _kept(_event_expected(records), retired), _event_found(events), head_seq
    )
    if isinstance(found, VerifyResult):
        return found
    n_events, n_messages = found, None
    if messages is not None:
        again = records if records_again is None else records_again
        try:
            got = _match(
                "messages",
                _kept(_message_expected(again), retired),
                _message_found(messages),
                head_seq,
            )
        except _BadField as exc:
            r = exc.record
            return _bad(
                0,
                r.seq,
                "edited",
                f"record {r.seq} ({_what(r)}) holds a messages field that is not a list of "
                "message digests: it was forged",
                r.seq - 1,
            )
        if isinstance(got, VerifyResult):
            return got
        n_messages = got
    return VerifyResult(ok=True, checked=0, events=n_events, messages=n_messages)


def _kept(expected: Iterator[_Expected], retired: Collection[str]) -> Iterator[_Expected]:
    """The expected rows that retention did not delete."""
    if not retired:
        return expected
    return (e for e in expected if e.id not in retired)


def retired_ids(records: Iterable[AuditRecord]) -> set[str]:
    """The event and message ids the chain's `retention` records name as deleted."""
    out: set[str] = set()
    for r in records:
        if r.type != RETENTION:
            continue
        try:
            data = json.loads(r.data)
            out.update(str(i) for i in data.get("events", ()))
            out.update(str(i) for i in data.get("messages", ()))
        except (ValueError, AttributeError, TypeError):
            continue  # not what gc writes: its ids excuse nothing
    return out


def _match(
    table: Table, expected: Iterator[_Expected], rows: Iterator[_Found], head_seq: int
) -> int | VerifyResult:
    want, have = _Peek(expected), _Peek(rows)
    n = 0
    while True:
        e: _Expected | None = want.next()
        if e is None:
            break
        r: _Found | None = have.next()
        if r is None:
            return _row_bad(
                table,
                None,
                e.record,
                "deleted",
                f"{table} row {e.id} is gone: audit record {e.record} vouches for it but the "
                f"table no longer holds it (deleted)",
            )
        if r.id == e.id:
            diff = [k for k, v in e.fields.items() if r.fields.get(k) != v]
            if diff:
                return _row_bad(
                    table,
                    r.seq,
                    e.record,
                    "edited",
                    f"{table} row {r.seq} ({r.label} {r.id}) was edited: its "
                    f"{', '.join(diff)} no longer match audit record {e.record}",
                )
            n += 1
            continue
        nxt = want.peek()
        if nxt is not None and nxt.id == r.id:
            return _row_bad(
                table,
                None,
                e.record,
                "deleted",
                f"{table} row {e.id} is gone: audit record {e.record} vouches for it, but "
                f"{table} row {r.seq} ({r.label} {r.id}) follows in its place (deleted)",
            )
        after = have.peek()
        if after is not None and after.id == e.id:
            return _row_bad(
                table,
                r.seq,
                e.record,
                "inserted",
                f"{table} row {r.seq} ({r.label} {r.id}) was inserted: no audit record "
                f"vouches for it (the next row is the one audit record {e.record} names)",
            )
        return _row_bad(
            table,
            r.seq,
            e.record,
            "edited",
            f"{table} row {r.seq} ({r.label} {r.id}) is not the row audit record {e.record} "
            f"vouches for ({e.id}): rows were edited, inserted or moved",
        )
    extra: _Found | None = have.next()
    if extra is not None:
        return _row_bad(
            table,
            extra.seq,
            head_seq + 1,
            "deleted",
            f"{table} row {extra.seq} ({extra.label} {extra.id}) has no audit record: it was "
            f"inserted, or records after {head_seq} were deleted from the end of the chain",
        )
    return n


def _row_bad(
    table: Table, row: int | None, record: int | None, tamper: Tamper, problem: str
) -> VerifyResult:
    return VerifyResult(
        ok=False,
        checked=0,
        first_bad_seq=record,
        tamper=tamper,
        problem=problem,
        table=table,
        row=row,
    )


def outcome(chain: VerifyResult, rows: VerifyResult | None) -> VerifyResult:
    """The result of a whole check from the chain's (`verify`) and, once the chain holds, the
    stored rows' (`agree`, None when not checked): the chain's, failed where the rows
    disagree with it."""
    if rows is None:
        return chain
    if not rows.ok:
        return rows.model_copy(update={"checked": chain.checked, "head_seq": chain.head_seq})
    return chain.model_copy(update={"events": rows.events, "messages": rows.messages})


@runtime_checkable
class AuditTrail(Protocol):
    """A store that keeps an audit chain of every event (and message) it stores."""

    async def audit_records(
        self, session_id: str | None = None, limit: int | None = None
    ) -> Sequence[AuditRecord]:
        """Audit records in chain order (the last `limit` if given; one session's if given)."""
        ...

    async def verify_audit(self, anchor: tuple[int, str] | None = None) -> VerifyResult:
        """Verify the whole chain, and that the stored events and messages agree with it."""
        ...
