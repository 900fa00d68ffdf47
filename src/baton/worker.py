"""`Worker`: a process that takes turns off the bus and runs them with a team.

It lives beside the bus, not in it: `baton.bus` is transport only, and a worker is typed
against `Serves` (what it needs of a team: `run`, `release`, `bus`), not `Team`.

The loop: receive deliveries (the bus gives each partition of sessions to one worker at a
time, in order); queue each behind the turns of its session already here (at most one turn
of a session in flight); run it as `team.run(message, session_id, request_id=envelope.id,
trace_id=...)`, under at most `concurrency` turns at once; report the result on the bus, then
acknowledge the delivery. A request is its (session, request id): the same id in two sessions
is two requests, each run and answered on its own. Because the run is recorded under the
envelope's id in the session (committed with the run), a delivery seen again — the worker
died after the commit and before the ack, or the bus redelivered it — is answered from the
record, never run twice, and a run cut off by a crash is resumed from its checkpoint, its
finished tool calls not repeated.

Failures:
- a store that fails (unreachable, connections dropped) or a session held by another process:
  the turn is tried again in place with backoff (a log line says so) for up to `retry_s`,
  then given back to the bus (`fail`), which delivers it again later and, after
  `max_deliveries`, moves it to the dead-letter queue;
- a bus that fails: receiving is retried with backoff, a line logged when it fails and when
  it works again; a result that could not be reported is reported again on redelivery;
- a request that cannot run (the session belongs to another user, waits for an approval, the
  message is empty): answered with status `error` and acknowledged — retrying cannot help.

`stop()` (SIGTERM, SIGINT under `serve`) is a graceful shutdown: no new deliveries; turns in
flight get `drain_s` to finish; those still running are released unfinished at their last
checkpoint (`team.release`), and the worker gives its partitions up, so another worker
resumes them at once rather than after `claim_idle_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from baton.bus.base import Bus, BusError, Delivery, TurnResult
from baton.bus.headers import trace_id_of
from baton.core.errors import BatonError, ModelUnreachable, RunReleased, StoreError
from baton.core.ids import new_id

if TYPE_CHECKING:
    from baton.runtime.result import RunResult

log = logging.getLogger("baton.worker")


class Serves(Protocol):
    """What a worker needs of a team (`Team` and every topology have it)."""

    @property
    def bus(self) -> Bus:
        """Where its turns are queued."""
        ...

    async def run(
        self,
        message: str,
        session_id: str | None = None,
        user_id: str | None = None,
        *,
        request_id: str | None = None,
        trace_id: str | None = None,
    ) -> RunResult:
        """Run one user message of a session (the request answered from its record when the
        same request id was run before)."""
        ...

    async def release(self, session_id: str) -> bool:
        """Stop the session's run in this process without ending it (its checkpoint stays)."""
        ...


GC_THRESHOLDS = (20_000, 10, 10)
"""The collector's thresholds a worker sets at start-up (`tune_gc`): young collections 28x
rarer than CPython's default 700, so conversations in flight are not rescanned constantly."""


def tune_collector(thresholds: tuple[int, int, int] = GC_THRESHOLDS) -> None:
    """Tune the garbage collector for thousands of conversations in flight: `gc.freeze()`
    moves everything alive after start-up (modules, the team, the model) out of the
    collector's sight, and raised thresholds make collections rarer (benchmarks/inflight_gc.py:
    about a sixth of the CPU saved at 5,000 in flight). An application's choice, so `Worker`
    does it only with `tune_gc=True` (the `baton worker` default; `--no-tune-gc` skips it)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*thresholds)


@dataclass
class WorkerStats:
    """What a worker did (`Worker.stats`)."""

    answered: int = 0
    """Deliveries answered and acknowledged (runs, and requests answered from the record)."""
    errors: int = 0
    """Of those, requests that could not run (answered with status `error`)."""
    retried: int = 0
    """Deliveries given back to the bus after failing (delivered again later)."""
    dead: int = 0
    """Deliveries the bus moved to the dead-letter queue."""
    released: int = 0
    """Turns released unfinished at shutdown (resumed by another worker)."""
    store_retries: int = 0
    """Store failures retried in place."""
    model_retries: int = 0
    """Turns whose model could not be reached (`ModelUnreachable`), retried in place: the run
    goes on from its last checkpoint."""
    bus_outages: int = 0
    """Times receiving from the bus failed and was retried."""


class Worker:
    """Runs the turns queued on a bus with `team` (the team's own bus by default)."""

    def __init__(
        self,
        team: Serves,
        bus: Bus | None = None,
        *,
        name: str | None = None,
        concurrency: int = 1000,
        drain_s: float = 10.0,
        retry_s: float = 60.0,
        block_s: float = 0.5,
        tune_gc: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1 (turns in flight at once)")
        self.team = team
        self.bus: Bus = bus if bus is not None else team.bus
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{new_id('w')[-6:]}"
        """The consumer name on the bus (unique per worker process)."""
        self.concurrency = concurrency
        self.drain_s = drain_s
        self.retry_s = retry_s
        self.block_s = block_s
        self.tune_gc = tune_gc
        self.stats = WorkerStats()
        self._slots = asyncio.Semaphore(concurrency)
        self._queues: dict[str, deque[Delivery]] = {}
        """Session id -> its deliveries here, the first one running or waiting for a slot."""
        self._sessions: dict[str, asyncio.Task[None]] = {}
        self._held: dict[tuple[str, str], list[Delivery]] = {}
        """(session, request id) received and not yet settled -> the copies of it received
        meanwhile (a redelivery, or the same request published twice): they are acknowledged
        with it, never run."""
        self._room = asyncio.Event()
        self._stopping = asyncio.Event()
        self._closing = False

    @property
    def in_flight(self) -> int:
        """Deliveries received and not yet settled (running or queued behind their session)."""
        return len(self._held)

    def stop(self) -> None:
        """Begin a graceful shutdown (safe to call from a signal handler on the loop)."""
        self._stopping.set()

    async def run(self) -> WorkerStats:
        """Receive and run turns until `stop()`, then shut down gracefully."""
        if self.tune_gc:
            tune_collector()
        log.info(
            "worker %s: consuming %s (concurrency %d)", self.name, self.bus.url, self.concurrency
        )
        try:
            await self._receive_until_stopped()
        finally:
            await self._shut_down()
        return self.stats

    async def serve(self) -> WorkerStats:
        """`run()` with SIGTERM and SIGINT starting the graceful shutdown."""
        loop = asyncio.get_running_loop()
        # loops without signal handlers (Windows' proactor: NotImplementedError) or outside the
        # main thread (RuntimeError) run without them: stop() is then the only way to stop
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stop)
        try:
            return await self.run()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)

    # ------------------------------------------------------------------ receiving
    async def _receive_until_stopped(self) -> None:
        backoff, outage = 0.1, False
        limit = 2 * self.concurrency  # deliveries held here at most (running + queued)
        while not self._stopping.is_set():
            room = limit - len(self._held)
            if room <= 0:  # full: wait for a turn to settle, still calling in to keep leases
                self._room.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._room.wait(), self.block_s)
                room = 0
            try:
                got = await self.bus.receive(self.name, count=room, block_s=self.block_s)
            except BusError as exc:
                self.stats.bus_outages += 1
                log.warning(
                    "worker %s: the bus failed (%s); receiving again in %.1fs, turns in "
                    "flight go on",
                    self.name,
                    exc,
                    backoff,
                )
                outage = True
                await self._sleep_unless_stopped(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if outage:
                log.warning("worker %s: the bus works again; receiving", self.name)
                backoff, outage = 0.1, False
            for delivery in got:
                self._take(delivery)

    def _take(self, delivery: Delivery) -> None:
        envelope = delivery.envelope
        copies = self._held.get((envelope.session_id, envelope.id))
        if copies is not None:  # a copy of a request still here: the first one settles it
            copies.append(delivery)
            return
        self._held[(envelope.session_id, envelope.id)] = []
        sid = envelope.session_id
        queue = self._queues.get(sid)
        if queue is None:
            queue = self._queues[sid] = deque()
            self._sessions[sid] = asyncio.create_task(self._session(sid, queue))
        queue.append(delivery)

    async def _session(self, session_id: str, queue: deque[Delivery]) -> None:
        """Run a session's deliveries one after another, in the order received."""
        try:
            while queue and not self._closing:
                async with self._slots:
                    await self._turn(queue[0])
                self._held.pop(_request(queue.popleft()), None)
                self._room.set()
        finally:
            if self._queues.get(session_id) is queue:
                del self._queues[session_id], self._sessions[session_id]
            for left in queue:  # shutting down: left unacknowledged, for another worker
                self._held.pop(_request(left), None)

    # ------------------------------------------------------------------ one turn
    async def _turn(self, delivery: Delivery) -> None:
        env = delivery.envelope
        delay, deadline = 0.2, time.monotonic() + self.retry_s
        while True:
            try:
                result = await self.team.run(
                    env.message,
                    env.session_id,
                    env.user_id,
                    request_id=env.id,
                    trace_id=trace_id_of(env.headers),
                )
                break
            except RunReleased:
                self.stats.released += 1
                return
            except (StoreError, ModelUnreachable) as exc:
                # the store failed, another process holds the session, or the model's server is
                # down or busy: the run is unfinished at its last checkpoint, and the same request
                # id resumes it
                if self._closing or time.monotonic() + delay > deadline:
                    await self._fail(delivery, f"{type(exc).__name__}: {exc}")
                    return
                if isinstance(exc, ModelUnreachable):
                    self.stats.model_retries += 1
                else:
                    self.stats.store_retries += 1
                log.warning(
                    "worker %s: turn %s of session %s: %s: %s; trying again in %.1fs "
                    "(nothing is lost: the run goes on from its last checkpoint)",
                    self.name,
                    env.id,
                    env.session_id,
                    type(exc).__name__,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            except (BatonError, ValueError) as exc:  # this request cannot run: retrying is vain
                self.stats.errors += 1
                await self._answer(
                    delivery,
                    TurnResult(
                        request_id=env.id,
                        session_id=env.session_id,
                        status="error",
                        error=f"{type(exc).__name__}: {exc}",
                        worker=self.name,
                    ),
                )
                return
            except Exception as exc:
                log.exception("worker %s: turn %s failed unexpectedly", self.name, env.id)
                await self._fail(delivery, f"{type(exc).__name__}: {exc}")
                return
        await self._answer(
            delivery,
            TurnResult(
                request_id=env.id,
                session_id=env.session_id,
                status=result.status,
                output=result.output,
                error=result.error,
                run_id=result.run_id,
                worker=self.name,
            ),
        )

    async def _answer(self, delivery: Delivery, result: TurnResult) -> None:
        try:
            await self.bus.put_result(result)
            await self.bus.ack(self.name, delivery)
            for copy in self._held.get(_request(delivery), ()):
                await self.bus.ack(self.name, copy)  # answered by the same record
        except BusError as exc:  # the run is committed: a redelivery answers from the record
            log.warning(
                "worker %s: could not report turn %s (%s); it is answered again from the "
                "record when delivered again",
                self.name,
                result.request_id,
                exc,
            )
            return
        self.stats.answered += 1

    async def _fail(self, delivery: Delivery, error: str) -> None:
        try:
            dead = await self.bus.fail(self.name, delivery, error)
        except BusError as exc:
            log.warning(
                "worker %s: could not fail turn %s back (%s)", self.name, delivery.envelope.id, exc
            )
            return
        if dead:
            self.stats.dead += 1
            log.error(
                "worker %s: turn %s of session %s moved to the dead-letter queue after %d "
                "deliveries: %s (baton dlq list / retry)",
                self.name,
                delivery.envelope.id,
                delivery.envelope.session_id,
                delivery.retry_count + 1,
                error,
            )
        else:
            self.stats.retried += 1

    # ------------------------------------------------------------------ shutdown
    async def _shut_down(self) -> None:
        running = list(self._sessions.values())
        if running:
            log.info(
                "worker %s: stopping; %d turns get %gs to finish",
                self.name,
                len(self._held),
                self.drain_s,
            )
            _, late = await asyncio.wait(running, timeout=self.drain_s)
            self._closing = True  # sessions start no further turn
            if late:
                for sid, task in list(self._sessions.items()):
                    if task in late and not await self.team.release(sid):
                        task.cancel()  # not begun (waiting for a slot or the session)
                await asyncio.gather(*late, return_exceptions=True)
                log.info(
                    "worker %s: released %d unfinished turns to the other workers",
                    self.name,
                    len(late),
                )
        self._closing = True
        try:
            await self.bus.release(self.name)
        except BusError as exc:
            log.warning(
                "worker %s: could not give its partitions up (%s); the others take them over "
                "after claim_idle_s",
                self.name,
                exc,
            )

    async def _sleep_unless_stopped(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)


def _request(delivery: Delivery) -> tuple[str, str]:
    """A delivery's request, as the bus and the store name it: (session, request id)."""
    return (delivery.envelope.session_id, delivery.envelope.id)
