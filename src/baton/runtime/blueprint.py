"""What a topology declares besides its agents: `Blueprint`.

A topology (a supervisor, a pipeline, a graph, ...) is a team of agents plus the calls it
generates for them (`ask_<worker>`, `post_to_board`, a graph's node functions), the conductors
that decide some agents' steps in code, the call kinds that answer those calls, and the store
capabilities its runs need. It says all of that in a blueprint, before anything is compiled:
`Team(..., blueprint=...)` compiles the plans once (`compile_plans`, which checks every
generated name in one place), builds the runner with the kinds up front, and checks the
store's capabilities with one error naming the capability and the stores that have it. Nothing
is patched into a runner after it is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from baton.backends.base import Blackboard, Snapshots, Tasks
from baton.core.errors import ConfigError

if TYPE_CHECKING:
    from baton.runtime.conduct import Conducted
    from baton.runtime.kernel import Kind
    from baton.runtime.plan import Extra


@dataclass(frozen=True, slots=True)
class Capability:
    """A store capability a topology needs: a protocol of `baton.backends.base`."""

    name: str
    protocol: type
    what: str
    """What it keeps, for the error message ("a graph's snapshots per super-step")."""

    def held_by(self, store: Any) -> bool:
        return isinstance(store, self.protocol)


SNAPSHOTS = Capability("Snapshots", Snapshots, "a graph's state at every super-step")
BLACKBOARD = Capability("Blackboard", Blackboard, "shared, versioned board entries")
TASKS = Capability("Tasks", Tasks, "a plan's tasks, each saved compare-and-set")


@dataclass(frozen=True)
class Blueprint:
    """A topology's additions to its agents (every field keyed by agent or kind name)."""

    entries: Mapping[str, tuple[Extra, ...]] = field(default_factory=dict)
    """Agent -> the calls the topology generates for it."""
    conductors: Mapping[str, Conducted] = field(default_factory=dict)
    """Agent -> the conductor deciding its steps and its round budget (the agent has no
    model)."""
    kinds: Mapping[str, Kind] = field(default_factory=dict)
    """Call kind -> its handler and parallelism."""
    needs: tuple[Capability, ...] = ()
    """Store capabilities the topology's runs use."""
    topology: str = "team"
    """Its name in error messages."""

    def __or__(self, other: Blueprint) -> Blueprint:
        """Both blueprints' additions (a pipeline's stage that is itself a supervisor)."""
        entries = dict(self.entries)
        for agent, extras in other.entries.items():
            entries[agent] = (*entries.get(agent, ()), *extras)
        twice = sorted(set(self.conductors) & set(other.conductors))
        if twice:
            raise ConfigError(f"agents {twice} would have two conductors")
        kinds = dict(self.kinds)
        for name, kind in other.kinds.items():
            if name in kinds and kinds[name] != kind:
                raise ConfigError(f"call kind {name!r} is declared twice, differently")
            kinds[name] = kind
        needs = (*self.needs, *(n for n in other.needs if n not in self.needs))
        topology = self.topology if self.topology != "team" else other.topology
        return Blueprint(entries, {**self.conductors, **other.conductors}, kinds, needs, topology)

    def check_store(self, store: Any) -> None:
        """Raise `ConfigError` naming the first capability `store` lacks and the stores that
        have it."""
        for need in self.needs:
            if not need.held_by(store):
                raise ConfigError(
                    f"a {self.topology} needs a store with the {need.name} capability "
                    f"({need.what}); {type(store).__name__} ({store.url}) lacks it: use "
                    f"{' or '.join(_stores_with(need))}"
                )


@runtime_checkable
class BringsBlueprint(Protocol):
    """An agent that brings its own part of the blueprint (a remote agent: the conductor of
    its turns, its call kind and its call), so every topology takes it like any agent; and
    a connection its team closes (`team.aclose`)."""

    def blueprint_part(self) -> Blueprint:
        """What this agent adds (keyed by its name)."""
        ...

    async def aclose(self) -> None:
        """Close what the agent opened (it opens again if used again)."""
        ...


def agents_part(agents: Iterable[Any]) -> Blueprint:
    """The blueprint parts the agents bring themselves, combined (empty for plain agents)."""
    out = Blueprint()
    for agent in agents:
        if isinstance(agent, BringsBlueprint):
            out = out | agent.blueprint_part()
    return out


def _stores_with(need: Capability) -> list[str]:
    """The stores Baton ships that have `need` (each named by the URL that opens it)."""
    from baton.backends.memory import MemoryStore
    from baton.backends.postgres import PostgresStore
    from baton.backends.redis_store import RedisStore
    from baton.backends.sqlite import SQLiteStore

    shipped = {
        MemoryStore: "MemoryStore() (memory://)",
        SQLiteStore: "SQLite (sqlite:///baton.db)",
        PostgresStore: "PostgreSQL (postgresql://...)",
        RedisStore: "Redis (redis://...)",
    }
    members = [n for n in dir(need.protocol) if not n.startswith("_")]
    return [name for cls, name in shipped.items() if all(hasattr(cls, m) for m in members)]
