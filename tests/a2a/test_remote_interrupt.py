"""A remote agent that needs more from the user (input-required) or waits for a person's
approval on its side (auth-required): the local run pauses with an interrupt, and the answer
(in a fresh team binding on the same SQLite store) continues the same remote task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from remote_kit import Remote, serving

from baton import Agent, Team
from baton.a2a import RemoteAgent
from baton.models.scripted import ScriptedModel


def desk(url: str, store: str) -> Team:
    step = ScriptedModel.call(
        "transfer_to_tech", reason="router trouble", objective="restart the router"
    )
    return Team(
        [
            Agent(name="triage", handoffs=["tech"], model=ScriptedModel({"triage": [step]})),
            RemoteAgent("tech", url, description="Diagnoses and restarts routers"),
        ],
        entry="triage",
        store=store,
    )


async def _paused_then_answered(
    remote: Remote, tmp_path: Path, message: str, answer: Any
) -> tuple[Any, Any]:
    store = f"sqlite:///{tmp_path / 'desk.db'}"
    team = desk(remote.url, store)
    try:
        paused = await team.run(message, session_id="s1", user_id="u1")
    finally:
        await team.aclose()
    fresh = desk(remote.url, store)  # another binding, as another process would have
    try:
        assert [c.session_id for c in await fresh.interrupts()] == ["s1"]
        done = await fresh.answer_interrupt("s1", answer)
    finally:
        await fresh.aclose()
    return paused, done


async def test_input_required_pauses_and_the_answer_continues_the_task(tmp_path: Path) -> None:
    async with serving() as remote:
        paused, done = await _paused_then_answered(
            remote, tmp_path, "ask me about my router", "ORD-7"
        )
    assert paused.status == "interrupted"
    card = paused.interrupt
    assert card is not None and card.agent == "tech" and card.name == "a2a_tech"
    assert card.value == {
        "remote": "tech",
        "url": remote.url,
        "state": "input-required",
        "question": "Which order number?",
    }
    assert done.status == "completed", done.error
    assert done.output == "Order ORD-7 restarted."
    assert done.path == ["triage", "tech"]
    first, second = remote.seen  # the first message was sent once, the answer once
    assert first.incoming.text == "ask me about my router"
    assert first.incoming.payload is not None
    assert second.incoming.text == "ORD-7"
    assert second.task_id == first.task_id and second.context_id == first.context_id
    assert second.incoming.payload is None
    assert second.incoming.trace_id == first.incoming.trace_id == paused.trace_id
    assert len({first.message_id, second.message_id}) == 2


async def test_auth_required_pauses_until_a_person_says_it_is_given(tmp_path: Path) -> None:
    async with serving() as remote:
        paused, done = await _paused_then_answered(
            remote, tmp_path, "approval needed for a router reset", "approved by Dana"
        )
    assert paused.status == "interrupted"
    value = paused.interrupt.value
    assert value["state"] == "auth-required"
    assert "approval" in value["question"] and "A manager must sign off." in value["question"]
    assert done.status == "completed", done.error
    assert done.output == "Signed off and done."
    assert [s.incoming.text for s in remote.seen] == [
        "approval needed for a router reset",
        "approved by Dana",
    ]


async def test_a_resumed_call_never_sends_its_first_message_again(tmp_path: Path) -> None:
    """Resuming a paused run without an answer leaves it waiting: nothing is sent."""
    store = f"sqlite:///{tmp_path / 'desk.db'}"
    async with serving() as remote:
        team = desk(remote.url, store)
        other = team.bind(store=store)  # a binding of its own on the same database
        try:
            paused = await team.run("ask me about my router", session_id="s1")
            again = await other.resume("s1")
        finally:
            await team.aclose()
            await other.aclose()
    assert paused.status == "interrupted"
    assert again.status == "interrupted"
    assert len(remote.seen) == 1
