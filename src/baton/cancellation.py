"""Telling a call's own `asyncio.CancelledError` from a cancellation of the run.

A tool (or a graph node) may raise `CancelledError` although nobody cancelled it: it raised it
itself, or a future it awaited was cancelled by someone else (a client library giving up on a
request). That is a failed call, which the model reads as an error; only a cancellation of the
task running the call (`task.cancel()`, `team.cancel`, a timeout) cancels the run.

On Python 3.11+ the task counts the cancellations asked of it (`Task.cancelling()`), so the
call is awaited as it is and the count read only when a `CancelledError` arrives. Python 3.10
has no such count, so there the call runs in a task of its own: a cancellation of the caller
reaches the caller (which then cancels the call and waits for it), while a call that ends
cancelled without having been cancelled is the call's own doing.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, cast

T = TypeVar("T")


class CancelledItself(Exception):
    """A call raised `CancelledError` while nobody cancelled it (see the module docstring)."""


def cancelled_from_outside() -> bool:
    """True when a `CancelledError` that just reached the caller is a cancellation of its own
    task; False when the call it awaited (through `awaited`) raised it of its own accord."""
    if sys.version_info >= (3, 11):
        task = asyncio.current_task()
        return task is None or task.cancelling() > 0
    return True  # pragma: no cover - 3.10: `awaited` turned the call's own into CancelledItself


def awaited(coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
    """`coro`, to be awaited where a `CancelledError` it raises itself must be told apart
    (3.11+: the coroutine itself, no frame added; 3.10: run in a task of its own)."""
    if sys.version_info >= (3, 11):
        return coro
    return _in_own_task(coro)  # pragma: no cover - 3.10


async def _in_own_task(coro: Coroutine[Any, Any, T]) -> T:  # pragma: no cover - 3.10
    stopping = False  # set before the caller cancels the call: then its CancelledError is ours
    exited: list[SystemExit] = []

    async def call() -> T | None:
        try:
            return await coro
        except asyncio.CancelledError as exc:
            if stopping:
                raise
            raise CancelledItself(str(exc)) from None
        except SystemExit as exc:  # out of a task it would stop the event loop: the caller
            exited.append(exc)  # raises it in its own frame, as if the call ran there
            return None

    task = asyncio.ensure_future(call())  # copies the context: `tool_context()` still works
    try:
        await asyncio.wait((task,))  # a cancellation of the caller lands here, not in `task`
    except asyncio.CancelledError:
        stopping = True
        task.cancel()
        await asyncio.wait((task,))  # the call's own clean-up runs before the caller goes on
        raise
    if exited:
        raise exited[0]
    return cast(T, task.result())  # None only when it exited, raised just above


def sync_call(fn: Callable[..., T], kwargs: dict[str, Any]) -> T:
    """`fn(**kwargs)` in a worker thread, where a `CancelledError` can only be the function's
    own: it becomes `CancelledItself`, so the awaiting task never takes it for its own."""
    try:
        return fn(**kwargs)
    except asyncio.CancelledError as exc:
        raise CancelledItself(str(exc)) from None
