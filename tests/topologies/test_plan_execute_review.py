"""PlanExecuteReview: pre-checked plans, executors by dependency in parallel, a capped fix
loop, aggregation, task events and stored tasks, and resumption without re-running."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from baton import Agent, ConfigError, ScriptedModel, tool
from baton.models.base import ModelRequest
from baton.topologies.plan_execute_review import PlanExecuteReview

S = ScriptedModel

PLAN = {
    "tasks": [
        {
            "task_id": "events",
            "description": "List the key events",
            "agent_role": "researcher",
            "requires_tool": ["search"],
        },
        {"task_id": "figures", "description": "Collect the figures", "agent_role": "analyst"},
        {
            "task_id": "report",
            "description": "Write the report",
            "agent_role": "writer",
            "depends_on": ["events", "figures"],
            "output_format": "three bullet points",
        },
    ]
}
PASS = {
    "verdict": "pass",
    **{d: {"ok": True} for d in ("completeness", "accuracy", "format", "safety")},
}


def fix(advice: str) -> dict[str, Any]:
    checks = {d: {"ok": True} for d in ("completeness", "accuracy", "format", "safety")}
    checks["completeness"] = {"ok": False, "reason": "no sources"}
    return {"verdict": "fix", **checks, "advice": advice}


class Desk:
    """Scripted planner, executors and reviewer; records who was asked what."""

    def __init__(self, plans: list[dict[str, Any]], reviews: Any = None) -> None:
        self.plans = plans
        self.reviews = reviews or (lambda text: PASS)
        self.asked: list[tuple[str, str]] = []
        self.searched: list[str] = []
        self.gate: asyncio.Event | None = None

    def respond(self, request: ModelRequest) -> Any:
        last = request.messages[-1]
        self.asked.append((request.agent, last.content or ""))
        if request.agent == "planner_writer":
            return S.say("REPORT: " + (last.content or "").split("Results of the tasks:")[1][:60])
        if request.agent == "planner":
            return S.say(json.dumps(self.plans.pop(0)))
        if request.agent == "reviewer":
            return S.say(json.dumps(self.reviews(last.content or "")))
        if request.agent == "researcher" and last.role == "user":
            return S.call("search", query="events")
        text = last.content if last.role == "tool" else f"{request.agent} done"
        return S.say(f"{request.agent}: {text}")

    def team(self, **kw: Any) -> PlanExecuteReview:
        desk = self

        @tool
        async def search(query: str) -> str:
            """Search the archive."""
            desk.searched.append(query)
            if desk.gate is not None and len(desk.searched) == 1:
                await desk.gate.wait()
            return "3 events found"

        return PlanExecuteReview(
            planner=Agent(name="planner"),
            executors=[
                Agent(name="researcher", tools=[search]),
                Agent(name="analyst"),
                Agent(name="writer"),
            ],
            reviewer=Agent(name="reviewer"),
            model=S(self.respond),
            **kw,
        )


def transitions(events: list[Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in events:
        if e.type == "task_transitioned":
            out.setdefault(e.task_id, []).append(e.to_status)
    return out


HAPPY = ["queued", "dispatching", "processing", "reviewing", "completed"]


async def test_plan_execute_review_aggregate() -> None:
    desk = Desk([PLAN])
    per = desk.team()
    result = await per.run("Write a short report on last quarter", session_id="S")
    assert result.status == "completed", result.error
    assert result.output is not None and result.output.startswith("REPORT:")
    assert transitions(result.events) == {"events": HAPPY, "figures": HAPPY, "report": HAPPY}
    # independent tasks went out together, the dependent one after both passed review
    order = [who for who, _ in desk.asked if who in ("researcher", "analyst", "writer")]
    assert order.index("writer") > max(order.index("researcher"), order.index("analyst"))
    writer_q = next(text for who, text in desk.asked if who == "writer")
    assert "researcher: 3 events found" in writer_q and "three bullet points" in writer_q
    stored = await per.store.list_tasks(run_id=result.run_id)
    assert [(t.task_id, t.status) for t in stored] == [
        ("events", "completed"),
        ("figures", "completed"),
        ("report", "completed"),
    ]


async def test_a_plan_that_cannot_run_is_refused_before_anything_runs() -> None:
    def task(tid: str, dep: str) -> dict[str, Any]:
        return {
            "task_id": tid,
            "description": "Do it",
            "agent_role": "analyst",
            "depends_on": [dep],
        }

    cycle = {"tasks": [task("a", "b"), task("b", "a")]}
    good = {"tasks": [{"task_id": "x", "description": "Do it", "agent_role": "analyst"}]}
    desk = Desk([cycle, good])
    result = await desk.team().run("do it")
    assert result.status == "completed"
    who = [w for w, _ in desk.asked]
    assert who[:2] == ["planner", "planner"]  # re-planned before any executor ran
    replan = desk.asked[1][1]
    assert "refused" in replan and "cycle" in replan


async def test_a_task_goes_to_an_executor_that_has_its_tools() -> None:
    """The named executor lacks the tool another has: the task goes there, and says why."""
    plan = {
        "tasks": [
            {
                "task_id": "x",
                "description": "Find it",
                "agent_role": "writer",
                "requires_tool": ["search"],
            },
        ]
    }
    desk = Desk([plan])
    result = await desk.team().run("find it")
    assert result.status == "completed"
    assert next(w for w, _ in desk.asked if w in ("writer", "researcher")) == "researcher"
    [dispatch] = [
        e for e in result.events if e.type == "task_transitioned" and e.to_status == "dispatching"
    ]
    assert dispatch.reason == "to researcher (writer lacks its tools)"


async def test_replanning_is_capped() -> None:
    bad = {"tasks": [{"task_id": "x", "description": "Do it", "agent_role": "nobody"}]}
    desk = Desk([bad] * 6)  # each plan is re-asked once with the validation error
    result = await desk.team(max_replans=2).run("do it")
    assert result.status == "failed"
    assert result.error is not None and result.error.startswith("no usable plan after 3 attempts")
    plans = [e for e in result.events if e.type == "tool_called" and e.tool == "ask_planner"]
    assert len(plans) == 3 and {w for w, _ in desk.asked} == {"planner"}
    # an executor the run lacks cannot even be named: the plan's schema lists the executors
    assert "agent_role" in (result.error or "")


async def test_the_fix_loop_is_capped_and_dependents_are_cancelled() -> None:
    def reviews(text: str) -> dict[str, Any]:
        return fix("cite your sources") if "List the key events" in text else PASS

    desk = Desk([PLAN], reviews)
    result = await desk.team(max_fix=3).run("report")
    assert result.status == "completed"  # the planner aggregates what there is
    moves = transitions(result.events)
    assert moves["events"].count("processing") == 4  # first try + 3 fixes
    assert moves["events"][-1] == "failed"
    assert moves["report"] == ["cancelled"]
    fixes = [t for who, t in desk.asked if who == "researcher" and "Expected output" in t]
    assert "cite your sources" in fixes[1]  # the advice reached the executor
    aggregate = desk.asked[-1][1]
    assert "did not complete" in aggregate and "events" in aggregate


async def test_a_killed_run_resumes_without_rerunning_finished_work(
    tmp_path: Path, dies_when_cancelled: None
) -> None:
    url = f"sqlite:///{tmp_path / 'per.db'}"
    desk = Desk([PLAN])
    desk.gate = asyncio.Event()
    per = desk.team(store=url)
    task = asyncio.ensure_future(per.run("report", session_id="S"))
    for _ in range(300):  # the analyst answers while the researcher's search hangs
        if any(w == "analyst" for w, _ in desk.asked) and desk.searched:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    again = Desk([])
    fresh = again.team(store=url)
    result = await fresh.resume("S")
    assert result.status == "completed", result.error
    asked = Counter(w for w, _ in again.asked)
    assert asked["analyst"] == 0 and asked["planner"] == 0  # not planned again
    assert asked["planner_writer"] == 1  # the aggregation
    stored = await fresh.store.get_events("S")
    moves = transitions(stored)
    assert moves == {"events": HAPPY, "figures": HAPPY, "report": HAPPY}  # each step once
    await per.aclose()
    await fresh.aclose()


def test_configuration_and_mermaid() -> None:
    with pytest.raises(ConfigError, match="at least one executor"):
        PlanExecuteReview(planner=Agent(name="p"), executors=[], reviewer=Agent(name="r"))
    text = Desk([]).team().to_mermaid()
    assert '"planner<br/>plans, aggregates"' in text and '|"fix"|' in text


async def test_a_failed_task_cancels_its_dependents_all_the_way_down() -> None:
    def task(tid: str, deps: list[str]) -> dict[str, Any]:
        return {
            "task_id": tid,
            "description": f"step {tid}",
            "agent_role": "analyst",
            "depends_on": deps,
        }

    chain = {"tasks": [task("a", []), task("b", ["a"]), task("c", ["b"]), task("d", [])]}

    def reviews(text: str) -> dict[str, Any]:
        return fix("again") if "step a" in text else PASS

    desk = Desk([chain], reviews)
    result = await desk.team(max_fix=0).run("go")
    assert result.status == "completed", result.error
    moves = transitions(result.events)
    assert moves["a"][-1] == "failed" and moves["d"][-1] == "completed"
    assert moves["b"] == ["cancelled"] and moves["c"] == ["cancelled"]
