"""Where sync tools run: Baton's own pool of daemon threads, or (opt-in) a child process.

`asyncio.to_thread` uses the event loop's default executor, and `asyncio.run` waits for that
executor's threads when it shuts down: a sync tool that hangs past its timeout would block
`team.run_sync` and `baton run` for as long as it hangs. `ToolThreads` is a small, bounded pool
of daemon threads that no event loop waits for, and that the interpreter does not wait for at
exit either.

A call whose caller stops waiting (the tool's timeout, or a cancelled run) while its thread
still runs is *abandoned*: the thread is counted in `stats()["abandoned_running"]`, replaced by
a fresh one (so hung tools cannot exhaust the pool), and leaves the pool when the function
finally returns; what it returns is dropped. Python threads cannot be killed, so the abandoned
work goes on in the background. `run_in_process` (`@tool(isolation="process")`) runs the
function in a child process instead, which is killed when the caller stops waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import logging
import os
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

_log = logging.getLogger("baton")

_QUEUED, _RUNNING, _DONE, _CANCELLED, _ABANDONED = range(5)


class _Job:
    __slots__ = ("args", "fn", "loop", "on_cancel", "state", "waiter")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop,
        waiter: asyncio.Future[Any],
        on_cancel: Callable[[], None] | None,
    ) -> None:
        self.fn = fn
        self.args = args
        self.loop = loop
        self.waiter = waiter
        self.on_cancel = on_cancel
        self.state = _QUEUED


def _settle(waiter: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if waiter.done():  # the caller stopped waiting
        return
    if exc is not None:
        waiter.set_exception(exc)
    else:
        waiter.set_result(result)


class ToolThreads:
    """A bounded pool of daemon threads for sync tools (see the module docstring).

    At most `max_workers` threads serve calls at once; a call beyond that waits in the queue.
    An abandoned thread is replaced at once, as long as the pool's threads and the abandoned
    ones still running stay within `max_workers + max_abandoned`; past that, calls wait until
    an abandoned thread returns (it then rejoins the pool), and the log says so."""

    def __init__(self, max_workers: int | None = None, *, max_abandoned: int = 256) -> None:
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)  # the default executor's size
        if max_workers < 1 or max_abandoned < 0:
            raise ValueError("max_workers must be at least 1, max_abandoned at least 0")
        self.max_workers = max_workers
        self.max_abandoned = max_abandoned
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._workers = 0
        """Threads that belong to the pool (abandoned ones do not)."""
        self._idle = 0
        """Pool threads waiting for a job."""
        self._pending = 0
        """Jobs in the queue."""
        self._abandoned_running = 0
        self._abandoned_total = 0

    def stats(self) -> dict[str, int]:
        """`workers` (the pool's threads), `idle` (those waiting for a call), `queued`,
        `abandoned_running` (abandoned threads still running) and `abandoned_total` (calls
        abandoned since the pool started)."""
        with self._lock:
            return {
                "workers": self._workers,
                "idle": self._idle,
                "queued": self._pending,
                "abandoned_running": self._abandoned_running,
                "abandoned_total": self._abandoned_total,
            }

    async def run(
        self,
        fn: Callable[..., Any],
        /,
        *args: Any,
        on_cancel: Callable[[], None] | None = None,
    ) -> Any:
        """`fn(*args)` in a pool thread, in a copy of the caller's context (as
        `asyncio.to_thread`). If the caller is cancelled while it runs, `on_cancel` is called
        (from the event loop) when given; otherwise the thread is abandoned and replaced."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()
        ctx = contextvars.copy_context()
        job = _Job(ctx.run, (fn, *args), loop, waiter, on_cancel)
        self._submit(job)
        try:
            return await waiter
        except asyncio.CancelledError:
            self._let_go(job)
            raise

    def _may_start(self) -> bool:  # with the lock held
        return (
            self._workers < self.max_workers
            and self._workers + self._abandoned_running < self.max_workers + self.max_abandoned
        )

    def _submit(self, job: _Job) -> None:
        with self._lock:
            self._queue.put(job)
            self._pending += 1
            if self._pending > self._idle and self._may_start():
                self._workers += 1
                threading.Thread(target=self._work, name="baton-tool", daemon=True).start()

    def _let_go(self, job: _Job) -> None:
        with self._lock:
            if job.state == _QUEUED:
                job.state = _CANCELLED  # the worker that takes it skips it
                return
            if job.state != _RUNNING:
                return
            hook = job.on_cancel  # it ends the work: the thread comes back soon
            if hook is None:
                job.state = _ABANDONED
                self._abandoned_total += 1
                self._abandoned_running += 1
                self._workers -= 1
                replaced = self._may_start()
                if replaced:
                    self._workers += 1
                    threading.Thread(target=self._work, name="baton-tool", daemon=True).start()
                running = self._abandoned_running
        if hook is not None:
            hook()
        elif replaced:
            _log.debug("a sync tool was abandoned after its timeout; its thread was replaced")
        else:
            _log.warning(
                "a sync tool was abandoned after its timeout and %d abandoned tool threads are "
                "still running: it was not replaced, and sync tools wait for a free thread",
                running,
            )

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._queue.get()
            with self._lock:
                self._idle -= 1
                self._pending -= 1
                if job.state == _CANCELLED:
                    continue
                job.state = _RUNNING
            result: Any = None
            error: BaseException | None = None
            try:
                result = job.fn(*job.args)
            except BaseException as exc:  # delivered to the caller, as `to_thread` does
                error = exc
            with self._lock:
                abandoned = job.state == _ABANDONED
                job.state = _DONE
                if abandoned:  # replaced while it ran: it rejoins only if there is room
                    self._abandoned_running -= 1
                    rejoin = self._workers < self.max_workers
                    if rejoin:
                        self._workers += 1
            if not abandoned:
                # (a closed loop raises RuntimeError: nobody is waiting any more)
                with contextlib.suppress(RuntimeError):
                    job.loop.call_soon_threadsafe(_settle, job.waiter, result, error)
            del job, result, error  # keep nothing alive while waiting for the next job
            if abandoned and not rejoin:
                return


_POOL: ToolThreads | None = None
_POOL_LOCK = threading.Lock()


def tool_threads() -> ToolThreads:
    """The process-wide pool that runs sync tools (created on first use)."""
    global _POOL
    pool = _POOL
    if pool is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = ToolThreads()
            pool = _POOL
    return pool


def _forget_pool() -> None:  # a forked child has none of its parent's threads
    global _POOL
    _POOL = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


# ------------------------------------------------------------------ process isolation
class ProcessFailed(Exception):
    """The tool's process ended without a result (killed, crashed, or a result that cannot
    be sent back)."""


class _Child:
    """The child process of one call; `kill` may come from the event loop at any time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: Any = None
        self.killed = False

    def kill(self) -> None:
        with self.lock:
            self.killed = True
            if self.proc is not None and self.proc.exitcode is None:
                self.proc.kill()


def _child_main(
    conn: Any, module: str, qualname: str, kwargs: Mapping[str, Any], context: Any
) -> None:
    """Runs in the child: import the tool by name, call it, send back its outcome."""
    try:
        from baton.tools import _CONTEXT, Tool

        target: Any = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
        fn = target.fn if isinstance(target, Tool) else target
        _CONTEXT.set(context)
        value = fn(**kwargs)
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    try:
        conn.send(("ok", value))
    except Exception as exc:
        conn.send(("error", f"its result could not be sent back from its process ({exc})"))


def _call_in_child(
    child: _Child, module: str, qualname: str, kwargs: Mapping[str, Any], context: Any
) -> Any:
    """Runs in a pool thread: start the child, wait for its answer or its end."""
    import multiprocessing

    mp = multiprocessing.get_context("spawn")  # fork is unsafe in a threaded process
    receiver, sender = mp.Pipe(duplex=False)
    proc = mp.Process(
        target=_child_main,
        args=(sender, module, qualname, dict(kwargs), context),
        name=f"baton-tool-{qualname}",
        daemon=True,
    )
    with child.lock:
        if child.killed:
            raise ProcessFailed("stopped before it started")
        proc.start()
        child.proc = proc
    sender.close()  # the child holds the only writer: its end means EOF here
    try:
        kind, value = receiver.recv()
    except EOFError:
        proc.join()
        if child.killed:
            raise ProcessFailed("its process was stopped after the timeout") from None
        raise ProcessFailed(
            f"its process ended without a result (exit code {proc.exitcode})"
        ) from None
    finally:
        receiver.close()
    proc.join()
    if kind == "error":
        raise ProcessFailed(value)
    return value


async def run_in_process(
    module: str, qualname: str, kwargs: Mapping[str, Any], context: Any = None
) -> Any:
    """The module-level function (or `Tool`) `module.qualname`, called with `kwargs` in a
    fresh child process that is killed if the caller stops waiting; `tool_context()` there
    returns `context`. Arguments and result must pickle."""
    child = _Child()
    return await tool_threads().run(
        _call_in_child, child, module, qualname, kwargs, context, on_cancel=child.kill
    )
