"""Grounded ids, `transfer_to_human`, text-mode tool names in events, bad custom models."""

from __future__ import annotations

from typing import Any

from runtime_kit import handoff, of_type

from baton import Agent, Guards, ModelResponse, ScriptedModel, Team, tool
from baton.models import Step
from baton.runtime.grounding import context_text, ungrounded

S = ScriptedModel
LOOKUPS: list[str] = []


@tool
async def lookup(order_id: str) -> dict[str, Any]:
    """Look an order up."""
    LOOKUPS.append(order_id)
    return {"order_id": order_id, "status": "SHIPPED", "next": "ORD-777"}


def _solo(model: Any, **kw: Any) -> Team:
    return Team([Agent(name="solo", tools=[lookup])], entry="solo", model=model, **kw)


async def test_an_invented_id_is_refused_and_the_model_is_told_why() -> None:
    LOOKUPS.clear()
    model = S([S.call("lookup", order_id="ORD-999"), S.say("Which order do you mean?")])
    result = await _solo(model).run("where is my order?")
    assert result.status == "completed"
    assert LOOKUPS == []
    (trip,) = of_type(result.events, "guard_tripped")
    assert trip.guard == "ungrounded_id" and "ORD-999" in trip.detail
    tool_msg = model.requests[-1].messages[-1]
    assert "appears nowhere in the conversation" in (tool_msg.content or "")


async def test_retrying_a_refused_id_or_writing_it_first_does_not_ground_it() -> None:
    """The refusal quotes the invented id, and the model may write it in its own text: neither
    is something it was shown."""
    LOOKUPS.clear()
    model = S(
        [
            S.call("lookup", order_id="ORD-999"),
            S.call("lookup", order_id="ORD-999"),  # the same call again
            Step(text="Let me check ORD-999.", calls=(("lookup", '{"order_id": "ORD-999"}'),)),
            S.say("Which order do you mean?"),
        ]
    )
    result = await _solo(model).run("where is my order?")
    assert result.status == "completed"
    assert LOOKUPS == []
    assert [t.guard for t in of_type(result.events, "guard_tripped")] == ["ungrounded_id"] * 3


async def test_ids_said_by_the_user_or_returned_by_a_tool_are_grounded() -> None:
    LOOKUPS.clear()
    model = S(
        [
            S.call("lookup", order_id="ord-202607-99"),  # case differs from the user's text
            S.call("lookup", order_id="ORD-777"),  # only a tool result mentioned this one
            S.say("done"),
        ]
    )
    result = await _solo(model).run("where is ORD-202607-99?")
    assert result.status == "completed"
    assert LOOKUPS == ["ord-202607-99", "ORD-777"]
    assert of_type(result.events, "guard_tripped") == []


async def test_the_guard_can_be_switched_off() -> None:
    LOOKUPS.clear()
    model = S([S.call("lookup", order_id="ORD-999"), S.say("ok")])
    await _solo(model, guards=Guards(grounded_ids=False)).run("where is my order?")
    assert LOOKUPS == ["ORD-999"]


async def test_invented_ids_are_dropped_from_a_handoff_state_but_the_handoff_goes_on() -> None:
    model = S(
        {
            "triage": [handoff("billing", state={"order_id": "ORD-404", "topic": "invoice"})],
            "billing": [S.say("Which order?")],
        }
    )
    team = Team(
        [Agent(name="triage", handoffs=["billing"]), Agent(name="billing")],
        entry="triage",
        model=model,
    )
    result = await team.run("I need my invoice")
    assert result.path == ["triage", "billing"]
    assert result.handoffs[0].state == {"topic": "invoice"}
    assert "order_id" not in result.state
    (trip,) = of_type(result.events, "guard_tripped")
    assert trip.guard == "ungrounded_id" and "ORD-404" in trip.detail


def test_id_detection_by_name_and_shape() -> None:
    shown = context_text([])
    assert ungrounded({"order_id": "12345"}, shown) == [("order_id", "12345")]
    assert ungrounded({"sku": "A1"}, shown) == [("sku", "A1")]
    assert ungrounded({"note": "srv-bj-001"}, shown) == [("note", "srv-bj-001")]
    assert ungrounded({"item_ids": ["X-1", "Y-2"]}, "x-1") == [("item_ids", "Y-2")]
    assert ungrounded({"reason": "arrived damaged", "count": 2}, shown) == []


async def test_transfer_to_human_escalates_to_the_human_queue_even_with_an_agent_fallback() -> None:
    model = S(
        {
            "triage": [handoff("human", reason="legal complaint", objective="call the user")],
            "desk": [S.say("should not run")],
        }
    )
    team = Team(
        [Agent(name="triage", handoffs=["human", "desk"]), Agent(name="desk")],
        entry="triage",
        model=model,
        fallback="desk",
    )
    result = await team.run("I want to talk to a lawyer")
    assert result.status == "escalated"
    assert result.path == ["triage"]
    (esc,) = of_type(result.events, "escalated")
    assert esc.to == "human"
    assert "legal complaint" in esc.card.reasons[0]
    tickets = await team.store.list_human()
    assert len(tickets) == 1 and tickets[0].card.last_user_message == "I want to talk to a lawyer"
    names = [s.name for s in model.requests[0].tools]
    assert "transfer_to_human" in names


async def test_text_mode_tool_calls_are_named_in_the_model_called_event() -> None:
    model = S([S.text('```json\n{"tool": "lookup", "arguments": {"order_id": "ORD-1"}}\n```'),
               S.text('{"final": "It shipped."}')])  # fmt: skip
    result = await _solo(model).run("where is ORD-1?")
    assert result.output == "It shipped."
    calls = of_type(result.events, "model_called")
    assert calls[0].tool_calls == ("lookup",)
    assert calls[1].tool_calls == () and calls[1].text == "It shipped."


class _Broken:
    name = "broken"

    async def generate(self, request: Any) -> Any:
        return ModelResponse(text=None, tool_calls=[{"name": "lookup"}])  # type: ignore[list-item]


async def test_a_custom_model_returning_a_malformed_response_fails_the_run_cleanly() -> None:
    result = await _solo(_Broken()).run("hello")
    assert result.status == "failed"
    assert "ToolCall" in (result.error or "")
