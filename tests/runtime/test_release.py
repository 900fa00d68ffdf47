"""`team.release`: a run stopped without ending — unfinished at its last checkpoint, lease
given up, its caller told with `RunReleased` — that `team.resume` or a `team.run` of the same
request continues, in this process or another, without repeating a finished tool call."""

from __future__ import annotations

import asyncio

import pytest

from baton import Agent, RunReleased, ScriptedModel, SQLiteStore, Team, tool
from baton.models import ModelRequest, Step

PAID: list[int] = []


@tool
async def pay(amount: int) -> dict:
    """Pay."""
    PAID.append(amount)
    return {"paid": amount}


def policy(request: ModelRequest) -> Step:
    if request.messages[-1].role == "tool":
        return ScriptedModel.say("paid")
    return ScriptedModel.call("pay", amount=5)


def cashier(store: object) -> Team:
    model = ScriptedModel(policy, latency_s=0.3)
    agent = Agent(name="cashier", instructions="Pay.", tools=[pay])
    return Team([agent], entry="cashier", model=model, store=store, lease_s=1.0)  # type: ignore[arg-type]


async def _result_checkpointed(team: Team) -> bool:
    cp = await team.store.get_checkpoint("s1")
    return cp is not None and "paid" in cp.state_json()


@pytest.fixture(autouse=True)
def _clear() -> None:
    PAID.clear()


async def test_a_released_run_stays_unfinished_and_resumes_elsewhere(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'baton.db'}"
    team = cashier(SQLiteStore(url))
    running = asyncio.create_task(team.run("pay 5", session_id="s1", request_id="r1"))
    # past the side effect and its checkpoint, in the model call that follows it: a release
    # before the tool's result is checkpointed is a crash mid-call, after which the call runs
    # again (its idempotency key is the tool's to honour)
    while not PAID or not await _result_checkpointed(team):
        await asyncio.sleep(0.02)
    assert await team.release("s1") is True
    with pytest.raises(RunReleased, match="released at checkpoint"):
        await running
    cp = await team.store.get_checkpoint("s1")
    assert cp is not None and cp.status == "running" and cp.meta["request_id"] == "r1"
    assert await team.session("s1") is None or not (await team.session("s1")).requests
    # another team on the same file (another process in production) answers the request
    other = cashier(SQLiteStore(url))
    result = await other.run("pay 5", session_id="s1", request_id="r1")
    assert result.status == "completed" and result.output == "paid"
    assert PAID == [5]  # not paid twice
    again = await other.run("pay 5", session_id="s1", request_id="r1")
    assert again.run_id == result.run_id  # answered from the record
    await team.aclose()
    await other.aclose()


async def test_release_of_a_session_with_no_run_here_is_false() -> None:
    team = cashier(None)
    assert await team.release("nobody") is False
