"""Request ids: a request delivered twice (a bus redelivery, a client's retry) runs once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from baton import Agent, ScriptedModel, Team, tool
from baton.backends.base import MAX_REQUESTS

S = ScriptedModel


async def test_a_request_answered_once_returns_its_recorded_result() -> None:
    model = S([S.say("您好，已处理。")])
    team = Team([Agent(name="desk")], entry="desk", model=model)
    first = await team.run("你好", session_id="s", request_id="msg-1")
    again = await team.run("你好", session_id="s", request_id="msg-1")
    assert first.status == again.status == "completed"
    assert again.output == "您好，已处理。" and again.run_id == first.run_id
    assert len(model.requests) == 1  # the model was asked once
    messages = await team.store.get_messages("s")
    assert [m.role for m in messages] == ["user", "assistant"]
    assert (await team.session("s")).requests == {"msg-1": first.run_id}  # type: ignore[union-attr]


async def test_a_request_whose_run_crashed_is_resumed_not_started_again(
    tmp_path: Path, dies_when_cancelled: None
) -> None:
    effects: list[str] = []
    gate = asyncio.Event()

    @tool
    async def refund(order_id: str) -> str:
        """Refund an order."""
        effects.append(order_id)
        if len(effects) == 1:
            await gate.wait()  # the process dies here the first time
        return "refunded"

    def build() -> Team:
        model = S(
            lambda r: (
                S.say("done")
                if r.messages[-1].role == "tool"
                else S.call("refund", order_id="ORD-1")
            )
        )
        return Team(
            [Agent(name="billing", tools=[refund])],
            entry="billing",
            model=model,
            store=f"sqlite:///{tmp_path / 'r.db'}",
        )

    team = build()
    task = asyncio.ensure_future(team.run("refund ORD-1", session_id="s", request_id="msg-7"))
    for _ in range(300):
        if effects:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    again = build()  # the message is delivered again, to another process
    result = await again.run("refund ORD-1", session_id="s", request_id="msg-7")
    assert result.status == "completed" and result.output == "done"
    users = [m for m in await again.store.get_messages("s") if m.role == "user"]
    assert len(users) == 1  # resumed, not run as a second turn
    third = await again.run("refund ORD-1", session_id="s", request_id="msg-7")
    assert third.run_id == result.run_id and third.output == "done"
    await team.aclose()
    await again.aclose()


async def test_a_request_waiting_for_approval_says_so_again() -> None:
    @tool(requires_approval=True)
    async def wire(amount: int) -> str:
        """Wire money."""
        return "sent"

    model = S([S.call("wire", amount=5), S.say("sent it")])
    team = Team([Agent(name="bank", tools=[wire])], entry="bank", model=model)
    first = await team.run("wire 5", session_id="s", request_id="m")
    again = await team.run("wire 5", session_id="s", request_id="m")
    assert first.status == again.status == "awaiting_approval"
    assert again.approval is not None and first.approval is not None
    assert again.approval.id == first.approval.id


async def test_a_session_remembers_its_last_requests_only() -> None:
    team = Team([Agent(name="desk")], entry="desk", model=S([S.say("ok")], loop=True))
    for i in range(MAX_REQUESTS + 5):
        await team.run(f"hi {i}", session_id="s", request_id=f"m{i}")
    session = await team.session("s")
    assert session is not None and len(session.requests) == MAX_REQUESTS
    assert next(iter(session.requests)) == "m5"  # the oldest went first
