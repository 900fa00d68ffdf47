"""Guardrails: input and output rules that travel with the baton.

A `Guardrail` is an input rule (it checks the user's message before the holder answers) or an
output rule (it checks the reply before the user reads it). Its check is a plain function of
the text and a `GuardrailContext`, sync or async, returning a `Verdict`; or a guard `Agent` on
any model, whose answer is parsed into a `Verdict` (its output type). Rules sit on a team
(`Team(guardrails=...)`), on an agent (`Agent(guardrails=...)`) or on a hand-off edge
(`Agent(handoff_guardrails={"billing": [...]})`); `baton.runtime.guardrails` keeps the set in
force for a run, which only grows as the baton moves.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from baton.core.errors import ConfigError

if TYPE_CHECKING:
    from baton.agents import Agent

Stage = Literal["input", "output"]
"""`input`: the user's message, before the holder answers; `output`: the reply, before the
user reads it."""

OnError = Literal["block", "allow"]
"""What a check that cannot give a verdict means: `block` (fail closed) or `allow`."""

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


class Verdict(BaseModel):
    """What a check decided: allow the text, block it with a reason, or rewrite it (output
    rules only: the user reads `text` instead of the reply)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    action: Literal["allow", "block", "rewrite"] = Field(
        description="allow: the text goes on; block: the run ends blocked; rewrite: the user "
        "reads `text` instead of the reply (output rules only)."
    )
    reason: str = Field(
        default="", description="Why the text was blocked or rewritten (for the audit trail)."
    )
    text: str | None = Field(
        default=None,
        description="The reply as the user should read it; only with action rewrite.",
    )

    @model_validator(mode="after")
    def _text_with_rewrite(self) -> Verdict:
        if self.action == "rewrite":
            if self.text is None or not self.text.strip():
                raise ValueError(
                    "a rewrite needs the text the user should read; to withhold the reply, block it"
                )
        elif self.text:
            raise ValueError(f"text is only for a rewrite, not for {self.action!r}")
        return self

    @classmethod
    def allow(cls) -> Verdict:
        """The text goes on unchanged."""
        return cls(action="allow")

    @classmethod
    def block(cls, reason: str) -> Verdict:
        """The run ends `blocked`; the user reads the rule's message."""
        return cls(action="block", reason=reason)

    @classmethod
    def rewrite(cls, text: str, reason: str = "") -> Verdict:
        """The user reads `text` instead of the reply (output rules only)."""
        return cls(action="rewrite", text=text, reason=reason)


@dataclass(frozen=True, slots=True)
class GuardrailContext:
    """What a check knows besides the text: who holds the baton, where, and which stage."""

    guardrail: str
    """The rule's name."""
    stage: Stage
    """input (the text is the user's message) or output (the text is the reply)."""
    agent: str
    """The agent holding the baton: the one about to answer, or the one that answered."""
    session_id: str
    """The session of the run."""
    user_id: str | None
    """The end user, when known."""
    run_id: str
    """The run (one user message)."""


Check = Callable[[str, GuardrailContext], Verdict | Awaitable[Verdict]]
"""A check function: `(text, context) -> Verdict`, sync or async."""


@dataclass(frozen=True, slots=True)
class Guardrail:
    """One input or output rule: a name, a stage, a check and what the user is told when it
    blocks. Invalid settings raise `ConfigError` here."""

    name: str
    """Unique in the team (events, metrics and checkpoints name the rule by it)."""
    stage: Stage
    """input: checks the user's message before the holder answers; output: checks the reply
    before the user reads it."""
    check: Check | Agent
    """A function `(text, GuardrailContext) -> Verdict` (sync or async), or a guard `Agent`
    whose answer is a `Verdict` (no tools, no hand-offs, not a member of the team)."""
    message: str | None = None
    """What the user reads when this rule blocks; None: the team's `guardrail_message`."""
    on_error: OnError = "block"
    """A check that raises, times out or gives no verdict: `block` fails closed (the default),
    `allow` lets the text through (recorded as a `guard_tripped` event `guardrail_error`)."""
    timeout_s: float = 30.0
    """Longest a check may take (a guard agent's model call included); past it the check has
    failed (see `on_error`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ConfigError(
                f"guardrail name {self.name!r} is not valid: start with a letter or '_', then "
                "letters, digits, '_', '-' or '.' (at most 64 characters)"
            )
        if self.stage not in ("input", "output"):
            raise ConfigError(
                f"guardrail {self.name!r}: stage must be 'input' or 'output', not {self.stage!r}"
            )
        if self.on_error not in ("block", "allow"):
            raise ConfigError(
                f"guardrail {self.name!r}: on_error must be 'block' or 'allow', not "
                f"{self.on_error!r}"
            )
        if (
            isinstance(self.timeout_s, bool)
            or not isinstance(self.timeout_s, (int, float))
            or not math.isfinite(self.timeout_s)
            or self.timeout_s <= 0
        ):
            raise ConfigError(
                f"guardrail {self.name!r}: timeout_s must be a positive number of seconds"
            )
        if self.message is not None and (
            not isinstance(self.message, str) or not self.message.strip()
        ):
            raise ConfigError(
                f"guardrail {self.name!r}: message must be the text the user reads when it "
                "blocks (or None for the team's guardrail_message)"
            )
        if self.agent is not None:
            _check_judge(self.name, self.agent)
        elif callable(self.check):
            _check_signature(self.name, self.check)
        else:
            raise ConfigError(
                f"guardrail {self.name!r}: check must be a function (text, context) -> Verdict "
                f"or an Agent, not {type(self.check).__name__}"
            )

    @property
    def agent(self) -> Agent | None:
        """The guard agent, when the check is one."""
        from baton.agents import Agent

        return self.check if isinstance(self.check, Agent) else None


def _check_signature(name: str, fn: Callable[..., Any]) -> None:
    """The function can be called as `check(text, context)`."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: called as given
        return
    try:
        signature.bind("", None)
    except TypeError:
        raise ConfigError(
            f"guardrail {name!r}: check {getattr(fn, '__name__', fn)!r} must take two "
            f"arguments, (text, context), and return a Verdict; its signature is {signature}"
        ) from None


def _check_judge(name: str, agent: Agent) -> None:
    """A guard agent only judges text: no tools, hand-offs or rules of its own."""
    problems = []
    if agent.tools:
        problems.append("tools")
    if agent.handoffs:
        problems.append("hand-offs")
    if agent.guardrails or agent.handoff_guardrails:
        problems.append("guardrails of its own")
    if problems:
        raise ConfigError(
            f"guardrail {name!r}: guard agent {agent.name!r} has {' and '.join(problems)}; a "
            "guard agent only reads the text and answers a Verdict: remove them"
        )
    if agent.output_type not in (None, Verdict):
        raise ConfigError(
            f"guardrail {name!r}: guard agent {agent.name!r} has output_type "
            f"{agent.output_type!r}; its answer is always a Verdict: leave output_type unset"
        )
