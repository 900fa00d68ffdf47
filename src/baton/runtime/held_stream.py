"""`team.stream` under output guardrails: the reply's `text_delta`s wait for the check."""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.core.events import Event, TextDelta
from baton.runtime.state import RunState

if TYPE_CHECKING:
    from collections.abc import Callable

    from baton.runtime.plan import KernelSettings


class HeldStream:
    """A run's listener while output rules may come into force: every event passes at once
    but `text_delta`s, which wait until the reply is checked (`release`); the pieces of a run
    that ends without a checked reply are never sent."""

    __slots__ = ("held", "listener")

    def __init__(self, listener: Callable[[Event], None]) -> None:
        self.listener = listener
        self.held: list[TextDelta] = []

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self.held.append(event)
        else:
            self.listener(event)

    def release(self, run: RunState, agent: str, text: str | None) -> None:
        """Send the held pieces when they spell `text` (or `text` is None: nothing to check),
        else `text` as one piece (a rewritten reply)."""
        held, self.held = self.held, []
        if text is None or "".join([d.text for d in held]) == text:
            for d in held:
                self.listener(d)
        elif text:
            self.listener(TextDelta(**run.base(agent), text=text))


def held_stream(
    cfg: KernelSettings, listener: Callable[[Event], None] | None, run: RunState | None = None
) -> Callable[[Event], None] | None:
    """The run's listener: held while an output rule may come into force (the team has one,
    or the run being resumed carries rules), else `listener` itself."""
    book = cfg.guardrails
    if listener is None or not ((book is not None and book.outputs) or (run and run.guardrails)):
        return listener
    return HeldStream(listener)
