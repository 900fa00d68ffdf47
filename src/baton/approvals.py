"""Approval policies: which tool calls and hand-offs wait for a person's sign-off (seed 002).

A policy is `True` (always), a function of the call's arguments and the session state
(`lambda args, state: args["amount"] > 10_000`), or an `ApprovalPolicy` that also names who may
approve, whether two people must, and how long the run may wait.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from baton.core.errors import ConfigError

Condition = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]
"""`(arguments, session state) -> needs approval`."""


@dataclass(frozen=True)
class ApprovalPolicy:
    """When a call needs approval, and whose."""

    when: bool | Condition = True
    """Always (`True`), never (`False`), or a function of (arguments, state)."""
    roles: tuple[str, ...] = ()
    """Roles allowed to decide (`team.approve(..., role=...)`); empty: anyone."""
    dual: bool = False
    """Two distinct people must approve."""
    timeout_s: float | None = None
    """A request older than this escalates instead of running; None: the team's
    `Guards.approval_timeout_s` (24 h by default)."""
    reason: str = ""
    """Shown on the approval card (default: the tool or hand-off needs sign-off)."""

    def __post_init__(self) -> None:
        if not isinstance(self.when, bool) and not callable(self.when):
            raise ConfigError("ApprovalPolicy.when must be True/False or a function(args, state)")
        if inspect.iscoroutinefunction(self.when) or inspect.iscoroutinefunction(
            getattr(self.when, "__call__", None)  # noqa: B004  (a callable object)
        ):
            raise ConfigError(
                "ApprovalPolicy.when must be a plain function: it runs on the event loop at "
                "every call, so it must be quick and not async (decide from args and state)"
            )
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ConfigError("ApprovalPolicy.timeout_s must be positive (or None to wait)")
        object.__setattr__(self, "roles", tuple(self.roles))

    def needs(self, args: Mapping[str, Any], state: Mapping[str, Any]) -> tuple[bool, str]:
        """(whether this call must wait for approval, why the policy could not decide).

        The condition gets read-only copies. A condition that raises counts as needing
        approval (a broken policy must not let a high-risk call through), and the error is
        returned for the card."""
        if isinstance(self.when, bool):
            return self.when, ""
        try:
            return bool(self.when(MappingProxyType(dict(args)), MappingProxyType(dict(state)))), ""
        except Exception as exc:
            return True, f"the approval policy failed ({type(exc).__name__}: {exc})"


PolicyLike = bool | Condition | ApprovalPolicy | None
"""What `requires_approval=` and `approve_handoffs=` accept."""


def approval_policy(
    value: PolicyLike,
    *,
    roles: Sequence[str] = (),
    dual: bool = False,
    timeout_s: float | None = None,
) -> ApprovalPolicy | None:
    """Normalise `requires_approval=`'s value; None (or False) means no approval."""
    if value is None or value is False:
        if roles or dual or timeout_s is not None:
            raise ConfigError(
                "approver_roles/dual/approval_timeout_s given without requires_approval; "
                "set requires_approval=True (or a policy)"
            )
        return None
    if isinstance(value, ApprovalPolicy):
        return value
    if value is True or callable(value):
        return ApprovalPolicy(when=value, roles=tuple(roles), dual=dual, timeout_s=timeout_s)
    raise ConfigError(
        f"requires_approval must be True, a function(args, state) or an ApprovalPolicy, "
        f"got {type(value).__name__}"
    )
