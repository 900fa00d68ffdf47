"""The `EventSink` protocol: anything that consumes events as they happen."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from baton.core.events import Event


@runtime_checkable
class EventSink(Protocol):
    """Receives every event, in order, as it happens. Must not raise."""

    def emit(self, event: Event) -> None:
        """Handle one event."""
        ...
