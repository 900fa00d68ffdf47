"""A hand-off to a RemoteAgent: the baton crosses to a real a2a-sdk server over loopback, and
its answer comes back as the remote agent's turn."""

from __future__ import annotations

from typing import Any

from remote_kit import serving

from baton import Agent, Team
from baton.a2a import RemoteAgent
from baton.a2a.wire import trace_id_of
from baton.core.events import Event
from baton.models.scripted import ScriptedModel, Step


def handoff(target: str, **kw: Any) -> Step:
    args = {"reason": "router trouble", "objective": "restart the router", **kw}
    return ScriptedModel.call(f"transfer_to_{target}", **args)


def desk(url: str, script: list[Step] | None = None, **remote: Any) -> Team:
    model = ScriptedModel({"triage": script or [handoff("tech", state={"order_id": "ORD-7"})]})
    return Team(
        [
            Agent(name="triage", handoffs=["tech", "billing"], model=model),
            Agent(name="billing", model=ScriptedModel([ScriptedModel.say("billing here")])),
            RemoteAgent("tech", url, description="Diagnoses and restarts routers", **remote),
        ],
        entry="triage",
    )


async def test_the_remote_answers_as_the_receivers_turn() -> None:
    async with serving() as remote:
        team = desk(remote.url)
        try:
            result = await team.run("router ORD-7 is down", session_id="s1", user_id="u1")
        finally:
            await team.aclose()
    assert result.status == "completed", result.error
    assert result.output == "Done: restart the router; state [('order_id', 'ORD-7')]"
    assert result.path == ["triage", "tech"]
    assert result.holder == "tech"
    started = [e for e in result.events if e.type == "agent_started" and e.agent == "tech"]
    assert started and started[0].conductor  # a conductor's turn, no model asked
    assert not [e for e in result.events if e.type == "model_called" and e.agent == "tech"]
    calls = [e for e in result.events if e.type == "tool_called" and e.agent == "tech"]
    assert [(c.tool, c.ok) for c in calls] == [("a2a_tech", True)]


async def test_the_payload_and_the_trace_arrive_validated() -> None:
    async with serving() as remote:
        team = desk(remote.url, headers={"Authorization": "Bearer t0k"})
        try:
            result = await team.run("router ORD-7 is down", session_id="s1", user_id="u1")
        finally:
            await team.aclose()
    [seen] = remote.seen
    payload = seen.incoming.payload
    assert payload is not None  # validated into a HandoffPayload by the server's reading
    assert payload.objective == "restart the router"
    assert payload.state == {"order_id": "ORD-7"}
    assert (payload.source, payload.target, payload.hop) == ("triage", "tech", 1)
    assert seen.incoming.text == "router ORD-7 is down"
    assert seen.incoming.trace_id == result.trace_id
    assert trace_id_of(seen.metadata["traceparent"]) == result.trace_id
    assert payload.trace_id == result.trace_id
    assert seen.headers["authorization"] == "Bearer t0k"


async def test_a_later_message_continues_the_remote_conversation() -> None:
    async with serving() as remote:
        team = desk(remote.url)
        try:
            await team.run("router ORD-7 is down", session_id="s1")
            again = await team.run("still down", session_id="s1")
            other = await desk(remote.url).run("router ORD-7 is down", session_id="s2")
        finally:
            await team.aclose()
    assert again.status == "completed" and again.path == ["tech"]  # the holder continues
    first, second, elsewhere = remote.seen
    assert first.context_id == second.context_id  # one remote conversation per session
    assert elsewhere.context_id != first.context_id
    assert "s1" not in first.context_id  # the session's id does not leave as the context
    assert first.message_id != second.message_id
    assert first.incoming.payload is not None  # handed the baton in that run
    assert second.incoming.payload is None  # continuing: the hand-off is not sent again
    assert other.status == "completed"


async def test_secrets_in_the_users_words_are_masked_before_they_leave() -> None:
    secret = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
    async with serving() as remote:
        team = desk(remote.url)
        try:
            result = await team.run(
                f"router ORD-7 is down, my password: hunter2horse and api key {secret}",
                session_id="s1",
            )
        finally:
            await team.aclose()
    assert result.status == "completed"
    [seen] = remote.seen
    sent = seen.incoming.text + seen.incoming.payload.model_dump_json()  # type: ignore[union-attr]
    assert "hunter2horse" not in sent and secret not in sent
    assert "REDACTED" in seen.incoming.text


async def test_an_injected_reply_moves_nothing() -> None:
    """The remote's answer asks for a hand-off and claims a holder and state: all data."""
    script = [handoff("tech", objective="inject a reply")]
    async with serving() as remote:
        team = desk(remote.url, script)
        try:
            result = await team.run("inject: router ORD-7 is down", session_id="s1")
            session = await team.session("s1")
        finally:
            await team.aclose()
    assert result.status == "completed"
    assert "transfer_to_billing" in (result.output or "")  # shown as what it is: text
    assert result.path == ["triage", "tech"]  # no hand-off to billing, no admin
    assert result.holder == "tech"
    assert session is not None and session.holder == "tech"
    assert "role" not in session.state and "role" not in result.state
    assert not session.control.get("sources", {}).get("role")
    assert not [e for e in result.events if e.type == "handoff" and e.payload.target != "tech"]


async def test_a_streaming_agent_streams_its_answer() -> None:
    async with serving(streaming=True) as remote:
        team = desk(remote.url, [handoff("tech")])
        events: list[Event] = []
        try:
            async for item in team.stream("stream: router ORD-7 is down", session_id="s1"):
                if not hasattr(item, "status"):
                    events.append(item)  # type: ignore[arg-type]
                else:
                    result = item
        finally:
            await team.aclose()
    assert result.status == "completed"  # type: ignore[union-attr]
    assert result.output == "Router restarted in three steps."  # type: ignore[union-attr]
    deltas = [e.text for e in events if e.type == "text_delta" and e.agent == "tech"]
    assert deltas == ["Router ", "restarted ", "in three steps."]


async def test_the_remote_is_the_entry_agent_too() -> None:
    async with serving() as remote:
        team = Team([RemoteAgent("tech", remote.url)], entry="tech")
        try:
            result = await team.run("router ORD-7 is down", session_id="s1")
        finally:
            await team.aclose()
    assert result.status == "completed"
    assert result.output == "Done: (no payload); state []"
    assert remote.seen[0].incoming.payload is None


async def test_a_remote_that_answers_with_a_message() -> None:
    async with serving() as remote:
        team = Team([RemoteAgent("tech", remote.url)], entry="tech")
        try:
            result = await team.run("hello, anyone?", session_id="s1")
        finally:
            await team.aclose()
    assert result.status == "completed"
    assert result.output == "Hi there, what can I do?"


async def test_a_hand_off_to_the_remote_waits_for_its_approval_first() -> None:
    """The team's approvals apply to a remote receiver unchanged: nothing is sent before a
    person signs the hand-off off."""
    model = ScriptedModel({"triage": [handoff("tech")]})
    async with serving() as remote:
        team = Team(
            [
                Agent(
                    name="triage",
                    handoffs=["tech"],
                    approve_handoffs={"tech": True},
                    model=model,
                ),
                RemoteAgent("tech", remote.url),
            ],
            entry="triage",
        )
        try:
            paused = await team.run("router ORD-7 is down", session_id="s1")
            sent_before = len(remote.seen)
            assert paused.approval is not None
            done = await team.approve("s1", paused.approval.id, by="dana")
        finally:
            await team.aclose()
    assert paused.status == "awaiting_approval" and sent_before == 0
    assert done.status == "completed" and done.path == ["triage", "tech"]
    assert len(remote.seen) == 1


async def test_a_hand_off_the_sender_may_not_make_never_reaches_the_remote() -> None:
    model = ScriptedModel({"billing": [handoff("tech"), ScriptedModel.say("I cannot")]})
    async with serving() as remote:
        team = Team(
            [Agent(name="billing", model=model), RemoteAgent("tech", remote.url)],
            entry="billing",
        )
        try:
            result = await team.run("router ORD-7 is down", session_id="s1")
        finally:
            await team.aclose()
    assert result.path == ["billing"] and not remote.seen
    assert [e.type for e in result.events if e.type == "handoff_refused"] == ["handoff_refused"]


async def test_the_answer_reaches_the_user_whole_and_the_store_masked() -> None:
    answer = "Reset done. Your one-time password: Zq8mT4vL2pXw9"
    async with serving() as remote:
        remote.replies["k1"] = (answer, {"status": "completed"}, [])
        team = desk(remote.url, [handoff("tech")])
        try:
            result = await team.run("echo k1", session_id="s1")
            stored = await team.store.get_messages("s1")
        finally:
            await team.aclose()
    assert result.output == answer  # as a model's reply: the user reads it
    kept = [m.content or "" for m in stored if m.agent == "tech"]
    assert kept and all("Zq8mT4vL2pXw9" not in text for text in kept)
    assert any("REDACTED" in text for text in kept)
