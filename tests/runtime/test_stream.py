"""`team.stream`: every event as it happens, the reply in pieces, the `RunResult` last."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from runtime_kit import handoff

from baton import Agent, ModelRequest, ModelResponse, RunResult, ScriptedModel, Team, tool

S = ScriptedModel


@tool
async def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"{order_id}: shipped"


def desk(model: Any) -> Team:
    return Team(
        [Agent(name="triage", handoffs=["orders"]), Agent(name="orders", tools=[lookup])],
        entry="triage",
        model=model,
    )


SCRIPT = {
    "triage": [handoff("orders", state={"order_id": "ORD-1"})],
    "orders": [S.call("lookup", order_id="ORD-1"), S.say("订单 ORD-1 已发货, it shipped today.")],
}


async def test_stream_yields_the_events_live_and_the_result_last() -> None:
    team = desk(S(dict(SCRIPT)))
    items = [item async for item in team.stream("where is ORD-1?", session_id="S")]

    result = items[-1]
    assert isinstance(result, RunResult) and result.status == "completed"
    events = items[:-1]
    deltas = [e for e in events if e.type == "text_delta"]
    assert len(deltas) > 1  # the scripted model streams word by word
    assert "".join(d.text for d in deltas) == result.output
    assert all(d.agent == "orders" for d in deltas)
    # every stored event came through the stream, in order; deltas are never stored
    assert [e.id for e in events if e.type != "text_delta"] == [e.id for e in result.events]
    assert "text_delta" not in {e.type for e in result.events}
    assert "text_delta" not in {e.type for e in await team.store.get_events(session_id="S")}
    # the tool call and hand-off produced no text deltas before the answer's model call
    answer_call = max(i for i, e in enumerate(events) if e.type == "model_called")
    assert all(e.type != "text_delta" for e in events[: answer_call - len(deltas)])


class Plain:
    """A model with `generate` only."""

    name = "plain"

    async def generate(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="one piece")


async def test_a_model_that_does_not_stream_gives_one_delta() -> None:
    team = Team([Agent(name="a")], entry="a", model=Plain())
    items = [item async for item in team.stream("hi", session_id="S")]
    deltas = [i for i in items if getattr(i, "type", None) == "text_delta"]
    assert [d.text for d in deltas] == ["one piece"]
    assert isinstance(items[-1], RunResult) and items[-1].output == "one piece"


async def test_leaving_the_stream_early_cancels_the_run_and_keeps_it_resumable() -> None:
    ran: list[str] = []

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
    team = Team(
        [Agent(name="triage", handoffs=["orders"]), Agent(name="orders", tools=[slow_lookup])],
        entry="triage",
        model=S(script),
    )
    async with contextlib.aclosing(team.stream("where is ORD-1?", session_id="S")) as stream:
        async for item in stream:
            if getattr(item, "type", None) == "model_called" and item.tool_calls:
                break  # the consumer walks away while the tool runs
    [cp] = await team.unfinished()
    assert (cp.session_id, cp.status) == ("S", "cancelled")
    # what it did is committed: the hand-off, and the call it was making, answered as such
    kept = await team.store.get_messages("S")
    assert [m.role for m in kept] == ["user", "assistant", "tool", "assistant", "tool"]
    assert "may have taken effect" in (kept[-1].content or "")

    result = await team.resume("S")
    assert result.status == "completed"
    assert result.output == "ORD-1 shipped today."
    assert ran == ["ORD-1"]  # the model read that the call may have run; it was not repeated
    assert await team.unfinished() == []
    assert [m.role for m in await team.store.get_messages("S")].count("user") == 1
