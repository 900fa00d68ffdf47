"""A timeout for awaitables that costs nothing when the awaitable never suspends.

`asyncio.timeout()` arms a timer on entry; on the kernel's hot path (several model and tool
calls per turn) that timer costs more than the rest of the turn when the model answers in
process (a scripted model, a cache hit). `with_timeout` drives the coroutine itself and arms the
timer only at its first real suspension, then behaves like `asyncio.timeout`: on expiry it
cancels the task, and converts that cancellation into `TimeoutError`.

Armed deadlines share timer handles (`_Slots`): with thousands of model calls waiting at once,
one handle per call was a large part of the event loop's work. A deadline fires at most 1/64 of
its limit late.
"""

from __future__ import annotations

import asyncio
import math
import sys
import weakref
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class _Deadline:
    __slots__ = ("coro", "due", "expired", "seconds", "task")

    def __init__(self, coro: Coroutine[Any, Any, Any], seconds: float) -> None:
        self.coro = coro
        self.seconds = seconds
        self.expired = False
        self.task: asyncio.Task[Any] | None = None
        self.due = 0.0
        """End of the slot the deadline was armed in (loop time)."""

    def fire(self) -> None:
        self.expired = True
        if self.task is not None:
            self.task.cancel()

    def __await__(self) -> Generator[Any, Any, Any]:
        return _drive(self.coro, self)


class _Slots:
    """The armed deadlines of one event loop, grouped into slots by when they fall due.

    A deadline joins the slot that ends at the first multiple of its grain (a power of two near
    1/64 of its limit) after it is due, and each slot has one timer handle. Thousands of model
    calls waiting at once then share a few handles instead of pushing one each onto the loop's
    timer heap (and leaving it there, cancelled, when the call returns in time); a deadline
    fires at most one grain late (about 1 s for a 120 s limit).
    """

    __slots__ = ("handles", "loop", "slots")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)  # weak: `_SLOTS` holds these by weak reference to the loop
        self.slots: dict[float, dict[_Deadline, None]] = {}
        self.handles: dict[float, asyncio.TimerHandle] = {}

    def arm(self, deadline: _Deadline, loop: asyncio.AbstractEventLoop) -> None:
        seconds = deadline.seconds
        grain = 2.0 ** math.floor(math.log2(seconds / 64))
        due = math.ceil((loop.time() + seconds) / grain) * grain
        deadline.due = due
        slot = self.slots.get(due)
        if slot is None:
            slot = self.slots[due] = {}
            self.handles[due] = loop.call_at(due, self._fire, due)
        slot[deadline] = None

    def disarm(self, deadline: _Deadline) -> None:
        slot = self.slots.get(deadline.due)
        if slot is not None:
            slot.pop(deadline, None)
            if not slot:
                del self.slots[deadline.due]
                self.handles.pop(deadline.due).cancel()

    def _fire(self, due: float) -> None:
        self.handles.pop(due, None)
        for deadline in self.slots.pop(due, ()):
            deadline.fire()


_MAX_SLOTTED_S = 1e7
"""Longer (or infinite) limits get a timer handle of their own."""
_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Slots] = weakref.WeakKeyDictionary()
_last: _Slots | None = None


def _slots(loop: asyncio.AbstractEventLoop) -> _Slots:
    """The slots of `loop` (the last one used is kept at hand: most programs run one loop)."""
    global _last
    last = _last
    if last is not None and last.loop() is loop:
        return last
    found = _SLOTS.get(loop)
    if found is None:
        found = _SLOTS[loop] = _Slots(loop)
    _last = found
    return found


def _drive(coro: Coroutine[Any, Any, T], deadline: _Deadline) -> Generator[Any, Any, T]:
    """`yield from coro`, arming the deadline at the first suspension."""
    slots: _Slots | None = None
    handle: asyncio.TimerHandle | None = None
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
                task = deadline.task
                if deadline.expired and task is not None and _uncancel(task) == 0:
                    raise TimeoutError(f"no result within {deadline.seconds}s") from None
                raise
            if deadline.task is None:
                deadline.task = asyncio.current_task()
                if deadline.task is not None:
                    loop = asyncio.get_running_loop()
                    if 0 < deadline.seconds < _MAX_SLOTTED_S:
                        slots = _slots(loop)
                        slots.arm(deadline, loop)
                    else:
                        handle = loop.call_later(deadline.seconds, deadline.fire)
            try:
                send = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # delivered into the coroutine, as `yield from` does
                send, throw = None, exc
    finally:
        if slots is not None:
            slots.disarm(deadline)
        elif handle is not None:
            handle.cancel()


def _uncancel(task: asyncio.Task[Any]) -> int:
    if sys.version_info >= (3, 11):
        return task.uncancel()
    return 0  # pragma: no cover - 3.10 has no cancellation counting


def timed(coro: Coroutine[Any, Any, T], seconds: float | None) -> Awaitable[T]:
    """`with_timeout` as a plain awaitable, not a coroutine: one frame less per call, for the
    kernel's hot path (`asyncio.create_task` needs `with_timeout`)."""
    if seconds is None:
        return coro
    return _Deadline(coro, seconds)


async def with_timeout(coro: Coroutine[Any, Any, T], seconds: float | None) -> T:
    """Await `coro`; raise `TimeoutError` after `seconds` of suspension (None = no limit)."""
    result: T = await timed(coro, seconds)
    return result
