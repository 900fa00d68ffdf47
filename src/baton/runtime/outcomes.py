"""How a turn ends: one small type per ending, so the run loop reads as a `match`."""

from __future__ import annotations

from dataclasses import dataclass

from baton.core.approval import ApprovalCard
from baton.core.interrupt import InterruptCard
from baton.core.payload import HandoffPayload


@dataclass(frozen=True, slots=True)
class Answered:
    """The holder answered the user; the run completes."""

    text: str


@dataclass(frozen=True, slots=True)
class HandedOff:
    """The holder passed the baton; the receiver's turn comes next."""

    payload: HandoffPayload


@dataclass(frozen=True, slots=True)
class Tripped:
    """A guard stopped the turn; the run escalates to the fallback."""

    reason: str


@dataclass(frozen=True, slots=True)
class ToHuman:
    """The holder (or the router) sent the request to the human queue."""

    reason: str


@dataclass(frozen=True, slots=True)
class Failed:
    """The model provider failed or answered something unusable; the run fails."""

    reason: str


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The run was cancelled (`team.cancel`, `task.cancel()`, a caller's timeout); what it did
    is committed and it may be resumed until the session's next message."""

    reason: str


@dataclass(frozen=True, slots=True)
class Paused:
    """A call waits for a person (an approval, or the answer to an `interrupt`); the run
    stops and can be resumed."""

    card: ApprovalCard | InterruptCard


@dataclass(frozen=True, slots=True)
class Blocked:
    """A guardrail's tripwire: the run ends `blocked`; the user reads `message`, never the text
    that was blocked (`baton.runtime.guardrails`)."""

    guardrail: str
    """The rule's name."""
    stage: str
    """input (the user's message) or output (the reply)."""
    reason: str
    """Why: the verdict's reason, or why the check could not give one."""
    message: str
    """What the user reads instead."""

    @property
    def detail(self) -> str:
        """Which rule blocked what, and why (`RunResult.error`)."""
        what = "the user's message" if self.stage == "input" else "the reply"
        return f"guardrail {self.guardrail!r} blocked {what}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Cleared:
    """The run's reply as the output guardrails in force let the user read it: whole (every
    answer of a run that served several needs), rewritten where a rule rewrote it."""

    text: str


TurnOutcome = (
    Answered | HandedOff | Tripped | ToHuman | Failed | Paused | Cancelled | Blocked | Cleared
)
"""Every way a turn (and so a run) can end."""

TurnEnd = Tripped | ToHuman | Failed | Paused
"""Endings that stop a turn in the middle of its calls."""
