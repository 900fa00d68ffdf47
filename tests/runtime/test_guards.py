"""Guards: every loop and limit ends a run as `escalated`, never as an exception or a hang."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from pydantic import ValidationError
from runtime_kit import content, handoff, of_type, tool_messages

from baton import Agent, EscalationCard, Guards, ScriptedModel, Team
from baton.runtime import check_handoff, is_ping_pong
from baton.runtime.plan import DEFAULT_ESCALATION_MESSAGE
from baton.runtime.timeouts import with_timeout

S = ScriptedModel


# ---------------------------------------------------------------- the pure checks


def test_guard_defaults_match_the_documented_table() -> None:
    g = Guards()
    assert (g.max_hops, g.max_visits, g.ping_pong, g.lock_window_s) == (5, 2, True, 30.0)
    assert (g.model_timeout_s, g.tool_timeout_s) == (120.0, 30.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_hops": -1},
        {"max_visits": 0},
        {"model_timeout_s": 0},
        {"lock_window_s": -1},
        {"tool_timeout_s": -2},
        {"max_hop": 3},
    ],
)
def test_guards_reject_bad_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Guards(**kwargs)


def test_guards_are_frozen() -> None:
    with pytest.raises(ValidationError):
        Guards().max_hops = 9  # type: ignore[misc]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (["A", "B", "A", "B"], True),
        (["C", "A", "B", "A", "B"], True),
        (["A", "B", "A"], False),
        (["A", "B", "C", "B"], False),
        (["A", "A", "A", "A"], False),
        ([], False),
    ],
)
def test_is_ping_pong(path: list[str], expected: bool) -> None:
    assert is_ping_pong(path) is expected


def test_check_handoff_names_the_guard() -> None:
    g = Guards(max_hops=3, max_visits=2)
    assert check_handoff(g, ["A"], "B", 1) is None
    assert (check_handoff(g, ["A", "B", "C"], "D", 4) or "").startswith("max_hops:")
    assert (check_handoff(g, ["A", "B", "A", "C"], "A", 3) or "").startswith("max_visits:")
    assert (check_handoff(g, ["A", "B", "A"], "B", 3) or "").startswith("ping_pong:")
    assert check_handoff(Guards(ping_pong=False), ["A", "B", "A"], "B", 3) is None
    assert (check_handoff(Guards(max_hops=0), ["A"], "B", 1) or "").startswith("max_hops:")
    assert (check_handoff(Guards(max_visits=1), ["A", "B"], "A", 2) or "").startswith("max_visits:")


# ---------------------------------------------------------------- ping-pong and escalation


def _pair(model: ScriptedModel, **team_kwargs: Any) -> Team:
    a = Agent(name="A", handoffs=["B"])
    b = Agent(name="B", handoffs=["A"])
    extra = team_kwargs.pop("extra", [])
    return Team([a, b, *extra], entry="A", model=model, **team_kwargs)


def _bouncing_script(**more: list[Any]) -> ScriptedModel:
    return S(
        {
            "A": [
                handoff("B", state={"order_id": "ORD-1"}, reply_to_user="One moment please."),
                handoff("B", objective="try again"),
            ],
            "B": [handoff("A")],
            **more,
        }
    )


async def test_ping_pong_escalates_to_the_human_queue_with_a_card() -> None:
    model = _bouncing_script()
    team = _pair(model)

    result = await team.run("please sort out order ORD-1", session_id="S1", user_id="u1")

    assert result.status == "escalated"
    assert result.path == ["A", "B", "A"]
    assert result.output == DEFAULT_ESCALATION_MESSAGE
    (trip,) = of_type(result.events, "guard_tripped")
    assert trip.guard == "ping_pong"
    assert "A -> B -> A -> B" in trip.detail
    assert len(of_type(result.events, "handoff")) == 2
    (esc,) = of_type(result.events, "escalated")
    assert esc.to == "human"

    card = result.escalation
    assert isinstance(card, EscalationCard)
    assert esc.card == card
    assert card.path == ["A", "B", "A"]
    assert len(card.reasons) == 1 and card.reasons[0].startswith("ping_pong")
    assert card.state == {"order_id": "ORD-1"}
    assert card.last_user_message == "please sort out order ORD-1"
    assert card.last_reply == "One moment please."
    assert (card.session_id, card.trace_id, card.user_id) == ("S1", result.trace_id, "u1")

    tickets = await team.store.list_human()
    assert len(tickets) == 1
    assert tickets[0].card == card
    assert result.events[-1].type == "run_finished"
    assert result.events[-1].status == "escalated"


async def test_ping_pong_is_not_tripped_when_disabled() -> None:
    model = S({"A": [handoff("B"), handoff("B"), S.say("done")], "B": [handoff("A")] * 2})
    guards = Guards(ping_pong=False, max_visits=5, lock_window_s=0, reroute_after_refusals=0)
    team = _pair(model, guards=guards)

    result = await team.run("x")

    assert result.status == "completed"
    assert result.path == ["A", "B", "A", "B", "A"]
    assert result.output == "done"
    assert of_type(result.events, "guard_tripped") == []


async def test_fallback_agent_runs_with_the_card_and_the_run_stays_escalated() -> None:
    desk = Agent(name="desk", instructions="You take over escalations.", handoffs=["A"])
    model = _bouncing_script(desk=[S.say("A colleague will call you back today.")])
    team = _pair(model, extra=[desk], fallback="desk")

    result = await team.run("please sort out order ORD-1", session_id="S1")

    assert result.status == "escalated"
    assert result.output == "A colleague will call you back today."
    assert result.path == ["A", "B", "A", "desk"]
    assert result.escalation is not None
    assert result.escalation.path == ["A", "B", "A"]
    (esc,) = of_type(result.events, "escalated")
    assert esc.to == "desk"
    request = model.requests[-1]
    assert request.agent == "desk"
    system = request.messages[0].content or ""
    assert "You take over escalations." in system
    assert "ESCALATION" in system
    assert "Path: A -> B -> A" in system
    assert "ping_pong" in system
    assert "ORD-1" in system
    # a fallback cannot pass the baton on
    assert [t.name for t in request.tools] == []
    # the fallback finished, so nothing waits in the human queue
    assert await team.store.list_human() == []


async def test_a_failing_fallback_sends_the_card_to_the_human_queue() -> None:
    desk = Agent(name="desk")
    model = _bouncing_script(desk=[S.fail("provider down")])
    team = _pair(model, extra=[desk], fallback="desk")

    result = await team.run("please sort out order ORD-1", session_id="S1")

    assert result.status == "escalated"
    assert result.output == DEFAULT_ESCALATION_MESSAGE
    (ticket,) = await team.store.list_human()
    assert ticket.card.reasons[0].startswith("ping_pong")
    assert "fallback desk could not finish" in ticket.card.reasons[1]
    assert "provider down" in ticket.card.reasons[1]


async def test_custom_escalation_message() -> None:
    team = _pair(_bouncing_script(), escalation_message="Hold on, a human is coming.")
    result = await team.run("x")
    assert result.status == "escalated"
    assert result.output == "Hold on, a human is coming."


# ---------------------------------------------------------------- hop, visit and iteration limits


def _chain(model: ScriptedModel, guards: Guards) -> Team:
    agents = [
        Agent(name="a", handoffs=["b"]),
        Agent(name="b", handoffs=["c", "a"]),
        Agent(name="c", handoffs=["d"]),
        Agent(name="d"),
    ]
    return Team(agents, entry="a", model=model, guards=guards)


async def test_max_hops_trips() -> None:
    model = S({"a": [handoff("b")], "b": [handoff("c")], "c": [handoff("d")], "d": [S.say("x")]})
    team = _chain(model, Guards(max_hops=2))

    result = await team.run("go")

    assert result.status == "escalated"
    assert result.path == ["a", "b", "c"]
    (trip,) = of_type(result.events, "guard_tripped")
    assert trip.guard == "max_hops"
    assert trip.agent == "c"
    assert "max_hops=2" in trip.detail
    assert result.escalation is not None
    assert result.escalation.reasons == [trip.detail]
    assert len(of_type(result.events, "agent_started")) == 3


async def test_max_hops_zero_forbids_every_handoff() -> None:
    model = S({"a": [handoff("b")], "b": [S.say("x")]})
    team = _chain(model, Guards(max_hops=0))

    result = await team.run("go")

    assert result.status == "escalated"
    assert result.path == ["a"]
    assert of_type(result.events, "guard_tripped")[0].guard == "max_hops"


async def test_max_visits_trips() -> None:
    model = S({"a": [handoff("b")], "b": [handoff("a")], "c": [], "d": []})
    team = _chain(model, Guards(max_visits=1))

    result = await team.run("go")

    assert result.status == "escalated"
    assert result.path == ["a", "b"]
    (trip,) = of_type(result.events, "guard_tripped")
    assert trip.guard == "max_visits"
    assert "max_visits=1" in trip.detail
    assert await team.store.list_human()


async def test_per_agent_max_iterations_trips() -> None:
    model = S({"busy": [S.call("transfer_to_nowhere", reason="r", objective="o")]}, loop=True)
    team = Team([Agent(name="busy", max_iterations=3)], entry="busy", model=model)

    result = await team.run("go")

    assert result.status == "escalated"
    assert len(model.requests) == 3
    (trip,) = of_type(result.events, "guard_tripped")
    assert trip.guard == "max_iterations"
    assert "busy made 3 model calls" in trip.detail
    assert len(of_type(result.events, "model_called")) == 3


async def test_max_iterations_counts_each_agent_separately() -> None:
    model = S(
        {
            "a": [S.call("nope"), handoff("b")],
            "b": [S.call("nope"), S.say("done")],
        }
    )
    agents = [Agent(name="a", handoffs=["b"], max_iterations=2), Agent(name="b", max_iterations=2)]
    team = Team(agents, entry="a", model=model)

    result = await team.run("go")

    assert result.status == "completed"
    assert result.path == ["a", "b"]


async def test_model_timeout_escalates() -> None:
    model = S([S.slow(S.say("too late"), 2.0)])
    team = Team(
        [Agent(name="solo")], entry="solo", model=model, guards=Guards(model_timeout_s=0.05)
    )

    t0 = time.perf_counter()
    result = await team.run("hello")
    assert time.perf_counter() - t0 < 1.5

    assert result.status == "escalated"
    assert result.output != "too late"
    (trip,) = of_type(result.events, "guard_tripped")
    assert trip.guard == "model_timeout"
    assert "0.05s" in trip.detail
    assert result.escalation is not None
    assert result.escalation.reasons[0].startswith("model_timeout")


async def test_a_guard_trip_during_a_response_skips_its_remaining_calls() -> None:
    ran: list[str] = []

    from baton import tool

    @tool
    def note(text: str) -> str:
        """Take a note."""
        ran.append(text)
        return "noted"

    model = S({"a": [S.calls(handoff("b"), S.call("note", text="after"))], "b": []})
    agents = [Agent(name="a", tools=[note], handoffs=["b"]), Agent(name="b")]
    team = Team(agents, entry="a", model=model, guards=Guards(max_hops=0))

    result = await team.run("go", session_id="S1")

    assert result.status == "escalated"
    assert ran == []
    (msg,) = await tool_messages(team, "S1", "note")
    assert "stopped by a guard" in content(msg)["error"]


# ---------------------------------------------------------------- the idempotent hand-off lock


def _lock_desk(model: ScriptedModel, window: float) -> Team:
    triage = Agent(name="triage", handoffs=["billing"])
    billing = Agent(name="billing", handoffs=["triage"])
    return Team([triage, billing], entry="triage", model=model, guards=Guards(lock_window_s=window))


def _lock_script() -> ScriptedModel:
    p = {
        "reason": "invoice question",
        "objective": "Send the invoice",
        "state": {"order_id": "ORD-1"},
    }
    return S(
        {
            "triage": [
                handoff("billing", **p),  # run 1
                S.say("Anything else?"),  # run 1, after billing handed back
                handoff("billing", **p),  # run 2: the very same hand-off
                S.say("Billing is already on it."),
            ],
            "billing": [handoff("triage", objective="finish the chat"), S.say("Billing here.")],
        }
    )


async def test_the_same_handoff_answering_a_new_message_is_accepted() -> None:
    """The lock is keyed by run: an identical hand-off for a NEW user message is real work."""
    model = _lock_script()
    team = _lock_desk(model, window=30)

    first = await team.run("invoice for ORD-1", session_id="S")
    assert first.status == "completed"
    assert first.path == ["triage", "billing", "triage"]

    second = await team.run("invoice for ORD-1 again", session_id="S")

    assert second.status == "completed"
    assert second.path == ["triage", "billing"]
    assert second.output == "Billing here."
    assert of_type(second.events, "guard_tripped") == []


async def test_duplicate_handoff_in_one_run_is_dropped() -> None:
    p = {
        "reason": "invoice question",
        "objective": "Send the invoice",
        "state": {"order_id": "ORD-1"},
    }
    model = S(
        {
            "triage": [
                handoff("billing", **p),
                handoff("billing", **p),  # the very same hand-off again, in the same run
                S.say("Billing is already on it."),
            ],
            "billing": [handoff("triage", objective="finish the chat")],
        }
    )
    triage = Agent(name="triage", handoffs=["billing"])
    billing = Agent(name="billing", handoffs=["triage"])
    guards = Guards(lock_window_s=30, ping_pong=False, max_visits=3, reroute_after_refusals=0)
    team = Team([triage, billing], entry="triage", model=model, guards=guards)

    result = await team.run("invoice for ORD-1", session_id="S")

    assert result.status == "completed"
    assert result.output == "Billing is already on it."
    assert result.path == ["triage", "billing", "triage"]
    (trip,) = of_type(result.events, "guard_tripped")
    assert trip.guard == "duplicate_handoff"
    # the model is told, and receives the existing state instead of a second transfer
    after = model.requests[-1].messages[-1]
    assert after.role == "tool" and after.name == "transfer_to_billing"
    got = content(after)
    assert got["ok"] is False
    assert "duplicate_handoff" in got["error"]
    assert "ORD-1" in got["error"]


async def test_the_same_handoff_outside_the_window_is_accepted() -> None:
    model = _lock_script()
    team = _lock_desk(model, window=0.05)

    first = await team.run("invoice for ORD-1", session_id="S")
    assert first.path == ["triage", "billing", "triage"]
    await asyncio.sleep(0.1)

    second = await team.run("invoice for ORD-1 again", session_id="S")

    assert second.status == "completed"
    assert second.path == ["triage", "billing"]
    assert second.output == "Billing here."
    assert len(of_type(second.events, "handoff")) == 1
    assert of_type(second.events, "guard_tripped") == []


async def test_a_different_session_is_not_locked_out() -> None:
    model = S(
        {
            "triage": [handoff("billing", state={"order_id": "ORD-1"})] * 2,
            "billing": [S.say("ok")] * 2,
        }
    )
    team = _lock_desk(model, window=30)
    await team.run("x", session_id="S1")
    other = await team.run("x", session_id="S2")
    assert other.path == ["triage", "billing"]


# ---------------------------------------------------------------- the timeout primitive


async def test_with_timeout_returns_results_with_and_without_suspending() -> None:
    async def instant() -> int:
        return 1

    async def a_few_sleeps() -> int:
        for _ in range(3):
            await asyncio.sleep(0.001)
        return 2

    assert await with_timeout(instant(), 0.05) == 1
    assert await with_timeout(a_few_sleeps(), 1.0) == 2
    assert await with_timeout(a_few_sleeps(), None) == 2


async def test_with_timeout_raises_timeout_error_and_leaves_the_task_usable() -> None:
    async def forever() -> None:
        await asyncio.sleep(10)

    t0 = time.perf_counter()
    with pytest.raises(TimeoutError):
        await with_timeout(forever(), 0.02)
    assert time.perf_counter() - t0 < 1
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0.001)  # the task was not left cancelled


async def test_with_timeout_lets_exceptions_through() -> None:
    async def boom() -> None:
        await asyncio.sleep(0)
        raise KeyError("x")

    with pytest.raises(KeyError):
        await with_timeout(boom(), 1.0)


async def test_an_outside_cancellation_stays_a_cancellation() -> None:
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(10)

    task = asyncio.create_task(with_timeout(slow(), 5.0))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_nested_timeouts_the_outer_one_fires() -> None:
    async def inner() -> str:
        try:
            return await with_timeout(asyncio.sleep(10, "late"), 5.0)
        except TimeoutError:  # pragma: no cover - would mean the inner limit claimed it
            return "inner timed out"

    with pytest.raises(TimeoutError):
        await with_timeout(inner(), 0.02)


async def test_a_sync_tool_that_hangs_times_out_too() -> None:
    from baton import tool

    @tool
    def blocking() -> str:
        """Blocks its thread."""
        time.sleep(0.3)
        return "late"

    model = S([S.call("blocking"), S.say("gave up")])
    team = Team(
        [Agent(name="solo", tools=[blocking])],
        entry="solo",
        model=model,
        guards=Guards(tool_timeout_s=0.05),
    )
    t0 = time.perf_counter()
    result = await team.run("go", session_id="S1")
    assert time.perf_counter() - t0 < 0.25
    assert result.status == "completed"
    (msg,) = await tool_messages(team, "S1", "blocking")
    assert "timed out" in content(msg)["error"]


# ---------------------------------------------------------------- cycles


def test_cycle_finds_a_repeated_hand_off_of_any_length() -> None:
    from baton.runtime import cycle

    assert cycle(["a", "b", "c", "a", "b"]) == ["a", "b", "c", "a", "b"]
    assert cycle(["x", "a", "b", "c", "d", "a", "b"]) == ["a", "b", "c", "d", "a", "b"]
    assert cycle(["a", "b", "a"]) == []  # handing back once is fine
    assert cycle(["a", "b", "c", "a"]) == []  # closing the loop once is fine
    assert cycle(["a", "b"]) == []


async def test_a_three_agent_cycle_trips_before_the_visit_cap() -> None:
    """A -> B -> C -> A -> B: the hand-off A -> B repeats; `max_visits=2` alone would allow
    it and only trip at the seventh holder."""
    model = S(
        {
            "a": [handoff("b"), handoff("b")],
            "b": [handoff("c"), handoff("c")],
            "c": [handoff("a"), handoff("a")],
        }
    )
    team = Team(
        [
            Agent(name="a", handoffs=["b"]),
            Agent(name="b", handoffs=["c"]),
            Agent(name="c", handoffs=["a"]),
        ],
        entry="a",
        model=model,
        guards=Guards(max_hops=10, max_visits=2, reroute_after_refusals=0),
    )

    result = await team.run("go round", session_id="S")

    assert result.status == "escalated"
    assert result.path == ["a", "b", "c", "a"]
    (trip,) = of_type(result.events, "guard_tripped")
    assert trip.guard == "cycle"
    assert "a -> b -> c -> a -> b" in trip.detail
    assert (
        check_handoff(Guards(ping_pong=False, max_visits=2), ["a", "b", "c", "a"], "b", 4) is None
    )


async def test_a_fallback_agent_cannot_pass_the_baton_on_not_even_back() -> None:
    """After an escalation the fallback agent answers or uses its tools; a `transfer_back` or
    `transfer_to_*` it tries is refused, and no hand-off is recorded after the escalation."""
    model = S(
        {
            "triage": [handoff("billing")],
            "billing": [handoff("triage")],  # triage again: max_visits=1 trips
            "supervisor": [
                S.call("transfer_back", reason="yours", objective="finish it"),
                handoff("billing"),
                S.say("I will take it from here."),
            ],
        }
    )
    team = Team(
        [
            Agent(name="triage", handoffs=["billing"]),
            Agent(name="billing", handoffs=["triage"]),
            Agent(name="supervisor", transfer_back=True, handoffs=["billing"]),
        ],
        entry="triage",
        model=model,
        fallback="supervisor",
        guards=Guards(max_visits=1, reroute_after_refusals=0),
    )

    result = await team.run("help", session_id="S")

    assert result.status == "escalated"
    assert result.output == "I will take it from here."
    assert result.holder == "supervisor"
    kinds = [e.type for e in result.events]
    after = kinds[kinds.index("escalated") :]
    assert "handoff" not in after
    refused = of_type(result.events, "handoff_refused")
    assert [r.target for r in refused] == ["billing"]
    calls = [e for e in of_type(result.events, "tool_called") if e.agent == "supervisor"]
    assert [c.tool for c in calls] == ["transfer_back"] and not calls[0].ok


async def test_an_oversized_hand_off_payload_is_refused_with_the_reason() -> None:
    big = "很长的背景说明。" * 1200  # ~29 KB of UTF-8
    model = S(
        {
            "triage": [
                handoff("billing", objective=big),
                handoff("billing", objective="Send the invoice", state={"order_id": "ORD-1"}),
            ],
            "billing": [S.say("Billing here.")],
        }
    )
    team = Team(
        [Agent(name="triage", handoffs=["billing"]), Agent(name="billing")],
        entry="triage",
        model=model,
    )
    result = await team.run("invoice for ORD-1", session_id="S")
    assert result.status == "completed" and result.path == ["triage", "billing"]
    (refused,) = of_type(result.events, "handoff_refused")
    assert "bytes, over the 8,192 a hand-off may carry" in refused.reason
    assert result.handoffs[0].objective == "Send the invoice"
    # the cap can be raised or turned off
    model2 = S({"triage": [handoff("billing", objective=big)], "billing": [S.say("ok")]})
    team2 = Team(
        [Agent(name="triage", handoffs=["billing"]), Agent(name="billing")],
        entry="triage",
        model=model2,
        guards=Guards(max_payload_bytes=0),
    )
    assert (await team2.run("x", session_id="S")).path == ["triage", "billing"]
