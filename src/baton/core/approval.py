"""`ApprovalCard`: a run waiting for a person to sign off a tool call or a hand-off (seed 002)."""

from __future__ import annotations

import unicodedata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from baton.core.ids import now

_INVISIBLE = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))
"""Character categories an approver's name loses: control and format characters (zero-width
spaces and joiners, direction marks), lone surrogates, private and unassigned ones."""


def approver_identity(by: str) -> str:
    """Who `by` names, for telling approvers apart: NFKC-normalised, control and zero-width
    characters removed, white space trimmed and collapsed, case-folded, so `alice`, `Alice`,
    `alice ` and `alice\u200b` are one person ("" when nothing is left)."""
    text = unicodedata.normalize("NFKC", by)
    text = "".join(c for c in text if unicodedata.category(c) not in _INVISIBLE)
    return " ".join(text.split()).casefold()


class Approval(BaseModel):
    """One person's sign-off (or refusal) on an `ApprovalCard`."""

    model_config = ConfigDict(defer_build=True)

    by: str
    """Who decided."""
    role: str | None = None
    """The role they decided in (checked against the card's `required_roles`)."""
    approved: bool = True
    reason: str = ""
    at: float = Field(default_factory=now)
    authenticated: bool = False
    """The channel that recorded the decision verified who `by` is (the API server binds it
    to the bearer token's user); False for the Python API and the CLI, which take `by` on
    the caller's word."""


class ApprovalCard(BaseModel):
    """What a person needs to decide, persisted with the paused run."""

    model_config = ConfigDict(defer_build=True)

    id: str
    """Approval id: name it in `team.approve(session_id, approval_id, ...)`."""
    session_id: str
    run_id: str
    trace_id: str
    agent: str
    """The agent whose call waits."""
    kind: Literal["tool", "handoff"]
    tool: str | None = None
    """The tool to run (kind `tool`)."""
    target: str | None = None
    """The agent to hand over to (kind `handoff`)."""
    call_id: str
    """The model's tool-call id the decision answers."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The tool's arguments, or the hand-off payload's fields (redacted)."""
    reason: str = ""
    """Why approval is needed."""
    state: dict[str, Any] = Field(default_factory=dict)
    """Session slots when the run paused (redacted)."""
    requested_at: float = Field(default_factory=now)
    timeout_s: float | None = None
    """After this many seconds without a decision the run escalates instead."""
    required_roles: list[str] = Field(default_factory=list)
    """Roles allowed to decide; empty: anyone."""
    dual: bool = False
    """Two distinct approvers are needed."""
    approvals: list[Approval] = Field(default_factory=list)
    """Sign-offs so far."""

    @property
    def needed(self) -> int:
        """How many distinct approvers the card needs."""
        return 2 if self.dual else 1

    def expired(self, at: float | None = None) -> bool:
        """True when the card waited longer than its timeout."""
        if self.timeout_s is None:
            return False
        return (at if at is not None else now()) - self.requested_at > self.timeout_s

    def render(self) -> str:
        """The card as text for a console."""
        what = f"tool {self.tool}" if self.kind == "tool" else f"hand-off to {self.target}"
        roles = ", ".join(self.required_roles) or "anyone"
        signed = ", ".join(a.by for a in self.approvals) or "none"
        return (
            f"APPROVAL {self.id} ({self.session_id})\n"
            f"{self.agent} wants: {what}\nArguments: {self.arguments}\nReason: {self.reason}\n"
            f"Approvers: {roles}; needs {self.needed}; signed: {signed}"
        )
