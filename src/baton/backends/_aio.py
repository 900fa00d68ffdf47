"""Small asyncio helpers the service backends (PostgreSQL, Redis store, Redis bus) share."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def settle(work: Coroutine[Any, Any, T]) -> T:
    """Await `work` to its end even if the caller is cancelled meanwhile (then re-raise the
    cancellation): a write the server may already have applied is never left unknown, so a
    committed `SessionRecord` has its new version whatever happens to its caller."""
    task = asyncio.ensure_future(work)
    interrupted: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            interrupted = exc
    if interrupted is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller sees
        raise interrupted
    return task.result()


def glob_escape(text: str) -> str:
    """`text` matched literally by a Redis SCAN MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
