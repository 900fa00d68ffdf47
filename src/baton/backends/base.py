"""The store: small capability protocols that every backend implements, each tested by one
conformance suite (`baton.testing`).

`Sessions` (sessions, transcripts, events), `Checkpoints` (unfinished runs), `Leases` (one
runner per session) and `HumanQueue` (escalations) are what the kernel needs: `Store` is their
union. `Tasks` (the tasks of plan-execute-review runs), `Blackboard` (shared, versioned
entries that several agents read and write) and `Snapshots` (the per-super-step checkpoints of
graph threads) are capabilities of their own that a topology needing one declares in its
blueprint (`isinstance(store, Blackboard)`); `AuditTrail` (`baton.backends.audit`) is the
hash-chained record of what a store committed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from baton.core.errors import StoreError
from baton.core.events import EscalationCard, Event
from baton.core.ids import now
from baton.core.messages import Message
from baton.core.payload import HandoffPayload
from baton.core.tasks import Task, TaskStatus


@dataclass
class SessionRecord:
    """What a store keeps per session between runs."""

    session_id: str
    user_id: str | None = None
    holder: str | None = None
    """Agent that held the baton when the last run ended; the next run starts there."""
    holder_since: str | None = None
    """Id of the user message of the run in which the holder took the baton."""
    incoming: HandoffPayload | None = None
    """The payload with which the holder received the baton, if it did by hand-off."""
    state: dict[str, Any] = field(default_factory=dict)
    """Accumulated business slots (order_id, server_id, ...)."""
    created_at: float = field(default_factory=now)
    updated_at: float = field(default_factory=now)
    version: int = 0
    """Commits so far. `commit_run` is compare-and-set on it: a record read at version n
    commits only while the store still holds version n (then both become n + 1)."""
    requests: dict[str, str] = field(default_factory=dict)
    """Request id -> run id of the last requests (e.g. bus messages) whose runs this session
    committed, oldest first, at most `MAX_REQUESTS`: committed with the run, so a request
    delivered again is recognised and never run twice."""
    control: dict[str, Any] = field(default_factory=dict)
    """The kernel's control slots (`baton.runtime.control`): the user's needs still to hand
    on, where each `state` slot came from. Only the kernel writes them: no hand-off, tool,
    extractor or text reaches them, and no model is shown them as facts. JSON data."""


MAX_REQUESTS = 64
"""Request ids a session remembers (`SessionRecord.requests`)."""


TicketStatus = Literal["open", "claimed", "answered", "closed"]


@dataclass
class HumanTicket:
    """An escalation in the human queue: open -> claimed -> answered/closed."""

    id: int
    card: EscalationCard
    status: TicketStatus = "open"
    claimed_by: str | None = None
    """Who claimed it (set by `claim_human`)."""
    answer: str | None = None
    """The person's reply to the user, once answered."""
    note: str = ""
    """Why it was closed, or anything the person added."""
    updated_at: float = field(default_factory=now)


CheckpointStatus = Literal["running", "awaiting_approval", "interrupted", "cancelled"]
"""`running`: the run goes on (or its process died: resume it); `awaiting_approval`: it waits
for a person's decision; `interrupted`: it waits for a person's answer to an `interrupt`;
`cancelled`: it was cancelled, what it did is committed, and `resume` may still
continue it until the session's next message."""


@dataclass(slots=True)
class Checkpoint:
    """The saved state of one unfinished run: the latest one per session.

    The kernel gives `state`, an object with `to_json() -> str`; a store in process memory may
    keep that object as it is (the kernel never changes a state it has checkpointed), a
    persistent store keeps `state.to_json()` (sealed when it has checkpoint keys,
    `baton.backends.sealing`) and returns it as `data`. `meta` is a small JSON dict (agent,
    approval card) that listings read without decoding the state.
    """

    session_id: str
    run_id: str
    seq: int
    """Increases with every save of the run; a save with a seq not above the stored one of the
    same run is stale and raises `ConflictError`."""
    status: CheckpointStatus = "running"
    state: Any = None
    data: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    updated_at: float = field(default_factory=now)
    sealed_with: str | None = None
    """Id of the checkpoint key the state is encrypted with at rest; None when it is stored
    in clear (or kept in process memory)."""
    unreadable: str | None = None
    """Why the stored state cannot be opened (a key this store lacks, a changed blob); the
    checkpoint is listed all the same, and `state_json()` raises `StoreError` with it."""

    def state_json(self) -> str:
        """The state as JSON text, whichever form the store returned."""
        if self.unreadable is not None:
            raise StoreError(self.unreadable)
        if self.data is not None:
            return self.data
        if self.state is None:
            raise ValueError("checkpoint has neither state nor data")
        text: str = self.state.to_json()
        return text


@runtime_checkable
class Sessions(Protocol):
    """Sessions with their transcripts and events, each run committed in one step."""

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, or None if it does not exist."""
        ...

    async def commit_run(
        self,
        session: SessionRecord,
        messages: list[Message],
        events: list[Event],
        *,
        run_id: str | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        """Atomically save the session and append messages and events, and, in the same
        transaction: with `checkpoint`, save it as the session's checkpoint (a run commits
        what it did so far and goes on, e.g. paused for approval); else with `run_id`, delete
        the session's checkpoint if it is that run's (the run is finished); else leave the
        checkpoint alone.

        Compare-and-set: raises `ConflictError` (nothing written) unless the stored version
        equals `session.version` (0 for a session not stored yet); on success
        `session.version` is incremented in place."""
        ...

    async def get_messages(self, session_id: str, limit: int | None = None) -> list[Message]:
        """The session's transcript, oldest first (the last `limit` messages if given)."""
        ...

    async def get_events(
        self, session_id: str | None = None, trace_id: str | None = None
    ) -> list[Event]:
        """Stored events of a session and/or trace, in order."""
        ...

    async def list_sessions(self, limit: int = 100) -> list[SessionRecord]:
        """Most recently updated sessions first."""
        ...


@runtime_checkable
class Checkpoints(Protocol):
    """The latest checkpoint of each session's unfinished run (resume, approvals)."""

    async def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Save the latest checkpoint of a session's unfinished run (replacing the previous
        one). Raises `ConflictError` for a stale save (same run, seq not above the stored one)
        and for a save of another run while the stored one waits for approval (a person's
        decision is never overwritten).

        The store reads `checkpoint.state` before it first yields to the event loop: a store
        that keeps the object may keep the kernel's live state (the kernel's next checkpoint
        replaces it); a persistent store serialises it at once."""
        ...

    async def get_checkpoint(self, session_id: str) -> Checkpoint | None:
        """The session's checkpoint, or None when no run of it is unfinished."""
        ...

    async def list_checkpoints(self, status: CheckpointStatus | None = None) -> list[Checkpoint]:
        """Checkpoints of unfinished runs, oldest first (with state or data)."""
        ...

    async def delete_checkpoint(self, session_id: str, run_id: str) -> None:
        """Drop the session's checkpoint if it belongs to `run_id` (no error if absent)."""
        ...


@runtime_checkable
class Leases(Protocol):
    """Leases that expire: one runner per session across processes."""

    async def acquire_lease(self, key: str, owner: str, ttl_s: float) -> bool:
        """Hold `key` for `ttl_s` seconds as `owner` (renews when `owner` already holds it);
        False while another owner's lease is live."""
        ...

    async def release_lease(self, key: str, owner: str) -> None:
        """Give `key` up if `owner` holds it."""
        ...


@dataclass(frozen=True, slots=True)
class Fence:
    """The lease a checkpoint save renews in the same write (`FencedCheckpoints`)."""

    key: str
    owner: str
    ttl_s: float


@runtime_checkable
class FencedCheckpoints(Protocol):
    """A store that renews the run's lease and saves its checkpoint in one write (optional:
    without it the kernel renews the lease, then saves, in two)."""

    async def put_checkpoint_fenced(
        self, checkpoint: Checkpoint, fence: Fence, snapshots: Sequence[KeptSnapshot] = ()
    ) -> bool:
        """`acquire_lease(fence)` and, only if it succeeds, `put_checkpoint(checkpoint)` and
        `put_snapshot(snapshot, keep_last)` for each of `snapshots` (the graph boundaries the
        step reached), as one atomic write. False (nothing saved) while another owner's lease
        is live; the conflicts of `put_checkpoint` raise as there (nothing saved either)."""
        ...


@runtime_checkable
class HumanQueue(Protocol):
    """Escalations waiting for a person: open -> claimed -> answered/closed."""

    async def push_human(self, card: EscalationCard) -> int:
        """Put an escalation card in the human queue; returns its ticket id."""
        ...

    async def list_human(self, status: str | None = "open") -> list[HumanTicket]:
        """Tickets in the human queue, oldest first."""
        ...

    async def get_human(self, ticket_id: int) -> HumanTicket | None:
        """One ticket, or None."""
        ...

    async def update_human(self, ticket: HumanTicket, expect: TicketStatus) -> None:
        """Save `ticket` (status, claimed_by, answer, note) if its stored status is still
        `expect`; else raise `ConflictError` and write nothing."""
        ...


@runtime_checkable
class Store(Sessions, Checkpoints, Leases, HumanQueue, Protocol):
    """What the kernel needs of a store: `Sessions`, `Checkpoints`, `Leases` and
    `HumanQueue`, plus `url`, `shared` and `close`. Implementations: `MemoryStore`,
    `SQLiteStore`, `PostgresStore`, `RedisStore`; each also has the `Tasks`, `Blackboard` and
    `Snapshots` capabilities, and the last three the `AuditTrail` (`baton.backends.audit`)."""

    url: str
    shared: bool
    """True when other processes reach the same data (SQLite file, PostgreSQL, Redis): runs
    then hold a lease per session; False for process memory, where a lock per team is enough."""

    async def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class Tasks(Protocol):
    """The tasks of plan-execute-review runs (`baton.core.tasks`), one record per
    (run, task id), each saved compare-and-set on its own version: executors and a reviewer
    working on one plan (in several processes, with a shared store) never overwrite each
    other's steps."""

    async def put_task(
        self, session_id: str, run_id: str, task: Task, expected_version: int
    ) -> None:
        """Save `task` as a task of run `run_id` (of session `session_id`) if the stored
        version of that (run, task id) is `expected_version` (0: not stored yet); on success
        set `task.version` to `expected_version + 1`, and `task.session_id`/`task.run_id`, in
        place. Else raise `ConflictError` and write nothing. A task that names another session
        or run than the one given, or is stored under another session, raises `StoreError`."""
        ...

    async def get_task(self, run_id: str, task_id: str) -> Task | None:
        """The stored task (a copy, with its version), or None."""
        ...

    async def list_tasks(
        self,
        session_id: str | None = None,
        run_id: str | None = None,
        status: TaskStatus | None = None,
    ) -> list[Task]:
        """Stored tasks matching every filter given, in the order they were first saved."""
        ...


@dataclass(frozen=True, slots=True)
class BoardEntry:
    """One entry of a blackboard as the store holds it: a JSON value under (board, key).

    Every field is JSON (`dataclasses.asdict(entry)` can be dumped as it is). An entry handed
    out by a store is the caller's own: changing its `value` changes nothing stored.
    """

    board: str
    """The blackboard the entry is on."""
    key: str
    """The entry's name, unique on its board."""
    value: Any
    """Any JSON value: string, number, boolean, None, or lists and dicts of them."""
    version: int
    """Writes of this entry so far (1 after the first); `write_entry` is compare-and-set on
    it."""
    seq: int
    """The board-wide number of the write that left the entry as it is: every write on a
    board takes the board's next seq, so `board_changes(board, since_seq)` finds what changed
    since a reader last looked."""
    writer: str = ""
    """Who wrote this version (an agent's name), as the writer gave it."""
    updated_at: float = field(default_factory=now)
    """When this version was written (seconds since the epoch)."""


@runtime_checkable
class Blackboard(Protocol):
    """Blackboards: shared, versioned state that several agents read and write (in several
    processes, with a shared store). Each entry is saved compare-and-set on its own version,
    so two agents that read one version cannot both write over it; `write_with_retry`
    (`baton.backends.board`) re-reads and retries for them."""

    async def read_board(self, board: str) -> dict[str, BoardEntry]:
        """Every entry of the board, by key (empty for a board never written or deleted)."""
        ...

    async def read_entry(self, board: str, key: str) -> BoardEntry | None:
        """The entry, or None."""
        ...

    async def write_entry(
        self, board: str, key: str, value: Any, expected_version: int, *, writer: str = ""
    ) -> BoardEntry:
        """Write `value` (JSON) under (board, key) if the entry's stored version is
        `expected_version` (0: the key must not exist yet); returns the stored entry, at
        version `expected_version + 1` with the board's next seq. Else raise `ConflictError`
        and write nothing. A value that is not JSON raises `StoreError`."""
        ...

    async def board_changes(self, board: str, since_seq: int = 0) -> list[BoardEntry]:
        """The entries whose last write has a seq above `since_seq`, oldest write first (the
        last entry's seq is where to look from next time)."""
        ...

    async def delete_board(self, board: str) -> None:
        """Drop every entry of the board (no error if it has none). The board's seq goes on
        from where it was, so a reader's `since_seq` still finds later writes."""
        ...


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One checkpoint of a graph thread, saved after a super-step: what time travel lists
    (a thread's history) and forks from (a new branch whose first snapshot names an older one
    as its parent).

    A snapshot handed out by a store is the caller's own: changing its `data` changes nothing
    stored.
    """

    thread_id: str
    """The thread it belongs to: the session id of the graph's thread."""
    id: str
    """Unique within the thread, chosen by the caller (deterministic, e.g. `f"{run_id}:{step}"`,
    so that a resumed run saving its step again replaces it)."""
    run_id: str
    """The run that saved it."""
    step: int
    """The super-step number along its branch."""
    parent_id: str | None
    """The snapshot it followed (None for a thread's first); a fork's first snapshot names the
    older one it forked from. Retention may have deleted the parent since."""
    data: Any
    """Any JSON value (graph state, next nodes, ...)."""
    seq: int = 0
    """Set by the store: the order of first save within the thread (1 for the first; a thread
    emptied by `delete_snapshots` starts over)."""
    created_at: float = field(default_factory=now)
    """When it was saved (seconds since the epoch)."""


@dataclass(frozen=True, slots=True)
class KeptSnapshot:
    """A snapshot to save with a step's checkpoint, and the thread's retention
    (`Snapshots.put_snapshot`'s `keep_last`)."""

    snapshot: Snapshot
    keep_last: int | None = None


@runtime_checkable
class Snapshots(Protocol):
    """The per-super-step checkpoints of graph threads, for time travel: list a thread's
    history, fork from an older snapshot, and keep only the newest few (`keep_last`)."""

    async def put_snapshot(self, snapshot: Snapshot, keep_last: int | None = None) -> Snapshot:
        """Save `snapshot`; one whose (thread_id, id) is stored already is replaced in place
        and keeps its seq (a resumed run saves its step again). Then, with `keep_last` (>= 1),
        delete the thread's oldest snapshots (by seq, whatever their branch) beyond the newest
        `keep_last`. Returns the stored snapshot (with its seq, its data as stored). Data that
        is not JSON raises `StoreError` and `keep_last` < 1 raises `ConfigError`; nothing is
        written then."""
        ...

    async def get_snapshot(self, thread_id: str, snapshot_id: str) -> Snapshot | None:
        """The snapshot, or None."""
        ...

    async def list_snapshots(self, thread_id: str, limit: int | None = None) -> list[Snapshot]:
        """The thread's snapshots, newest first (highest seq first); the newest `limit` if
        given."""
        ...

    async def delete_snapshots(self, thread_id: str) -> None:
        """Drop every snapshot of the thread (no error if it has none)."""
        ...
