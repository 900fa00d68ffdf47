"""`OTelSink`: a guardrail's trip or rewrite is a span event, never with the text it read."""

from __future__ import annotations

from baton import Agent, Guardrail, GuardrailContext, ScriptedModel, Team, Verdict
from baton.observe import OTelSink

S = ScriptedModel
SECRET = "the text the rule read: 13800138000"


def block(text: str, ctx: GuardrailContext) -> Verdict:
    return Verdict.block(f"quotes the reply: {text}")


async def test_a_blocked_reply_is_a_span_event_of_the_holders_turn_without_the_reason() -> None:
    sink = OTelSink.in_memory()
    try:
        team = Team(
            [Agent(name="desk")],
            entry="desk",
            model=S([S.say(SECRET)]),
            guardrails=[Guardrail("review", "output", block)],
            sinks=[sink],
        )
        result = await team.run("hi", session_id="S")
        assert result.status == "blocked"
        spans = sink.finished_spans()
    finally:
        sink.shutdown()
    [root] = [s for s in spans if s.parent is None]
    assert (root.attributes or {})["baton.run.status"] == "blocked"
    events = [e for s in spans for e in s.events if e.name == "baton.guardrail_tripped"]
    [trip] = events
    attrs = dict(trip.attributes or {})
    assert attrs["baton.guardrail.name"] == "review"
    assert attrs["baton.guardrail.stage"] == "output"
    assert attrs["baton.guardrail.failed"] is False
    assert all("13800138000" not in str(v) for v in attrs.values())
