"""An agent's toolsets (MCP servers) listed before a run, and its plan compiled again when
the tools they offer changed.

A toolset's tools are known only once it is listed, which needs its server: the team lists
them before every run or resume (a cached list costs nothing; a server that said its list
changed is asked again), so the tools an agent sees never change in the middle of a run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping, Sequence

from baton.agents import Agent
from baton.core.errors import BatonError, ConfigError
from baton.models.base import Model
from baton.runtime.blueprint import Blueprint
from baton.runtime.plan import AgentPlan, compile_plan
from baton.tools import Tool


async def refresh_toolsets(
    plans: MutableMapping[str, AgentPlan],
    agents: Mapping[str, Agent],
    default_model: Model | str | None,
    blueprint: Blueprint,
    log: logging.Logger,
) -> None:
    """List every agent's toolsets; compile again (in `plans`) each agent whose listed
    tools are not the ones its plan holds. Raises what a toolset raises (a server that
    cannot start) and `ConfigError` for a listed tool whose name the agent already has.
    An agent whose toolsets were listed before keeps those tools when listing fails now
    (logged on `log`)."""
    for agent in agents.values():
        if not agent.toolsets:
            continue
        plan = plans[agent.name]
        try:
            listed: list[Tool] = []
            for toolset in agent.toolsets:
                listed.extend(await toolset.list_tools())
        except BatonError as exc:
            if plan.agent is agent:  # never listed: the agent cannot run without its tools
                raise
            # listed before: the run goes on with those tools, and a call to a server that
            # is still down fails as a tool error naming it
            log.warning("agent %r keeps the tools it had: %s", agent.name, exc)
            continue
        if _same(plan.agent.tools[len(agent.tools) :], listed):
            continue
        _check_names(agent, listed)
        update: dict[str, object] = {"tools": (*agent.tools, *listed)}
        if plan.model is not None:  # the model resolved at build, not a second client
            update["model"] = plan.model
        expanded = agent.model_copy(update=update)
        plans[agent.name] = compile_plan(
            expanded,
            agents,
            default_model,
            blueprint.entries.get(agent.name, ()),
            blueprint.conductors.get(agent.name),
        )


def _same(held: Sequence[Tool], listed: Sequence[Tool]) -> bool:
    return len(held) == len(listed) and all(a is b for a, b in zip(held, listed, strict=True))


def _check_names(agent: Agent, listed: Sequence[Tool]) -> None:
    seen = {t.name for t in agent.tools}
    for t in listed:
        if t.name in seen:
            raise ConfigError(
                f"agent {agent.name!r} gets two tools named {t.name!r} (its own tools and "
                "its toolsets'): leave one out with exclude=[...], or give the server's tools "
                "a prefix with server.tools(prefix='...')"
            )
        seen.add(t.name)
