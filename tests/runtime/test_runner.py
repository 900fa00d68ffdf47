"""The kernel (`baton.runtime.runner`): turns, tool calls, parsing, hand-offs, sessions, events."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from runtime_kit import ListSink, content, handoff, of_type, tool_messages, types

from baton import Agent, Guards, ModelRequest, ModelResponse, ScriptedModel, Team, Usage, tool
from baton.core.errors import ParseError
from baton.core.events import event_from_json
from baton.models.parsing import parse_json_object

S = ScriptedModel


# ---------------------------------------------------------------- a plain answer, events


async def test_single_agent_answer_completes_with_minimal_event_sequence() -> None:
    model = S([S.say("Hello there.")])
    team = Team([Agent(name="solo")], entry="solo", model=model)

    result = await team.run("hi", session_id="S1", user_id="u1")

    assert result.status == "completed"
    assert result.output == "Hello there."
    assert result.path == ["solo"]
    assert result.holder == "solo"
    assert result.error is None and result.escalation is None
    assert types(result.events) == [
        "run_started",
        "route_decided",
        "agent_started",
        "model_called",
        "run_finished",
    ]
    route = of_type(result.events, "route_decided")[0]
    assert (route.target, route.tier) == ("solo", "entry")
    finished = result.events[-1]
    assert finished.status == "completed"
    assert (finished.output, finished.path) == ("Hello there.", ["solo"])


async def test_events_in_order_for_a_handoff_with_a_tool_call(desk: Any) -> None:
    model = S(
        {
            "triage": [handoff("billing", state={"order_id": "ORD-1"})],
            "billing": [S.call("query_invoice", order_id="ORD-1"), S.say("Issued.")],
        }
    )
    team = desk(model)

    result = await team.run("invoice for ORD-1?", session_id="S1")

    assert result.status == "completed"
    assert types(result.events) == [
        "run_started",
        "route_decided",
        "agent_started",  # triage
        "model_called",
        "handoff",
        "state_updated",  # order_id from the payload
        "agent_started",  # billing
        "model_called",
        "tool_called",  # same order_id: no state change, no event
        "model_called",
        "run_finished",
    ]
    agents = [e.agent for e in of_type(result.events, "agent_started")]
    assert agents == ["triage", "billing"]
    hops = [e.hop for e in result.events]
    assert hops == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]


async def test_every_event_carries_ids_round_trips_and_reaches_sinks_and_store(desk: Any) -> None:
    sink = ListSink()
    late_sink = ListSink()
    model = S(
        {
            "triage": [handoff("billing", state={"order_id": "ORD-1"})],
            "billing": [S.call("query_invoice", order_id="ORD-1"), S.say("Issued.")],
        }
    )
    team = desk(model, sinks=[sink])
    team.add_sink(late_sink)

    result = await team.run("invoice for ORD-1?", session_id="S1")

    assert result.events
    for e in result.events:
        assert e.trace_id == result.trace_id
        assert e.session_id == result.session_id == "S1"
        assert e.run_id == result.run_id
        assert event_from_json(e.model_dump_json()) == e
    assert [e.id for e in sink.events] == [e.id for e in result.events]
    assert sink.events == result.events
    assert late_sink.events == result.events
    stored = await team.store.get_events(session_id="S1")
    assert [e.id for e in stored] == [e.id for e in result.events]


async def test_usage_is_summed_per_agent_over_its_model_calls(desk: Any) -> None:
    model = S(
        {
            "triage": [handoff("billing", state={"order_id": "ORD-1"})],
            "billing": [S.call("query_invoice", order_id="ORD-1"), S.say("Issued, 299 CNY.")],
        }
    )
    team = desk(model)

    result = await team.run("invoice for ORD-1?", session_id="S1")

    calls = of_type(result.events, "model_called")
    assert [c.agent for c in calls] == ["triage", "billing", "billing"]
    for agent in ("triage", "billing"):
        mine = [c.usage for c in calls if c.agent == agent]
        assert result.usage[agent].input_tokens == sum(u.input_tokens for u in mine)
        assert result.usage[agent].output_tokens == sum(u.output_tokens for u in mine)
    billing_calls = [c.usage for c in calls if c.agent == "billing"]
    assert all(u.total_tokens > 0 for u in billing_calls)
    assert result.usage["billing"].total_tokens > billing_calls[-1].total_tokens
    assert "tech" not in result.usage
    total = result.total_usage
    assert total.total_tokens == sum(c.usage.total_tokens for c in calls)
    assert result.events[-1].usage == result.usage


# ---------------------------------------------------------------- ordinary tools


async def test_unknown_tool_gets_an_error_naming_available_tools_and_run_continues(
    desk: Any,
) -> None:
    model = S(
        {
            "triage": [handoff("billing")],
            "billing": [S.call("delete_everything", confirm=True), S.say("Sorry, I cannot.")],
        }
    )
    team = desk(model)

    result = await team.run("wipe it", session_id="S1")

    assert result.status == "completed"
    assert result.output == "Sorry, I cannot."
    (msg,) = await tool_messages(team, "S1", "delete_everything")
    got = content(msg)
    assert got["ok"] is False
    assert "unknown tool 'delete_everything'" in got["error"]
    assert (
        "available tools: fetch_history, query_invoice, transfer_to_tech, transfer_to_triage"
        in got["error"]
    )
    (ev,) = of_type(result.events, "tool_called")
    assert (ev.tool, ev.ok, ev.agent) == ("delete_everything", False, "billing")
    # the model saw the error as the answer to its call
    last = model.requests[-1].messages[-1]
    assert last.role == "tool" and last.content == msg.content


async def test_a_tool_of_another_agent_is_refused(desk: Any, calls: Any) -> None:
    # query_invoice belongs to billing; triage must not be able to call it
    model = S({"triage": [S.call("query_invoice", order_id="ORD-1"), S.say("Let me route you.")]})
    team = desk(model)

    result = await team.run("invoice ORD-1", session_id="S1")

    assert result.status == "completed"
    assert calls.invoice == []
    (msg,) = await tool_messages(team, "S1")
    assert "unknown tool 'query_invoice'" in content(msg)["error"]
    assert "transfer_to_billing" in content(msg)["error"]
    assert result.state == {}


async def test_a_raising_tool_becomes_an_error_result_and_the_run_continues() -> None:
    @tool
    async def lookup(order_id: str) -> dict[str, Any]:
        """Look up an order."""
        raise KeyError(f"no order {order_id}")

    model = S([S.call("lookup", order_id="ORD-404"), S.say("I could not find that order.")])
    team = Team([Agent(name="solo", tools=[lookup])], entry="solo", model=model)

    result = await team.run("where is ORD-404", session_id="S1")

    assert result.status == "completed"
    assert result.output == "I could not find that order."
    (msg,) = await tool_messages(team, "S1")
    # exactly the error, never a made-up result
    assert content(msg) == {"ok": False, "error": "KeyError: 'no order ORD-404'"}
    (ev,) = of_type(result.events, "tool_called")
    assert ev.ok is False and ev.error == "KeyError: 'no order ORD-404'"
    # a failed call verifies nothing: its arguments do not become state
    assert result.state == {}


async def test_invalid_tool_arguments_become_an_error_result() -> None:
    ran: list[int] = []

    @tool
    def count(n: int) -> int:
        """Count."""
        ran.append(n)
        return n

    model = S([S.call("count", n="many"), S.say("oops")])
    team = Team([Agent(name="solo", tools=[count])], entry="solo", model=model)

    result = await team.run("count", session_id="S1")

    assert result.status == "completed"
    assert ran == []
    (msg,) = await tool_messages(team, "S1")
    assert content(msg)["ok"] is False
    assert "invalid arguments for count" in content(msg)["error"]


async def test_sync_tool_runs_and_only_id_like_arguments_become_state() -> None:
    @tool
    def add(a: int, b: int, order_id: str = "", limit: int = 5, verbose: bool = False) -> int:
        """Add two numbers."""
        return a + b

    model = S([S.call("add", a=2, b=3, order_id="ORD-7", limit=9, verbose=True), S.say("5")])
    team = Team([Agent(name="solo", tools=[add])], entry="solo", model=model)

    result = await team.run("2+3 for ORD-7", session_id="S1")

    (msg,) = await tool_messages(team, "S1")
    assert msg.content == "5"
    (ev,) = of_type(result.events, "tool_called")
    assert ev.ok is True and ev.arguments["a"] == 2
    # options such as `limit` and `verbose` are not facts: only id-like arguments are kept
    assert result.state == {"order_id": "ORD-7"}


async def test_a_tool_names_the_arguments_it_records() -> None:
    @tool(records=("city", "a"))
    def add(a: int, b: int, city: str = "") -> int:
        """Add two numbers."""
        return a + b

    model = S([S.call("add", a=2, b=3, city=""), S.say("5")])
    team = Team([Agent(name="solo", tools=[add])], entry="solo", model=model)

    result = await team.run("2+3", session_id="S1")

    # the declared slots; empty strings are not recorded
    assert result.state == {"a": 2}


async def test_non_string_results_are_json_serialised_and_strings_kept_verbatim() -> None:
    @tool
    async def record() -> dict[str, Any]:
        """A structured record."""
        return {"城市": "北京", "tags": {"b", "a"}, "n": 1.5, "usage": Usage(input_tokens=2)}

    @tool
    async def plain() -> str:
        """Plain text."""
        return "just text"

    model = S([S.calls(S.call("record"), S.call("plain")), S.say("ok")])
    team = Team([Agent(name="solo", tools=[record, plain])], entry="solo", model=model)

    await team.run("go", session_id="S1")

    rec, txt = await tool_messages(team, "S1")
    assert "北京" in (rec.content or "")  # not ASCII-escaped
    assert json.loads(rec.content or "") == {
        "城市": "北京",
        "tags": ["a", "b"],
        "n": 1.5,
        "usage": {"input_tokens": 2, "output_tokens": 0, "cached_input_tokens": 0},
    }
    assert txt.content == "just text"


def _long_tool(n: int, **kw: Any) -> Any:
    @tool(**kw)
    async def dump() -> str:
        """A long result."""
        return "x" * n

    return dump


async def test_long_results_are_truncated_at_1500_with_a_visible_marker() -> None:
    model = S([S.call("dump"), S.say("ok")])
    team = Team([Agent(name="solo", tools=[_long_tool(4000)])], entry="solo", model=model)

    result = await team.run("go", session_id="S1")

    (msg,) = await tool_messages(team, "S1")
    text = msg.content or ""
    assert text.startswith("x" * 1500)
    assert "x" * 1501 not in text
    assert text.endswith("[truncated: showing 1500 of 4000 characters]")
    (ev,) = of_type(result.events, "tool_called")
    assert ev.truncated is True and ev.result_chars == 4000


async def test_result_limit_is_configurable_per_team_and_per_tool() -> None:
    model = S([S.calls(S.call("dump"), S.call("short"), S.call("fits")), S.say("ok")])
    dump = _long_tool(400)
    short = _long_tool(400, name="short", max_result_chars=50)
    fits = _long_tool(100, name="fits")
    team = Team(
        [Agent(name="solo", tools=[dump, short, fits])],
        entry="solo",
        model=model,
        max_result_chars=100,
    )

    result = await team.run("go", session_id="S1")

    m_dump, m_short, m_fits = await tool_messages(team, "S1")
    assert (m_dump.content or "").startswith("x" * 100 + "\n")
    assert "showing 100 of 400 characters" in (m_dump.content or "")
    assert (m_short.content or "").startswith("x" * 50 + "\n")
    assert "showing 50 of 400 characters" in (m_short.content or "")
    assert m_fits.content == "x" * 100  # exactly at the limit: untouched
    flags = [(e.tool, e.truncated) for e in of_type(result.events, "tool_called")]
    assert flags == [("dump", True), ("short", True), ("fits", False)]


async def test_tool_timeout_gives_an_error_result_and_the_run_goes_on() -> None:
    @tool
    async def slow_lookup(order_id: str) -> str:
        """Very slow."""
        await asyncio.sleep(5)
        return "late"

    @tool(timeout_s=0.05)
    async def own_limit() -> str:
        """Has its own, shorter limit."""
        await asyncio.sleep(5)
        return "late"

    model = S(
        [
            S.call("slow_lookup", order_id="ORD-1"),
            S.call("own_limit"),
            S.say("The system is slow, please try later."),
        ]
    )
    team = Team(
        [Agent(name="solo", tools=[slow_lookup, own_limit])],
        entry="solo",
        model=model,
        guards=Guards(tool_timeout_s=0.05),
    )

    t0 = time.perf_counter()
    result = await team.run("look up ORD-1", session_id="S1")
    assert time.perf_counter() - t0 < 2

    assert result.status == "completed"
    assert result.output == "The system is slow, please try later."
    first, second = await tool_messages(team, "S1")
    assert content(first)["ok"] is False
    assert "slow_lookup timed out after 0.05s" in content(first)["error"]
    assert "own_limit timed out after 0.05s" in content(second)["error"]
    trips = of_type(result.events, "guard_tripped")
    assert [t.guard for t in trips] == ["tool_timeout", "tool_timeout"]
    assert [e.ok for e in of_type(result.events, "tool_called")] == [False, False]
    assert "order_id" not in result.state


async def test_per_tool_timeout_never_exceeds_the_guard() -> None:
    @tool(timeout_s=60)
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(5)
        return "late"

    model = S([S.call("slow"), S.say("gave up")])
    team = Team(
        [Agent(name="solo", tools=[slow])],
        entry="solo",
        model=model,
        guards=Guards(tool_timeout_s=0.05),
    )
    t0 = time.perf_counter()
    result = await team.run("look up ORD-1", session_id="S1")
    assert time.perf_counter() - t0 < 2
    assert result.status == "completed"


# ---------------------------------------------------------------- parsing, repair and re-ask


@pytest.mark.parametrize(
    "raw",
    [
        '{"order_id": "ORD-1",}',  # trailing comma
        '```json\n{"order_id": "ORD-1"}\n```',  # code fence
        'Sure! {"order_id": "ORD-1"} hope that helps',  # chatter around the object
        "{'order_id': 'ORD-1'}",  # single quotes
    ],
)
async def test_repairable_arguments_are_repaired_without_a_reask(
    desk: Any, calls: Any, raw: str
) -> None:
    model = S(
        {
            "triage": [handoff("billing")],
            "billing": [S.raw_call("query_invoice", raw), S.say("Issued.")],
        }
    )
    team = desk(model)

    result = await team.run("invoice ORD-1", session_id="S1")

    assert result.status == "completed"
    assert calls.invoice == ["ORD-1"]
    assert len(model.requests) == 3
    assert not any(r.reask for r in model.requests)
    assert not any(e.reask for e in of_type(result.events, "model_called"))


async def test_unrepairable_arguments_are_reasked_once_quoting_the_exact_error(
    desk: Any, calls: Any
) -> None:
    bad = "order_id=ORD-1"
    with pytest.raises(ParseError) as err:
        parse_json_object(bad)
    model = S(
        {
            "triage": [handoff("billing")],
            "billing": [
                S.raw_call("query_invoice", bad),
                S.call("query_invoice", order_id="ORD-1"),
                S.say("Issued."),
            ],
        }
    )
    team = desk(model)

    result = await team.run("invoice ORD-1", session_id="S1")

    assert result.status == "completed"
    assert result.output == "Issued."
    assert calls.invoice == ["ORD-1"]
    first, reask = model.requests[1], model.requests[2]
    assert not first.reask and reask.reask
    assert reask.messages[: len(first.messages)] == first.messages
    bad_turn, error_answer, nudge = reask.messages[len(first.messages) :]
    assert bad_turn.role == "assistant"
    assert bad_turn.tool_calls and bad_turn.tool_calls[0].arguments == bad
    assert error_answer.role == "tool"
    assert error_answer.tool_call_id == bad_turn.tool_calls[0].id
    assert nudge.role == "user"
    assert f"query_invoice: {err.value}" in (nudge.content or "")
    assert [e.reask for e in of_type(result.events, "model_called")] == [
        False,
        False,
        True,
        False,
    ]


async def test_when_the_reask_fails_too_the_call_gets_an_error_and_the_run_returns(
    desk: Any, calls: Any
) -> None:
    model = S(
        {
            "triage": [handoff("billing")],
            "billing": [
                S.raw_call("query_invoice", "order_id=ORD-1"),
                S.raw_call("query_invoice", "order id is ORD-1"),
                S.say("I could not read the order number, could you repeat it?"),
            ],
        }
    )
    team = desk(model)

    result = await team.run("invoice ORD-1", session_id="S1")

    assert result.status == "completed"
    assert result.output == "I could not read the order number, could you repeat it?"
    assert calls.invoice == []
    reasks = [e for e in of_type(result.events, "model_called") if e.reask]
    assert len(reasks) == 1  # exactly one re-ask
    (msg,) = await tool_messages(team, "S1", "query_invoice")
    assert "could not parse the arguments" in content(msg)["error"]
    assert "order id is ORD-1" in content(msg)["error"]
    (ev,) = of_type(result.events, "tool_called")
    assert ev.ok is False and ev.tool == "query_invoice"


async def test_text_mode_tool_calls_and_answers_are_parsed(desk: Any, calls: Any) -> None:
    model = S(
        {
            "triage": [
                S.text(
                    'Routing you.\n```json\n{"tool": "transfer_to_billing", "arguments": '
                    '{"reason": "invoice", "objective": "send the invoice"}}\n```'
                )
            ],
            "billing": [
                S.text('{"name": "query_invoice", "arguments": {"order_id": "ORD-1"}}'),
                S.text('{"final": "Your invoice is issued."}'),
            ],
        }
    )
    team = desk(model)

    result = await team.run("invoice ORD-1", session_id="S1")

    assert result.status == "completed"
    assert result.path == ["triage", "billing"]
    assert calls.invoice == ["ORD-1"]
    assert result.output == "Your invoice is issued."


# ---------------------------------------------------------------- hand-offs


async def test_handoff_payload_is_completed_by_the_kernel(desk: Any) -> None:
    model = S(
        {
            "triage": [
                handoff(
                    "billing",
                    reason="invoice question",
                    objective="Send the invoice",
                    state={"order_id": "ORD-1"},
                    reply_to_user="Passing you to billing.",
                    priority="high",
                )
            ],
            "billing": [S.say("Here it is.")],
        }
    )
    team = desk(model)
    t0 = time.time()

    result = await team.run("invoice ORD-1", session_id="S1", user_id="u-7")

    (p,) = result.handoffs
    (ev,) = of_type(result.events, "handoff")
    assert ev.payload == p
    assert (p.reason, p.objective, p.priority) == ("invoice question", "Send the invoice", "high")
    assert p.state == {"order_id": "ORD-1"}
    assert p.trace_id == result.trace_id
    assert p.session_id == "S1" and p.history_ref == "S1"
    assert p.user_id == "u-7"
    assert (p.source, p.target, p.hop, p.path) == ("triage", "billing", 1, ["triage"])
    assert t0 <= p.created_at <= time.time()
    # the receiver sees the rendered payload in its system message
    system = model.requests[1].messages[0]
    assert system.role == "system"
    assert "You are billing." in (system.content or "")
    assert 'Objective: "Send the invoice"' in (system.content or "")
    assert "ORD-1" in (system.content or "")
    assert "Passing you to billing." in (system.content or "")
    # the receiver does not see triage's tool call
    assert [m.role for m in model.requests[1].messages] == ["system", "user"]
    assert result.state == {"order_id": "ORD-1"}


async def test_a_model_cannot_overwrite_kernel_fields_of_the_payload(desk: Any) -> None:
    model = S(
        {
            "triage": [handoff("billing", source="tech", hop=9), S.say("Cannot route.")],
            "billing": [S.say("unreachable")],
        }
    )
    team = desk(model)

    result = await team.run("invoice", session_id="S1")

    assert result.path == ["triage"]
    assert result.handoffs == []
    (refused,) = of_type(result.events, "handoff_refused")
    assert "invalid payload" in refused.reason


async def test_handoff_to_a_non_permitted_agent_is_refused(desk: Any) -> None:
    model = S(
        {
            "triage": [handoff("billing")],
            # billing may hand off to triage and tech, not to itself or to strangers
            "billing": [handoff("ghost"), handoff("billing"), S.say("I'll handle it myself.")],
        }
    )
    team = desk(model)

    result = await team.run("help", session_id="S1")

    assert result.status == "completed"
    assert result.path == ["triage", "billing"]
    assert len(result.handoffs) == 1
    assert len(of_type(result.events, "handoff")) == 1
    refused = of_type(result.events, "handoff_refused")
    assert [r.target for r in refused] == ["ghost", "billing"]
    assert all("allowed: tech, triage" in r.reason for r in refused)
    (m_ghost,) = await tool_messages(team, "S1", "transfer_to_ghost")
    m_accepted, m_self = await tool_messages(team, "S1", "transfer_to_billing")
    assert m_accepted.agent == "triage" and m_self.agent == "billing"
    assert content(m_ghost)["ok"] is False
    assert "hand-off to 'ghost' refused" in content(m_ghost)["error"]
    assert "hand-off to 'billing' refused" in content(m_self)["error"]
    assert result.output == "I'll handle it myself."


async def test_handoff_with_an_invalid_payload_is_refused(desk: Any) -> None:
    model = S(
        {
            "triage": [
                S.call("transfer_to_billing", reason="invoice"),  # no objective
                S.call("transfer_to_billing", reason="invoice", objective="   "),  # blank
                handoff("billing", objective="Send the invoice"),
            ],
            "billing": [S.say("Done.")],
        }
    )
    team = desk(model)

    result = await team.run("invoice", session_id="S1")

    assert result.status == "completed"
    assert result.path == ["triage", "billing"]
    r1, r2 = of_type(result.events, "handoff_refused")
    assert "invalid payload" in r1.reason and "objective" in r1.reason
    assert "invalid payload" in r2.reason and "objective" in r2.reason
    msgs = await tool_messages(team, "S1")
    assert "objective" in content(msgs[0])["error"]
    assert result.handoffs[0].objective == "Send the invoice"
    assert result.handoffs[0].hop == 1


async def test_several_handoffs_in_one_response_first_valid_wins(desk: Any, calls: Any) -> None:
    model = S(
        {
            "triage": [
                S.calls(
                    S.call("transfer_to_billing", reason="invoice"),  # invalid: refused
                    handoff("tech", objective="restart"),  # first valid: wins
                    handoff("billing", objective="invoice"),  # valid, but too late
                )
            ],
            "tech": [S.say("Restarting.")],
            "billing": [S.say("unreachable")],
        }
    )
    team = desk(model)

    result = await team.run("restart and invoice", session_id="S1")

    assert result.path == ["triage", "tech"]
    assert [p.target for p in result.handoffs] == ["tech"]
    assert len(of_type(result.events, "handoff")) == 1
    refused = of_type(result.events, "handoff_refused")
    assert [r.target for r in refused] == ["billing", "billing"]
    assert "invalid payload" in refused[0].reason
    assert "only the first valid hand-off" in refused[1].reason
    m_invalid, m_ok, m_late = await tool_messages(team, "S1")
    assert content(m_ok) == {"ok": True, "handed_to": "tech"}
    assert content(m_late)["ok"] is False
    assert "not executed" in content(m_late)["error"]
    assert content(m_invalid)["ok"] is False


async def test_calls_after_an_accepted_handoff_are_not_executed(calls: Any, desk: Any) -> None:
    model = S(
        {
            "triage": [handoff("billing")],
            "billing": [
                S.calls(handoff("tech"), S.call("query_invoice", order_id="ORD-1")),
            ],
            "tech": [S.say("ok")],
        }
    )
    team = desk(model)

    result = await team.run("x", session_id="S1")

    assert result.path == ["triage", "billing", "tech"]
    assert calls.invoice == []
    msgs = await tool_messages(team, "S1")
    assert "not executed: the baton already passed to tech" in content(msgs[-1])["error"]


async def test_handoff_request_tools_are_the_agents_own(desk: Any) -> None:
    model = S({"triage": [S.say("hi")]})
    team = desk(model)
    await team.run("hi")
    names = [t.name for t in model.requests[0].tools]
    assert names == ["transfer_to_billing", "transfer_to_tech"]
    spec = model.requests[0].tools[0]
    assert "Invoices." in spec.description
    assert set(spec.parameters["required"]) == {"reason", "objective"}  # type: ignore[arg-type]


# ---------------------------------------------------------------- sessions


async def test_second_run_continues_with_the_holder_and_the_state(desk: Any, calls: Any) -> None:
    model = S(
        {
            "triage": [handoff("billing", state={"order_id": "ORD-1"})],
            "billing": [
                S.say("Which invoice type do you need?"),
                S.call("query_invoice", order_id="ORD-1"),
                S.say("Your VAT invoice for ORD-1 is issued."),
            ],
        }
    )
    team = desk(model)

    first = await team.run("invoice for ORD-1 please", session_id="S")
    assert first.path == ["triage", "billing"]
    assert first.output == "Which invoice type do you need?"
    n = len(model.requests)

    second = await team.run("a VAT invoice", session_id="S")

    assert second.status == "completed"
    assert second.path[0] == "billing"
    assert second.path == ["billing"]
    route = of_type(second.events, "route_decided")[0]
    assert (route.target, route.tier) == ("billing", "session")
    request = model.requests[n]
    assert request.agent == "billing"
    system = request.messages[0].content or ""
    assert "ORD-1" in system
    # billing's conversation since it took the baton: both user messages and its question
    convo = [(m.role, m.content) for m in request.messages[1:]]
    assert convo == [
        ("user", "invoice for ORD-1 please"),
        ("assistant", "Which invoice type do you need?"),
        ("user", "a VAT invoice"),
    ]
    assert second.state["order_id"] == "ORD-1"
    assert calls.invoice == ["ORD-1"]
    session = await team.session("S")
    assert session is not None
    assert session.holder == "billing"
    assert session.state["order_id"] == "ORD-1"
    assert first.trace_id != second.trace_id and first.run_id != second.run_id


async def test_sessions_are_isolated(desk: Any) -> None:
    model = S(
        {
            "triage": [handoff("billing", state={"order_id": "ORD-1"}), S.say("Hello!")],
            "billing": [S.say("Which type?")],
        }
    )
    team = desk(model)
    await team.run("invoice ORD-1", session_id="A")
    other = await team.run("hello", session_id="B")
    assert other.path == ["triage"]
    assert other.state == {}


async def test_accepts_whitelist_hides_other_state_keys_from_the_system_prompt(
    desk: Any,
) -> None:
    @tool(records=("customer_tier",))
    async def profile(customer_tier: str) -> str:
        """Look up the customer's profile."""
        return "ok"

    model = S(
        {
            "triage": [
                S.call("profile", customer_tier="platinum"),
                handoff("billing", state={"order_id": "ORD-1", "internal_score": 7}),
            ],
            "billing": [S.say("Which type?")],
        }
    )
    triage = Agent(name="triage", tools=[profile], handoffs=["billing"])
    billing = Agent(name="billing", accepts=["order_id"])
    team = Team([triage, billing], entry="triage", model=model)

    # the user gave the score, so it is a fact (a slot only the model wrote is a claim)
    result = await team.run("invoice ORD-1, internal score 7", session_id="S1")

    system = model.requests[-1].messages[0].content or ""
    assert model.requests[-1].agent == "billing"
    assert "ORD-1" in system
    assert "internal_score" not in system
    assert "platinum" not in system and "customer_tier" not in system
    # hidden from the prompt, not lost: the session keeps every slot
    assert result.state == {"customer_tier": "platinum", "order_id": "ORD-1", "internal_score": 7}


async def test_without_accepts_an_agent_sees_every_slot(desk: Any) -> None:
    model = S(
        {
            "triage": [handoff("billing", state={"order_id": "ORD-1", "internal_score": 7})],
            "billing": [S.say("ok")],
        }
    )
    team = desk(model)
    await team.run("invoice for ORD-1", session_id="S1")
    system = model.requests[-1].messages[0].content or ""
    assert "ORD-1" in system and "internal_score" in system


# ---------------------------------------------------------------- provider failures


async def test_model_provider_failure_ends_the_run_as_failed_without_raising(desk: Any) -> None:
    model = S({"triage": [handoff("billing")], "billing": [S.fail("503 upstream overloaded")]})
    team = desk(model)

    result = await team.run("invoice", session_id="S1")

    assert result.status == "failed"
    assert result.error is not None
    assert "503 upstream overloaded" in result.error
    assert "billing" in result.error and "scripted" in result.error
    assert result.output is None
    assert result.path == ["triage", "billing"]
    failed_call = of_type(result.events, "model_called")[-1]
    assert failed_call.error == result.error
    assert result.events[-1].type == "run_finished"
    assert result.events[-1].status == "failed"
    # the run was committed and the session can continue
    session = await team.session("S1")
    assert session is not None and session.holder == "billing"


async def test_unexpected_model_exception_gets_a_hint() -> None:
    class Broken:
        name = "broken"

        async def generate(self, request: ModelRequest) -> ModelResponse:
            raise ConnectionError("connection refused")

    team = Team([Agent(name="solo")], entry="solo", model=Broken())  # type: ignore[arg-type]

    result = await team.run("hi")

    assert result.status == "failed"
    assert result.error is not None
    assert "ConnectionError: connection refused" in result.error
    assert "check the provider" in result.error


async def test_exhausted_script_fails_the_run(desk: Any) -> None:
    model = S({"triage": [handoff("billing")], "billing": []})
    team = desk(model)

    result = await team.run("invoice", session_id="S1")

    assert result.status == "failed"
    assert result.error is not None and "exhausted" in result.error
