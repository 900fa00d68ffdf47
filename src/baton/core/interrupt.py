"""Interrupts: code that stops a run to ask a person for a value, and gets it on resume.

`interrupt(value)` inside a graph node's function or inside any tool stops the run: the
call it was made in stays open, the run is saved with `status="interrupted"` and an
`InterruptCard` carrying `value` (what to show the person). `graph.resume(thread_id,
answer)` (or `team.answer_interrupt`) runs that one call again, in any process, and this
time `interrupt(...)` returns `answer`. Everything else the run did stays done: the calls
answered before it, the other tools of the same agent's turn, a function node's earlier
`ctx.call(...)` steps. Several interrupts in one call are answered in the order they are
made (the first resume answers the first, and so on).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from baton.core.ids import now


class InterruptCard(BaseModel):
    """What an interrupted run asks, persisted with it."""

    model_config = ConfigDict(defer_build=True)

    id: str
    """Interrupt id."""
    session_id: str
    """The session (a graph's thread) of the run."""
    run_id: str
    trace_id: str
    agent: str
    """The agent (or graph node) whose call stopped."""
    call_id: str
    """The call that made the interrupt: it runs again on resume."""
    name: str
    """The tool or node that called `interrupt`."""
    value: Any = None
    """What the code passed to `interrupt(value)`: the question for the person (JSON)."""
    index: int = 0
    """Which interrupt of the call this is (0 for its first)."""
    created_at: float = Field(default_factory=now)


class GraphInterrupt(Exception):
    """Raised by `interrupt(value)` when no resume value is there yet. Let it propagate: the
    kernel catches it and pauses the run. Catching it (e.g. `except Exception`) and going on
    would run the rest of the code without the person's answer."""

    def __init__(self, value: Any, index: int) -> None:
        super().__init__(f"interrupted: {value!r}")
        self.value = value
        self.index = index


class Resumes:
    """The resume values of one call, and how many `interrupt` calls used them so far."""

    __slots__ = ("used", "values")

    def __init__(self, values: list[Any]) -> None:
        self.values = values
        self.used = 0


_RESUMES: contextvars.ContextVar[Resumes | None] = contextvars.ContextVar(
    "baton_resumes", default=None
)


@contextmanager
def resuming(values: list[Any]) -> Iterator[Resumes]:
    """Run a call with its resume values (what `interrupt` returns, in order)."""
    found = Resumes(values)
    token = _RESUMES.set(found)
    try:
        yield found
    finally:
        _RESUMES.reset(token)


def interrupt(value: Any = None) -> Any:
    """Stop the run to ask a person; returns their answer once the run is resumed with one.

    `value` (JSON: text, numbers, lists, dicts) is what the person is shown. Call it inside a
    graph node's function or a tool; anywhere else it raises `RuntimeError`."""
    found = _RESUMES.get()
    if found is None:
        raise RuntimeError(
            "interrupt() is called outside a run: call it inside a graph node's function or a "
            "tool that a run calls"
        )
    index = found.used
    found.used += 1
    if index < len(found.values):
        return found.values[index]
    raise GraphInterrupt(value, index)
