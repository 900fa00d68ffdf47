"""The hash-chained audit trail: append-only records that prove no stored event was changed.

Every stored event gets one `AuditRecord` holding the event's JSON exactly as the store keeps
it (events are redacted before they reach a store, so the audit holds no more than the events
do), the hash of the record before it (`prev_hash`) and its own
`hash = sha256(prev_hash + body)`. The body is a canonical JSON array of the record's fields
(`[event_id, type, session_id, trace_id, ts]`), a newline, then the event JSON: the array
cannot contain a raw newline, so the split is unambiguous, and the event text is hashed as
stored, not re-serialised. Editing any record breaks its hash; deleting or moving one breaks
the link of the record after it. `verify` walks a chain and names the first record that was
edited, deleted or reordered.

`seq` is the record's position (1, 2, 3, ...) and is not part of the hash: the chain of
`prev_hash` links fixes the order, and `verify` demands gap-free positions, so any change of
`seq` shows as a gap or a broken link. Keeping it out of the hash is what lets `verify` tell
a moved record (intact, but linked to another predecessor) from an edited one.

Nothing here touches a database: a store builds the records' bodies with `prepare` before it
takes its write lock, chains them to the current tip with `link` inside the transaction that
stores the events, and passes what it reads back to `verify`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from baton.core.data import Data
from baton.core.events import Event

GENESIS = "0" * 64
"""`prev_hash` of the first record of every chain."""

Tamper = Literal["edited", "deleted", "reordered"]
"""What `verify` found done to the first bad record."""


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """`value` as canonical JSON: sorted keys, no whitespace, UTF-8 text kept as it is."""
    return _CANONICAL.encode(value)


def event_json(event: Event) -> str:
    """The JSON of an event as stores keep it (pydantic: fixed field order, compact, UTF-8)."""
    return event.model_dump_json()


def record_body(
    event_id: str, type: str, session_id: str, trace_id: str, ts: float, data: str
) -> str:
    """The text a record's hash covers after the previous hash: its fields, newline, event."""
    return canonical_json([event_id, type, session_id, trace_id, ts]) + "\n" + data


def chain_hash(prev_hash: str, body: str) -> str:
    """sha256 (hex) of `prev_hash` followed by `body`."""
    return hashlib.sha256((prev_hash + body).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord(Data):
    """One link of the audit chain: a stored event and the hashes that bind it in place."""

    seq: int
    """Position in the chain, from 1, without gaps."""
    event_id: str
    """Id of the event."""
    type: str
    """Event type, e.g. `handoff`."""
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
    """sha256(prev_hash + body) in hex."""

    def body(self) -> str:
        """The canonical text the hash covers (after `prev_hash`)."""
        return record_body(
            self.event_id, self.type, self.session_id, self.trace_id, self.ts, self.data
        )

    def intact(self) -> bool:
        """True when `hash` matches the record's content and `prev_hash`."""
        try:
            return chain_hash(self.prev_hash, self.body()) == self.hash
        except (TypeError, ValueError):  # a value no event can hold was written into the record
            return False

    def event(self) -> dict[str, Any]:
        """The stored event as a dict."""
        data: dict[str, Any] = json.loads(self.data)
        return data


@dataclass(frozen=True, slots=True)
class Unsealed:
    """An event's audit fields and hashed body, before it is linked into a chain."""

    event_id: str
    type: str
    session_id: str
    trace_id: str
    ts: float
    data: str
    body: str


def prepare(events: Sequence[Event], texts: Sequence[str] | None = None) -> list[Unsealed]:
    """The audit fields of `events`: the costly part of sealing, done before any lock.

    `texts` are the events' JSON when the caller already has it (`event_json` of each).
    """
    if texts is None:
        texts = [event_json(e) for e in events]
    return [
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


def link(
    items: Iterable[Unsealed], last_seq: int = 0, last_hash: str = GENESIS
) -> list[AuditRecord]:
    """Chain prepared items after the record (`last_seq`, `last_hash`)."""
    out: list[AuditRecord] = []
    seq, prev = last_seq, last_hash
    for u in items:
        seq += 1
        h = chain_hash(prev, u.body)
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
            )
        )
        prev = h
    return out


def seal(events: Sequence[Event], last_seq: int = 0, last_hash: str = GENESIS) -> list[AuditRecord]:
    """Audit records for `events`, chained after the record (`last_seq`, `last_hash`)."""
    return link(prepare(events), last_seq, last_hash)


class VerifyResult(BaseModel):
    """What `verify` found: an intact chain, or the first bad record and why."""

    ok: bool = Field(description="True when the chain is intact.")
    checked: int = Field(description="Records examined.")
    first_bad_seq: int | None = Field(
        default=None, description="Position of the first edited, deleted or moved record."
    )
    tamper: Tamper | None = Field(default=None, description="edited, deleted or reordered.")
    problem: str | None = Field(default=None, description="What is wrong, in words.")
    head_seq: int = Field(default=0, description="Position of the last record checked.")
    head_hash: str = Field(default=GENESIS, description="Hash of the last record checked.")

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
) -> VerifyResult:
    """Check a whole chain, read in `seq` order, and name the first bad record.

    - edited: a record's hash does not match its content;
    - deleted: a position is missing, or a record's predecessor is in no stored record;
    - reordered: an intact record follows a record other than the one it was chained to.

    A chain cut at its end still verifies on its own; `anchor` (a `SEQ:HASH` kept from an
    earlier verification) and `event_ids` (every stored event, each needing a record) catch that.
    """
    checked, prev_seq, prev_hash = 0, 0, GENESIS
    seen: dict[str, int] = {}  # hash -> position, to tell a moved record from a lost one
    ids: set[str] = set()
    anchor_hash: str | None = None
    broken: AuditRecord | None = None  # an intact record linked to an unseen predecessor
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
        if not r.intact():
            return _bad(
                checked,
                r.seq,
                "edited",
                f"record {r.seq} ({r.type} {r.event_id}) was edited: its hash does not match "
                "its content",
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
    if broken is not None:
        return _bad(
            checked,
            broken.seq,
            "deleted",
            f"record {broken.seq} ({broken.type} {broken.event_id}) was chained after a record "
            "that is no longer stored: a record before it was deleted, or rewritten with a new "
            "hash",
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
    return VerifyResult(ok=True, checked=checked, head_seq=prev_seq, head_hash=prev_hash)


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
        f"record {r.seq} ({r.type} {r.event_id}) is intact but was chained after the record "
        f"now at {predecessor_at}, not after record {r.seq - 1}: records were moved",
        r.seq - 1,
    )


@runtime_checkable
class AuditTrail(Protocol):
    """A store that keeps an audit chain of every event it stores."""

    async def audit_records(
        self, session_id: str | None = None, limit: int | None = None
    ) -> Sequence[AuditRecord]:
        """Audit records in chain order (the last `limit` if given; one session's if given)."""
        ...

    async def verify_audit(self, anchor: tuple[int, str] | None = None) -> VerifyResult:
        """Verify the whole chain (and that every stored event has a record)."""
        ...
