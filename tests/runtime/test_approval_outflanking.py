"""Approvals cannot be outflanked: arguments are finite and validated before a policy reads
them, a decision meets the policy in force when it is decided, approvers are told apart by
their normalised identity (also from two processes at once), decisions record whether the
approver was authenticated, and a waiting card times out by default."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from tests.runtime.runtime_kit import of_type

from baton import Agent, ApprovalError, Guards, ScriptedModel, Team, tool

S = ScriptedModel


def pays(amount: float, to: str = "bob") -> Any:
    """A model that asks to pay until the payment's result is back, then says so (a fresh
    team on the same store, another process, continues the same conversation)."""

    def step(rq: Any) -> Any:
        if rq.messages[-1].role == "tool":
            return S.say("Paid.")
        return S.call("pay", amount=amount, to=to)

    return step


def cashier(paid: list[float], script: list[Any], store: Any = None, **gate: Any) -> Team:
    gate.setdefault("requires_approval", lambda args, state: args["amount"] > 10_000)

    @tool(**gate)
    async def pay(amount: float, to: str) -> str:
        """Pay an amount to someone."""
        paid.append(amount)
        return f"paid {amount} to {to}"

    return Team([Agent(name="cashier", tools=[pay])], entry="cashier", model=S(script), store=store)


@pytest.mark.parametrize("amount", [math.nan, -math.inf, math.inf])
async def test_a_non_finite_amount_is_refused_before_any_policy_reads_it(amount: float) -> None:
    """`NaN > 10_000` is False: a NaN amount would have passed the gate unseen."""
    paid: list[float] = []
    team = cashier(
        paid,
        [
            S.call("pay", amount=amount, to="mallory"),
            S.call("pay", amount=5, to="bob"),
            S.say("ok"),
        ],
    )
    result = await team.run("pay mallory", session_id="S")
    assert result.status == "completed"
    assert paid == [5]  # the model was re-asked and sent a real number
    first = of_type(result.events, "tool_called")[0]
    assert not first.ok and first.error is not None
    assert "amount is not a finite number" in first.error
    assert not of_type(result.events, "approval_requested")


async def test_nan_hidden_in_a_nested_argument_is_refused_too() -> None:
    seen: list[Any] = []

    @tool(requires_approval=lambda args, state: any(i["price"] > 100 for i in args["items"]))
    async def order(items: list[dict[str, float]]) -> str:
        """Order items."""
        seen.append(items)
        return "ordered"

    model = S([S.call("order", items=[{"price": 1.0}, {"price": math.nan}]), S.say("no")])
    result = await Team([Agent(name="a", tools=[order])], entry="a", model=model).run("x", "S")
    assert seen == []
    [called] = of_type(result.events, "tool_called")
    assert called.error is not None and "items[1].price" in called.error


async def test_the_policy_reads_validated_typed_arguments() -> None:
    """ "20000" as a string is the number 20,000 to the tool: the policy sees 20000.0."""
    paid: list[float] = []
    team = cashier(paid, [S.call("pay", amount="20000", to="bob"), S.say("ok")])
    result = await team.run("pay bob", session_id="S")
    assert result.status == "awaiting_approval" and paid == []
    bad = cashier(paid, [S.call("pay", amount="lots", to="bob"), S.say("ok")])
    refused = await bad.run("pay bob", session_id="S")
    assert refused.status == "completed" and paid == []
    [called] = of_type(refused.events, "tool_called")
    assert called.error is not None and "invalid arguments for pay" in called.error


async def test_a_decision_meets_the_policy_in_force_when_it_is_decided(tmp_path: Path) -> None:
    """The card was made for one approver; the code now says two, then a role: the decision
    needs what the code now says."""
    store = f"sqlite:///{tmp_path / 'b.db'}"
    paid: list[float] = []
    script = pays(20_000)
    paused = await cashier(paid, script, store=store).run("pay bob 20000", session_id="S")
    card = paused.approval
    assert card is not None and not card.dual

    tightened = cashier(paid, script, store=store, dual=True)
    once = await tightened.approve("S", card.id, by="alice")
    assert once.status == "awaiting_approval" and paid == []  # a second approver is needed
    assert once.approval is not None and once.approval.dual

    roles = cashier(paid, script, store=store, dual=True, approver_roles=["finance"])
    with pytest.raises(ApprovalError, match="needs one of finance"):
        await roles.approve("S", card.id, by="bob")
    done = await roles.approve("S", card.id, by="bob", role="finance")
    assert done.status == "completed" and paid == [20_000]


@pytest.mark.parametrize(
    "again", ["Alice", "alice ", " ALICE\t", "alice\u200b", "ａｌｉｃｅ", "al\u200dice"]
)
async def test_one_person_under_another_spelling_is_still_one_approver(again: str) -> None:
    paid: list[float] = []
    team = cashier(paid, [S.call("pay", amount=20_000, to="bob"), S.say("Paid.")], dual=True)
    paused = await team.run("pay bob 20000", session_id="S")
    assert paused.approval is not None
    first = await team.approve("S", paused.approval.id, by="alice")
    assert first.status == "awaiting_approval"
    with pytest.raises(ApprovalError, match="already signed"):
        await team.approve("S", paused.approval.id, by=again)
    assert paid == []
    done = await team.approve("S", paused.approval.id, by="bob")
    assert done.status == "completed" and paid == [20_000]


@pytest.mark.parametrize("nobody", ["", "   ", "\u200b\u200c", "\x00\x1f"])
async def test_a_name_of_nothing_but_invisible_characters_decides_nothing(nobody: str) -> None:
    team = cashier([], [S.call("pay", amount=20_000, to="bob"), S.say("Paid.")])
    paused = await team.run("pay bob", session_id="S")
    assert paused.approval is not None
    with pytest.raises(ApprovalError, match="say who decides"):
        await team.approve("S", paused.approval.id, by=nobody)


async def test_a_decision_records_whether_its_approver_was_authenticated() -> None:
    paid: list[float] = []
    team = cashier(paid, [S.call("pay", amount=20_000, to="bob"), S.say("Paid.")], dual=True)
    paused = await team.run("pay bob", session_id="S")
    assert paused.approval is not None
    first = await team.approve("S", paused.approval.id, by="alice")
    assert first.approval is not None
    assert [a.authenticated for a in first.approval.approvals] == [False]
    done = await team.approve("S", paused.approval.id, by="bob", authenticated=True)
    decided = of_type(done.events, "approval_decided")
    assert [(e.by, e.authenticated) for e in decided][-1] == ("bob", True)


async def test_approvals_from_two_processes_at_once_count_each_person_once(
    tmp_path: Path,
) -> None:
    """Two teams on one SQLite file (two processes' worth) sign a dual card at the same moment:
    as the same person, one is refused; the call runs once, after two distinct people."""
    store = f"sqlite:///{tmp_path / 'b.db'}"
    paid: list[float] = []
    script = pays(20_000)
    paused = await cashier(paid, script, store=store, dual=True).run("pay bob", session_id="S")
    assert paused.approval is not None
    aid = paused.approval.id
    a, b = (cashier(paid, script, store=store, dual=True) for _ in range(2))
    same = await asyncio.gather(
        a.approve("S", aid, by="alice"), b.approve("S", aid, by="ALICE"), return_exceptions=True
    )
    assert sorted(type(x).__name__ for x in same) == ["ApprovalError", "RunResult"]
    assert paid == []
    c, d = (cashier(paid, script, store=store, dual=True) for _ in range(2))
    both = await asyncio.gather(
        c.approve("S", aid, by="bob"), d.approve("S", aid, by="carol"), return_exceptions=True
    )
    assert paid == [20_000]  # exactly once
    outcomes = sorted(x.status if not isinstance(x, BaseException) else repr(x) for x in both)
    assert "completed" in outcomes, outcomes
    for team in (a, b, c, d):
        await team.aclose()


async def test_a_waiting_card_times_out_by_default() -> None:
    paid: list[float] = []

    @tool(requires_approval=True)
    async def pay(amount: float) -> str:
        """Pay."""
        paid.append(amount)
        return "paid"

    def model() -> ScriptedModel:
        return S([S.call("pay", amount=1), S.say("Paid.")])

    team = Team([Agent(name="a", tools=[pay])], entry="a", model=model())
    paused = await team.run("pay", session_id="S")
    assert paused.approval is not None and paused.approval.timeout_s == 86_400.0

    quick = Team(
        [Agent(name="a", tools=[pay])],
        entry="a",
        model=model(),
        guards=Guards(approval_timeout_s=0.05),
    )
    waiting = await quick.run("pay", session_id="T")
    assert waiting.approval is not None and waiting.approval.timeout_s == 0.05
    await asyncio.sleep(0.1)
    expired = await quick.approve("T", waiting.approval.id, by="alice")
    assert expired.status == "escalated" and paid == []
    assert [e.decision for e in of_type(expired.events, "approval_decided")] == ["expired"]
