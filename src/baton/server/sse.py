"""Server-sent events: the wire format, and the response that carries them."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, TypeVar

import anyio
from fastapi.responses import StreamingResponse

from baton.core.events import Event

MEDIA_TYPE = "text/event-stream"

EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One server-sent event: `event` names it, `data` is one line of JSON.",
    "properties": {
        "event": {"type": "string", "description": "The event's type, `result`, `error` or `end`."},
        "data": {"type": "string", "contentMediaType": "application/json"},
        "id": {"type": "string", "description": "The event's id (session event streams)."},
    },
    "required": ["event", "data"],
}
"""The OpenAPI schema of each message of an event stream."""

PING = b": ping\n\n"
"""A keep-alive comment (clients ignore it; proxies see traffic)."""

PING_S = 15.0
"""Seconds of silence after which a stream sends `PING`."""

T = TypeVar("T")


def message(event: str, data: Any, *, id: str | None = None) -> bytes:
    """One SSE message: `id:` (optional), `event:`, one `data:` line of JSON, a blank line.
    JSON text never holds a raw newline, so `data` is always one line."""
    head = f"id: {_field(id)}\n" if id is not None else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"{head}event: {_field(event)}\ndata: {body}\n\n".encode()


def data_message(data: Any) -> bytes:
    """One SSE message with no event name: a `data:` line of JSON (OpenAI's chunks)."""
    return f"data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


def event_message(event: Event, *, with_id: bool = False) -> bytes:
    """The SSE message of a Baton event: its `type` as the name, its JSON as the data."""
    return message(event.type, event.model_dump(mode="json"), id=event.id if with_id else None)


def _field(value: str) -> str:
    """A value safe on an SSE field line (no line breaks)."""
    return value.replace("\r", " ").replace("\n", " ")


def stream(messages: AsyncIterator[bytes]) -> StreamingResponse:
    """The HTTP response of an SSE stream (not cached, not buffered by proxies)."""
    return StreamingResponse(
        messages,
        media_type=MEDIA_TYPE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def paced(items: AsyncIterator[T]) -> AsyncGenerator[T | None, None]:
    """Each item of `items` as it comes, and None after every `PING_S` seconds of silence
    (the caller sends `PING`). Closed early (the client went away), it cancels the pending
    read and closes `items`, shielded from the cancellation that closed it, so the run
    behind `items` stops cleanly. Close it with `contextlib.aclosing`."""
    pending: asyncio.Future[T] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(items.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=PING_S)
            if not done:
                yield None
                continue
            future, pending = pending, None
            try:
                item = future.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        with anyio.CancelScope(shield=True):
            if pending is not None and not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pending
            close = getattr(items, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
