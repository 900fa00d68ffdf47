"""The human queue (`baton.runtime.tickets`, `Team.answer_ticket`): escalations become tickets
a person claims, answers (into the user's session) and closes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from runtime_kit import of_type, types

from baton import Agent, ModelRequest, ScriptedModel, Team, tool
from baton.backends.base import HumanTicket, Store
from baton.backends.memory import MemoryStore
from baton.backends.sqlite import SQLiteStore
from baton.core.errors import ApprovalError, ConfigError, ConflictError, TicketError
from baton.models import Step

S = ScriptedModel

ESCALATE = "I want to talk to a person"


def script(request: ModelRequest) -> Step:
    """triage sends "a person" requests to the queue and answers anything else itself."""
    if request.agent == "billing":
        return S.say("Billing here: your invoice is fine.")
    last_user = next(m for m in reversed(request.messages) if m.role == "user")
    if last_user.content == ESCALATE and request.messages[-1].role == "user":
        return S.call("transfer_to_human", reason="the user asks for a person", objective="talk")
    if (last_user.content or "").startswith("slow"):
        return S.slow(S.say("Triage here."), 0.2)  # holds the session a while
    return S.say("Triage here.")


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made: Store = (
        MemoryStore()
        if request.param == "memory"
        else SQLiteStore(f"sqlite:///{tmp_path / 'baton.db'}")
    )
    yield made
    await made.close()


def desk(store: Store) -> tuple[Team, ScriptedModel]:
    model = S(script)
    triage = Agent(name="triage", handoffs=["billing", "human"])
    billing = Agent(name="billing", description="Invoices.", handoffs=["triage"])
    return Team([triage, billing], entry="triage", model=model, store=store), model


async def escalated(team: Team, session_id: str = "S1") -> HumanTicket:
    result = await team.run(ESCALATE, session_id=session_id, user_id="u1")
    assert result.status == "escalated"
    (ticket,) = [t for t in await team.tickets.list() if t.card.session_id == session_id]
    return ticket


# ---------------------------------------------------------------- the queue


async def test_an_escalation_puts_one_open_ticket_in_the_queue(store: Store) -> None:
    team, _ = desk(store)

    result = await team.run(ESCALATE, session_id="S1", user_id="u1")

    assert result.status == "escalated"
    (ticket,) = await team.tickets.list()
    assert (ticket.status, ticket.claimed_by, ticket.answer, ticket.note) == (
        "open",
        None,
        None,
        "",
    )
    assert ticket.card == result.escalation
    assert (ticket.card.session_id, ticket.card.user_id) == ("S1", "u1")
    assert ticket.card.path == ["triage"]
    assert ticket.card.reasons == ["triage asked for a human: the user asks for a person"]
    assert ticket.card.last_user_message == ESCALATE
    assert await team.tickets.list(None) == [ticket]
    assert await team.tickets.list("claimed") == []
    assert await team.tickets.get(ticket.id) == ticket


async def test_a_claimed_ticket_cannot_be_claimed_again(store: Store) -> None:
    team, _ = desk(store)
    ticket = await escalated(team)

    claimed = await team.tickets.claim(ticket.id, "alice")

    assert (claimed.status, claimed.claimed_by) == ("claimed", "alice")
    stored = await team.tickets.get(ticket.id)
    assert (stored.status, stored.claimed_by) == ("claimed", "alice")
    assert await team.tickets.list() == []
    assert [t.id for t in await team.tickets.list("claimed")] == [ticket.id]
    with pytest.raises(TicketError, match="claimed by alice"):
        await team.tickets.claim(ticket.id, "bob")
    with pytest.raises(TicketError):
        await team.tickets.claim(ticket.id, "alice")
    stored = await team.tickets.get(ticket.id)
    assert (stored.status, stored.claimed_by) == ("claimed", "alice")


async def test_only_the_claimer_may_answer(store: Store) -> None:
    team, _ = desk(store)
    ticket = await escalated(team)
    await team.tickets.claim(ticket.id, "alice")
    transcript = await team.store.get_messages("S1")
    session = await team.session("S1")
    assert session is not None

    with pytest.raises(TicketError, match="bob cannot answer it"):
        await team.answer_ticket(ticket.id, by="bob", reply="Bob here.")

    assert await team.store.get_messages("S1") == transcript
    after = await team.session("S1")
    assert after is not None
    assert (after.holder, after.version) == (session.holder, session.version)
    stored = await team.tickets.get(ticket.id)
    assert (stored.status, stored.claimed_by, stored.answer) == ("claimed", "alice", None)


async def test_the_claimers_answer_goes_into_the_session_as_a_human_message(store: Store) -> None:
    team, _ = desk(store)
    ticket = await escalated(team)
    await team.tickets.claim(ticket.id, "alice")
    before = await team.store.get_messages("S1")

    answered = await team.answer_ticket(ticket.id, by="alice", reply="Hello, I am Alice.")

    assert (answered.status, answered.claimed_by, answered.answer) == (
        "answered",
        "alice",
        "Hello, I am Alice.",
    )
    stored = await team.tickets.get(ticket.id)
    assert (stored.status, stored.answer) == ("answered", "Hello, I am Alice.")
    messages = await team.store.get_messages("S1")
    assert messages[: len(before)] == before
    (reply,) = messages[len(before) :]
    assert (reply.role, reply.agent, reply.content) == ("assistant", "human", "Hello, I am Alice.")
    session = await team.session("S1")
    assert session is not None
    assert (session.holder, session.holder_since, session.incoming) == ("human", reply.id, None)
    with pytest.raises(TicketError):
        await team.answer_ticket(ticket.id, by="alice", reply="Again.")
    assert len(await team.store.get_messages("S1")) == len(messages)


async def test_answering_an_open_ticket_claims_it_on_the_way(store: Store) -> None:
    team, _ = desk(store)
    ticket = await escalated(team)

    answered = await team.answer_ticket(ticket.id, by="carol", reply="Carol here.")

    assert (answered.status, answered.claimed_by) == ("answered", "carol")


async def test_a_reply_handed_back_to_an_agent_lets_that_agent_take_the_next_message(
    store: Store,
) -> None:
    team, model = desk(store)
    ticket = await escalated(team)
    await team.tickets.claim(ticket.id, "alice")
    await team.answer_ticket(
        ticket.id, by="alice", reply="Billing will look at it.", hand_back_to="billing"
    )
    session = await team.session("S1")
    assert session is not None and session.holder == "billing"
    asked = len(model.requests)

    result = await team.run("so, is my invoice fine?", session_id="S1")

    assert result.status == "completed"
    assert result.path == ["billing"]
    assert result.output == "Billing here: your invoice is fine."
    (route,) = of_type(result.events, "route_decided")
    assert (route.target, route.tier) == ("billing", "session")
    assert [r.agent for r in model.requests[asked:]] == ["billing"]
    seen = [(m.role, m.agent, m.content) for m in model.requests[-1].messages]
    assert ("assistant", "human", "Billing will look at it.") in seen
    assert await team.tickets.list() == []


async def test_a_reply_kept_by_the_person_sends_the_next_message_to_the_queue(
    store: Store,
) -> None:
    team, model = desk(store)
    ticket = await escalated(team)
    await team.tickets.claim(ticket.id, "alice")
    await team.answer_ticket(ticket.id, by="alice", reply="I'll handle it.", hand_back_to=None)
    asked = len(model.requests)

    result = await team.run("thanks, one more thing", session_id="S1")

    assert result.status == "escalated"
    assert result.path == []
    assert len(model.requests) == asked  # no agent was asked
    assert types(result.events) == ["run_started", "escalated", "run_finished"]
    (new,) = await team.tickets.list()
    assert new.id != ticket.id
    assert new.card.last_user_message == "thanks, one more thing"
    assert new.card.last_reply == "I'll handle it."
    assert result.escalation == new.card
    session = await team.session("S1")
    assert session is not None and session.holder == "human"
    assert result.holder == "human"
    assert [(t.id, t.status) for t in await team.tickets.list(None)] == [
        (ticket.id, "answered"),
        (new.id, "open"),
    ]
    messages = await team.store.get_messages("S1")
    assert [(m.role, m.agent, m.content) for m in messages[-2:]] == [
        ("assistant", "human", "I'll handle it."),
        ("user", None, "thanks, one more thing"),
    ]


async def test_hand_back_to_an_unknown_agent_is_a_config_error(store: Store) -> None:
    team, _ = desk(store)
    ticket = await escalated(team)

    with pytest.raises(ConfigError, match="payments"):
        await team.answer_ticket(ticket.id, by="alice", reply="Hi.", hand_back_to="payments")
    with pytest.raises(TicketError, match="empty"):
        await team.answer_ticket(ticket.id, by="alice", reply="   ")

    stored = await team.tickets.get(ticket.id)
    assert (stored.status, stored.claimed_by) == ("open", None)


# ---------------------------------------------------------------- closing


@pytest.mark.parametrize("reached", ["open", "claimed", "answered"])
async def test_a_ticket_closes_from_any_live_status_but_only_once(
    store: Store, reached: str
) -> None:
    team, _ = desk(store)
    ticket = await escalated(team)
    if reached in ("claimed", "answered"):
        await team.tickets.claim(ticket.id, "alice")
    if reached == "answered":
        await team.answer_ticket(ticket.id, by="alice", reply="Done.", hand_back_to="triage")
    assert (await team.tickets.get(ticket.id)).status == reached

    closed = await team.tickets.close(ticket.id, "bob", note="resolved by phone")

    assert (closed.status, closed.note) == ("closed", "resolved by phone")
    stored = await team.tickets.get(ticket.id)
    assert (stored.status, stored.note) == ("closed", "resolved by phone")
    with pytest.raises(TicketError, match="already closed"):
        await team.tickets.close(ticket.id, "bob")
    with pytest.raises(TicketError):
        await team.tickets.claim(ticket.id, "carol")
    with pytest.raises(TicketError):
        await team.answer_ticket(ticket.id, by="alice", reply="Late.")
    assert (await team.tickets.get(ticket.id)).status == "closed"
    assert await team.tickets.list() == []


async def test_closing_without_a_note_says_who_closed_it(store: Store) -> None:
    team, _ = desk(store)
    ticket = await escalated(team)

    closed = await team.tickets.close(ticket.id, "bob")

    assert (await team.tickets.get(ticket.id)).note == closed.note == "closed by bob"


async def test_unknown_tickets_are_refused(store: Store) -> None:
    team, _ = desk(store)
    await escalated(team)

    for step in (
        team.tickets.get(99),
        team.tickets.claim(99, "alice"),
        team.tickets.close(99, "alice"),
        team.answer_ticket(99, by="alice", reply="Hi."),
    ):
        with pytest.raises(TicketError, match="no ticket 99"):
            await step


# ---------------------------------------------------------------- answers racing other steps


async def test_an_answer_to_a_ticket_closed_meanwhile_writes_nothing(store: Store) -> None:
    team, _ = desk(store)
    ticket = await escalated(team)
    await team.tickets.claim(ticket.id, "alice")
    # the user writes again: a slow run holds the session while alice answers
    run = asyncio.ensure_future(team.run("slow: anyone there?", session_id="S1"))
    await asyncio.sleep(0.05)
    answer = asyncio.ensure_future(team.answer_ticket(ticket.id, by="alice", reply="Alice here."))
    await asyncio.sleep(0.05)
    await team.tickets.close(ticket.id, "bob", note="duplicate")
    assert (await run).status == "completed"

    with pytest.raises((TicketError, ConflictError)):
        await answer

    contents = [(m.agent, m.content) for m in await team.store.get_messages("S1")]
    assert ("human", "Alice here.") not in contents
    session = await team.session("S1")
    assert session is not None and session.holder == "triage"


async def test_a_double_submitted_answer_is_written_once(store: Store) -> None:
    team, _ = desk(store)
    ticket = await escalated(team)
    await team.tickets.claim(ticket.id, "alice")
    run = asyncio.ensure_future(team.run("slow: anyone there?", session_id="S1"))
    await asyncio.sleep(0.05)
    first = asyncio.ensure_future(team.answer_ticket(ticket.id, by="alice", reply="Alice here."))
    second = asyncio.ensure_future(team.answer_ticket(ticket.id, by="alice", reply="Alice here."))
    await run

    outcomes = await asyncio.gather(first, second, return_exceptions=True)

    assert [o.status for o in outcomes if isinstance(o, HumanTicket)] == ["answered"]
    assert [type(o) for o in outcomes if isinstance(o, BaseException)] in (
        [TicketError],
        [ConflictError],
    )
    replies = [m for m in await team.store.get_messages("S1") if m.agent == "human"]
    assert [m.content for m in replies] == ["Alice here."]


async def test_answering_a_ticket_keeps_a_run_that_waits_for_approval(store: Store) -> None:
    paid: list[int] = []

    @tool(requires_approval=True)
    async def pay(amount: int) -> str:
        """Pay."""
        paid.append(amount)
        return "paid"

    def pay_script(request: ModelRequest) -> Step:
        last = request.messages[-1]
        if last.role == "tool" and last.name == "pay":
            return S.say(f"Outcome: {last.content}")
        if last.role == "user" and last.content == ESCALATE:
            return S.call("transfer_to_human", reason="wants a person", objective="talk")
        return S.call("pay", amount=5)

    triage = Agent(name="triage", tools=[pay], handoffs=["human"])
    team = Team([triage], entry="triage", model=S(pay_script), store=store)
    ticket = await escalated(team)
    paused = await team.run("pay 5 please", session_id="S1")  # the user goes on meanwhile
    card = paused.approval
    assert card is not None

    with contextlib.suppress(TicketError, ApprovalError):
        await team.answer_ticket(ticket.id, by="alice", reply="Alice here.", hand_back_to="triage")

    assert [c.id for c in await team.approvals()] == [card.id]
    result = await team.approve("S1", card.id, by="bob")
    assert result.status == "completed" and paid == [5]
    contents = [m.content for m in await team.store.get_messages("S1")]
    assert "pay 5 please" in contents
