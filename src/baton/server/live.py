"""`LiveHub`: the events of the runs in this server process, as they happen, for the
sessions someone follows (`GET /sessions/{id}/events`), and which sessions run right now."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

from baton.core.events import Event

_ENDS = ("run_finished", "approval_requested", "interrupt_raised")
"""Events after which a session's run no longer goes on in this process."""


class LiveHub:
    """An event sink: hands each event to the queues of its session's followers (from any
    thread), and keeps the set of sessions whose run goes on in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._followers: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[Event]]]]
        self._followers = {}
        self._running: dict[str, tuple[float, str | None]] = {}
        """Session -> (when its run started, its user)."""

    def emit(self, event: Event) -> None:
        """Count the run in or out, and pass the event on; never raises."""
        sid = event.session_id
        with self._lock:
            if event.parent_run_id is None:
                if event.type in ("run_started", "run_resumed"):
                    self._running[sid] = (event.ts, getattr(event, "user_id", None))
                elif event.type in _ENDS:
                    self._running.pop(sid, None)
            targets = list(self._followers.get(sid, ()))
        for loop, queue in targets:
            with contextlib.suppress(RuntimeError):  # the follower's loop is closed
                loop.call_soon_threadsafe(queue.put_nowait, event)

    def running(self, session_id: str) -> bool:
        """A run of the session goes on in this process."""
        with self._lock:
            return session_id in self._running

    def started(self, session_id: str) -> tuple[float, str | None] | None:
        """When the session's run going on in this process started, and its user."""
        with self._lock:
            return self._running.get(session_id)

    def running_sessions(self) -> list[str]:
        """The sessions whose run goes on in this process."""
        with self._lock:
            return list(self._running)

    @contextlib.contextmanager
    def follow(self, session_id: str) -> Iterator[asyncio.Queue[Event]]:
        """A queue that receives the session's events while the block runs."""
        entry = (asyncio.get_running_loop(), asyncio.Queue[Event]())
        with self._lock:
            self._followers.setdefault(session_id, []).append(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                found = self._followers.get(session_id, [])
                if entry in found:
                    found.remove(entry)
                if not found:
                    self._followers.pop(session_id, None)
