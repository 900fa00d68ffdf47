"""The LLM judge's answer: a constrained choice with a confidence, the conversation's last
turns in its prompt, and the fitted gate (off, or a confidence threshold)."""

from __future__ import annotations

from typing import Any

import pytest

from baton import ScriptedModel
from baton.core.messages import Message
from baton.models.base import ModelRequest, ModelResponse
from baton.routing import UNKNOWN, LLMJudge, Route, Router, TierVerdict
from baton.routing.judge import CONFIDENCE, recent_turns

S = ScriptedModel
ROUTES = [
    Route("billing", ("where is my invoice", "我要退款"), "Invoices, refunds.", "Servers."),
    Route("orders", ("where is my parcel", "我的订单到哪了"), "Deliveries.", ""),
    Route("tech_support", ("my server is down",), "Servers, outages.", "Invoices."),
]


class Ranked:
    """A tier that abstains with a fixed ranking (what the semantic tier hands the judge)."""

    name = "semantic"

    def bind(self, routes: Any) -> None:
        pass

    async def decide(self, text: str, history: Any, context: Any, previous: Any) -> TierVerdict:
        return TierVerdict(self.name, None, 0.4, [("orders", 0.4), ("billing", 0.3)])


def router(model: Any, **judge: Any) -> tuple[Router, LLMJudge]:
    tier = LLMJudge(model, **judge)
    return Router([Ranked(), tier], fallback="human", routes=ROUTES), tier


async def test_the_judge_sees_the_last_turns_of_the_conversation() -> None:
    model = S([S.say('{"route": "orders", "confidence": "high"}')])
    r, _ = router(model, turns=2)
    history = [
        Message(role="system", content="you are the desk"),
        {"role": "user", "content": "我上周买了一台显示器"},
        Message(role="assistant", content="好的，请问有什么问题？"),
        Message(role="tool", content='{"raw": "record"}'),
        "它什么时候到？  还没发货吗",
    ]
    decision = await r.route("还没到", history=history)
    assert (decision.target, decision.tier) == ("orders", "llm")
    system = model.requests[0].messages[0].content or ""
    assert "Conversation so far" in system
    assert "assistant: 好的，请问有什么问题？" in system
    assert "user: 它什么时候到？ 还没发货吗" in system  # whitespace folded
    assert "显示器" not in system  # only the last two turns
    assert "you are the desk" not in system and "record" not in system
    assert model.requests[0].messages[-1].content == "还没到"  # the request itself, last


def test_recent_turns_are_cut_and_optional() -> None:
    long = "退" * 1000
    (turn,) = recent_turns([long], 4)
    assert turn[0] == "user" and len(turn[1]) == 300 and turn[1].endswith("…")
    assert recent_turns(None, 4) == [] and recent_turns(["hi"], 0) == []


async def test_without_history_the_prompt_has_no_conversation() -> None:
    model = S([S.say('{"route": "billing", "confidence": "medium"}')])
    r, _ = router(model)
    decision = await r.route("I was charged twice")
    assert decision.target == "billing"
    assert "Conversation so far" not in (model.requests[0].messages[0].content or "")
    assert "(medium)" in decision.verdicts[-1].detail


async def test_the_answer_is_constrained_to_candidates_unknown_and_a_confidence() -> None:
    model = S([S.say('{"route": "unknown", "confidence": "high"}')])
    r, _ = router(model)
    decision = await r.route("tell me a joke")
    schema = model.requests[0].output_schema
    assert schema is not None
    assert schema["properties"]["route"]["enum"] == ["billing", "orders", UNKNOWN]  # routes' order
    assert schema["properties"]["confidence"]["enum"] == list(CONFIDENCE)
    assert schema["required"] == ["route", "confidence"]
    assert decision.tier == "fallback" and decision.verdicts[-1].target == UNKNOWN


async def test_below_the_threshold_the_judge_defers_and_above_it_acts() -> None:
    model = S(
        [
            S.say('{"route": "billing", "confidence": "low"}'),
            S.say('{"route": "billing", "confidence": "high"}'),
            S.say('{"route": "billing"}'),  # no confidence: the lowest, defers
        ]
    )
    r, judge = router(model, threshold=0.5)
    low = await r.route("charged twice")
    assert low.tier == "fallback"
    assert "confidence 0.25 < threshold 0.50: defers" in low.verdicts[-1].detail
    assert (await r.route("charged twice")).target == "billing"
    assert (await r.route("charged twice")).tier == "fallback"
    assert judge.threshold == 0.5
    r2, _ = router(S([S.say('{"route": "billing"}')]))  # unfitted: any named route acts
    assert (await r2.route("charged twice")).target == "billing"


async def test_a_judge_turned_off_abstains_without_a_model_call() -> None:
    model = S([])
    r, judge = router(model)
    judge.enabled, judge.reason = False, "does not beat abstaining on the band"
    decision = await r.route("charged twice")
    assert decision.tier == "fallback" and model.requests == []
    assert decision.verdicts[-1].detail == "off: does not beat abstaining on the band"


async def test_log_probabilities_are_the_confidence_when_the_model_gives_them() -> None:
    class WithLogprobs:
        name = "logprobs"

        async def generate(self, request: ModelRequest) -> ModelResponse:
            raw = {"choices": [{"logprobs": {"content": [{"logprob": -0.1}, {"logprob": -0.2}]}}]}
            return ModelResponse(text='{"route": "orders", "confidence": "low"}', raw=raw)

    judge = LLMJudge(WithLogprobs())
    judge.bind(ROUTES)
    answer = await judge.ask("where is it", None, [])
    assert answer.route == "orders"
    assert answer.confidence == pytest.approx(0.7408, abs=1e-3)  # exp(-0.3), not "low"


def test_turns_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="turns"):
        LLMJudge(S([]), turns=-1)


async def test_a_team_routes_a_later_message_with_the_conversation_so_far() -> None:
    """After an escalation the next message is routed again: the judge reads the turns
    before it, not only the new message."""
    from baton import Agent, Team

    judge_model = S(
        [
            S.say('{"route": "unknown", "confidence": "high"}'),
            S.say('{"route": "orders", "confidence": "high"}'),
        ]
    )
    r, _ = router(judge_model)
    agents = [Agent(name="billing"), Agent(name="orders"), Agent(name="tech_support")]
    team = Team(agents, entry=r, model=S([S.say("Your parcel is on its way.")]), fallback="human")
    first = await team.run("我上周买了一台显示器，想问问", session_id="H1")
    assert first.status == "escalated"
    second = await team.run("它什么时候到？", session_id="H1")
    assert second.path == ["orders"]
    system = judge_model.requests[1].messages[0].content or ""
    assert "Conversation so far" in system and "我上周买了一台显示器" in system
    assert judge_model.requests[1].messages[-1].content == "它什么时候到？"
    first_system = judge_model.requests[0].messages[0].content or ""
    assert "Conversation so far" not in first_system  # a new session has no earlier turns
