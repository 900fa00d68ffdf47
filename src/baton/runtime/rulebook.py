"""A team's guardrails, compiled once when it is built: every rule by name, the team's, each
agent's own and each hand-off edge's, and the guard agents' plans (`baton.runtime.guardrails`
uses it in a run)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baton.agents import Agent
from baton.core.errors import ConfigError
from baton.core.payload import HandoffPayload
from baton.guardrails import Guardrail, Verdict
from baton.models.base import Model
from baton.runtime.plan import HUMAN, AgentPlan, compile_plans

DEFAULT_MESSAGE = "Sorry, I can't help with that request."
"""What the user reads when a rule without a `message` of its own blocks the run."""


@dataclass(frozen=True)
class Rulebook:
    """A team's guardrails, compiled once when the team is built."""

    rules: Mapping[str, Guardrail]
    """Name -> rule, for every rule of the team, its agents and their edges."""
    team: tuple[str, ...]
    """The names of the team's own rules (`Team(guardrails=...)`)."""
    own: Mapping[str, tuple[str, ...]]
    """Agent -> the names of its own rules."""
    edges: Mapping[tuple[str, str], tuple[str, ...]]
    """(source, target) -> the names of the rules of that hand-off edge."""
    judges: Mapping[str, AgentPlan]
    """Guard agent name -> its compiled plan (its answer's output type is `Verdict`)."""
    message: str
    """The team's `guardrail_message`."""
    inputs: bool
    """Some rule is an input rule (a user message is withheld until the rules pass it)."""
    outputs: bool
    """Some rule is an output rule (a stream then holds its text until the check)."""

    def carried(self, incoming: HandoffPayload, holder: str) -> list[str]:
        """The rules the baton carried to `holder` by `incoming`: those of every agent on the
        hand-off's path and of every edge between them."""
        path = [*incoming.path, holder]
        names: list[str] = []
        for i, agent in enumerate(path):  # in the order they joined along the path
            if i:
                names += self.edges.get((path[i - 1], agent), ())
            names += self.own.get(agent, ())
        names += self.edges.get((incoming.source, holder), ())
        return names


def compile_guardrails(
    rules: Sequence[Guardrail],
    agents: Mapping[str, Agent],
    default_model: Model | str | None,
    message: str,
) -> Rulebook | None:
    """The team's `Rulebook`; None when neither the team nor any agent has a rule. Raises
    `ConfigError` for a rule that is not a `Guardrail`, two rules with one name, an edge that is
    not a hand-off of its agent, or a guard agent that is also a member of the team."""
    if isinstance(rules, (Guardrail, str)):
        raise ConfigError("Team(guardrails=...) takes a list of Guardrail objects")
    if not isinstance(message, str) or not message.strip():
        raise ConfigError("guardrail_message must be the text the user reads when a rule blocks")
    found: dict[str, Guardrail] = {}

    def names(items: Sequence[Any], where: str) -> tuple[str, ...]:
        out: list[str] = []
        for g in items:
            if not isinstance(g, Guardrail):
                raise ConfigError(f"{where}: {g!r} is not a Guardrail; build one: Guardrail(...)")
            seen = found.setdefault(g.name, g)
            if seen != g:
                raise ConfigError(
                    f"two different guardrails are named {g.name!r} ({where} has one); give "
                    "each rule its own name"
                )
            if g.name not in out:
                out.append(g.name)
        return tuple(out)

    team = names(list(rules), "Team(guardrails=...)")
    own: dict[str, tuple[str, ...]] = {}
    edges: dict[tuple[str, str], tuple[str, ...]] = {}
    for a in agents.values():
        own[a.name] = names(a.guardrails, f"agent {a.name!r}")
        for target, items in a.handoff_guardrails.items():
            if target == HUMAN or target not in a.handoffs:
                raise ConfigError(
                    f"agent {a.name!r} sets handoff_guardrails for {target!r}, which is not an "
                    f"agent it hands off to ({', '.join(t for t in a.handoffs if t != HUMAN)})"
                )
            edges[(a.name, target)] = names(items, f"agent {a.name!r}, edge to {target!r}")
    if not found:
        return None
    judges: dict[str, AgentPlan] = {}
    judge_agents: dict[str, Agent] = {}
    for g in found.values():
        guard = g.agent
        if guard is None:
            continue
        if guard.name in agents:
            raise ConfigError(
                f"guardrail {g.name!r}: guard agent {guard.name!r} is also a member of the team; "
                "a guard judges the team from outside: give it its own name and leave it out "
                "of the team's agents"
            )
        if judge_agents.setdefault(guard.name, guard) != guard:
            raise ConfigError(
                f"two different guard agents are named {guard.name!r}; give each its own name"
            )
        if guard.name not in judges:
            typed = guard.model_copy(update={"output_type": Verdict})
            judges[guard.name] = compile_plans({guard.name: typed}, default_model)[guard.name]
    return Rulebook(
        rules=found,
        team=team,
        own=own,
        edges=edges,
        judges=judges,
        message=message,
        inputs=any(g.stage == "input" for g in found.values()),
        outputs=any(g.stage == "output" for g in found.values()),
    )
