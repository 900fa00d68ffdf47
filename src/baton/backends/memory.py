"""`MemoryStore`: everything in process memory. The default for `Team(...)` without a store."""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from itertools import islice
from typing import Any

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
from baton.backends._snapshots import check_keep_last, snapshot_json
from baton.backends.audit import Unsealed
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
from baton.backends.outbox import MemoryOutbox
from baton.backends.retention import GcReport, Prune, Retention, Sizes, collect
from baton.core.errors import ConfigError
from baton.core.events import EscalationCard, Event
from baton.core.ids import now
from baton.core.jsontext import copy_json
from baton.core.messages import Message
from baton.core.tasks import Task, TaskStatus


def _copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A copy that shares nothing mutable with `state` (fast path for flat slots)."""
    if all(isinstance(v, (str, int, float, bool, type(None))) for v in state.values()):
        return dict(state)
    return copy.deepcopy(state)


def _snapshot(rec: SessionRecord) -> SessionRecord:
    """A copy of `rec` with its own state (`dataclasses.replace` without its per-call
    inspection of the fields: stores take one per run)."""
    out = object.__new__(type(rec))
    out.__dict__.update(rec.__dict__)
    out.state = _copy_state(rec.state)
    out.requests = dict(rec.requests)
    out.control = copy_json(rec.control) if rec.control else {}
    return out


_StoredEntry = tuple[str, int, int, str, float]
"""A blackboard entry as `MemoryStore` keeps it: (value as JSON text, version, seq, writer,
updated_at); the text is decoded afresh for every read, so no caller shares a stored value."""


def _entry(board: str, key: str, stored: _StoredEntry) -> BoardEntry:
    text, version, seq, writer, at = stored
    return BoardEntry(board, key, json.loads(text), version, seq, writer, at)


_StoredSnapshot = tuple[Snapshot, str]
"""A graph snapshot as `MemoryStore` keeps it: the snapshot (its seq set, its data None) and
its data as JSON text, decoded afresh for every read."""


def _snapshot_of(stored: _StoredSnapshot) -> Snapshot:
    snap, text = stored
    return dataclasses.replace(snap, data=json.loads(text))


def _batch_seq(batch: tuple[int, list[Event]]) -> int:
    """Sort key of an event batch: its number in commit order."""
    return batch[0]


_MIN_PRUNE = 10_000
"""Expired leases are dropped once their table holds more than this many."""

_TRIM_MARGIN = 8
"""When unfinished runs alone keep the store over `max_sessions`, it is looked through again
only after growing by a further `max_sessions // _TRIM_MARGIN` sessions."""


class MemoryStore(MemoryOutbox):
    """A dict-backed store; session state is copied in and out so callers never alias it.

    Bounded, so that a long-running process does not grow without end: it keeps at most
    `max_sessions` sessions (default 10,000; None for no bound). A commit that takes the store
    over the bound evicts the least recently committed sessions together with their
    transcripts and events. With `max_age_s`, a commit also evicts sessions whose `updated_at`
    is older than that many seconds, looking from the least recently committed one on and
    stopping at the first that is young enough.

    A session with a checkpoint (a run that is unfinished, or paused for approval) is never
    evicted; it is moved behind the others and looked at again when its turn comes round.
    While such sessions alone hold the store over its bound, it may exceed `max_sessions` by
    them plus an eighth of `max_sessions`. The session being committed is never evicted by
    its own commit. Sessions are kept in commit order, so a commit looks only at the oldest
    few and costs the same however many are stored. Use a persistent store (SQLite) to keep
    everything.

    Checkpoints are kept by reference, neither copied nor serialised (the kernel never changes
    a state it has checkpointed). Tasks are copied in and out, and evicted with their session.
    Blackboard values are kept as JSON text (so they round-trip as SQLite's do) and are not
    bounded: `delete_board` drops a board. Graph snapshots are kept as JSON text too, bounded
    by `keep_last`, and evicted with the session of their thread. The outbox
    (`baton.backends.outbox`) is not evicted; `prune_outbox` drops what was delivered. Not
    shared between processes: `shared` is False.
    """

    url = "memory://"
    shared = False

    def __init__(
        self,
        max_sessions: int | None = 10_000,
        max_age_s: float | None = None,
        *,
        serialise_checkpoints: bool = False,
    ) -> None:
        if max_sessions is not None and max_sessions < 1:
            raise ConfigError(
                f"MemoryStore(max_sessions={max_sessions}): keep at least 1 session, or pass "
                "None for no bound"
            )
        if max_age_s is not None and max_age_s <= 0:
            raise ConfigError(
                f"MemoryStore(max_age_s={max_age_s}): give a positive number of seconds, or "
                "None to keep sessions however old"
            )
        self.max_sessions = max_sessions
        """Most sessions kept; the least recently committed are evicted first (None: all)."""
        self.max_age_s = max_age_s
        """Sessions whose `updated_at` is older than this are evicted on commit (None: never)."""
        self.serialise_checkpoints = serialise_checkpoints
        """Keep each checkpoint as JSON text (`state.to_json()`, as a persistent store does)
        instead of the live state: slower, and what the tests run to prove the shortcut
        equivalent (a resumed run reads the text back like any store's)."""
        MemoryOutbox.__init__(self)  # the outbox is not evicted with sessions
        self._sessions: OrderedDict[str, SessionRecord] = OrderedDict()  # in commit order
        self._trim_at = max_sessions
        self._messages: dict[str, list[Message]] = {}
        self._events: dict[str, list[tuple[int, list[Event]]]] = {}
        """Per session id, the batches of its events, each with its number in commit order."""
        self._batches = 0
        self._checkpoints: dict[str, Checkpoint] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        self._lease_prune_at = _MIN_PRUNE
        self._human: list[HumanTicket] = []
        self._tasks: dict[tuple[str, str], Task] = {}
        """(run id, task id) -> the stored copy, in the order first saved."""
        self._session_tasks: dict[str, list[tuple[str, str]]] = {}
        """Session id -> the keys of its tasks (to evict them with it)."""
        self._boards: dict[str, dict[str, _StoredEntry]] = {}
        self._board_seqs: dict[str, int] = {}
        """Board -> the seq of its last write (kept when the board is deleted)."""
        self._snapshots: dict[str, dict[str, _StoredSnapshot]] = {}
        """Thread id -> its snapshots by id, in seq order (a replaced one keeps its place)."""

    # ------------------------------------------------------------------ sessions
    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, or None if it does not exist."""
        rec = self._sessions.get(session_id)
        return None if rec is None else _snapshot(rec)

    async def commit_run(
        self,
        session: SessionRecord,
        messages: list[Message],
        events: list[Event],
        *,
        run_id: str | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        """Save the session (compare-and-set on its version), append the run's messages and
        events, save `checkpoint` or drop `run_id`'s checkpoint; then evict what the bounds
        say."""
        sid = session.session_id
        sessions = self._sessions
        stored = sessions.get(sid)
        version = 0 if stored is None else stored.version
        if version != session.version:
            raise version_conflict(sid, session.version, version)
        snap = _snapshot(session)
        snap.version = version + 1
        sessions[sid] = snap
        sessions.move_to_end(sid)
        if messages:
            self._messages.setdefault(sid, []).extend(messages)
        if events:
            self._add_events(sid, events)
            self._add_outbox(events)
        if checkpoint is not None:
            self._checkpoints[sid] = self._kept(checkpoint)
        elif run_id is not None:
            cp = self._checkpoints.get(sid)
            if cp is not None and cp.run_id == run_id:
                del self._checkpoints[sid]
        session.version = version + 1
        limit = self._trim_at
        if (limit is not None and len(sessions) > limit) or (
            self.max_age_s is not None
            and next(iter(sessions.values())).updated_at < time.time() - self.max_age_s
        ):
            self._trim(sid)

    def _add_events(self, sid: str, events: list[Event]) -> None:
        """File the events of one commit under their session ids, numbered in commit order."""
        self._batches += 1
        if {e.session_id for e in events} == {sid}:  # (a set: one call, not one per event)
            self._events.setdefault(sid, []).append((self._batches, list(events)))
            return
        # Events of other sessions (unusual): one batch per stretch of one session's events,
        # so the numbers keep the commit's order across sessions.
        start = 0
        for i in range(1, len(events) + 1):
            if i == len(events) or events[i].session_id != events[start].session_id:
                batch = events[start:i]
                self._events.setdefault(batch[0].session_id, []).append((self._batches, batch))
                self._batches += 1
                start = i

    def _trim(self, keep: str) -> None:
        """Evict the oldest sessions while over `max_sessions` or older than `max_age_s`;
        never `keep` (the session just committed) nor one with a checkpoint."""
        sessions = self._sessions
        limit = self.max_sessions
        cutoff = None if self.max_age_s is None else time.time() - self.max_age_s
        for _ in range(len(sessions)):  # each session is looked at once at most
            sid, rec = next(iter(sessions.items()))
            over = limit is not None and len(sessions) > limit
            old = cutoff is not None and rec.updated_at < cutoff
            if sid == keep or not (over or old):
                break
            if sid in self._checkpoints:
                sessions.move_to_end(sid)  # an unfinished run: kept, looked at again last
            else:
                self._evict(sid)
        if limit is not None:
            # Over the bound now means unfinished runs hold it there; looking through them all
            # at every commit would cost O(n) each, so wait until the store grows by a margin.
            over_by = len(sessions) - limit
            self._trim_at = limit if over_by <= 0 else len(sessions) + max(1, limit // _TRIM_MARGIN)

    def _evict(self, sid: str) -> None:
        """Forget a session with its transcript and events."""
        del self._sessions[sid]
        self._messages.pop(sid, None)
        self._events.pop(sid, None)
        for key in self._session_tasks.pop(sid, ()):
            del self._tasks[key]
        self._snapshots.pop(sid, None)

    async def get_messages(self, session_id: str, limit: int | None = None) -> list[Message]:
        """The session's transcript, oldest first (the last `limit` messages if given)."""
        msgs = self._messages.get(session_id, [])
        if limit is None:
            return list(msgs)
        return msgs[-limit:] if limit > 0 else []  # a slice is already a copy

    async def get_events(
        self, session_id: str | None = None, trace_id: str | None = None
    ) -> list[Event]:
        """Stored events of a session and/or trace, in order (all of them without a filter)."""
        if session_id is not None:
            batches: list[tuple[int, list[Event]]] = self._events.get(session_id, [])
        else:
            batches = sorted((b for bs in self._events.values() for b in bs), key=_batch_seq)
        return [
            e for _, batch in batches for e in batch if trace_id is None or e.trace_id == trace_id
        ]

    async def list_sessions(self, limit: int = 100) -> list[SessionRecord]:
        """Most recently updated sessions first."""
        recs = sorted(self._sessions.values(), key=lambda r: r.updated_at, reverse=True)
        return [_snapshot(r) for r in recs[:limit]]

    # ------------------------------------------------------------------ leases
    async def acquire_lease(self, key: str, owner: str, ttl_s: float) -> bool:
        """Hold `key` for `ttl_s` seconds as `owner` (renews when `owner` already holds it);
        False while another owner's lease is live."""
        t = time.monotonic()
        held = self._leases.get(key)
        if held is not None and held[0] != owner and held[1] > t:
            return False
        self._leases[key] = (owner, t + ttl_s)
        if len(self._leases) > self._lease_prune_at:  # leases never released expire here
            self._leases = {k: v for k, v in self._leases.items() if v[1] > t}
            self._lease_prune_at = max(_MIN_PRUNE, 2 * len(self._leases))
        return True

    async def release_lease(self, key: str, owner: str) -> None:
        """Give `key` up if `owner` holds it."""
        held = self._leases.get(key)
        if held is not None and held[0] == owner:
            del self._leases[key]

    # ------------------------------------------------------------------ checkpoints
    async def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Keep `checkpoint` (by reference) as the session's latest; a stale save of the same
        run (seq not above the stored one) raises `ConflictError`."""
        old = self._checkpoints.get(checkpoint.session_id)
        if old is not None:
            if old.run_id == checkpoint.run_id:
                if checkpoint.seq <= old.seq:
                    raise stale_checkpoint(checkpoint, old.seq)
            elif old.status in ("awaiting_approval", "interrupted"):
                raise paused_elsewhere(checkpoint, old.run_id)
        self._checkpoints[checkpoint.session_id] = self._kept(checkpoint)

    async def put_checkpoint_fenced(
        self, checkpoint: Checkpoint, fence: Fence, snapshots: Sequence[KeptSnapshot] = ()
    ) -> bool:
        """`acquire_lease(fence)`, then `put_checkpoint` and `put_snapshot` for each of
        `snapshots`; atomic, as nothing awaits between (`FencedCheckpoints`). False, nothing
        saved, while another owner's lease is live."""
        for kept in snapshots:  # before anything is written: bad data writes nothing
            check_keep_last(kept.keep_last)
            snapshot_json(kept.snapshot)
        if not await self.acquire_lease(fence.key, fence.owner, fence.ttl_s):
            return False
        await self.put_checkpoint(checkpoint)
        for kept in snapshots:
            await self.put_snapshot(kept.snapshot, kept.keep_last)
        return True

    def _kept(self, checkpoint: Checkpoint) -> Checkpoint:
        """The checkpoint as the store keeps it: as given, or with its state as JSON text."""
        if not self.serialise_checkpoints or checkpoint.state is None:
            return checkpoint
        return dataclasses.replace(checkpoint, state=None, data=checkpoint.state_json())

    async def get_checkpoint(self, session_id: str) -> Checkpoint | None:
        """The session's checkpoint (the object that was saved), or None."""
        return self._checkpoints.get(session_id)

    async def list_checkpoints(self, status: CheckpointStatus | None = None) -> list[Checkpoint]:
        """Checkpoints of unfinished runs, least recently saved first."""
        found = [c for c in self._checkpoints.values() if status is None or c.status == status]
        found.sort(key=lambda c: c.updated_at)
        return found

    async def delete_checkpoint(self, session_id: str, run_id: str) -> None:
        """Drop the session's checkpoint if it belongs to `run_id` (no error if absent)."""
        cp = self._checkpoints.get(session_id)
        if cp is not None and cp.run_id == run_id:
            del self._checkpoints[session_id]

    # ------------------------------------------------------------------ human queue
    async def push_human(self, card: EscalationCard) -> int:
        """Put an escalation card in the human queue; returns its ticket id."""
        ticket = HumanTicket(id=len(self._human) + 1, card=card)
        self._human.append(ticket)
        return ticket.id

    async def list_human(self, status: str | None = "open") -> list[HumanTicket]:
        """Tickets in the human queue, oldest first (copies: change them with update_human)."""
        return [copy.copy(t) for t in self._human if status is None or t.status == status]

    async def get_human(self, ticket_id: int) -> HumanTicket | None:
        """One ticket (a copy), or None."""
        stored = self._ticket(ticket_id)
        return None if stored is None else copy.copy(stored)

    async def update_human(self, ticket: HumanTicket, expect: TicketStatus) -> None:
        """Save the ticket's status, claimed_by, answer and note if its stored status is still
        `expect` (else `ConflictError`); stamps `updated_at`, on `ticket` too."""
        check_ticket(ticket)
        stored = self._ticket(ticket.id)
        if stored is None:
            raise unknown_ticket(ticket.id)
        if stored.status != expect:
            raise ticket_conflict(ticket, expect, stored.status)
        ticket.updated_at = now()
        stored.status, stored.claimed_by = ticket.status, ticket.claimed_by
        stored.answer, stored.note, stored.updated_at = (
            ticket.answer,
            ticket.note,
            ticket.updated_at,
        )

    def _ticket(self, ticket_id: int) -> HumanTicket | None:
        if isinstance(ticket_id, int) and 0 < ticket_id <= len(self._human):
            return self._human[ticket_id - 1]
        return None

    # ------------------------------------------------------------------ tasks
    async def put_task(
        self, session_id: str, run_id: str, task: Task, expected_version: int
    ) -> None:
        """Save a copy of `task` if its stored version is `expected_version` (else
        `ConflictError`); sets `task.version`, `task.session_id` and `task.run_id`."""
        check_task_owner(session_id, run_id, task)
        key = (run_id, task.task_id)
        stored = self._tasks.get(key)
        if stored is not None and stored.session_id != session_id:
            raise task_elsewhere(run_id, task.task_id, str(stored.session_id), session_id)
        version = 0 if stored is None else stored.version
        if version != expected_version:
            raise task_conflict(run_id, task.task_id, expected_version, version)
        saved = {"version": version + 1, "session_id": session_id, "run_id": run_id}
        self._tasks[key] = task.model_copy(deep=True, update=saved)
        if stored is None:
            self._session_tasks.setdefault(session_id, []).append(key)
        task.version, task.session_id, task.run_id = version + 1, session_id, run_id

    async def get_task(self, run_id: str, task_id: str) -> Task | None:
        """A copy of the stored task, or None."""
        stored = self._tasks.get((run_id, task_id))
        return None if stored is None else stored.model_copy(deep=True)

    async def list_tasks(
        self,
        session_id: str | None = None,
        run_id: str | None = None,
        status: TaskStatus | None = None,
    ) -> list[Task]:
        """Copies of the stored tasks matching every filter given, in the order first saved."""
        return [
            t.model_copy(deep=True)
            for t in self._tasks.values()
            if (session_id is None or t.session_id == session_id)
            and (run_id is None or t.run_id == run_id)
            and (status is None or t.status == status)
        ]

    # ------------------------------------------------------------------ blackboard
    async def read_board(self, board: str) -> dict[str, BoardEntry]:
        """Every entry of the board, by key in key order (copies)."""
        entries = self._boards.get(board, {})
        return {key: _entry(board, key, entries[key]) for key in sorted(entries)}

    async def read_entry(self, board: str, key: str) -> BoardEntry | None:
        """The entry (a copy), or None."""
        stored = self._boards.get(board, {}).get(key)
        return None if stored is None else _entry(board, key, stored)

    async def write_entry(
        self, board: str, key: str, value: Any, expected_version: int, *, writer: str = ""
    ) -> BoardEntry:
        """Keep `value` as JSON if the entry's stored version is `expected_version` (else
        `ConflictError`); returns the new entry."""
        text = board_json(board, key, value)
        entries = self._boards.get(board, {})
        stored = entries.get(key)
        version = 0 if stored is None else stored[1]
        if version != expected_version:
            raise board_conflict(board, key, expected_version, version)
        seq = self._board_seqs.get(board, 0) + 1
        saved = (text, version + 1, seq, writer, now())
        self._boards.setdefault(board, entries)[key] = saved
        self._board_seqs[board] = seq
        return _entry(board, key, saved)

    async def board_changes(self, board: str, since_seq: int = 0) -> list[BoardEntry]:
        """Copies of the entries last written after `since_seq`, oldest write first."""
        entries = self._boards.get(board, {})
        changed = sorted((s[2], k) for k, s in entries.items() if s[2] > since_seq)
        return [_entry(board, key, entries[key]) for _, key in changed]

    async def delete_board(self, board: str) -> None:
        """Drop the board's entries (its seq is kept)."""
        self._boards.pop(board, None)

    # ------------------------------------------------------------------ graph snapshots
    async def put_snapshot(self, snapshot: Snapshot, keep_last: int | None = None) -> Snapshot:
        """Keep `snapshot` with its data as JSON (a stored id is replaced and keeps its seq),
        then drop the thread's oldest beyond `keep_last`; returns the stored snapshot."""
        check_keep_last(keep_last)
        text = snapshot_json(snapshot)
        thread = self._snapshots.setdefault(snapshot.thread_id, {})
        old = thread.get(snapshot.id)
        if old is not None:
            seq = old[0].seq
        else:
            seq = next(reversed(thread.values()))[0].seq + 1 if thread else 1
        stored = (dataclasses.replace(snapshot, seq=seq, data=None), text)
        thread[snapshot.id] = stored  # a stored key keeps its place in the dict
        if keep_last is not None:
            for key in list(islice(thread, max(0, len(thread) - keep_last))):
                del thread[key]
        return _snapshot_of(stored)

    async def get_snapshot(self, thread_id: str, snapshot_id: str) -> Snapshot | None:
        """The snapshot (a copy), or None."""
        stored = self._snapshots.get(thread_id, {}).get(snapshot_id)
        return None if stored is None else _snapshot_of(stored)

    async def list_snapshots(self, thread_id: str, limit: int | None = None) -> list[Snapshot]:
        """Copies of the thread's snapshots, newest first (the newest `limit` if given)."""
        newest = reversed(self._snapshots.get(thread_id, {}).values())
        return [_snapshot_of(s) for s in islice(newest, None if limit is None else max(0, limit))]

    async def delete_snapshots(self, thread_id: str) -> None:
        """Drop the thread's snapshots."""
        self._snapshots.pop(thread_id, None)

    # ------------------------------------------------------------------ retention
    async def gc(self, policy: Retention, *, dry_run: bool = False) -> GcReport:
        """Delete what `policy` does not keep (`baton.backends.retention`); in process memory
        the sizes count records, not bytes."""
        sizes = Sizes(self._gc_count, "records kept (messages, events, snapshots), not bytes")
        return await collect(self, policy, dry_run, self._gc_prune, sizes)

    async def _gc_count(self) -> int | None:
        return (
            sum(len(m) for m in self._messages.values())
            + sum(len(b) for bs in self._events.values() for _, b in bs)
            + sum(len(t) for t in self._snapshots.values())
        )

    async def _gc_prune(self, prune: Prune, item: Unsealed | None) -> None:
        sid, gone = prune.session_id, {*prune.messages, *prune.events}
        if prune.messages:
            self._messages[sid] = [m for m in self._messages.get(sid, []) if m.id not in gone]
        if prune.events:
            batches = [
                (n, [e for e in b if e.id not in gone]) for n, b in self._events.get(sid, [])
            ]
            self._events[sid] = [(n, b) for n, b in batches if b]
        thread = self._snapshots.get(sid, {})
        for snapshot_id in prune.snapshots:
            thread.pop(snapshot_id, None)

    async def close(self) -> None:
        """Nothing to release."""
        return None
