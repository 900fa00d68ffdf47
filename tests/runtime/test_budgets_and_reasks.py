"""Issue 15, items 3 and 10: cut-off tool calls and empty replies are re-asked, never guessed;
per-run budgets (model calls, tokens, cost) end a run `escalated` through the `budget` guard."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from runtime_kit import handoff, of_type

from baton import (
    Agent,
    Guards,
    ModelRequest,
    ModelResponse,
    ParseError,
    ScriptedModel,
    Team,
    tool,
)
from baton.backends.sqlite import SQLiteStore
from baton.core.messages import ToolCall, Usage
from baton.models import Step
from baton.models.parsing import parse_json_object
from baton.runtime.state import RunState

S = ScriptedModel


def _orders_desk(model: Any, ran: list[str], **team_kwargs: Any) -> Team:
    @tool
    async def lookup(order_id: str) -> str:
        """Look an order up.

        Args:
            order_id: Order number, e.g. ORD-1.
        """
        ran.append(order_id)
        return f"{order_id}: shipped"

    return Team([Agent(name="orders", tools=[lookup])], entry="orders", model=model, **team_kwargs)


# ---------------------------------------------------------------- item 3: cut-off tool calls


@pytest.mark.parametrize("cut", ['{"order_id": ', '{"order_id":"ORD-', '{"order_id": "ORD-1",'])
async def test_a_cut_off_call_is_re_asked_with_the_error_and_never_run_as_repaired(
    cut: str,
) -> None:
    ran: list[str] = []
    model = S(
        [S.raw_call("lookup", cut), S.call("lookup", order_id="ORD-1"), S.say("ORD-1 shipped.")]
    )
    team = _orders_desk(model, ran)

    result = await team.run("where is ORD-1?")

    assert result.status == "completed" and result.output == "ORD-1 shipped."
    assert ran == ["ORD-1"]  # never "" nor "ORD-"
    reask = model.requests[1]
    assert reask.reask
    nudge = reask.messages[-1].content or ""
    assert "could not be parsed" in nudge and "cut off" in nudge and repr(cut) in nudge


async def test_a_call_cut_off_twice_is_answered_with_the_error_and_not_run() -> None:
    ran: list[str] = []
    model = S([S.raw_call("lookup", '{"order_id": "ORD-')] * 2 + [S.say("Sorry.")])
    team = _orders_desk(model, ran)

    result = await team.run("where is ORD-1?")

    assert ran == []
    assert result.output == "Sorry."
    assert len(model.requests) == 3  # the call, its one re-ask, then the answer


async def test_a_cut_off_text_mode_call_is_re_asked() -> None:
    ran: list[str] = []
    cut = 'Checking.\n{"tool": "lookup", "arguments": {"order_id": "ORD-'
    model = S(
        [
            S.text(cut),
            S.text('{"tool": "lookup", "arguments": {"order_id": "ORD-1"}}'),
            S.text('{"final": "ORD-1 shipped."}'),
        ]
    )
    team = _orders_desk(model, ran)

    result = await team.run("where is ORD-1?")

    assert ran == ["ORD-1"]
    assert result.output == "ORD-1 shipped."
    assert model.requests[1].reask and "cut off" in (model.requests[1].messages[-1].content or "")


async def test_a_repair_that_invents_an_empty_value_is_re_asked() -> None:
    ran: list[str] = []
    model = S(
        [
            S.raw_call("lookup", '{"order_id": }'),
            S.call("lookup", order_id="ORD-1"),
            S.say("ORD-1 shipped."),
        ]
    )
    result = await _orders_desk(model, ran).run("where is ORD-1?")
    assert ran == ["ORD-1"] and result.status == "completed"
    assert "invent an empty value for 'order_id'" in (model.requests[1].messages[-1].content or "")


async def test_legitimate_repairs_still_run_the_tool() -> None:
    ran: list[str] = []
    model = S([S.raw_call("lookup", "```json\n{'order_id': 'ORD-1',}\n```"), S.say("Shipped.")])
    result = await _orders_desk(model, ran).run("where is ORD-1?")
    assert ran == ["ORD-1"] and result.status == "completed"
    assert not any(r.reask for r in model.requests)


json_objects = st.dictionaries(
    st.text(max_size=8),
    st.one_of(st.text(max_size=12), st.integers()),
    min_size=0,
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(obj=json_objects, ascii_only=st.booleans(), indent=st.sampled_from([None, 2]))
def test_a_proper_prefix_of_an_object_never_parses_to_a_different_object(
    obj: dict[str, Any], ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(obj, ensure_ascii=ascii_only, indent=indent)
    assert parse_json_object(text) == obj
    # the empty prefix is "no arguments" ({}), by design; every other one is cut off
    for end in range(1, len(text)):
        prefix = text[:end]
        try:
            parsed = parse_json_object(prefix)
        except ParseError:
            continue
        pytest.fail(f"{prefix!r} (a prefix of {text!r}) parsed to {parsed!r}")


# ---------------------------------------------------------------- item 3: empty replies


@pytest.mark.parametrize("empty", [Step(), S.say(""), S.say("  \n ")])
async def test_an_empty_reply_is_re_asked_once_with_a_nudge(empty: Step) -> None:
    model = S([empty, S.say("Hello!")])
    result = await Team([Agent(name="a")], entry="a", model=model).run("hi")

    assert result.status == "completed" and result.output == "Hello!"
    reask = model.requests[1]
    assert reask.reask
    assert "Your last reply was empty" in (reask.messages[-1].content or "")


async def test_an_empty_reply_twice_fails_the_run_never_completes_it_with_nothing() -> None:
    model = S([S.say(""), Step()])
    result = await Team([Agent(name="a")], entry="a", model=model).run("hi")

    assert result.status == "failed"
    assert result.output is None
    assert result.error is not None
    assert "model 'scripted' returned an empty reply twice for agent a" in result.error


async def test_an_empty_reply_to_a_parse_re_ask_fails_the_run() -> None:
    ran: list[str] = []
    model = S([S.raw_call("lookup", '{"order_id": '), S.say(" ")])
    result = await _orders_desk(model, ran).run("where is ORD-1?")
    assert result.status == "failed" and "empty reply to a re-ask" in (result.error or "")
    assert ran == [] and len(model.requests) == 2


# ---------------------------------------------------------------- item 10: per-run budgets


class Metered:
    """A model whose every call costs exactly 600 input and 100 output tokens: it calls
    `lookup` until told to stop, then answers."""

    name = "metered"

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.requests: list[ModelRequest] = []

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        usage = Usage(input_tokens=600, output_tokens=100)
        if len(self.requests) > self.calls:
            return ModelResponse(text="All shipped.", usage=usage)
        n = len(self.requests)
        call = ToolCall(name="lookup", arguments=json.dumps({"order_id": f"ORD-{n}"}))
        return ModelResponse(tool_calls=[call], usage=usage)


ASK = "where are ORD-1, ORD-2, ORD-3, ORD-4 and ORD-5?"


def _budget_trip(result: Any) -> str:
    (trip,) = [e for e in of_type(result.events, "guard_tripped") if e.guard == "budget"]
    assert result.status == "escalated"
    return str(trip.detail)


async def test_max_model_calls_trips_before_the_call_past_it() -> None:
    ran: list[str] = []
    model = Metered(calls=5)
    team = _orders_desk(model, ran, guards=Guards(max_model_calls_per_run=3))

    result = await team.run(ASK)

    assert _budget_trip(result) == (
        "max_model_calls_per_run: 3 model calls made of 3; no room for another model call"
    )
    assert len(model.requests) == 3 and ran == ["ORD-1", "ORD-2", "ORD-3"]
    assert (
        result.escalation is not None and "max_model_calls_per_run" in result.escalation.reasons[0]
    )


async def test_re_asks_count_as_model_calls() -> None:
    ran: list[str] = []
    model = S([S.raw_call("lookup", '{"order_id": '), S.call("lookup", order_id="ORD-1")])
    team = _orders_desk(model, ran, guards=Guards(max_model_calls_per_run=1))

    result = await team.run("where is ORD-1?")

    assert _budget_trip(result).startswith("max_model_calls_per_run: 1 model calls made of 1")
    assert len(model.requests) == 1 and ran == []


async def test_max_tokens_trips_after_the_call_that_goes_past_it_without_running_its_tools() -> (
    None
):
    ran: list[str] = []
    model = Metered(calls=5)
    team = _orders_desk(model, ran, guards=Guards(max_tokens_per_run=1_000))

    result = await team.run(ASK)

    assert _budget_trip(result) == "max_tokens_per_run: 1,400 tokens used of 1,000"
    assert len(model.requests) == 2
    assert ran == ["ORD-1"]  # the second call's tool call never ran


async def test_an_answer_that_goes_past_the_budget_still_reaches_the_user() -> None:
    """It is already paid for: the user gets it, and the run spends nothing more."""
    ran: list[str] = []
    model = Metered(calls=1)  # a lookup, then the answer
    team = _orders_desk(model, ran, guards=Guards(max_tokens_per_run=1_000))

    result = await team.run("where is ORD-1?")

    assert (result.status, result.output) == ("completed", "All shipped.")
    assert len(model.requests) == 2 and ran == ["ORD-1"]
    assert [e for e in of_type(result.events, "guard_tripped") if e.guard == "budget"] == []


async def test_tokens_used_up_to_the_limit_leave_no_room_for_another_call() -> None:
    ran: list[str] = []
    model = Metered(calls=5)
    team = _orders_desk(model, ran, guards=Guards(max_tokens_per_run=1_400))

    result = await team.run(ASK)

    assert _budget_trip(result) == (
        "max_tokens_per_run: 1,400 tokens used of 1,400; no room for another model call"
    )
    assert len(model.requests) == 2 and ran == ["ORD-1", "ORD-2"]


async def test_max_cost_counts_input_and_output_prices_per_1k_tokens() -> None:
    ran: list[str] = []
    model = Metered(calls=5)
    # each call: 600 * 1.0 / 1000 + 100 * 2.0 / 1000 = 0.8
    guards = Guards(max_cost_per_run=2.0, token_prices={"metered": (1.0, 2.0)})
    team = _orders_desk(model, ran, guards=guards)

    result = await team.run(ASK)

    assert _budget_trip(result) == "max_cost_per_run: 2.4000 spent of 2.0000"
    assert len(model.requests) == 3 and ran == ["ORD-1", "ORD-2"]


async def test_a_cost_budget_needs_prices_and_a_model_without_one_trips_before_its_call() -> None:
    with pytest.raises(ValidationError, match="max_cost_per_run needs token_prices"):
        Guards(max_cost_per_run=1.0)

    model = Metered(calls=1)
    guards = Guards(max_cost_per_run=1.0, token_prices={"other-model": (1.0, 1.0)})
    result = await _orders_desk(model, [], guards=guards).run(ASK)

    assert _budget_trip(result) == (
        "max_cost_per_run: model 'metered' has no price in Guards.token_prices, "
        "so the run's cost cannot be counted"
    )
    assert model.requests == []


async def test_default_budgets_change_nothing() -> None:
    guards = Guards()
    assert guards.max_model_calls_per_run is None
    assert guards.max_tokens_per_run is None
    assert guards.max_cost_per_run is None
    assert guards.token_prices == {}
    ran: list[str] = []
    model = Metered(calls=4)

    result = await _orders_desk(model, ran, guards=guards).run(ASK)

    assert result.status == "completed" and result.output == "All shipped."
    assert len(model.requests) == 5 and len(ran) == 4
    assert of_type(result.events, "guard_tripped") == []


async def test_a_fallback_agent_cannot_go_past_the_budget_the_card_goes_to_the_queue() -> None:
    ran: list[str] = []

    @tool
    async def lookup(order_id: str) -> str:
        """Look an order up."""
        ran.append(order_id)
        return "shipped"

    model = S(
        {
            "orders": [S.call("lookup", order_id="ORD-1"), S.call("lookup", order_id="ORD-2")],
            "desk": [S.say("A colleague will call you back.")],
        }
    )
    team = Team(
        [Agent(name="orders", tools=[lookup]), Agent(name="desk")],
        entry="orders",
        model=model,
        fallback="desk",
        guards=Guards(max_model_calls_per_run=2),
    )

    result = await team.run(ASK, session_id="S")

    assert result.status == "escalated"
    assert [r.agent for r in model.requests] == ["orders", "orders"]  # desk never called
    trips = [e for e in of_type(result.events, "guard_tripped") if e.guard == "budget"]
    assert [e.agent for e in trips] == ["orders", "desk"]
    (ticket,) = await team.store.list_human()
    assert ticket.card.reasons[0].startswith("max_model_calls_per_run: 2 model calls made of 2")
    assert "fallback desk could not finish: max_model_calls_per_run" in ticket.card.reasons[1]


# ---------------------------------------------------------------- item 10: budgets and resume


def _slow_desk(store: Any, guards: Guards, ran: list[str]) -> Team:
    @tool
    async def slow_lookup(order_id: str) -> str:
        """Look an order up (slowly)."""
        ran.append(order_id)
        if len(ran) == 1:
            await asyncio.sleep(30)  # the first attempt is cancelled here
        return f"{order_id}: shipped"

    script = {
        "triage": [handoff("orders", state={"order_id": "ORD-1"})],
        "orders": [S.call("slow_lookup", order_id="ORD-1"), S.say("ORD-1 shipped today.")],
    }
    return Team(
        [Agent(name="triage", handoffs=["orders"]), Agent(name="orders", tools=[slow_lookup])],
        entry="triage",
        model=S(script),
        store=store,
        guards=guards,
    )


async def _cancel_during_the_tool(team: Team, ran: list[str]) -> None:
    async with contextlib.aclosing(team.stream("where is ORD-1?", session_id="S")) as stream:
        async for item in stream:
            if getattr(item, "type", None) == "model_called" and item.agent == "orders":
                while not ran:  # (the run yields to the store before the tool starts)
                    await asyncio.sleep(0.005)
                break  # the consumer walks away while the tool runs


@pytest.mark.parametrize("persistent", [False, True])
async def test_a_resumed_run_keeps_counting_from_its_checkpoint(
    persistent: bool, tmp_path: Path
) -> None:
    def store() -> Any:
        return SQLiteStore(f"sqlite:///{tmp_path / 'baton.db'}") if persistent else None

    ran: list[str] = []
    first = _slow_desk(store(), Guards(max_model_calls_per_run=2), ran)
    await _cancel_during_the_tool(first, ran)
    (checkpoint,) = await first.unfinished()
    assert checkpoint.status == "cancelled"
    assert RunState.from_json(checkpoint.state_json()).model_calls == 2

    # a fresh team (another process) on the same store, or the same team in memory
    second = _slow_desk(store(), Guards(max_model_calls_per_run=2), ran) if persistent else first
    result = await second.resume("S")

    # the cancelled call is not run again (the model read that it may have taken effect),
    # and the budget counted from the checkpoint trips at the next model call
    assert ran == ["ORD-1"]
    assert result.status == "escalated"
    assert _budget_trip(result).startswith("max_model_calls_per_run: 2 model calls made of 2")


async def test_a_resumed_run_within_its_budget_completes() -> None:
    ran: list[str] = []
    team = _slow_desk(None, Guards(max_model_calls_per_run=3, max_tokens_per_run=100_000), ran)
    await _cancel_during_the_tool(team, ran)
    result = await team.resume("S")
    assert result.status == "completed" and result.output == "ORD-1 shipped today."
