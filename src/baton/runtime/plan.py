"""What the kernel needs to run a team: compiled agents and the run-wide settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from baton.agents import Agent
from baton.backends.base import Store
from baton.core.messages import ToolSpec
from baton.models.base import Model
from baton.observe.base import EventSink
from baton.routing.router import Router
from baton.runtime.guards import Guards
from baton.tools import Tool

if TYPE_CHECKING:
    from baton.runtime.entities import Extractor
    from baton.runtime.redact import Redactor

HUMAN = "human"
"""The `fallback` value that sends escalations to the store's human queue."""

DEFAULT_ESCALATION_MESSAGE = (
    "I'm passing your request to a human colleague, together with everything we have so far, "
    "so you won't need to repeat yourself."
)


@dataclass(frozen=True)
class AgentPlan:
    """An agent compiled for the kernel: its model, tool table and the specs its model sees."""

    agent: Agent
    model: Model
    tools: dict[str, Tool]
    specs: list[ToolSpec]
    handoff_targets: frozenset[str]
    received_specs: list[ToolSpec] | None = None
    """Specs when the agent received the baton by hand-off (adds `transfer_back` and
    `fetch_history` where enabled); None means the same as `specs`."""

    def specs_for(self, received: bool) -> list[ToolSpec]:
        """The tool specs the model sees this turn."""
        if received and self.received_specs is not None:
            return self.received_specs
        return self.specs

    @property
    def callable_names(self) -> set[str]:
        """Names of everything the agent may call (its tools and hand-offs)."""
        return {s.name for s in self.received_specs or self.specs}


@dataclass
class KernelConfig:
    """Run-wide settings shared by every run of a team."""

    plans: dict[str, AgentPlan]
    entry: str | None
    """The entry agent; None when a router picks the first holder."""
    store: Store
    guards: Guards = field(default_factory=Guards)
    fallback: str = HUMAN
    sinks: list[EventSink] = field(default_factory=list)
    max_result_chars: int = 1500
    escalation_message: str = DEFAULT_ESCALATION_MESSAGE
    router: Router | None = None
    """Picks the first holder of each new session (tiers, then fallback)."""
    summariser: Model | None = None
    """Writes `summary`-policy summaries; None uses the handing-over agent's model."""
    redactor: Redactor | None = None
    """Redacts sensitive keys and values in payloads and events; None turns redaction off."""
    extractors: list[Extractor] | None = None
    """Entity extractors of the entity guard (`Guards.entity_guard`); None: the defaults."""
