"""`baton trace` shows a plan's task transitions, one line each, in every view."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from typer.testing import CliRunner

from baton.backends import SQLiteStore
from baton.backends.base import SessionRecord
from baton.cli.app import app
from baton.core.events import AgentStarted, Event, RunFinished, RunStarted
from baton.core.tasks import SubTask, Task
from baton.runtime.tasks import task_event

SESSION = "s_plan"


def plan_events() -> list[Event]:
    """A run whose planner moved two tasks: one passed, one fixed once and then failed."""
    base: dict[str, Any] = {"trace_id": "a" * 32, "session_id": SESSION, "run_id": "run_1"}
    events: list[Event] = [
        RunStarted(**base, message="调研某行业近半年的发展趋势"),
        AgentStarted(**base, agent="planner", reason="entry"),
    ]
    at = {**base, "agent": "planner"}
    t1 = Task.from_subtask(SubTask(task_id="t1", description="趋势概览", agent_role="executor"))
    t2 = Task.from_subtask(
        SubTask(task_id="t2", description="深度分析", agent_role="analyst"), max_retries=1
    )
    for task, steps in (
        (t1, ["queued", "dispatching", "processing", "reviewing", "completed"]),
        (t2, ["queued", "dispatching", "processing", "reviewing"]),
    ):
        for new in steps:
            events.append(task_event(at, task, task.transition(new)))  # type: ignore[arg-type]
    events.append(task_event(at, t2, t2.transition("retry", "reviewer: fix, 缺少来源引用")))
    for new in ("queued", "dispatching", "processing"):
        events.append(task_event(at, t2, t2.transition(new)))  # type: ignore[arg-type]
    events.append(task_event(at, t2, t2.transition("failed", "executor timed out")))
    events.append(RunFinished(**base, agent="planner", status="completed", output="报告"))
    return events


@pytest.fixture
def store_with_plan(store_url: str) -> str:
    async def write() -> None:
        store = SQLiteStore(store_url)
        try:
            await store.commit_run(SessionRecord(SESSION), [], plan_events())
        finally:
            await store.close()

    asyncio.run(write())
    return store_url


def test_the_tree_has_one_line_per_task_transition(runner: CliRunner, store_with_plan: str):
    result = runner.invoke(app, ["trace", SESSION, "--store", store_with_plan, "--view", "tree"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if re.search(r"\btask  t\d ", line)]
    assert len(lines) == 14, result.output
    out = "\n".join(lines)
    assert "task  t1 pending -> queued" in out
    assert "task  t1 dispatching -> processing (attempt 1)" in out
    assert "task  t1 reviewing -> completed (attempt 1)" in out
    assert "task  t2 reviewing -> retry (attempt 1): reviewer: fix, 缺少来源引用" in out
    assert "task  t2 processing -> failed (attempt 2, final): executor timed out" in out


def test_the_table_and_the_json_tree_list_the_task_steps(runner: CliRunner, store_with_plan: str):
    table = runner.invoke(app, ["trace", SESSION, "--store", store_with_plan, "--view", "table"])
    assert table.exit_code == 0, table.output
    assert re.search(r"planner\s+task\s+t2 reviewing -> retry \(attempt 1\)", table.output)
    doc = runner.invoke(
        app, ["trace", SESSION, "--store", store_with_plan, "-f", "json", "--view", "tree"]
    )
    assert doc.exit_code == 0, doc.output
    [run] = json.loads(doc.stdout)["runs"]
    steps = [s for s in run["turns"][0]["steps"] if s["kind"] == "task"]
    assert len(steps) == 14
    assert [s["failed"] for s in steps].count(True) == 1
    events = runner.invoke(app, ["trace", SESSION, "--store", store_with_plan, "-f", "json"])
    kinds = [json.loads(line)["type"] for line in events.stdout.splitlines()]
    assert kinds.count("task_transitioned") == 14


def test_mermaid_notes_each_task_step(runner: CliRunner, store_with_plan: str):
    result = runner.invoke(app, ["trace", SESSION, "--store", store_with_plan, "-f", "mermaid"])
    assert result.exit_code == 0, result.output
    assert "Note over A1: task t1 pending -> queued" in result.output
    assert "Note over A1: task t2 processing -> failed (attempt 2, final)" in result.output
