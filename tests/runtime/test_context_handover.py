"""Context hand-over: policies, fetch_history, entity guard, re-routing, transfer_back, tokens."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.runtime.runtime_kit import handoff, of_type

from baton import Agent, Guards, ScriptedModel, Team, tool
from baton.core.policies import parse_policy, recent
from baton.models import ModelRequest, Step
from baton.routing import Router, Rules
from baton.runtime.summary import SUMMARY_AGENT

S = ScriptedModel
LONG = "X" * 3000  # a long raw tool output that must never leave its agent


@tool
async def lookup(order_id: str) -> str:
    """Look up an order (returns a long raw record)."""
    return json.dumps({"order_id": order_id, "raw": LONG})


def desk(model: Any, **billing: Any) -> Team:
    triage = Agent(name="triage", tools=[lookup], handoffs=["billing"])
    bill = Agent(name="billing", handoffs=["triage"], **billing)
    return Team([triage, bill], entry="triage", model=model)


async def chat_then_handoff(policy: Any, summariser: Any = None) -> tuple[S, list[Any]]:
    """Three answered exchanges with triage (one uses a long tool output), then a hand-off."""
    model = S(
        {
            "triage": [
                S.say("Hello! How can I help?"),
                S.call("lookup", order_id="ORD-7"),
                S.say("ORD-7 ships Friday."),
                S.say("Sure, noted."),
                handoff("billing", state={"order_id": "ORD-7"}),
            ],
            "billing": [S.say("Here is the invoice.")],
            SUMMARY_AGENT: [S.say("User asked about ORD-7 (ships Friday); now wants its invoice.")],
        }
    )
    team = desk(model, context=policy)
    if summariser is not None:
        team._config.summariser = summariser
    for text in ["hi", "where is ORD-7?", "thanks, also a gift note", "now the invoice please"]:
        await team.run(text, session_id="S")
    billing = [r for r in model.requests if r.agent == "billing"]
    return model, billing[0].messages


def said(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if m.role != "system"]


async def test_structured_shows_payload_and_the_message_only() -> None:
    _, view = await chat_then_handoff("structured")
    assert said(view) == ["now the invoice please"]
    assert "ORD-7" in (view[0].content or "")  # the payload carries the slot
    assert all(LONG not in (m.content or "") for m in view)


async def test_recent_n_adds_the_last_exchanges() -> None:
    _, view = await chat_then_handoff(recent(1))
    assert said(view) == ["thanks, also a gift note", "Sure, noted.", "now the invoice please"]
    _, view2 = await chat_then_handoff("recent(2)")
    assert said(view2)[:2] == ["where is ORD-7?", "ORD-7 ships Friday."]


async def test_full_shows_every_turn_but_never_other_agents_scratch() -> None:
    _, view = await chat_then_handoff("full")
    assert said(view) == [
        "hi",
        "Hello! How can I help?",
        "where is ORD-7?",
        "ORD-7 ships Friday.",
        "thanks, also a gift note",
        "Sure, noted.",
        "now the invoice please",
    ]
    assert all(m.role in ("system", "user", "assistant") and not m.tool_calls for m in view)
    assert all(LONG not in (m.content or "") for m in view)


async def test_summary_policy_puts_a_model_made_summary_in_the_payload() -> None:
    model, view = await chat_then_handoff("summary")
    system = view[0].content or ""
    assert '  summary of the conversation so far: "User asked about ORD-7' in system
    asked = next(r for r in model.requests if r.agent == SUMMARY_AGENT)
    assert not asked.tools
    transcript = asked.messages[-1].content or ""
    assert "where is ORD-7?" in transcript and "Result of lookup" in transcript


async def test_a_failing_summariser_costs_the_summary_not_the_hand_off() -> None:
    broken = S([S.fail("summariser is down")])
    _, view = await chat_then_handoff("summary", summariser=broken)
    assert "Summary of the conversation" not in (view[0].content or "")
    assert said(view) == ["now the invoice please"]


async def test_the_source_can_choose_the_policy_per_target() -> None:
    model = S({"triage": [S.say("hi"), handoff("billing")], "billing": [S.say("ok")]})
    triage = Agent(name="triage", handoffs=["billing"], handoff_context={"billing": "full"})
    team = Team([triage, Agent(name="billing")], entry="triage", model=model)
    await team.run("first", session_id="S")
    result = await team.run("second", session_id="S")
    view = next(r for r in model.requests if r.agent == "billing").messages
    assert said(view) == ["first", "hi", "second"]
    assert result.usage_by_handoff[0].policy == "full"


def test_policy_names_are_validated() -> None:
    assert str(parse_policy("recent(5)")) == "recent(5)"
    assert str(parse_policy(" Recent ")) == "recent(3)"
    with pytest.raises(ValueError, match="unknown context policy"):
        parse_policy("everything")
    with pytest.raises(ValueError):
        Agent(name="a", context="recent(0)")
    with pytest.raises(Exception, match="not in its handoffs"):
        Team([Agent(name="a", handoff_context={"b": "full"}), Agent(name="b")], entry="a")


async def test_fetch_history_returns_earlier_turns_on_demand() -> None:
    def script(req: ModelRequest) -> Step:
        if req.agent == "triage":
            return S.say("noted") if "hand" not in req.messages[-1].content else handoff("billing")
        tools = [m for m in req.messages if m.role == "tool"]
        if not tools:
            return S.call("fetch_history", query="退款 ORD-9", limit=2)
        if len(tools) == 1:
            return S.call("fetch_history", ref="other-session")
        return S.say("done")

    model = S(script)
    team = desk(model)
    await team.run("我想申请退款, order ORD-9", session_id="S")
    await team.run("something else entirely", session_id="S")
    result = await team.run("please hand me over", session_id="S")
    assert result.path == ["triage", "billing"]
    tool_msgs = [m for m in model.requests[-1].messages if m.role == "tool"]
    found = json.loads(tool_msgs[0].content or "")
    assert [t["text"] for t in found["turns"]] == ["我想申请退款, order ORD-9"]
    assert "unknown history reference" in (tool_msgs[1].content or "")
    billing_specs = {s.name for s in model.requests[-1].tools}
    assert "fetch_history" in billing_specs
    triage_specs = {s.name for s in model.requests[0].tools}
    assert "fetch_history" not in triage_specs  # only receivers get it


async def test_entity_guard_carries_an_id_said_three_turns_earlier() -> None:
    model = S(
        {
            "triage": [
                S.say("Let me see."),
                S.say("Anything else?"),
                S.say("Ok."),
                handoff("billing", state={}),  # the source forgot the id
            ],
            "billing": [S.say("Invoice sent.")],
        }
    )
    team = desk(model)
    for text in [
        "我的订单号是 ORD-202607-99",
        "also email me at li.lei@example.cn",
        "thanks",
        "发票",
    ]:
        result = await team.run(text, session_id="S")
    system = next(r for r in model.requests if r.agent == "billing").messages[0].content or ""
    assert "ORD-202607-99" in system and "li.lei@example.cn" in system
    added = [e for e in of_type(result.events, "state_updated") if e.source == "entity_guard"]
    assert len(added) == 1 and added[0].slots["order_id"] == "ORD-202607-99"
    assert result.handoffs[0].state["order_id"] == "ORD-202607-99"
    assert result.state["order_id"] == "ORD-202607-99"


async def test_entity_guard_can_be_turned_off() -> None:
    model = S({"triage": [S.say("ok"), handoff("billing")], "billing": [S.say("?")]})
    team = Team(
        [Agent(name="triage", handoffs=["billing"]), Agent(name="billing")],
        entry="triage",
        model=model,
        guards=Guards(entity_guard=False),
    )
    await team.run("order ORD-55", session_id="S")
    result = await team.run("invoice please", session_id="S")
    assert result.handoffs[0].state == {}


def refusing_desk(model: Any, router: bool, **kw: Any) -> Team:
    agents = [
        Agent(name="triage", handoffs=["billing", "tech"]),
        Agent(name="billing", handoffs=["triage"]),
        Agent(name="tech", handoffs=["triage"]),
        Agent(name="accounts", description="passwords and logins"),
    ]
    entry: Any = Router([Rules({"triage": r".*"})]) if router else "triage"
    return Team(agents, entry=entry, model=model, **kw)


REFUSALS = {
    "triage": [handoff("billing"), handoff("tech")],
    "billing": [handoff("triage", reason="not mine")],
    "tech": [handoff("triage", reason="not mine either")],
    "accounts": [S.say("Password reset link sent.")],
}


async def test_two_refusals_reroute_through_the_router() -> None:
    model = S(dict(REFUSALS))
    team = refusing_desk(model, router=True)
    team.policy.router.route = _route_to("accounts", team.policy.router.route)  # type: ignore
    result = await team.run("I cannot log in", session_id="S")
    assert result.status == "completed"
    assert result.path == ["triage", "billing", "triage", "tech", "accounts"]
    assert result.output == "Password reset link sent."
    rerouted = [e for e in of_type(result.events, "route_decided") if e.tier.startswith("reroute")]
    assert len(rerouted) == 1 and rerouted[0].target == "accounts"


async def test_two_refusals_without_a_router_go_to_the_fallback() -> None:
    model = S(dict(REFUSALS))
    team = refusing_desk(model, router=False, guards=Guards(max_visits=3))
    result = await team.run("I cannot log in", session_id="S")
    assert result.status == "escalated"
    assert [e.guard for e in of_type(result.events, "guard_tripped")] == ["refusals"]
    assert result.path == ["triage", "billing", "triage", "tech"]


async def test_without_a_router_a_loop_guard_that_trips_anyway_names_the_bounce() -> None:
    model = S(dict(REFUSALS))
    result = await refusing_desk(model, router=False).run("I cannot log in", session_id="S")
    assert result.status == "escalated"
    assert [e.guard for e in of_type(result.events, "guard_tripped")] == ["max_visits"]


def _route_to(target: str, original: Any) -> Any:
    """The first call routes by rules (to triage); a re-route picks `target` by its rules."""
    calls = {"n": 0}

    async def route(text: str, history: Any = None, context: Any = None) -> Any:
        calls["n"] += 1
        decision = await original(text, history=history, context=context)
        if calls["n"] > 1:
            decision.target = target
        return decision

    return route


async def test_transfer_back_returns_the_baton_to_who_handed_over() -> None:
    model = S(
        {
            "triage": [handoff("billing"), S.say("Back with triage: anything else?")],
            "billing": [
                S.call("lookup", order_id="ORD-1"),
                S.call(
                    "transfer_back",
                    reason="done",
                    objective="continue",
                    completed_steps=["looked up ORD-1"],
                ),
            ],
        }
    )
    triage = Agent(name="triage", handoffs=["billing"])
    billing = Agent(name="billing", tools=[lookup], transfer_back=True)
    team = Team([triage, billing], entry="triage", model=model)
    result = await team.run("check ORD-1", session_id="S")
    assert result.path == ["triage", "billing", "triage"]
    assert result.output == "Back with triage: anything else?"
    assert result.handoffs[1].completed_steps == ["looked up ORD-1"]


async def test_transfer_back_with_nobody_to_return_to_is_refused() -> None:
    model = S([S.call("transfer_back", reason="x", objective="y"), S.say("ok")])
    solo = Agent(name="solo", transfer_back=True)
    result = await Team([solo], entry="solo", model=model).run("hi", session_id="S")
    assert result.output == "ok"
    refused = of_type(result.events, "handoff_refused")
    assert refused and "no agent handed you the baton" in refused[0].reason
    assert "transfer_back" not in {s.name for s in model.requests[0].tools}


async def test_token_accounting_per_handoff_and_policy() -> None:
    model = S(
        {
            "triage": [S.say("hi"), handoff("billing")],
            "billing": [S.say("invoice")],
        }
    )
    team = desk(model, context="full")
    await team.run("hello there", session_id="S")
    result = await team.run("invoice for ORD-1", session_id="S")
    [h] = result.usage_by_handoff
    assert (h.source, h.target, h.policy, h.hop) == ("triage", "billing", "full", 1)
    billing_calls = [e for e in of_type(result.events, "model_called") if e.agent == "billing"]
    assert h.usage.input_tokens == sum(e.usage.input_tokens for e in billing_calls) > 0
    started = [e for e in of_type(result.events, "agent_started") if e.agent == "billing"]
    assert started[0].policy == "full" and started[0].context_tokens == h.context_tokens > 0
    assert result.usage_by_policy["full"].input_tokens == h.usage.input_tokens
    assert result.events[-1].handoff_usage == result.usage_by_handoff
