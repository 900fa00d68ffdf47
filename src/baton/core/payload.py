"""The typed hand-off payload: what travels with the baton from one agent to the next."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from baton.core.ids import now
from baton.core.jsontext import to_canonical, to_text

Priority = Literal["low", "normal", "high", "urgent"]


class HandoffArgs(BaseModel):
    """The arguments a model writes when it calls a `transfer_to_<agent>` tool."""

    # defer_build: pydantic builds the validator on first use, not during `import baton`
    model_config = ConfigDict(extra="forbid", defer_build=True)

    reason: str = Field(min_length=1, description="Why the baton passes to this agent.")
    objective: str = Field(min_length=1, description="What the receiver must achieve for the user.")
    state: dict[str, Any] = Field(
        default_factory=dict,
        description="Verified business slots the receiver needs (order_id, server_id, ...).",
    )
    completed_steps: list[str] = Field(default_factory=list, description="What is already done.")
    constraints: list[str] = Field(
        default_factory=list, description="Rules the receiver must keep."
    )
    reply_to_user: str | None = Field(
        default=None, description="What the user has already been told about this hand-off."
    )
    priority: Priority = Field(default="normal", description="low, normal, high or urgent.")

    @field_validator("reason", "objective")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v


class HandoffPayload(HandoffArgs):
    """A validated hand-off: the model's arguments plus the fields the kernel fills in."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    trace_id: str = Field(description="Trace id of the run (also the OpenTelemetry trace id).")
    session_id: str = Field(description="Session the run belongs to.")
    user_id: str | None = Field(default=None, description="End user, when known.")
    source: str = Field(description="Agent handing over.")
    target: str = Field(description="Agent receiving the baton.")
    hop: int = Field(ge=1, description="1 for the first hand-off of a run, 2 for the next, ...")
    path: list[str] = Field(description="Agents that held the baton in this run, source last.")
    history_ref: str = Field(description="Store reference of the full transcript (session id).")
    summary: str | None = Field(
        default=None, description="Model-made summary of the conversation (`summary` policy)."
    )
    created_at: float = Field(default_factory=now, description="Epoch seconds.")

    def fingerprint(self) -> str:
        """sha256 of the canonical business content (target + what was asked), for idempotency.

        Volatile fields (ids, hop, path, timestamps) are left out so a retried or repeated
        hand-off with the same meaning has the same fingerprint.
        """
        canonical = {
            "target": self.target,
            "reason": self.reason,
            "objective": self.objective,
            "state": self.state,
            "completed_steps": self.completed_steps,
            "constraints": self.constraints,
            "priority": self.priority,
        }
        return hashlib.sha256(to_canonical(canonical).encode()).hexdigest()

    def render(self) -> str:
        """The payload as the receiving agent reads it (a compact, labelled block)."""
        lines = [
            f"You now hold the baton, handed over by {self.source} (hop {self.hop}).",
            f"Objective: {self.objective}",
            f"Reason: {self.reason}",
        ]
        if self.state:
            lines.append("Known facts: " + to_text(self.state))
        if self.completed_steps:
            lines.append("Already done: " + "; ".join(self.completed_steps))
        if self.constraints:
            lines.append("Constraints: " + "; ".join(self.constraints))
        if self.summary:
            lines.append(f"Summary of the conversation so far: {self.summary}")
        if self.reply_to_user:
            lines.append(f"The user was already told: {self.reply_to_user!r} (do not repeat it).")
        if self.priority != "normal":
            lines.append(f"Priority: {self.priority}")
        lines.append("Do not ask the user again for anything listed above.")
        return "\n".join(lines)
