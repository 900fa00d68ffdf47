"""Human approvals (seed 002 §4.3): a call that needs sign-off pauses the run; a decision
resumes it exactly where it stopped.

`request_approval` makes the `ApprovalCard` and pauses the turn; `decide` checks a person's
decision and marks the waiting call: approved calls run, rejected ones are answered with the
rejection so the agent tells the user.

A decision is checked against the policy in force when it is decided, not the one the card was
made under: a card issued before the code tightened `dual=True` or `approver_roles` needs what
the code now says (its card is updated to say so). Approvers are told apart by their
normalised identity (`approver_identity`: `alice`, `Alice ` and `alice\u200b` are one person).
A card waits at most its policy's `timeout_s`, else `Guards.approval_timeout_s`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from baton.approvals import ApprovalPolicy
from baton.core.approval import Approval, ApprovalCard, approver_identity
from baton.core.errors import ApprovalError
from baton.core.events import ApprovalDecided, ApprovalRequested
from baton.core.ids import new_id, now
from baton.runtime.outcomes import Paused
from baton.runtime.state import PendingCall, RunState, TurnState

if TYPE_CHECKING:
    from baton.runtime.kernel import Kernel

Decision = Literal["approved", "rejected", "pending", "expired"]


def request_approval(
    kernel: Kernel,
    run: RunState,
    turn: TurnState,
    pending: PendingCall,
    policy: ApprovalPolicy,
    kind: Literal["tool", "handoff"],
    arguments: dict[str, Any],
    *,
    tool: str | None = None,
    target: str | None = None,
    note: str = "",
) -> Paused:
    """Pause the run on `pending` with a new approval card (`note`: why the policy could not
    decide, shown on the card and logged)."""
    if note:
        kernel.cfg.log.warning("approval needed for %s: %s", tool or target, note)
    redactor = kernel.cfg.redactor
    shown_args = redactor.redact_value(arguments) if redactor is not None else arguments
    state = (
        redactor.redact_value(dict(run.session.state))
        if redactor is not None
        else run.session.state
    )
    what = f"tool {tool}" if kind == "tool" else f"hand-off to {target}"
    card = ApprovalCard(
        id=new_id("apr_"),
        session_id=run.session.session_id,
        run_id=run.run_id,
        trace_id=run.trace_id,
        agent=turn.agent,
        kind=kind,
        tool=tool,
        target=target,
        call_id=pending.call.id,
        arguments=dict(shown_args),
        reason=(policy.reason or f"{what} needs a person's approval")
        + (f"; {note}" if note else ""),
        state=dict(state),
        timeout_s=policy.timeout_s
        if policy.timeout_s is not None
        else kernel.cfg.guards.approval_timeout_s,
        required_roles=list(policy.roles),
        dual=policy.dual,
    )
    run.approval = card
    kernel.emit(run, ApprovalRequested(**run.base(turn.agent), card=card), redacted=True)
    return Paused(card)


def waiting_call(run: RunState) -> PendingCall:
    """The call the run's approval card is about."""
    card, turn = run.approval, run.turn
    if card is None or turn is None:
        raise ApprovalError(f"session {run.session.session_id!r} is not waiting for an approval")
    found = find_call(turn, card.call_id)
    if found is not None:
        return found
    raise ApprovalError(
        f"approval {card.id} names call {card.call_id}, which the paused turn does not hold; "
        "the checkpoint is inconsistent: escalate the session by hand"
    )


def find_call(turn: TurnState, call_id: str) -> PendingCall | None:
    """The open call `call_id` of the turn, or of a sub-run it delegated to (a worker)."""
    for pending in turn.calls:
        if pending.content is None:
            if pending.call.id == call_id:
                return pending
            if pending.sub is not None and pending.sub.turn is not None:
                found = find_call(pending.sub.turn, call_id)
                if found is not None:
                    return found
    return None


def policy_in_force(kernel: Kernel, card: ApprovalCard) -> ApprovalPolicy | None:
    """The policy the team's code now gives the card's call (None: the code no longer gates
    it, or no longer has it)."""
    plan = kernel.plans.get(card.agent)
    if plan is None:
        return None
    if card.kind == "tool":
        tool = plan.tools.get(card.tool or "")
        return tool.approval if tool is not None else None
    return plan.agent.handoff_approval(card.target or "")


def _as_in_force(kernel: Kernel, card: ApprovalCard) -> None:
    """Bring the card's requirements to what the policy in force says (a policy the code no
    longer has leaves the card's own, the stricter reading)."""
    policy = policy_in_force(kernel, card)
    if policy is None:
        return
    card.required_roles = list(policy.roles)
    card.dual = policy.dual
    if policy.timeout_s is not None:
        card.timeout_s = policy.timeout_s


def decide(
    kernel: Kernel,
    run: RunState,
    approval_id: str,
    *,
    approve: bool,
    by: str,
    role: str | None = None,
    reason: str = "",
    at: float | None = None,
    authenticated: bool = False,
) -> Decision:
    """Apply one person's decision to the run's waiting call, under the policy in force.

    Raises `ApprovalError` (and changes nothing) for an unknown approval id, a role the card
    does not allow, or an approver who already signed. Returns `expired` when the card timed
    out (the caller escalates), `pending` when a dual card still needs its second approver.
    `authenticated`: the caller verified who `by` is (recorded with the decision).
    """
    card = run.approval
    if card is None or card.id != approval_id:
        waiting = f"it waits for {card.id}" if card is not None else "it waits for none"
        raise ApprovalError(
            f"session {run.session.session_id!r} has no pending approval {approval_id!r} "
            f"({waiting}); list them with `baton approvals list`"
        )
    who = approver_identity(by) if isinstance(by, str) else ""
    if not who:
        raise ApprovalError("say who decides: by='alice'")
    pending = waiting_call(run)
    agent = card.agent
    _as_in_force(kernel, card)
    if expire(kernel, run, at):
        return "expired"
    if card.required_roles and role not in card.required_roles:
        raise ApprovalError(
            f"{by!r} decided as role {role!r}, but approval {card.id} needs one of "
            f"{', '.join(card.required_roles)}; decide with role=..."
        )
    if any(approver_identity(a.by) == who for a in card.approvals):
        raise ApprovalError(
            f"{by!r} already signed approval {card.id} (names are compared ignoring case, "
            "spacing and invisible characters); a second, different approver must sign"
        )
    card.approvals.append(
        Approval(by=by, role=role, approved=approve, reason=reason, authenticated=authenticated)
    )
    decision: Decision
    if not approve:
        pending.rejection = f"rejected by {by}" + (f": {reason}" if reason else "")
        decision = "rejected"
    elif sum(1 for a in card.approvals if a.approved) >= card.needed:
        pending.approved = True
        decision = "approved"
    else:
        decision = "pending"
    kernel.emit(
        run,
        ApprovalDecided(
            **run.base(agent),
            approval_id=card.id,
            decision=decision,
            by=by,
            role=role,
            reason=reason,
            authenticated=authenticated,
        ),
    )
    if decision != "pending":
        run.approval = None
    return decision


def expire(kernel: Kernel, run: RunState, at: float | None = None) -> bool:
    """Record the timeout of the run's card if it expired; True when it did."""
    card = run.approval
    if card is None or not card.expired(at if at is not None else now()):
        return False
    kernel.emit(
        run,
        ApprovalDecided(
            **run.base(card.agent),
            approval_id=card.id,
            decision="expired",
            reason="the approval timed out",
        ),
    )
    return True
