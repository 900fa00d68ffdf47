"""The task state machine (`baton.core.tasks`), dependency layers and `TaskBoard`
(`baton.runtime.tasks`), and the `task_transitioned` event."""

from __future__ import annotations

import json
import re
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import baton
from baton.core.errors import BatonError
from baton.core.events import TaskTransitioned, event_from_json
from baton.runtime.redact import Redactor
from baton.runtime.tasks import (
    InvalidTransition,
    PlanError,
    SubTask,
    Task,
    TaskBoard,
    plan_layers,
    task_event,
)

# -- the table, written out independently of the module (seed 001 §3, the design's table) ------

STATUSES = (
    "pending",
    "queued",
    "dispatching",
    "processing",
    "reviewing",
    "completed",
    "failed",
    "retry",
    "cancelled",
)
FORWARD = {
    ("pending", "queued"),
    ("queued", "dispatching"),
    ("dispatching", "processing"),
    ("dispatching", "failed"),
    ("processing", "reviewing"),
    ("processing", "failed"),
    ("reviewing", "completed"),
    ("reviewing", "retry"),
    ("reviewing", "failed"),
    ("failed", "retry"),
    ("retry", "queued"),
}
EDGES = FORWARD | {(s, "cancelled") for s in STATUSES if s not in ("completed", "cancelled")}
TERMINAL = {"completed", "failed", "cancelled"}


class Model:
    """What the task should look like, tracked by the rules alone."""

    def __init__(self, max_retries: int) -> None:
        self.status, self.final = "pending", False
        self.attempts, self.retries, self.max_retries = 0, 0, max_retries

    def allows(self, new: str, final: bool) -> bool:
        if self.final or (self.status, new) not in EDGES:
            return False
        if new == "retry" and self.retries >= self.max_retries:
            return False
        return not (final and new != "failed")

    def apply(self, new: str, final: bool) -> None:
        self.attempts += new == "processing"
        self.final = new in ("completed", "cancelled") or (
            new == "failed" and (final or self.retries >= self.max_retries)
        )
        self.retries += new == "retry"
        self.status = new


def new_task(max_retries: int = 3, task_id: str = "t1", **fields: Any) -> Task:
    sub = SubTask(
        task_id=task_id,
        description=fields.pop("description", "整理近半年的关键事件"),
        agent_role=fields.pop("agent_role", "executor"),
        **fields,
    )
    return Task.from_subtask(sub, max_retries=max_retries)


def assert_well_formed(task: Task) -> None:
    """The history is a chain of table steps from `pending` to the current status."""
    assert task.status in STATUSES
    at = "pending"
    for step in task.history:
        assert step.from_status == at
        assert (step.from_status, step.to_status) in EDGES
        at = step.to_status
    assert at == task.status
    assert task.attempts == sum(s.to_status == "processing" for s in task.history)
    assert task.retries == sum(s.to_status == "retry" for s in task.history)
    assert task.attempts <= task.max_retries + 1
    finals = [i for i, s in enumerate(task.history) if s.final]
    assert finals == ([len(task.history) - 1] if task.final else [])


requests = st.lists(st.tuples(st.sampled_from((*STATUSES, "done", "")), st.booleans()), max_size=60)


@settings(max_examples=300, deadline=None)
@given(max_retries=st.integers(0, 4), steps=requests)
def test_valid_requests_apply_and_invalid_ones_change_nothing(
    max_retries: int, steps: list[tuple[str, bool]]
) -> None:
    task, model = new_task(max_retries), Model(max_retries)
    for new, final in steps:
        before = task.model_dump()
        if model.allows(new, final):
            step = task.transition(new, f"to {new}", final=final)  # type: ignore[arg-type]
            model.apply(new, final)
            assert step is task.history[-1]
            assert (step.to_status, step.reason, step.attempt) == (new, f"to {new}", model.attempts)
        else:
            with pytest.raises(InvalidTransition) as info:
                task.transition(new, "refused", final=final)  # type: ignore[arg-type]
            assert task.model_dump() == before, "a refused request changed the task"
            err = info.value
            assert (err.task_id, err.current, err.requested) == ("t1", model.status, new)
            assert err.allowed == task.allowed()
            assert f"task 't1' cannot go from {model.status!r} to {new!r}" in str(err)
        assert (task.status, task.final) == (model.status, model.final)
        assert (task.attempts, task.retries) == (model.attempts, model.retries)
        assert set(task.allowed()) == {s for s in STATUSES if model.allows(s, False)}
        assert_well_formed(task)


@settings(max_examples=300, deadline=None)
@given(max_retries=st.integers(0, 4), data=st.data())
def test_a_random_policy_always_ends_in_exactly_one_terminal_state(
    max_retries: int, data: st.DataObject
) -> None:
    task = new_task(max_retries)
    bound = 7 * (max_retries + 1) + 2  # the longest way: every retry after a review
    for _ in range(bound):
        if task.final:
            break
        choices = task.allowed()
        assert choices, f"{task.status} is not final but has no way out"
        new = data.draw(st.sampled_from(choices))
        final = new == "failed" and data.draw(st.booleans())
        task.transition(new, final=final)
        assert_well_formed(task)
    assert task.final, f"not final after {bound} steps: {task.history}"
    assert task.status in TERMINAL
    assert [s.final for s in task.history].count(True) == 1 and task.history[-1].final
    assert task.attempts <= max_retries + 1 and task.retries <= max_retries
    assert task.allowed() == ()
    for new in STATUSES:
        with pytest.raises(InvalidTransition, match="final"):
            task.transition(new)  # type: ignore[arg-type]
    # the task reads back from JSON as it was (a store keeps it so)
    assert Task.model_validate_json(task.model_dump_json()) == task


# -- the steps a plan-execute-review run takes ----------------------------------------------------


def drive(task: Task, *steps: str) -> None:
    for new in steps:
        task.transition(new)  # type: ignore[arg-type]


def test_the_straight_path_records_result_and_history() -> None:
    task = new_task()
    drive(task, "queued", "dispatching")
    task.transition("processing", "executor-1 took it")
    task.transition("reviewing", "result in", result="| 事件 | 日期 |")
    last = task.transition("completed", "reviewer: pass")
    assert (task.status, task.final, task.attempts, task.retries) == ("completed", True, 1, 0)
    assert task.result == "| 事件 | 日期 |"
    assert [s.to_status for s in task.history] == [
        "queued",
        "dispatching",
        "processing",
        "reviewing",
        "completed",
    ]
    assert last.final and last.reason == "reviewer: pass" and last.attempt == 1
    assert all(a.at <= b.at for a, b in pairwise(task.history))


def test_a_fix_verdict_retries_with_the_advice_until_retries_are_spent() -> None:
    task = new_task(max_retries=1)
    drive(task, "queued", "dispatching", "processing", "reviewing")
    task.transition("retry", "reviewer: fix", advice="补充来源引用")
    assert (task.status, task.retries, task.advice, task.final) == (
        "retry",
        1,
        "补充来源引用",
        False,
    )
    drive(task, "queued", "dispatching", "processing", "reviewing")
    assert task.attempts == 2
    with pytest.raises(InvalidTransition) as info:
        task.transition("retry", "reviewer: fix again")
    message = str(info.value)
    assert "task 't1' cannot go from 'reviewing' to 'retry'" in message
    assert "retries are spent (1 of 1)" in message
    assert "allowed from 'reviewing': completed, failed, cancelled" in message
    step = task.transition("failed", "reviewer: fix, no retries left", error="still no sources")
    assert step.final and task.final and task.error == "still no sources"
    assert task.allowed() == ()


def test_an_executor_error_with_retries_left_must_be_retried_or_cancelled() -> None:
    task = new_task()
    drive(task, "queued", "dispatching", "processing")
    step = task.transition("failed", "executor raised", error="TimeoutError")
    assert not step.final and not task.final
    assert task.allowed() == ("retry", "cancelled")
    drive(task, "retry", "queued")
    assert (task.retries, task.retries_left, task.error) == (1, 2, "TimeoutError")


def test_no_executor_fails_at_dispatch_and_final_means_no_retry() -> None:
    task = new_task(requires_tool=["web_search"])
    drive(task, "queued", "dispatching")
    step = task.transition("failed", "no executor has web_search", final=True)
    assert step.final and task.final and task.attempts == 0
    with pytest.raises(InvalidTransition, match="it is final \\(failed\\)"):
        task.transition("retry")


def test_only_a_failure_can_be_marked_final() -> None:
    task = new_task()
    with pytest.raises(InvalidTransition, match="only a move to 'failed' can be marked final"):
        task.transition("queued", final=True)
    assert task.history == []


def test_refusals_name_the_task_the_states_and_what_is_allowed() -> None:
    task = new_task(task_id="trend")
    with pytest.raises(InvalidTransition) as info:
        task.transition("completed")
    assert str(info.value) == (
        "task 'trend' cannot go from 'pending' to 'completed': the task state machine has no "
        "such step; allowed from 'pending': queued, cancelled"
    )
    with pytest.raises(InvalidTransition, match="'done' is not a task status"):
        task.transition("done")  # type: ignore[arg-type]
    assert isinstance(info.value, BatonError)
    assert baton.InvalidTransition is InvalidTransition and baton.PlanError is PlanError


def test_a_zero_retry_task_fails_finally_at_once() -> None:
    task = new_task(max_retries=0)
    drive(task, "queued", "dispatching", "processing")
    assert task.transition("failed").final
    task = new_task(max_retries=0)
    drive(task, "queued", "dispatching", "processing", "reviewing")
    assert "retry" not in task.allowed()


def test_the_planner_shape_is_strict_and_a_task_round_trips() -> None:
    raw = {
        "task_id": "t3",
        "description": "对其中一个事件做深度分析",
        "agent_role": "analyst",
        "requires_tool": ["web_search", "doc_parse"],
        "output_format": "markdown",
        "depends_on": ["t2"],
    }
    sub = SubTask.model_validate(raw)
    assert set(SubTask.model_json_schema()["properties"]) == set(raw)
    with pytest.raises(ValidationError):
        SubTask.model_validate({**raw, "priority": "high"})
    with pytest.raises(ValidationError):
        SubTask.model_validate({**raw, "task_id": ""})
    task = Task.from_subtask(sub)
    assert (task.status, task.max_retries, task.depends_on) == ("pending", 3, ["t2"])
    assert task.subtask() == sub
    again = Task.from_subtask(task, max_retries=1)  # a task's planner part, afresh
    assert (again.status, again.max_retries, again.subtask()) == ("pending", 1, sub)
    drive(task, "queued", "dispatching", "processing")
    assert Task.model_validate_json(task.model_dump_json()) == task


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"status": "pending", "final": True}, "final while 'pending'"),
        ({"status": "completed"}, "'completed' but not final"),
        ({"status": "failed", "max_retries": 0}, "failed with no retries left but not final"),
        ({"retries": 4}, "4 retries of at most 3"),
        ({"attempts": 2}, "2 attempts after 0 retries"),
    ],
)
def test_an_unreachable_task_is_refused_when_read(fields: dict[str, Any], problem: str) -> None:
    data = {**new_task().model_dump(), **fields}
    with pytest.raises(ValidationError, match=re.escape(problem)):
        Task.model_validate_json(json.dumps(data))


def test_each_step_becomes_a_task_transitioned_event() -> None:
    task = new_task()
    drive(task, "queued", "dispatching", "processing")
    step = task.transition("failed", "password: hunter2 rejected", final=True)
    base = {"trace_id": "a" * 32, "session_id": "s1", "run_id": "r1", "agent": "planner"}
    event = task_event(base, task, step)
    assert isinstance(event, TaskTransitioned) and event.type == "task_transitioned"
    assert (event.task_id, event.from_status, event.to_status) == ("t1", "processing", "failed")
    assert (event.attempt, event.final, event.ts, event.agent) == (1, True, step.at, "planner")
    assert event_from_json(event.model_dump_json()) == event
    out = Redactor().redact_event(event)
    assert out.reason == "password: [REDACTED:password] rejected"
    assert (out.task_id, out.from_status, out.to_status) == ("t1", "processing", "failed")


# -- dependency layers ---------------------------------------------------------------------------


def sub(task_id: str, *depends_on: str) -> SubTask:
    return SubTask(
        task_id=task_id,
        description=f"do {task_id}",
        agent_role="executor",
        depends_on=[*depends_on],
    )


def test_a_diamond_runs_its_middle_in_parallel() -> None:
    plan = [sub("d", "b", "c"), sub("b", "a"), sub("c", "a"), sub("a")]
    assert plan_layers(plan) == [["a"], ["b", "c"], ["d"]]


def test_independent_tasks_form_one_layer_in_plan_order() -> None:
    assert plan_layers([sub("z"), sub("m"), sub("a")]) == [["z", "m", "a"]]
    assert plan_layers([]) == []


def test_a_cycle_names_its_tasks() -> None:
    plan = [sub("x"), sub("a", "c"), sub("b", "a"), sub("c", "b"), sub("after", "c", "x")]
    with pytest.raises(PlanError) as info:
        plan_layers(plan)
    message = str(info.value)
    assert "cycle (a -> c -> b -> a)" in message
    assert "tasks that cannot be ordered: a, b, c, after" in message
    assert isinstance(info.value, BatonError)
    with pytest.raises(PlanError, match=re.escape("cycle (self -> self)")):
        plan_layers([sub("self", "self")])


def test_an_unknown_dependency_and_a_repeated_id_are_refused() -> None:
    with pytest.raises(PlanError) as info:
        plan_layers([sub("t1"), sub("t2", "t1", "t9")])
    assert str(info.value).startswith(
        "task 't2' depends on 't9', which the plan does not have (its tasks: t1, t2)"
    )
    with pytest.raises(PlanError, match="two tasks with id 't1'"):
        plan_layers([sub("t1"), sub("t1")])


@st.composite
def dags(draw: st.DrawFn) -> list[SubTask]:
    """A random plan without cycles (each task depends on some earlier ones), shuffled."""
    n = draw(st.integers(0, 12))
    plan = [
        sub(f"t{i}", *draw(st.sets(st.sampled_from([f"t{j}" for j in range(i)]))) if i else ())
        for i in range(n)
    ]
    return draw(st.permutations(plan))


@settings(max_examples=200, deadline=None)
@given(dags())
def test_layers_put_every_task_once_after_all_its_dependencies(plan: list[SubTask]) -> None:
    layers = plan_layers(plan)
    where = {tid: i for i, layer in enumerate(layers) for tid in layer}
    assert sorted(where) == sorted(t.task_id for t in plan)
    assert sum(map(len, layers)) == len(plan)
    for t in plan:
        # in the earliest layer its dependencies allow: as parallel as the plan permits
        assert where[t.task_id] == max((where[d] + 1 for d in t.depends_on), default=0)


@settings(max_examples=200, deadline=None)
@given(dags(), st.data())
def test_any_cycle_is_refused_and_the_one_named_is_real(
    plan: list[SubTask], data: st.DataObject
) -> None:
    if not plan:
        return
    ids = [t.task_id for t in plan]
    a, b = data.draw(st.sampled_from(ids)), data.draw(st.sampled_from(ids))
    by_id = {t.task_id: t for t in plan}
    by_id[a] = sub(a, *by_id[a].depends_on, b)  # a and b now wait on each other (a == b: itself)
    by_id[b] = sub(b, *by_id[b].depends_on, a)
    with pytest.raises(PlanError) as info:
        plan_layers(list(by_id.values()))
    found = re.search(r"cycle \(([^)]*)\)", str(info.value))
    assert found, str(info.value)
    named = found.group(1).split(" -> ")
    assert named[0] == named[-1] and len(named) >= 2
    for a, b in pairwise(named):
        assert b in by_id[a].depends_on, (a, b, str(info.value))


# -- the board ------------------------------------------------------------------------------------


def finish(task: Task) -> None:
    drive(task, "queued", "dispatching", "processing", "reviewing", "completed")


def test_the_board_releases_tasks_as_their_dependencies_complete() -> None:
    board = TaskBoard.from_subtasks(
        [sub("a"), sub("b", "a"), sub("c", "a"), sub("d", "b", "c")], max_retries=1
    )
    assert board.layers == [["a"], ["b", "c"], ["d"]] and len(board) == 4
    assert [t.task_id for t in board.ready()] == ["a"]
    finish(board["a"])
    assert [t.task_id for t in board.ready()] == ["b", "c"]
    finish(board["b"])
    assert [t.task_id for t in board.ready()] == ["c"]
    finish(board["c"])
    assert [t.task_id for t in board.ready()] == ["d"]
    finish(board["d"])
    assert board.finished and board.ready() == [] and board.counts() == {"completed": 4}
    assert all(t.max_retries == 1 for t in board)


def test_tasks_after_a_final_failure_are_blocked_and_cancelled() -> None:
    board = TaskBoard.from_subtasks([sub("a"), sub("b", "a"), sub("c")])
    drive(board["a"], "queued", "dispatching")
    board["a"].transition("failed", "no executor", final=True)
    assert [t.task_id for t in board.blocked()] == ["b"]
    assert [t.task_id for t in board.ready()] == ["c"]
    for t in board.blocked():
        t.transition("cancelled", "dependency 'a' failed")
    assert board["b"].final and board.counts() == {"failed": 1, "cancelled": 1, "pending": 1}
    assert not board.finished


def test_a_board_refuses_a_bad_plan() -> None:
    with pytest.raises(PlanError, match="cycle"):
        TaskBoard.from_subtasks([sub("a", "b"), sub("b", "a")])


@settings(max_examples=100, deadline=None)
@given(dags(), st.data())
def test_a_whole_plan_driven_at_random_ends_with_every_task_final(
    plan: list[SubTask], data: st.DataObject
) -> None:
    board = TaskBoard.from_subtasks(plan, max_retries=data.draw(st.integers(0, 2)))
    for _ in range(20 * (len(board) + 1) * 3):
        if board.finished:
            break
        for t in board.blocked():
            t.transition("cancelled", "a dependency did not complete")
        for t in board.ready():
            t.transition("queued")
        running = [t for t in board if not t.final and t.status != "pending"]
        if not running:
            continue
        t = data.draw(st.sampled_from(running))
        choices = [s for s in t.allowed() if s != "cancelled"]
        new = data.draw(st.sampled_from(choices))
        t.transition(new, final=new == "failed" and data.draw(st.booleans()))
    assert board.finished
    for t in board:
        assert_well_formed(t)
        deps = [board[d] for d in t.depends_on]
        if t.status == "completed" or t.attempts:
            assert all(d.status == "completed" for d in deps)  # never ran before its inputs
        if t.status == "cancelled":
            assert any(d.status != "completed" for d in deps)
