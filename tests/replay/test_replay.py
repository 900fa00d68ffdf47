"""Replay: a recorded session played again through the current code reproduces every step;
a changed guard, instruction or team shows the first step where it parts; no tool runs."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from baton import Agent, Guards, ScriptedModel, Team, tool
from baton.backends import open_store
from baton.models.base import ModelRequest
from baton.models.scripted import Step as ScriptStep
from baton.replay import RecordError, Recording, read_recording, replay
from baton.testing.replay import assert_replays


def lookup_invoice(order_id: str) -> dict[str, Any]:
    """The invoice of an order."""
    return {"order_id": order_id, "amount": 42, "currency": "EUR"}


def _raises(order_id: str) -> dict[str, Any]:
    """The invoice of an order."""
    raise AssertionError("a replay called the tool's real function")


def routing(request: ModelRequest) -> ScriptStep | list[ScriptStep]:
    """Triage follows its instructions (as a language model would); billing looks up."""
    system = request.messages[0].content or ""
    last = request.messages[-1]
    if request.agent == "triage":
        target = "billing" if "invoices go to billing" in system else "tech"
        return ScriptedModel.call(f"transfer_to_{target}", reason="owns it", objective="help")
    if last.role == "tool":
        return ScriptedModel.say(f"Here it is: {last.content}")
    return ScriptedModel.call("lookup_invoice", order_id="ORD-7")


def desk(
    instructions: str = "invoices go to billing",
    guards: Guards | None = None,
    invoice: Callable[..., Any] = lookup_invoice,
    agents: tuple[str, ...] = ("triage", "billing", "tech"),
    store: Any = None,
) -> Team:
    made = {
        "triage": Agent(
            name="triage",
            instructions=instructions,
            handoffs=[a for a in ("billing", "tech") if a in agents],
        ),
        "billing": Agent(name="billing", tools=[tool(invoice, name="lookup_invoice")]),
        "tech": Agent(name="tech", tools=[tool(invoice, name="lookup_invoice")]),
    }
    return Team(
        [made[a] for a in agents],
        entry="triage",
        guards=guards,
        model=ScriptedModel(routing),
        store=store,
    )


async def recorded(tmp_path: Path, *messages: str) -> Recording:
    url = f"sqlite:///{tmp_path / 'rec.db'}"
    team = desk(store=url)
    for m in messages:
        result = await team.run(m, session_id="s1", user_id="u1")
        assert result.status == "completed", result.error
    rec = await read_recording(team.store, "s1")
    await team.aclose()
    return rec


async def test_a_replay_takes_every_recorded_step_and_never_runs_a_tool(tmp_path: Path) -> None:
    rec = await recorded(tmp_path, "Invoice for ORD-7 please", "and again?")
    assert len(rec.runs) == 2 and rec.end_state == {"order_id": "ORD-7"}
    report = await replay(desk(invoice=_raises), rec)  # the tool raises if it is called
    assert report.ok, report.describe()
    assert [r.status for r in report.runs] == ["completed", "completed"]


async def test_a_changed_guard_shows_the_first_divergence_at_the_hand_off(tmp_path: Path) -> None:
    rec = await recorded(tmp_path, "Invoice for ORD-7 please")
    report = await replay(desk(guards=Guards(max_hops=0)), rec)
    d = report.divergence
    assert d is not None and d.expected is not None and d.got is not None
    assert d.expected.type == "handoff" and d.got.type != "handoff"
    # everything before it was the same
    assert all(a.same_as(b) for a, b in zip(d.recorded[: d.index], d.replayed, strict=False))
    assert "diverged at step" in report.describe()


async def test_a_changed_instruction_shows_with_the_live_model(tmp_path: Path) -> None:
    rec = await recorded(tmp_path, "Invoice for ORD-7 please")
    changed = desk(instructions="everything goes to tech")
    assert (await replay(changed, rec)).ok  # the recorded model answers as recorded
    live = await replay(desk(instructions="everything goes to tech"), rec, live_model=True)
    d = live.divergence
    assert d is not None and d.expected is not None and d.got is not None
    assert (d.expected.type, d.expected.agent) == ("model_called", "triage")
    assert d.expected.data["tool_calls"] == ["transfer_to_billing"]
    assert d.got.data["tool_calls"] == ["transfer_to_tech"]
    # the unchanged instruction replays live too (its wording may differ; its way may not)
    assert (await replay(desk(), rec, live_model=True)).ok


async def test_a_team_without_an_agent_the_record_used_diverges_without_crashing(
    tmp_path: Path,
) -> None:
    rec = await recorded(tmp_path, "Invoice for ORD-7 please")
    report = await replay(desk(agents=("triage", "tech")), rec)
    assert not report.ok and report.divergence is not None
    assert report.divergence.expected is not None
    assert report.divergence.expected.type == "handoff"


async def test_until_compares_only_the_steps_before_the_one_investigated(tmp_path: Path) -> None:
    rec = await recorded(tmp_path, "Invoice for ORD-7 please")
    handoff = next(i for i, s in enumerate(rec.runs[0].steps) if s.type == "handoff")
    changed = desk(guards=Guards(max_hops=0))
    assert (await replay(changed, rec, until=handoff)).runs[0].divergence is None
    assert (await replay(changed, rec, until=handoff + 1)).divergence is not None


async def test_an_exported_fixture_is_a_regression_test_with_secrets_masked(tmp_path: Path) -> None:
    secret = "sk-proj-" + "Q7v" * 12
    rec = await recorded(tmp_path, f"Invoice for ORD-7 please, my api key is {secret}")
    path = rec.dump(tmp_path / "regressions" / "invoice.json")
    assert secret not in path.read_text(encoding="utf-8")
    await assert_replays(path, desk(invoice=_raises))
    with pytest.raises(AssertionError, match="diverged at step"):
        await assert_replays(path, desk(guards=Guards(max_hops=0)))


async def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'empty.db'}")
    with pytest.raises(RecordError, match="no session 'nope'"):
        await read_recording(store, "nope")
    await store.close()
    rec = await recorded(tmp_path, "Invoice for ORD-7 please")
    with pytest.raises(RecordError, match="has no run 'run_x'"):
        rec.upto("run_x")
    newer = tmp_path / "newer.json"
    newer.write_text(rec.model_dump_json().replace('"format":1', '"format":99'))
    with pytest.raises(RecordError, match="fixture format 99; this Baton reads format 1"):
        Recording.load(newer)
    with pytest.raises(RecordError, match="no replay fixture"):
        Recording.load(tmp_path / "missing.json")


def _examples() -> list[tuple[str, Callable[[], Team], str]]:
    from examples.blackboard_design import REQUEST, build_blackboard
    from examples.code_fix_loop import TASK, build_code_fix_loop, fix_policy
    from examples.research_report import build_research_desk, report_policy
    from examples.ticket_workflow import build_ticket_workflow, ticket_policy

    kb = tempfile.mkdtemp()
    return [
        (
            "pipeline",
            lambda: build_ticket_workflow(ScriptedModel(ticket_policy), kb_dir=kb),
            "When will the invoice for ORD-202608-17 be issued?",
        ),
        (
            "plan-execute-review",
            lambda: build_research_desk(ScriptedModel(report_policy)),
            "Research the EV battery industry over the last six months",
        ),
        ("graph", lambda: build_code_fix_loop(ScriptedModel(fix_policy)), TASK),
        ("blackboard", lambda: build_blackboard("scripted"), REQUEST),
    ]


@pytest.mark.parametrize(
    "index", range(4), ids=["pipeline", "plan-execute-review", "graph", "blackboard"]
)
async def test_every_example_topology_replays_its_session_with_zero_divergence(
    index: int, tmp_path: Path
) -> None:
    _, build, message = _examples()[index]
    url = f"sqlite:///{tmp_path / 'rec.db'}"
    bound = build().bind(store=url)
    result = await bound.run(message, session_id="S1")
    assert result.status == "completed", result.error
    await bound.aclose()
    store = open_store(url)
    rec = await read_recording(store, "S1")
    await store.close()
    report = await replay(build(), rec)
    assert report.ok, report.describe()


async def test_a_debate_replays_with_zero_divergence(tmp_path: Path) -> None:
    from baton.topologies.debate import Debate

    def build() -> Debate:
        answers = {"a": ["41", "42"], "b": ["43", "42 or 43"]}

        def respond(request: ModelRequest) -> ScriptStep:
            if request.agent == "judge":
                return ScriptedModel.say("judged: 42")
            return ScriptedModel.say(answers[request.agent].pop(0))

        return Debate(
            [Agent(name="a"), Agent(name="b")],
            judge=Agent(name="judge"),
            model=ScriptedModel(respond),
        )

    url = f"sqlite:///{tmp_path / 'rec.db'}"
    bound = build().bind(store=url)
    assert (await bound.run("What is 6 x 7?", session_id="d1")).status == "completed"
    await bound.aclose()
    store = open_store(url)
    rec = await read_recording(store, "d1")
    await store.close()
    report = await replay(build(), rec)
    assert report.ok, report.describe()


async def test_the_customer_service_example_replays_with_zero_divergence(tmp_path: Path) -> None:
    import examples.customer_service as cs

    def build() -> Team:
        return Team(
            [cs.triage, cs.billing, cs.tech_support],
            entry="triage",
            guards=Guards(max_hops=5, max_visits=2, lock_window_s=30),
            fallback="human",
            model=ScriptedModel(cs.desk_policy),
        )

    url = f"sqlite:///{tmp_path / 'rec.db'}"
    bound = build().bind(store=url)
    for message in ("please check the invoice for order ORD-202607-99", "请重启服务器 srv-bj-001"):
        assert (await bound.run(message, session_id="cs1")).status in ("completed", "escalated")
    await bound.aclose()
    store = open_store(url)
    rec = await read_recording(store, "cs1")
    await store.close()
    assert len(rec.runs) == 2
    report = await replay(build(), rec)
    assert report.ok, report.describe()
