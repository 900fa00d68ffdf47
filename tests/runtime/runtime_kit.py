"""Plain helpers shared by the kernel tests (fixtures live in conftest.py)."""

from __future__ import annotations

import json
from typing import Any

from baton import Event, Message, ScriptedModel, Team
from baton.models import Step


class ListSink:
    """An `EventSink` that keeps every event it receives."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


def handoff(
    target: str, reason: str = "belongs there", objective: str = "help the user", **kw: Any
) -> Step:
    """A scripted `transfer_to_<target>` call."""
    return ScriptedModel.call(f"transfer_to_{target}", reason=reason, objective=objective, **kw)


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


def of_type(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


async def tool_messages(team: Team, session_id: str, *names: str) -> list[Message]:
    """The tool results the kernel recorded for the session, in order (only `names` if given)."""
    return [
        m
        for m in await team.store.get_messages(session_id)
        if m.role == "tool" and (not names or m.name in names)
    ]


def content(msg: Message) -> Any:
    """A tool result parsed as JSON."""
    return json.loads(msg.content or "null")
