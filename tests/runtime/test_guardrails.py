"""Guardrails travel with the baton: input rules check the user's message before the holder
answers, output rules check the reply before the user reads it, and a hand-off can never leave
a rule behind (`baton.runtime.guardrails`)."""

from __future__ import annotations

from typing import Any

import pytest
from guardrails_kit import (
    BLOCKED,
    ID_NO,
    INJECTION,
    INJECTION_ZH,
    JAILBREAK_RULE,
    PHONE_NO,
    PII_RULE,
    S,
    asked,
    desk,
    handoff,
    masked_phone,
)
from runtime_kit import of_type

from baton import Agent, Guardrail, GuardrailContext, MetricsSink, Team, Verdict
from baton.routing import Router, Rules


# ------------------------------------------------------------------ input rules
@pytest.mark.parametrize("message", [INJECTION, INJECTION_ZH, "x" * 100_000 + INJECTION])
async def test_an_injected_jailbreak_is_blocked_before_any_model_reads_it(message: str) -> None:
    model = S({"triage": [S.say("sure, refunding everything")]})
    metrics = MetricsSink()
    team = desk(model, guardrails=[JAILBREAK_RULE], sinks=[metrics])

    result = await team.run(message, session_id="S", user_id="U")

    assert result.status == "blocked"
    assert result.output == BLOCKED
    assert result.error is not None and "'no_jailbreak'" in result.error
    assert "prompt injection" in result.error
    assert model.requests == []  # the holder never saw the message
    [trip] = of_type(result.events, "guardrail_tripped")
    assert (trip.guardrail, trip.stage, trip.agent, trip.failed) == (
        "no_jailbreak",
        "input",
        "triage",
        False,
    )
    assert "prompt injection" in trip.reason
    assert of_type(result.events, "run_finished")[0].status == "blocked"
    sample = metrics.registry.get_sample_value
    labels = {"guardrail": "no_jailbreak", "stage": "input"}
    assert sample("baton_guardrail_trips_total", labels) == 1
    assert sample("baton_runs_total", {"status": "blocked"}) == 1
    # the audit keeps what the user sent; the transcript withholds it from every later view
    stored = await team.store.get_events(session_id="S")
    assert [e.type for e in stored] == [e.type for e in result.events]
    assert message[-20:] in of_type(stored, "run_started")[0].message
    messages = await team.store.get_messages("S")
    assert [(m.role, m.content) for m in messages] == [
        ("user", "[withheld: this message was blocked by guardrail 'no_jailbreak']"),
        ("assistant", BLOCKED),
    ]


async def test_a_blocked_message_never_reaches_a_later_view() -> None:
    model = S({"triage": [S.say("How can I help?")]})
    team = desk(model, guardrails=[JAILBREAK_RULE], triage={"context": "full"})
    assert (await team.run(INJECTION, session_id="S")).status == "blocked"

    result = await team.run("what did I ask before?", session_id="S")

    assert result.status == "completed"
    seen = "\n".join(m.content or "" for m in model.requests[0].messages)
    assert "refund every order" not in seen
    assert "withheld" in seen


async def test_a_clean_message_passes_and_the_rule_runs_once_per_run() -> None:
    calls: list[tuple[str, str]] = []

    def counted(text: str, ctx: GuardrailContext) -> Verdict:
        calls.append((ctx.agent, text))
        return Verdict.allow()

    rule = Guardrail("counted", "input", counted)
    model = S({"triage": [handoff("billing")], "billing": [S.say("Your invoice is issued.")]})
    team = desk(model, guardrails=[rule])

    result = await team.run("where is my invoice?", session_id="S", user_id="U")

    assert (result.status, result.output) == ("completed", "Your invoice is issued.")
    assert calls == [("triage", "where is my invoice?")]  # not again when billing takes over


async def test_the_rule_of_an_agent_that_receives_the_baton_later_checks_the_message() -> None:
    model = S({"triage": [handoff("billing")], "billing": [S.say("refunded everything")]})
    team = desk(model, billing={"guardrails": [JAILBREAK_RULE]})

    result = await team.run(INJECTION, session_id="S")

    assert result.status == "blocked"
    assert result.path == ["triage", "billing"]
    assert asked(model, "triage") == 1 and asked(model, "billing") == 0
    [trip] = of_type(result.events, "guardrail_tripped")
    assert (trip.agent, trip.stage) == ("billing", "input")
    assert "agent_started" not in [e.type for e in result.events if e.agent == "billing"]


async def test_the_first_holders_rules_stay_in_force_after_the_baton_moves_on() -> None:
    model = S(
        {
            "triage": [handoff("billing")],
            "billing": [S.say(f"Call us on {PHONE_NO}."), S.say("never said")],
        }
    )
    team = desk(model, triage={"guardrails": [JAILBREAK_RULE, PII_RULE]})

    first = await team.run("my invoice is wrong", session_id="S")

    # billing has no rule of its own: triage's output rule still reads its reply
    assert first.status == "completed" and first.holder == "billing"
    assert first.output == f"Call us on {masked_phone()}."
    # the next message goes straight to billing: triage's input rule still checks it
    second = await team.run(INJECTION, session_id="S")
    assert second.status == "blocked"
    assert second.path == ["billing"]
    assert asked(model, "billing") == 1


async def test_an_edge_rule_joins_only_when_the_baton_crosses_that_edge() -> None:
    def script() -> S:
        return S(
            {
                "triage": [handoff("billing"), handoff("tech")],
                "billing": [S.say(f"billing: {PHONE_NO}")],
                "tech": [S.say(f"tech: {PHONE_NO}")],
            }
        )

    model = script()
    team = desk(model, triage={"handoff_guardrails": {"billing": [PII_RULE]}})

    crossed = await team.run("invoice", session_id="A")
    other = await team.run("server", session_id="B")

    assert crossed.output == f"billing: {masked_phone()}"
    assert other.output == f"tech: {PHONE_NO}"  # the edge to tech carries no rule


async def test_an_edge_rule_still_holds_messages_later_after_more_hand_offs() -> None:
    """Run 1 crosses triage -> billing (the edge brings the PII rule); run 2 goes on to tech;
    run 3 continues with tech: the rule the edge brought is still in force."""
    model = S(
        {
            "triage": [handoff("billing")],
            "billing": [S.say("noted"), handoff("tech")],
            "tech": [S.say("on it"), S.say(f"call me: {PHONE_NO}")],
        }
    )
    team = desk(model, triage={"handoff_guardrails": {"billing": [PII_RULE]}})
    first = await team.run("invoice", session_id="S")
    second = await team.run("now the server", session_id="S")
    third = await team.run("and your number?", session_id="S")
    assert (first.path, second.path, third.path) == (
        ["triage", "billing"],
        ["billing", "tech"],
        ["tech"],
    )
    assert third.output == f"call me: {masked_phone()}"
    session = await team.session("S")
    assert session is not None and session.control["guardrails"] == ["mask_pii"]


# ------------------------------------------------------------------ output rules
async def test_a_pii_rule_rewrites_phone_and_id_numbers_in_the_reply_and_the_transcript() -> None:
    reply = f"已为您登记：手机 {PHONE_NO}，身份证 {ID_NO}。"
    model = S({"triage": [handoff("billing")], "billing": [S.say(reply), S.say("好的")]})
    metrics = MetricsSink()
    team = desk(model, guardrails=[PII_RULE], sinks=[metrics])

    result = await team.run("帮我登记", session_id="S")

    assert result.status == "completed"
    assert result.output == "已为您登记：手机 138****8000，身份证 1101**********002X。"
    [rewrote] = of_type(result.events, "guardrail_rewrote")
    assert (rewrote.guardrail, rewrote.agent) == ("mask_pii", "billing")
    sample = metrics.registry.get_sample_value
    assert sample("baton_guardrail_rewrites_total", {"guardrail": "mask_pii"}) == 1
    assert of_type(result.events, "run_finished")[0].output == result.output
    stored = [m.content for m in await team.store.get_messages("S") if m.role == "assistant"]
    assert PHONE_NO not in "".join(c or "" for c in stored)
    assert stored[-1] == result.output
    # the next turn's view shows the user's reply as it was read, masked
    await team.run("谢谢", session_id="S")
    seen = "\n".join(m.content or "" for m in model.requests[-1].messages)
    assert masked_phone() in seen and PHONE_NO not in seen


async def test_a_blocked_reply_is_never_shown_nor_stored_as_the_answer() -> None:
    def no_refund_promises(text: str, ctx: GuardrailContext) -> Verdict:
        if "guarantee" in text.lower():
            return Verdict.block("promises a refund")
        return Verdict.allow()

    rule = Guardrail("no_promises", "output", no_refund_promises, message="A colleague follows up.")
    model = S({"triage": [handoff("billing")], "billing": [S.say("I guarantee a full refund!")]})
    team = desk(model, billing={"guardrails": [rule]})

    result = await team.run("refund please", session_id="S")

    assert (result.status, result.output) == ("blocked", "A colleague follows up.")
    assert result.final is None and result.holder == "billing"
    [trip] = of_type(result.events, "guardrail_tripped")
    assert (trip.stage, trip.agent, trip.reason) == ("output", "billing", "promises a refund")
    assert "guarantee" not in (of_type(result.events, "run_finished")[0].output or "")
    stored = await team.store.get_messages("S")
    assert [m.content for m in stored if m.role == "assistant" and not m.tool_calls] == [
        "A colleague follows up."
    ]
    assert stored[0].content == "refund please"  # an output block keeps the user's message


async def test_output_rules_read_what_the_user_reads_in_a_run_with_several_needs() -> None:
    router = Router([Rules({"billing": [r"\binvoice\b"], "tech": [r"\bserver\b"]})])
    agents = [
        Agent(name="billing", handoffs=["tech"]),
        Agent(name="tech", handoffs=["billing"], guardrails=[PII_RULE]),
    ]
    model = S(
        {"billing": [S.say(f"Invoice sent, call {PHONE_NO}.")], "tech": [S.say("Server up.")]}
    )
    team = Team(agents, entry=router, model=model, multi_intent=True)

    result = await team.run("the invoice is wrong and the server is down", session_id="S")

    # tech's rule joined after billing answered; it still reads billing's part
    assert result.path == ["billing", "tech"]
    assert result.output == f"Invoice sent, call {masked_phone()}.\n\nServer up."
    answers = [
        m.content
        for m in await team.store.get_messages("S")
        if m.role == "assistant" and not m.tool_calls
    ]
    assert answers == [result.output]  # the transcript holds what the user read, once


async def test_rules_in_force_apply_in_the_order_they_joined_each_reading_the_last() -> None:
    seen: list[tuple[str, str]] = []

    def tag(name: str) -> Guardrail:
        def rewrite(text: str, ctx: GuardrailContext) -> Verdict:
            seen.append((name, text))
            return Verdict.rewrite(f"{text} <{name}>")

        return Guardrail(name, "output", rewrite)

    model = S({"triage": [handoff("billing")], "billing": [S.say("done"), S.say("again")]})
    team = desk(
        model,
        guardrails=[tag("team")],
        triage={"guardrails": [tag("triage")], "handoff_guardrails": {"billing": [tag("edge")]}},
        billing={"guardrails": [tag("billing")]},
    )

    result = await team.run("hi", session_id="S")

    assert result.output == "done <team> <triage> <edge> <billing>"
    assert [name for name, _ in seen] == ["team", "triage", "edge", "billing"]
    assert seen[-1][1] == "done <team> <triage> <edge>"
    # the next run continues with billing: the baton carried the same rules, in that order
    later = await team.run("and now?", session_id="S")
    assert later.path == ["billing"]
    assert later.output == "again <team> <triage> <edge> <billing>"


async def test_a_typed_answer_that_is_rewritten_keeps_no_value_from_before() -> None:
    from pydantic import BaseModel

    class Contact(BaseModel):
        name: str
        phone: str

    answer = f'{{"name": "王芳", "phone": "{PHONE_NO}"}}'
    model = S({"clerk": [S.say(answer)]})
    team = Team(
        [Agent(name="clerk", output_type=Contact, guardrails=[PII_RULE])],
        entry="clerk",
        model=model,
    )

    result = await team.run("who?", session_id="S")

    assert result.status == "completed"
    assert result.final == Contact(name="王芳", phone=masked_phone())
    assert PHONE_NO not in (result.output or "")


# ------------------------------------------------------------------ escalations and pauses
async def test_the_fallback_agents_answer_is_checked_and_its_rules_join() -> None:
    from baton import Guards

    model = S(
        {
            "triage": [handoff("billing")],
            "billing": [handoff("triage")],  # a loop the hop guard stops
            "tech": [S.say(f"A person calls you back on {PHONE_NO}.")],
        }
    )
    team = desk(
        model,
        fallback="tech",
        guards=Guards(max_hops=1),
        billing={"guardrails": [PII_RULE]},
    )

    result = await team.run("invoice", session_id="S")

    assert result.status == "escalated" and result.path[-1] == "tech"
    assert result.output == f"A person calls you back on {masked_phone()}."


async def test_rules_in_force_survive_an_approval_pause() -> None:
    from baton import tool

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id: Order number.
        """
        return f"refunded {order_id}; receipt sent to {PHONE_NO}"

    model = S(
        {
            "triage": [handoff("billing", state={"order_id": "ORD-1"})],
            "billing": [S.call("refund", order_id="ORD-1"), S.say(f"Done: receipt to {PHONE_NO}.")],
        }
    )
    team = desk(model, triage={"guardrails": [PII_RULE]}, billing={"tools": [refund]})

    paused = await team.run("refund ORD-1", session_id="S")
    assert paused.status == "awaiting_approval" and paused.approval is not None

    result = await team.approve("S", paused.approval.id, by="alice")

    assert result.status == "completed"
    assert result.output == f"Done: receipt to {masked_phone()}."


# ------------------------------------------------------------------ delegating topologies
async def test_a_supervisors_answer_is_checked_and_its_workers_are_not_held_to_it() -> None:
    from baton import Supervisor

    def script(request: Any) -> Any:
        last = request.messages[-1]
        if request.agent == "lead":
            if last.role == "tool":
                return S.say(f"The courier's phone is {PHONE_NO}.")
            return S.call("ask_orders", question="the courier's phone?")
        return S.say(f"Courier: {PHONE_NO}")  # the worker answers the lead, unchecked

    desk = Supervisor(
        Agent(name="lead", guardrails=[PII_RULE]),
        workers=[Agent(name="orders", description="orders")],
        model=S(script),
        guardrails=[JAILBREAK_RULE],
    )

    result = await desk.run("who delivers my parcel?", session_id="S")

    assert result.status == "completed"
    assert result.output == f"The courier's phone is {masked_phone()}."
    assert "orders" in result.usage  # the worker ran, as a sub-run
    assert len(of_type(result.events, "guardrail_rewrote")) == 1


def test_a_workers_own_rules_are_refused_since_they_would_never_run() -> None:
    from baton import ConfigError, Supervisor

    with pytest.raises(ConfigError, match=r"workers \['orders'\] have guardrails of their own"):
        Supervisor(
            Agent(name="lead"),
            workers=[Agent(name="orders", guardrails=[PII_RULE])],
            model=S([]),
        )


async def test_a_blocked_request_delivered_again_is_answered_from_the_record() -> None:
    checks: list[str] = []

    def screen(text: str, ctx: GuardrailContext) -> Verdict:
        checks.append(text)
        return Verdict.block("not allowed")

    team = desk(S({}), guardrails=[Guardrail("screen", "input", screen, message=BLOCKED)])

    first = await team.run("hello", session_id="S", request_id="req-1")
    again = await team.run("hello", session_id="S", request_id="req-1")

    assert (first.status, again.status) == ("blocked", "blocked")
    assert again.output == BLOCKED and again.run_id == first.run_id
    assert again.error == first.error
    assert len(checks) == 1  # not run, nor checked, a second time
