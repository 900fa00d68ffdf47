"""Cancelling a run: `team.cancel(session_id)` from any task or thread, or the caller's own
`task.cancel()` (a timeout, a client that went away).

Either way the run ends `cancelled`: the calls it was making are answered (a tool that was
running may have taken effect, and the model is told so), and what it did is committed with a
`cancelled` checkpoint, so `team.resume` can still continue it until the session's next
message. A `team.cancel` makes the run return its `RunResult`; a caller's own cancellation is
recorded the same way and then raised on, as asyncio expects.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from typing import TYPE_CHECKING

from baton.runtime.calls import answer
from baton.tools import error_content

if TYPE_CHECKING:
    from baton.runtime.result import RunResult
    from baton.runtime.state import RunState

CALLER = "the caller cancelled the run (task.cancel(), or a timeout around the call)"
"""The reason recorded when the run's own task was cancelled."""

RELEASED = "released unfinished (team.release): its process is shutting down"
"""Why a released run stopped (it is not recorded: the run stays unfinished)."""


class LiveRun:
    """A run going on in this process, as `team.cancel` reaches it (from any thread)."""

    __slots__ = ("_done", "finished", "loop", "reason", "released", "result", "task")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.reason: str | None = None
        """Why `team.cancel` stopped it (None: not asked to stop)."""
        self.released = False
        """`team.release` stopped it: it stays unfinished, nothing committed."""
        self.finished = False
        self.result: RunResult | None = None
        self._done: concurrent.futures.Future[RunResult | None] | None = None

    def stop(self, reason: str, *, release: bool = False) -> None:
        """Ask the run to stop (thread-safe): it records `cancelled` and returns its result, or,
        with `release`, stops where it is, unfinished (its caller gets `RunReleased`)."""
        if self.reason is None:
            self.reason = reason
            self.released = release
            self.loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        # on the run's loop: a run that ended meanwhile is left alone
        if not self.finished and self.task is not None and not self.task.done():
            self.task.cancel()

    def done(self) -> concurrent.futures.Future[RunResult | None]:
        """Resolves with the run's result once it has ended (any loop or thread can wait)."""
        with _GUARD:
            if self._done is None:
                self._done = concurrent.futures.Future()
                if self.finished:
                    self._done.set_result(self.result)
            return self._done

    def end(self, result: RunResult | None) -> None:
        """The run is over (called on its loop)."""
        with _GUARD:
            self.finished = True
            self.result = result
            waiting = self._done
        if waiting is not None:
            waiting.set_result(result)


_GUARD = threading.Lock()


def answer_open_calls(run: RunState, ended: str) -> None:
    """Give every call of the latest response that has no result one that says how the run
    `ended` ("was cancelled", "failed"), and whether the call may have taken effect (its tool
    had started)."""
    turn = run.turn
    if turn is None:
        return
    for pending in turn.open_calls():
        if pending.started:
            note = (
                f"not completed: the run {ended} while this call ran, so it may have taken "
                "effect; check before calling it again"
            )
        else:
            note = f"not executed: the run {ended} before this call ran"
        answer(run, turn, pending, error_content(note))
    run.approval = run.interrupt = None


def consume_cancellation() -> bool:
    """Take back the one cancellation `LiveRun.stop` sent the current task; True when no
    other cancellation is pending (the run may return normally)."""
    task = asyncio.current_task()
    if task is None or sys.version_info < (3, 11):
        return True  # 3.10 counts no cancellations
    return task.uncancel() == 0
