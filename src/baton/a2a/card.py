"""The Agent Card of a team served over A2A: one skill per agent, streaming and push
notifications, JSON-RPC at the URL clients reach, and a bearer scheme with a token file."""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT

from baton.a2a.wire import HANDOFF_MEDIA_TYPE, RESULT_MEDIA_TYPE
from baton.topologies.team import Team


def build_card(
    team: Team,
    *,
    name: str,
    url: str,
    description: str | None = None,
    authenticated: bool = False,
) -> AgentCard:
    """The Agent Card of a served team: one skill per agent, streaming and push notifications,
    JSON-RPC at `url`; with `authenticated` a bearer token scheme."""
    agents = team.agents
    entry = team.entry if isinstance(team.entry, str) else "a router"
    skills = [
        AgentSkill(
            id=agent.name,
            name=agent.name,
            description=agent.description or f"the agent {agent.name} of the team",
            tags=["baton", "entry" if agent.name == team.entry else "agent"],
            input_modes=["text/plain", HANDOFF_MEDIA_TYPE],
            output_modes=["text/plain", RESULT_MEDIA_TYPE],
        )
        for agent in agents.values()
    ]
    card = AgentCard(
        name=name,
        description=description
        or f"A Baton team of agents ({', '.join(agents)}); requests start with {entry}.",
        version=_version(),
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_CURRENT
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text/plain", HANDOFF_MEDIA_TYPE],
        default_output_modes=["text/plain", RESULT_MEDIA_TYPE],
        skills=skills,
    )
    if authenticated:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer",
                    description="A token of the server's token file (`--auth`), with the "
                    "role operator.",
                )
            )
        )
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


def _version() -> str:
    from baton import __version__

    return __version__
