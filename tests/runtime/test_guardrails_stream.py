"""`team.stream` under output guardrails: the reply's `text_delta`s wait for the check."""

from __future__ import annotations

import asyncio

from guardrails_kit import PHONE_NO, PII_RULE, S, desk, handoff, masked_phone

from baton import Guardrail, GuardrailContext, RunResult, Verdict


async def test_deltas_wait_until_the_output_check_has_passed() -> None:
    log: list[str] = []

    async def slow_review(text: str, ctx: GuardrailContext) -> Verdict:
        log.append("check started")
        await asyncio.sleep(0.05)  # a consumer would read any delta sent before this point
        log.append("check done")
        return Verdict.allow()

    rule = Guardrail("review", "output", slow_review)
    reply = "Your invoice for order ORD-1 is issued and on its way."
    team = desk(S({"triage": [handoff("billing")], "billing": [S.say(reply)]}), guardrails=[rule])

    items = []
    async for item in team.stream("invoice?", session_id="S"):
        items.append(item)
        if getattr(item, "type", None) == "text_delta":
            log.append("delta")

    result = items[-1]
    assert isinstance(result, RunResult) and result.status == "completed"
    assert log.index("check done") < log.index("delta")
    assert "delta" not in log[: log.index("check done")]
    deltas = [i for i in items if getattr(i, "type", None) == "text_delta"]
    assert len(deltas) > 1  # the pieces as the model streamed them, released together
    assert "".join(d.text for d in deltas) == result.output == reply  # type: ignore[attr-defined]
    # they come before the run's end, as without a rule
    kinds = [getattr(i, "type", None) for i in items[:-1]]
    assert kinds.index("run_finished") > max(i for i, k in enumerate(kinds) if k == "text_delta")


async def test_a_rewritten_reply_streams_only_as_the_user_reads_it() -> None:
    reply = f"Please call {PHONE_NO} today."
    team = desk(
        S({"triage": [handoff("billing")], "billing": [S.say(reply)]}),
        billing={"guardrails": [PII_RULE]},
    )

    items = [i async for i in team.stream("call me", session_id="S")]

    deltas = [i for i in items if getattr(i, "type", None) == "text_delta"]
    assert [d.text for d in deltas] == [f"Please call {masked_phone()} today."]  # type: ignore[attr-defined]
    assert all(PHONE_NO not in d.text for d in deltas)  # type: ignore[attr-defined]


async def test_a_blocked_reply_streams_no_text_at_all() -> None:
    def block(text: str, ctx: GuardrailContext) -> Verdict:
        return Verdict.block("off-topic")

    team = desk(
        S({"triage": [S.say("Here is a poem about pirates ...")]}),
        guardrails=[Guardrail("topic", "output", block, message="Let's stay on your order.")],
    )

    items = [i async for i in team.stream("write a poem", session_id="S")]

    assert [i for i in items if getattr(i, "type", None) == "text_delta"] == []
    result = items[-1]
    assert isinstance(result, RunResult)
    assert (result.status, result.output) == ("blocked", "Let's stay on your order.")


async def test_a_team_without_output_rules_streams_as_before() -> None:
    def allow(text: str, ctx: GuardrailContext) -> Verdict:
        return Verdict.allow()

    reply = "Your order shipped yesterday."
    team = desk(S({"triage": [S.say(reply)]}), guardrails=[Guardrail("screen", "input", allow)])

    items = [i async for i in team.stream("order?", session_id="S")]

    kinds = [getattr(i, "type", None) for i in items[:-1]]
    deltas = [i for i in items if getattr(i, "type", None) == "text_delta"]
    assert "".join(d.text for d in deltas) == reply  # type: ignore[attr-defined]
    # streamed live: the pieces come before the model_called event of the answer
    assert kinds.index("text_delta") < kinds.index("model_called")
