"""The kernel's two memory hooks: what a team with long-term memory adds to a run.

A team given a memory (`Team(..., memory=Memory(...))`, `baton.memory`) hands the kernel an
object with these two hooks and nothing else: `recall` before an agent's turn (the memories
relevant to the user's message, rendered as quoted data for the system prompt) and `after_run`
once a run's commit succeeded (what the run leaves to remember). A team without memory has
`KernelSettings.memory = None`, and the kernel asks nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from baton.runtime.blueprint import Blueprint
    from baton.runtime.kernel import Kernel
    from baton.runtime.result import RunStatus
    from baton.runtime.state import RunState


@runtime_checkable
class MemoryHook(Protocol):
    """What the kernel asks of a team's long-term memory."""

    async def recall(self, run: RunState, agent: str) -> str | None:
        """The memories for `agent`'s turn in `run` as quoted data for its system prompt;
        None when there are none (or the run has no user)."""
        ...

    async def after_run(self, kernel: Kernel, run: RunState, status: RunStatus) -> None:
        """Keep what the finished, committed `run` leaves to remember; never raises (a
        memory that fails costs the memories, not the run)."""
        ...

    def blueprint_part(self, agents: Sequence[str]) -> Blueprint:
        """The calls it gives `agents` (the agents with a model): its `remember` tool."""
        ...
