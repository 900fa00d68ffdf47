"""Router tiers: order and short-circuiting, unknown -> fallback, the LLM judge's validation,
and a router-fronted Team."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from baton import Agent, ConfigError, ScriptedModel, Team, tool
from baton.routing import (
    UNKNOWN,
    LLMJudge,
    Route,
    Router,
    Rules,
    TierVerdict,
)

S = ScriptedModel
ROUTES = [
    Route("billing", ("where is my invoice", "我要退款"), "Invoices, refunds.", "Servers."),
    Route("tech_support", ("my server is down",), "Servers, outages.", "Invoices."),
    Route("orders", ("where is my parcel",), "Deliveries.", ""),
]


class FixedTier:
    """A tier that always answers the same, and counts its calls."""

    def __init__(self, name: str, target: str | None, ranked: Sequence[str] = ()) -> None:
        self.name = name
        self.target = target
        self.ranked = list(ranked)
        self.calls = 0

    def bind(self, routes: Sequence[Route]) -> None:
        self.routes = list(routes)

    async def decide(self, text: str, history: Any, context: Any, previous: Any) -> TierVerdict:
        self.calls += 1
        return TierVerdict(self.name, self.target, 0.5, [(n, 0.5) for n in self.ranked])


async def test_first_confident_tier_wins_and_later_tiers_are_not_asked() -> None:
    first, second = FixedTier("a", None), FixedTier("b", "orders")
    third = FixedTier("c", "billing")
    router = Router([first, second, third], routes=ROUTES)
    decision = await router.route("anything")
    assert (decision.target, decision.tier) == ("orders", "b")
    assert (first.calls, second.calls, third.calls) == (1, 1, 0)
    assert [v.tier for v in decision.verdicts] == ["a", "b"]
    assert decision.latency_ms >= 0


async def test_unknown_goes_to_the_fallback_at_once() -> None:
    later = FixedTier("later", "billing")
    router = Router([FixedTier("a", UNKNOWN), later], fallback="human", routes=ROUTES)
    decision = await router.route("what is the meaning of life")
    assert (decision.target, decision.tier) == ("human", "fallback")
    assert decision.unknown and later.calls == 0


async def test_all_tiers_abstaining_falls_back_and_a_failing_tier_abstains() -> None:
    class Boom(FixedTier):
        async def decide(self, *a: Any) -> TierVerdict:
            raise RuntimeError("encoder crashed")

    router = Router([Boom("boom", None), FixedTier("a", None, ["orders"])], fallback="orders",
                    routes=ROUTES)  # fmt: skip
    decision = await router.route("hm")
    assert (decision.target, decision.tier) == ("orders", "fallback")
    assert "encoder crashed" in decision.verdicts[0].detail
    assert decision.candidates == ["orders"]


async def test_rules_are_deterministic_regex_and_keywords_in_any_language() -> None:
    rules = Rules({"billing": [r"\binvoice\b", "发票"], "tech_support": r"srv-[a-z]{2}-\d{3}"})
    router = Router([rules], routes=ROUTES)
    assert (await router.route("Where is my INVOICE?")).target == "billing"
    assert (await router.route("请帮我开发票")).target == "billing"
    assert (await router.route("reboot srv-bj-001 now")).target == "tech_support"
    decision = await router.route("hello")
    assert decision.tier == "fallback"
    assert "no rule matched" in decision.verdicts[0].detail


def test_rules_must_name_known_routes_and_be_valid_regex() -> None:
    with pytest.raises(ConfigError, match="unknown routes"):
        Router([Rules({"nobody": "x"})], routes=ROUTES)
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        Rules({"billing": "(unclosed"})


async def test_llm_judge_gets_the_top_candidates_with_description_and_examples() -> None:
    model = S([S.say('{"route": "billing"}')])
    router = Router([FixedTier("semantic", None, ["billing", "orders"]), LLMJudge(model)],
                    routes=ROUTES)  # fmt: skip
    decision = await router.route("I was charged twice")
    assert (decision.target, decision.tier) == ("billing", "llm")
    request = model.requests[0]
    system = request.messages[0].content or ""
    assert "- billing: Invoices, refunds." in system and "not for: Servers." in system
    assert "example: 我要退款" in system
    assert "tech_support" not in system  # only the semantic tier's candidates are shown
    assert request.output_schema is not None
    assert request.output_schema["properties"]["route"]["enum"] == ["billing", "orders", UNKNOWN]


async def test_llm_judge_answer_outside_the_candidates_is_rejected_and_repaired() -> None:
    model = S([S.say('{"route": "sales"}'), S.say('{"route": "orders"}')])
    router = Router([FixedTier("semantic", None, ["billing", "orders"]), LLMJudge(model)],
                    routes=ROUTES)  # fmt: skip
    decision = await router.route("where's my parcel?")
    assert decision.target == "orders"
    assert "re-ask" in decision.verdicts[-1].detail
    reask = model.requests[1]
    assert reask.reask
    assert "'sales' is not a candidate" in (reask.messages[-1].content or "")


async def test_llm_judge_that_never_answers_validly_abstains_to_the_fallback() -> None:
    model = S([S.say("billing, probably"), S.say("I think sales")])
    router = Router([LLMJudge(model, k=2)], fallback="human", routes=ROUTES)
    decision = await router.route("hmm")
    assert decision.tier == "fallback"
    assert "no valid answer" in decision.verdicts[0].detail


async def test_llm_judge_can_say_unknown() -> None:
    model = S([S.say('{"route": "unknown"}')])
    decision = await Router([LLMJudge(model)], routes=ROUTES).route("tell me a joke")
    assert decision.tier == "fallback"
    assert decision.verdicts[0].target == UNKNOWN


def test_router_without_routes_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="no routes"):
        Router([Rules({})]).route_sync("x")


# ------------------------------------------------------------------ router-fronted Team
INVOICES: list[str] = []


@tool
async def query_invoice(order_id: str) -> dict[str, str]:
    """Look up an invoice."""
    INVOICES.append(order_id)
    return {"order_id": order_id, "status": "ISSUED"}


def _team(judge_answer: str) -> tuple[Team, ScriptedModel]:
    model = S(
        {
            "router": [S.say(judge_answer)],
            "billing": [S.call("query_invoice", order_id="ORD-7"), S.say("Issued.")],
            "orders": [S.say("On its way.")],
        }
    )
    agents = [
        Agent(name="billing", description="Invoices.", examples=["invoice"], tools=[query_invoice]),
        Agent(name="orders", description="Deliveries.", examples=["parcel"]),
    ]
    router = Router([Rules({"orders": "parcel|包裹"}), LLMJudge(model)], fallback="human")
    return Team(agents, entry=router, model=model), model


async def test_a_router_fronted_team_routes_the_first_message_and_then_keeps_the_holder() -> None:
    INVOICES.clear()
    team, _ = _team('{"route": "billing"}')
    first = await team.run("I need the bill for ORD-7", session_id="S")
    assert first.path == ["billing"] and first.status == "completed"
    assert INVOICES == ["ORD-7"]
    (routed,) = [e for e in first.events if e.type == "route_decided"]
    assert (routed.target, routed.tier) == ("billing", "llm")
    assert routed.verdicts[0].startswith("rules: abstains")
    again = await team.run("thanks, and my parcel?", session_id="S")
    (kept,) = [e for e in again.events if e.type == "route_decided"]
    assert kept.tier == "session" and again.path == ["billing"]


async def test_rules_route_before_the_judge_spends_a_model_call() -> None:
    team, model = _team('{"route": "billing"}')
    result = await team.run("where is my parcel?")
    assert result.path == ["orders"]
    assert all(r.agent != "router" for r in model.requests)


async def test_unknown_requests_go_to_the_human_queue_without_an_agent_turn() -> None:
    team, model = _team('{"route": "unknown"}')
    result = await team.run("I want to sue you")
    assert result.status == "escalated"
    assert result.path == []
    assert [r.agent for r in model.requests] == ["router"]
    tickets = await team.store.list_human()
    assert len(tickets) == 1 and "no agent owns the request" in tickets[0].card.reasons[0]
    follow = await team.run("hello? my parcel", session_id=result.session_id)
    assert follow.path == ["orders"]  # routed afresh after the human escalation


def test_a_router_with_an_unknown_fallback_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="fallback"):
        Team([Agent(name="billing")], entry=Router([Rules({})], fallback="nobody"))
