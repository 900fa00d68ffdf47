"""A request with two needs: the router picks the first need's agent, the second need waits in
the session's control slot `pending_intents`, and the kernel hands the baton on once the first
agent answers (`Team(multi_intent=True)`, `baton.runtime.pending`), through the steps of any
hand-off."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tests.runtime.runtime_kit import handoff, of_type

from baton import Agent, Guards, ScriptedModel, Team, tool
from baton.routing import Router, Rules

S = ScriptedModel
RULES = {
    "billing": [r"\binvoice\b", "发票"],
    "after_sales": [r"\bbroken\b", "坏了"],
    "orders": [r"\bparcel\b", "快递"],
}
BILLED = "Your invoice INV-1 for ORD-1 is corrected."
RETURNED = "Return RMA-1 is open for the keyboard."


def desk(model: ScriptedModel, **kw: Any) -> Team:
    """billing, after_sales and orders behind a rules router, splitting multi-need requests."""

    @tool(requires_approval=True)
    async def correct_invoice(order_id: str) -> str:
        """Correct an invoice.

        Args:
            order_id: Order number.
        """
        return f"corrected {order_id}"

    agents = [
        Agent(name="billing", tools=[correct_invoice], handoffs=["after_sales"]),
        Agent(name="after_sales", handoffs=["billing"]),
        Agent(name="orders", handoffs=["billing"]),
    ]
    kw.setdefault("multi_intent", True)
    return Team(agents, entry=Router([Rules(RULES)]), model=model, **kw)


def answers(**by_agent: str) -> ScriptedModel:
    return S({agent: [S.say(text)] for agent, text in by_agent.items()})


def system_of(model: ScriptedModel, agent: str) -> str:
    request = next(rq for rq in model.requests if rq.agent == agent)
    return request.messages[0].content or ""


@pytest.mark.parametrize(
    ("message", "need"),
    [
        ("the invoice for ORD-1 is wrong AND the keyboard is broken", "the keyboard is broken"),
        ("ORD-1 的发票不对，而且键盘坏了", "键盘坏了"),
    ],
)
async def test_the_second_need_is_handed_on_after_the_first_answer(message: str, need: str) -> None:
    model = answers(billing=BILLED, after_sales=RETURNED)
    team = desk(model)
    result = await team.run(message, session_id="S")

    assert result.status == "completed"
    assert result.path == ["billing", "after_sales"]
    assert result.holder == "after_sales"
    [payload] = result.handoffs
    assert (payload.source, payload.target, payload.reason) == (
        "billing",
        "after_sales",
        "pending intent",
    )
    assert payload.objective == need
    assert payload.reply_to_user == BILLED  # the user was told: the receiver must not repeat it
    assert payload.state == {"order_id": "ORD-1"}  # the entity guard, as for any hand-off
    # the user reads both answers; the transcript keeps each agent's own
    assert result.output == f"{BILLED}\n\n{RETURNED}"
    said = [
        (m.agent, m.content) for m in await team.store.get_messages("S") if m.role == "assistant"
    ]
    assert said == [("billing", BILLED), ("after_sales", RETURNED)]
    # what each agent read: billing, the need it must leave; after_sales, its objective
    assert f"after_sales: {need!r}".replace("'", '"') in system_of(model, "billing")
    assert "pending_intents" not in system_of(model, "billing")
    assert f'Objective: "{need}"' in system_of(model, "after_sales")
    # the trace: the router's decision names both needs; the slot is set, then consumed
    [routed] = of_type(result.events, "route_decided")
    assert routed.target == "billing" and routed.verdicts[-1].startswith("intents: billing")
    slots = [
        e.slots["pending_intents"]
        for e in of_type(result.events, "state_updated")
        if "pending_intents" in e.slots
    ]
    assert slots == [[{"route": "after_sales", "text": need}], []]
    assert "pending_intents" not in result.state


async def test_a_single_need_is_routed_as_before() -> None:
    model = answers(billing=BILLED)
    result = await desk(model).run("the invoice for ORD-1 is wrong", session_id="S")
    assert result.path == ["billing"] and result.output == BILLED and result.handoffs == []
    [routed] = of_type(result.events, "route_decided")
    assert not any(v.startswith("intents") for v in routed.verdicts)
    assert not of_type(result.events, "state_updated")


async def test_without_multi_intent_the_first_route_takes_the_whole_request() -> None:
    model = answers(billing=BILLED)
    team = desk(model, multi_intent=False)
    result = await team.run("the invoice is wrong and the keyboard is broken", session_id="S")
    assert result.path == ["billing"] and result.output == BILLED


async def test_a_question_to_the_user_keeps_the_need_waiting_in_the_session() -> None:
    model = S(
        {"billing": [S.say("Which order is it?"), S.say(BILLED)], "after_sales": [S.say(RETURNED)]}
    )
    team = desk(model)
    first = await team.run("my invoice is wrong and the keyboard is broken", session_id="S")
    assert first.path == ["billing"] and first.output == "Which order is it?"
    session = await team.session("S")
    assert session is not None and session.control["pending_intents"] == [
        {"route": "after_sales", "text": "the keyboard is broken"}
    ]
    assert "pending_intents" not in first.state  # control, never a business slot
    second = await team.run("ORD-1", session_id="S")
    assert second.path == ["billing", "after_sales"]
    assert second.output == f"{BILLED}\n\n{RETURNED}"
    assert second.handoffs[0].state == {"order_id": "ORD-1"}
    assert "pending_intents" not in second.state


async def test_the_need_of_the_agent_that_answers_is_served() -> None:
    """billing passes the baton to after_sales itself: its answer serves the pending need."""
    model = S(
        {
            "billing": [handoff("after_sales", objective="open the return")],
            "after_sales": [S.say(RETURNED)],
        }
    )
    result = await desk(model).run("the invoice is wrong and the keyboard is broken", "S")
    assert result.path == ["billing", "after_sales"]
    assert [p.reason for p in result.handoffs] == ["belongs there"]
    assert result.output == RETURNED and "pending_intents" not in result.state


async def test_the_hand_on_obeys_the_loop_guards() -> None:
    """orders hands to billing (hop 1); after_sales's need would be hop 2 > max_hops=1."""
    model = S({"orders": [handoff("billing")], "billing": [S.say(BILLED)]})
    team = desk(model, guards=Guards(max_hops=1))
    result = await team.run("where is my parcel ORD-1? and the keyboard is broken", "S")
    assert result.status == "escalated"
    assert result.path == ["orders", "billing"]
    [trip] = of_type(result.events, "guard_tripped")
    assert trip.guard == "max_hops" and "the keyboard is broken" in trip.detail
    assert "pending_intents" not in result.state
    [ticket] = await team.tickets.list()
    assert "the keyboard is broken" in ticket.card.reasons[0]


async def test_a_paused_run_resumed_by_another_team_still_hands_on(tmp_path: Path) -> None:
    """The slot travels in the checkpoint (JSON in SQLite): a fresh team resumes the run."""

    def script() -> ScriptedModel:
        def step(rq: Any) -> Any:
            if rq.agent == "after_sales":
                return S.say(RETURNED)
            if rq.messages[-1].role == "tool":
                return S.say(BILLED)
            return S.call("correct_invoice", order_id="ORD-1")

        return S(step)

    store = f"sqlite:///{tmp_path / 'b.db'}"
    first = desk(script(), store=store)
    paused = await first.run("the invoice for ORD-1 is wrong and the keyboard is broken", "S")
    assert paused.status == "awaiting_approval" and paused.approval is not None
    await first.aclose()

    second = desk(script(), store=store)
    done = await second.approve("S", paused.approval.id, by="alice")
    assert done.status == "completed"
    assert done.path == ["billing", "after_sales"]
    assert done.handoffs[0].objective == "the keyboard is broken"
    assert done.output == f"{BILLED}\n\n{RETURNED}"
    await second.aclose()


@pytest.mark.usefixtures("dies_when_cancelled")
async def test_a_run_interrupted_before_the_answer_resumes_and_hands_on() -> None:
    gate = asyncio.Event()

    def step(rq: Any) -> Any:
        if rq.agent == "after_sales":
            return S.say(RETURNED)
        return S.say(BILLED) if rq.messages[-1].role == "tool" else S.call("lookup")

    @tool
    async def lookup() -> str:
        """Look the invoice up."""
        if not gate.is_set():
            gate.set()
            await asyncio.sleep(10)  # the first attempt is interrupted here
        return "INV-1"

    agents = [
        Agent(name="billing", tools=[lookup], handoffs=["after_sales"]),
        Agent(name="after_sales"),
    ]
    rules = {k: RULES[k] for k in ("billing", "after_sales")}
    team = Team(agents, entry=Router([Rules(rules)]), model=S(step), multi_intent=True)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(team.run("the invoice is wrong and it is broken", "S"), 0.3)
    [cp] = await team.unfinished()
    assert cp.state.session.control["pending_intents"][0]["route"] == "after_sales"
    done = await team.resume("S")
    assert done.status == "completed" and done.path == ["billing", "after_sales"]
    assert done.output == f"{BILLED}\n\n{RETURNED}"


def test_multi_intent_needs_a_router() -> None:
    from baton.core.errors import ConfigError

    with pytest.raises(ConfigError, match="multi_intent"):
        Team([Agent(name="a")], entry="a", multi_intent=True)
