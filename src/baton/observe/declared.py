"""The names a team declared: what a sink may use as a label without trusting a model.

A model can call a tool that does not exist, hand off to an agent that is not there, or post
under any key; those names reach the events (`tool_called`, `handoff_refused`, ...) as data.
A sink that turned every name it saw into a Prometheus series could be flooded by one reply
with a hundred invented names. So a team tells the sinks attached to it what it declared
(`Team.declared_names`, handed to a sink's `bind_names` when it is attached), and a sink counts
any other name under `OTHER`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

OTHER = "other"
"""The label of every name a team did not declare."""


@dataclass(frozen=True, slots=True)
class DeclaredNames:
    """What a team declared: its agents (with `human`), everything they may call, and the
    blackboard keys its subscriptions name."""

    agents: frozenset[str] = frozenset()
    """Agent names, and `human` (the human queue, a hand-off and escalation target)."""
    tools: frozenset[str] = frozenset()
    """Every name an agent may call: its tools, hand-offs, built-ins, a graph's nodes."""
    board_keys: frozenset[str] = frozenset()
    """Blackboard keys the team names (the request's key and subscribed keys)."""

    @staticmethod
    def union(all_names: Iterable[DeclaredNames]) -> DeclaredNames:
        """The names any of `all_names` declares."""
        agents: set[str] = set()
        tools: set[str] = set()
        keys: set[str] = set()
        for names in all_names:
            agents |= names.agents
            tools |= names.tools
            keys |= names.board_keys
        return DeclaredNames(frozenset(agents), frozenset(tools), frozenset(keys))


NamesSource = Callable[[], DeclaredNames]
"""Returns a team's declared names as they are now (a topology may add some after it is
built, e.g. the tools a graph's nodes call through `ctx.call`)."""


@runtime_checkable
class BindsNames(Protocol):
    """A sink that labels by names and so wants the declared ones of the teams it serves."""

    def bind_names(self, source: NamesSource) -> None:
        """Take the names of one more team (called by `Team` when the sink is attached)."""
        ...

    def unbind_names(self, source: NamesSource) -> None:
        """Forget a team's names (called by `Team.remove_sink`)."""
        ...
