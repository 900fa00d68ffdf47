"""Holding a session and continuing its runs: crash recovery, approvals, timeouts.

`hold` gives one run at a time a session: a lock inside the process and, for stores other
processes share, a lease in the store, renewed while the run goes on (a process killed mid-run
stops renewing, and its lease lapses after `lease_s`). `resume` and `decide` load the session's
checkpoint and hand the run back to the kernel exactly where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from baton.backends.base import Checkpoint, Fence, KeptSnapshot, SessionRecord, Snapshots, Store
from baton.core.errors import (
    ApprovalError,
    BatonError,
    ConflictError,
    InterruptError,
    NewerCheckpoint,
    NoRunToResume,
    StoreError,
)
from baton.core.events import RunFinished
from baton.core.ids import new_id
from baton.handoff import handoff_target
from baton.runtime.approval import decide, expire
from baton.runtime.interrupts import give_answer
from baton.runtime.redact import Redactor, end_run_log_redaction, run_log_redaction
from baton.runtime.result import RunResult
from baton.runtime.runner import Runner
from baton.runtime.state import RunState, restore_committed

if TYPE_CHECKING:
    from baton.runtime.plan import AgentPlan

_POLL_S = 0.05


class SessionLocks:
    """One lock per session for every team of this process on one store object, with the
    number of runs using each (a lock goes once nobody waits for it)."""

    __slots__ = ("locks", "users")

    def __init__(self) -> None:
        self.locks: dict[str, asyncio.Lock] = {}
        self.users: dict[str, int] = {}


_BY_STORE: weakref.WeakKeyDictionary[
    Store, weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SessionLocks]
] = weakref.WeakKeyDictionary()
"""The session locks of each store object (two teams on one `MemoryStore` take turns), per
event loop (an asyncio lock belongs to one loop: two threads each in `run_sync` have their
own); it holds nothing once the store or the loop is gone."""


class LiveSessions:
    """The sessions of one store object that a run of this process holds, across threads
    (each `run_sync` has its own event loop and so its own asyncio locks): a run in another
    thread is waited for, never taken for a crashed run and resumed under it."""

    __slots__ = ("guard", "held")

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.held: set[str] = set()

    def take(self, session_id: str) -> bool:
        """Hold `session_id` if no other thread's run does."""
        with self.guard:
            if session_id in self.held:
                return False
            self.held.add(session_id)
            return True

    def give(self, session_id: str) -> None:
        with self.guard:
            self.held.discard(session_id)


_LIVE: weakref.WeakKeyDictionary[Store, LiveSessions] = weakref.WeakKeyDictionary()
_LIVE_GUARD = threading.Lock()


def live_sessions(store: Store) -> LiveSessions:
    """The sessions of `store` held by runs of this process."""
    with _LIVE_GUARD:
        found = _LIVE.get(store)
        if found is None:
            found = _LIVE[store] = LiveSessions()
        return found


def session_locks(store: Store) -> SessionLocks:
    """The session locks of `store` for the running event loop."""
    loop = asyncio.get_running_loop()
    per_loop = _BY_STORE.get(store)
    if per_loop is None:
        per_loop = _BY_STORE[store] = weakref.WeakKeyDictionary()
    found = per_loop.get(loop)
    if found is None:
        found = per_loop[loop] = SessionLocks()
    return found


class Resumer:
    """Session holding and resumption for one runner."""

    def __init__(self, runner: Runner, lease_s: float) -> None:
        self.runner = runner
        self.lease_s = lease_s
        """Seconds a lease lasts without renewal (renewed every third of it)."""
        self.owner = new_id("own_")
        """This process's (team's) name in the store's leases."""
        runner.fence = self.fence
        runner.fenced_save = self.save
        self._held: tuple[Store, asyncio.AbstractEventLoop, SessionLocks] | None = None

    def _locks(self, store: Store) -> SessionLocks:
        """The session locks of the team's store on this loop (looked up again after
        `use_store`, or from another thread's loop)."""
        held = self._held
        loop = asyncio.get_running_loop()
        if held is None or held[0] is not store or held[1] is not loop:
            held = self._held = (store, loop, session_locks(store))
        return held[2]

    async def fence(self, session_id: str) -> None:
        """Renew this process's lease on the session, or stop the run: another process took
        the session over (this one stalled past its lease), and its checkpoints win."""
        store = self.runner.cfg.store
        if not await store.acquire_lease(f"session|{session_id}", self.owner, self.lease_s):
            raise self._taken_over(session_id)

    async def save(self, checkpoint: Checkpoint, snapshots: list[KeptSnapshot]) -> None:
        """Save a running checkpoint, with the graph snapshots of its step, under this
        process's lease on its session: one write that renews the lease and saves (a
        `FencedCheckpoints` store), or the renewal, then the saves. `ConflictError` when
        another process took the session over."""
        store = self.runner.cfg.store
        fenced = getattr(store, "put_checkpoint_fenced", None)
        session_id = checkpoint.session_id
        if fenced is None:
            await self.fence(session_id)
            for kept in snapshots:  # (a graph's store keeps snapshots: checked at compile)
                await cast(Snapshots, store).put_snapshot(kept.snapshot, kept.keep_last)
            await store.put_checkpoint(checkpoint)
            return
        fence = Fence(f"session|{session_id}", self.owner, self.lease_s)
        saving = fenced(checkpoint, fence, snapshots) if snapshots else fenced(checkpoint, fence)
        if not await saving:
            raise self._taken_over(session_id)

    def _taken_over(self, session_id: str) -> ConflictError:
        return ConflictError(
            f"session {session_id!r} was taken over by another process while this run "
            f"stalled for over {self.lease_s:g}s; this run stops, and nothing of it is saved",
            key=session_id,
        )

    def hold(
        self, session_id: str, redactor: Redactor | None = None, *, tools: bool = True
    ) -> Hold:
        """`async with resumer.hold(sid):` the session for one run (see `Hold`); `tools`:
        list the agents' toolsets first (False for what runs no agent: discard, cancel)."""
        return Hold(self, session_id, redactor, tools)

    async def enter(self, session_id: str) -> asyncio.Task[None] | None:
        """Take the session: the lock of this process (shared by every team on the same
        store object), then, for a store other processes reach, its lease (renewed by the
        returned task)."""
        store = self.runner.cfg.store
        held = self._locks(store)
        lock = held.locks.get(session_id)
        if lock is None:
            lock = held.locks[session_id] = asyncio.Lock()
        held.users[session_id] = held.users.get(session_id, 0) + 1
        try:
            await lock.acquire()
        except BaseException:
            _leave_lock(held, session_id)
            raise
        live = live_sessions(store)
        try:
            await self._wait_for_other_threads(live, session_id)
        except BaseException:
            lock.release()
            _leave_lock(held, session_id)
            raise
        if not store.shared:
            return None
        key = f"session|{session_id}"
        try:
            await self._acquire(key, session_id, self.lease_s)
        except BaseException:
            live.give(session_id)
            lock.release()
            _leave_lock(held, session_id)
            raise
        return asyncio.ensure_future(self._renew(key))

    async def _wait_for_other_threads(self, live: LiveSessions, session_id: str) -> None:
        deadline = time.monotonic() + 2 * self.lease_s
        while not live.take(session_id):
            if time.monotonic() > deadline:
                raise ConflictError(
                    f"session {session_id!r} is held by a run in another thread of this "
                    f"process for over {2 * self.lease_s:g}s; retry when it has finished",
                    key=session_id,
                )
            await asyncio.sleep(_POLL_S)

    async def leave(self, session_id: str, renewal: asyncio.Task[None] | None) -> None:
        """Give the session up (lease, then lock)."""
        store = self.runner.cfg.store
        held = self._locks(store)
        try:
            if renewal is not None:
                renewal.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewal
                try:
                    await store.release_lease(f"session|{session_id}", self.owner)
                except StoreError as exc:  # the lease lapses on its own after `lease_s`
                    self.runner.cfg.log.warning(
                        "could not release the lease on session %s (it lapses in %gs): %s",
                        session_id,
                        self.lease_s,
                        exc,
                    )
        finally:
            live_sessions(store).give(session_id)
            held.locks[session_id].release()
            _leave_lock(held, session_id)

    async def _acquire(self, key: str, session_id: str, ttl_s: float) -> None:
        """Wait for the store's lease on the session (at most twice `lease_s`)."""
        store = self.runner.cfg.store
        deadline = time.monotonic() + 2 * self.lease_s
        while not await store.acquire_lease(key, self.owner, ttl_s):
            if time.monotonic() > deadline:
                raise ConflictError(
                    f"session {session_id!r} is held by another process (its lease was renewed "
                    f"for over {2 * self.lease_s:g}s); retry when that run has finished",
                    key=session_id,
                )
            await asyncio.sleep(_POLL_S)

    async def _renew(self, key: str) -> None:
        store, log = self.runner.cfg.store, self.runner.cfg.log
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                if not await store.acquire_lease(key, self.owner, self.lease_s):
                    log.warning("lost the lease on %s; the run's commit will detect it", key)
            except Exception as exc:  # a store hiccup: the next renewal tries again
                log.warning("could not renew the lease on %s: %s", key, exc)

    async def _load(self, session_id: str) -> tuple[Checkpoint, RunState]:
        cp = await self.runner.cfg.store.get_checkpoint(session_id)
        if cp is None:
            raise NoRunToResume(
                f"session {session_id!r} has no unfinished run (list them with `baton resume "
                "--list` or team.unfinished())"
            )
        if isinstance(cp.state, RunState):
            r = cp.state.snapshot()  # the store's copy stays as it was saved
        else:
            try:
                r = RunState.from_json(cp.state_json())
                await restore_committed(self.runner.cfg.store, r)
            except NewerCheckpoint as exc:
                where = f"session {session_id!r} (run {cp.run_id!r})"
                raise NewerCheckpoint(exc.found, exc.readable, where) from None
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                raise StoreError(
                    f"the checkpoint of session {session_id!r} (run {cp.run_id!r}) cannot be "
                    f"read: {str(exc)[:300]}. It was damaged or written by an incompatible "
                    "version; discard it with team.discard(session_id) (`baton resume "
                    "--discard`) to free the session"
                ) from exc
            await self.runner.load_earlier(r)  # only this run could commit meanwhile
        self._check_team(cp, r)
        return cp, r

    def _check_team(self, checkpoint: Checkpoint, run: RunState) -> None:
        """The agents and tools the run needs still exist in this team: its holder, the
        call its approval is about, and every call not yet answered (it may have run, so
        answering it "unknown tool" would tell the model that it did not)."""
        missing: list[str] = []
        plans = self.runner.plans
        if run.turn is not None and run.turn.agent not in plans:
            missing.append(f"agent {run.turn.agent!r}")
        missing += _gone_calls(plans, run)
        card = run.approval
        if card is not None and card.kind == "tool":
            plan = plans.get(card.agent)  # the holder's, or a worker's of a supervisor
            if plan is None:
                missing.append(f"agent {card.agent!r}")
            elif card.tool not in plan.tools:
                missing.append(f"tool {card.tool!r} of agent {card.agent!r}")
        if card is not None and card.kind == "handoff" and card.target not in plans:
            missing.append(f"agent {card.target!r}")
        if missing:
            sid = checkpoint.session_id
            raise BatonError(
                f"session {sid!r}: run {checkpoint.run_id!r} needs {', '.join(missing)}, which "
                "this team no longer has; resume it with the team that started it, or discard "
                f"it with team.discard({sid!r}) (`baton resume {sid} --discard`)"
            )

    async def discard(self, session_id: str) -> Checkpoint:
        """Drop the session's unfinished run (nothing more of it is committed)."""
        cp = await self.runner.cfg.store.get_checkpoint(session_id)
        if cp is None:
            raise NoRunToResume(f"session {session_id!r} has no unfinished run to discard")
        await self.runner.cfg.store.delete_checkpoint(session_id, cp.run_id)
        return cp

    async def finish_crashed(self, session_id: str, cp: Checkpoint | None) -> bool:
        """Before a new message: finish the session's interrupted run (`cp`: the session's
        checkpoint, read by the caller while it holds the session); refuse while a run waits
        for approval. True when a run was finished (the session changed: read it again),
        False when there was none to finish."""
        if cp is None:
            return False
        if cp.status == "cancelled":  # the user moves on: the cancellation stands
            await self.runner.cfg.store.delete_checkpoint(session_id, cp.run_id)
            return False
        if cp.status == "interrupted":
            card = cp.meta.get("interrupt", {})
            raise InterruptError(
                f"session {session_id!r} waits for an answer to interrupt {card.get('id', '?')} "
                f"({card.get('name', 'a call')} asked {card.get('value')!r}); answer it first "
                "(graph.resume(thread_id, answer) or team.answer_interrupt), or discard the run "
                "(team.discard)"
            )
        if cp.status == "awaiting_approval":
            card = cp.meta.get("approval", {})
            raise ApprovalError(
                f"session {session_id!r} waits for approval {card.get('id', '?')} "
                f"({card.get('reason', 'a call needs sign-off')}); approve or reject it first "
                "(team.approve / team.reject, or `baton approvals`)"
            )
        result = await self.resume(session_id)
        if result.status == "interrupted":  # the resumed run reached an interrupt
            assert result.interrupt is not None
            raise InterruptError(
                f"session {session_id!r}: its unfinished run went on and now waits for an "
                f"answer to interrupt {result.interrupt.id} ({result.interrupt.value!r}); "
                "answer it first, then send the message again"
            )
        if result.status == "awaiting_approval":  # the resumed run reached an approval gate
            assert result.approval is not None
            raise ApprovalError(
                f"session {session_id!r}: its interrupted run went on and now waits for "
                f"approval {result.approval.id} ({result.approval.reason}); approve or reject "
                "it first, then send the message again"
            )
        return True

    async def resume(self, session_id: str) -> RunResult:
        """Continue the session's unfinished run (the caller holds the session)."""
        cp, r = await self._load(session_id)
        if cp.status == "awaiting_approval":
            if expire(self.runner, r):
                return await self.runner.expired(r)
            return self.runner.result(r, "awaiting_approval", None, None)
        if cp.status == "interrupted":  # it waits for an answer (`answer`)
            return self.runner.result(r, "interrupted", None, None)
        if cp.status == "cancelled":
            return await self.runner.resume(r, why="continued after it was cancelled")
        return await self.runner.resume(r, why="continued after an interruption")

    async def cancel(self, session_id: str, reason: str) -> RunResult | None:
        """End the session's unfinished run (crashed, or waiting for approval) as cancelled;
        None when it has none (the caller holds the session)."""
        cp = await self.runner.cfg.store.get_checkpoint(session_id)
        if cp is None or cp.status == "cancelled":
            return None
        _, r = await self._load(session_id)
        return await self.runner.cancel(r, reason)

    async def answered(
        self,
        session_id: str,
        request_id: str,
        session: SessionRecord | None,
        cp: Checkpoint | None,
    ) -> RunResult | None:
        """The result of request `request_id` when the session has one (the caller holds
        the session, and read it and its checkpoint: `session`, `cp`): its committed run's,
        rebuilt from the stored events; its unfinished run's, resumed (after a crash) or as
        it waits (for a person); None when the request is new."""
        store = self.runner.cfg.store
        run_id = session.requests.get(request_id) if session is not None else None
        if session is not None and run_id is not None:
            return await recorded_result(store, session, run_id)
        if cp is None or cp.meta.get("request_id") != request_id:
            return None
        if cp.status == "cancelled":  # cancelled and committed: it stays so
            _, r = await self._load(session_id)
            return self.runner.result(r, "cancelled", None, "cancelled before it finished")
        return await self.resume(session_id)

    async def answer(
        self, session_id: str, value: Any, interrupt_id: str | None = None
    ) -> RunResult:
        """Give the run's interrupt its answer and continue the run (the caller holds the
        session)."""
        try:
            cp, r = await self._load(session_id)
        except NoRunToResume:
            raise InterruptError(
                f"session {session_id!r} has no run waiting for an answer to an interrupt"
            ) from None
        if cp.status != "interrupted":
            raise InterruptError(
                f"session {session_id!r} is not waiting for an answer to an interrupt (its run "
                f"is {cp.status.replace('_', ' ')})"
            )
        found = give_answer(self.runner, r, value, interrupt_id)
        # the answer is durable before its call runs again: a crash in it resumes with it
        await self.runner.commit_so_far(r, paused=False)
        return await self.runner.resume(r, why=f"interrupt {found} answered")

    async def decide(
        self,
        session_id: str,
        approval_id: str,
        approve: bool,
        by: str,
        role: str | None,
        reason: str,
        authenticated: bool = False,
    ) -> RunResult:
        """Apply a decision and continue the run (the caller holds the session)."""
        try:
            cp, r = await self._load(session_id)
        except NoRunToResume:
            raise ApprovalError(
                f"session {session_id!r} has no run waiting for approval {approval_id!r}"
            ) from None
        if cp.status != "awaiting_approval":
            raise ApprovalError(
                f"session {session_id!r} is not waiting for an approval (its run is running)"
            )
        decision = decide(
            self.runner,
            r,
            approval_id,
            approve=approve,
            by=by,
            role=role,
            reason=reason,
            authenticated=authenticated,
        )
        if decision == "expired":
            return await self.runner.expired(r)
        if decision == "pending":
            await self.runner.commit_so_far(r, paused=True)
            return self.runner.result(r, "awaiting_approval", None, None)
        # the decision is durable before its call runs: a crash in the call resumes with it
        await self.runner.commit_so_far(r, paused=False)
        return await self.runner.resume(r, why=f"approval {approval_id} {decision} by {by}")


def _gone_calls(plans: Mapping[str, AgentPlan], run: RunState) -> list[str]:
    """The unanswered calls of `run`'s turn (and of the sub-runs its calls started) whose name
    the agent no longer has, described. Such a call may have been running when the run
    stopped (a checkpoint is saved after each call, not before it), so it can neither run
    again nor be answered "unknown tool" as if it never ran."""
    t = run.turn
    plan = plans.get(t.agent) if t is not None else None
    if t is None or plan is None:
        return []  # no turn, or its agent is gone (reported as such)
    gone: list[str] = []
    for pc in t.calls:
        if pc.sub is not None:
            gone += _gone_calls(plans, pc.sub)
        if pc.content is not None or pc.error is not None or t.accepted or t.halt:
            continue  # answered, unparsed, or to be skipped: no tool is needed for it
        name = pc.call.name
        known = name in plan.table or name in (plan.received_table or {})
        if not known and handoff_target(name) is None:
            gone.append(
                f"tool {name!r} of agent {t.agent!r} (its call {pc.call.id} was not answered "
                "when the run stopped, and may have run)"
            )
    return gone


async def recorded_result(store: Store, session: SessionRecord, run_id: str) -> RunResult:
    """The result of a committed run, rebuilt from its stored events."""
    events = [
        e for e in await store.get_events(session_id=session.session_id) if e.run_id == run_id
    ]
    ended = next((e for e in reversed(events) if isinstance(e, RunFinished)), None)
    started = events[0] if events else None
    return RunResult(
        status=ended.status if ended is not None else "completed",  # type: ignore[arg-type]
        output=ended.output if ended is not None else None,
        path=list(ended.path) if ended is not None else [],
        usage=dict(ended.usage) if ended is not None else {},
        usage_by_handoff=list(ended.handoff_usage) if ended is not None else [],
        trace_id=started.trace_id if started is not None else "",
        session_id=session.session_id,
        run_id=run_id,
        events=events,
        holder=session.holder,
        state=dict(session.state),
        error=ended.error if ended is not None else None,
    )


class Hold:
    """`async with`: the team's log redaction for whatever runs inside (the kernel, its tools
    and sinks), and the session held by one runner at a time (a class, not a generator: every
    run enters one)."""

    __slots__ = ("_renewal", "_token", "redactor", "resumer", "session_id", "tools")

    def __init__(
        self, resumer: Resumer, session_id: str, redactor: Redactor | None, tools: bool = True
    ) -> None:
        self.resumer = resumer
        self.tools = tools
        self.session_id = session_id
        self.redactor = redactor
        self._token: contextvars.Token[Redactor | None] | None = None
        self._renewal: asyncio.Task[None] | None = None

    async def __aenter__(self) -> None:
        refresh = self.resumer.runner.refresh_tools
        if refresh is not None and self.tools:  # toolsets (MCP servers), before the kernel
            await refresh()
        self._token = run_log_redaction(self.redactor)
        try:
            self._renewal = await self.resumer.enter(self.session_id)
        except BaseException:
            end_run_log_redaction(self._token)
            raise

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.resumer.leave(self.session_id, self._renewal)
        finally:
            if self._token is not None:
                end_run_log_redaction(self._token)


def _leave_lock(held: SessionLocks, session_id: str) -> None:
    left = held.users[session_id] - 1
    if left:
        held.users[session_id] = left
    else:
        del held.users[session_id], held.locks[session_id]
