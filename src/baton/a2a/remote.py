"""`RemoteAgent`: an agent on another system, reached over A2A.

A remote agent takes the baton like any agent: other agents hand off to it
(`transfer_to_<name>`), a supervisor asks it (`ask_<name>`), a router routes to it by its
description. Its turn has no model: it is a conductor (`baton.runtime.conduct`) whose first
step sends the request to the remote agent (one call of kind `a2a`, `baton.a2a.reach`) and
whose second turns the remote task into the turn's ending: its answer, or an escalation when
the remote failed, refused, escalated or could not be reached. It brings that part of the
blueprint itself (`blueprint_part`), so every topology takes it without code of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from baton.a2a.link import RemoteLink
from baton.a2a.reach import A2A, ROUNDS, call_name, conduct, reach
from baton.agents import Agent
from baton.core.errors import ConfigError
from baton.runtime.blueprint import Blueprint
from baton.runtime.conduct import Conducted
from baton.runtime.kernel import Kind
from baton.runtime.plan import CallEntry, Extra


class RemoteAgent(Agent):
    """An agent served over A2A at `url`: `RemoteAgent("tech", "http://tech:9000",
    description="Diagnoses outages")`. Its tools, model and hand-offs are the remote's, not
    the team's; the team decides who may hand it the baton and what leaves (the hand-off
    payload and the user's words, redacted)."""

    url: str = Field(
        description="Base URL of the agent (its card is at /.well-known/agent-card.json)."
    )
    timeout_s: float = Field(
        default=60.0, gt=0, description="Seconds one exchange with the agent may take."
    )
    headers: Mapping[str, str] = Field(
        default_factory=dict, description="HTTP headers sent with every request (auth)."
    )
    streaming: bool | None = Field(
        default=None,
        description="Stream the answer: None as the agent's card says, False never.",
    )
    _link: RemoteLink | None = PrivateAttr(default=None)

    def __init__(self, name: str, url: str, /, **fields: Any) -> None:
        super().__init__(**{**fields, "name": name, "url": url})

    @model_validator(mode="after")
    def _remote_only(self) -> RemoteAgent:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(
                f"remote agent {self.name!r}: url must be an http(s) URL, got {self.url!r}"
            )
        local = [
            what
            for what, given in (
                ("tools", self.tools),
                ("toolsets", self.toolsets),
                ("handoffs", self.handoffs),
                ("model", self.model is not None),
                ("output_type", self.output_type is not None),
                ("guardrails", self.guardrails),
                ("handoff_guardrails", self.handoff_guardrails),
            )
            if given
        ]
        if local:
            raise ConfigError(
                f"remote agent {self.name!r} runs at {self.url}: its {', '.join(local)} are "
                "the remote's own, not the team's; remove them"
            )
        return self

    @property
    def link(self) -> RemoteLink:
        """Its connection (opened on first use, closed with the team)."""
        if self._link is None:
            self._link = RemoteLink(
                self.name, self.url, self.headers, self.timeout_s, self.streaming
            )
        return self._link

    def blueprint_part(self) -> Blueprint:
        """Its conductor, its call (`a2a_<name>`, shown to no model) and the `a2a` kind."""
        extra = Extra(
            call_name(self.name),
            CallEntry(A2A, target=self.name),
            None,
            "the call that reaches the remote agent",
        )
        return Blueprint(
            entries={self.name: (extra,)},
            conductors={self.name: Conducted(conduct, ROUNDS)},
            kinds={A2A: Kind(reach)},
        )

    async def aclose(self) -> None:
        """Close its connection (it opens again if used again)."""
        if self._link is not None:
            await self._link.aclose()
