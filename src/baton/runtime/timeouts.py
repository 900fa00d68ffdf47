"""A timeout for awaitables that costs nothing when the awaitable never suspends.

`asyncio.timeout()` arms a timer on entry; on the kernel's hot path (several model and tool
calls per turn) that timer costs more than the rest of the turn when the model answers in
process (a scripted model, a cache hit). `with_timeout` drives the coroutine itself and arms the
timer only at its first real suspension, then behaves like `asyncio.timeout`: on expiry it
cancels the task, and converts that cancellation into `TimeoutError`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class _Deadline:
    __slots__ = ("expired", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False

    def fire(self, task: asyncio.Task[Any]) -> None:
        self.expired = True
        task.cancel()


def _drive(coro: Coroutine[Any, Any, T], deadline: _Deadline) -> Generator[Any, Any, T]:
    """`yield from coro`, arming the deadline at the first suspension."""
    handle: asyncio.TimerHandle | None = None
    task: asyncio.Task[Any] | None = None
    send: Any = None
    throw: BaseException | None = None
    try:
        while True:
            try:
                if throw is not None:
                    exc, throw = throw, None
                    yielded = coro.throw(exc)
                else:
                    yielded = coro.send(send)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            except asyncio.CancelledError:
                if deadline.expired and task is not None and _uncancel(task) == 0:
                    raise TimeoutError(f"no result within {deadline.seconds}s") from None
                raise
            if handle is None:
                task = asyncio.current_task()
                if task is not None:
                    loop = asyncio.get_running_loop()
                    handle = loop.call_later(deadline.seconds, deadline.fire, task)
            try:
                send = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # delivered into the coroutine, as `yield from` does
                send, throw = None, exc
    finally:
        if handle is not None:
            handle.cancel()


def _uncancel(task: asyncio.Task[Any]) -> int:
    if sys.version_info >= (3, 11):
        return task.uncancel()
    return 0  # pragma: no cover - 3.10 has no cancellation counting


class _Timed:
    __slots__ = ("coro", "deadline")

    def __init__(self, coro: Coroutine[Any, Any, Any], seconds: float) -> None:
        self.coro = coro
        self.deadline = _Deadline(seconds)

    def __await__(self) -> Generator[Any, Any, Any]:
        return _drive(self.coro, self.deadline)


async def with_timeout(coro: Coroutine[Any, Any, T], seconds: float | None) -> T:
    """Await `coro`; raise `TimeoutError` after `seconds` of suspension (None = no limit)."""
    if seconds is None:
        return await coro
    result: T = await _Timed(coro, seconds)
    return result
