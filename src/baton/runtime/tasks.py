"""Tasks of a plan-execute-review run: their state machine, their order, their events.

The state machine is pure data in `baton.core.tasks` (so that events and stores carry tasks)
and is re-exported here. In short (the full table, with when each step happens, is in that
module's docstring and in docs/api.md):

    pending -> queued -> dispatching -> processing -> reviewing -> completed
    dispatching -> failed        no executor has the role or the tools
    processing  -> failed        the executor raised or timed out
    reviewing   -> retry         the reviewer said fix, retries remain (advice kept)
    reviewing   -> failed        fix with retries spent, or the review failed
    failed      -> retry         retries remain and the failure is not final
    retry       -> queued
    any non-final -> cancelled   a dependency ended failed/cancelled, or the run was dropped

Terminal: `completed`, `cancelled`, and `failed` once `final` (retries spent, or the caller
said no retry follows).

This module adds the order: `plan_layers` groups a plan's tasks into layers whose tasks depend
only on earlier layers (the tasks of one layer may run in parallel), and `TaskBoard` follows a
plan as it runs (which tasks are ready, which can never run). `task_event` turns a step into
the `task_transitioned` event the run emits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from baton.core.errors import InvalidTransition, PlanError
from baton.core.events import TaskTransitioned
from baton.core.tasks import (
    TASK_STATUSES,
    TERMINAL_STATUSES,
    TRANSITIONS,
    SubTask,
    Task,
    TaskStatus,
    TaskTransition,
)

__all__ = [
    "TASK_STATUSES",
    "TERMINAL_STATUSES",
    "TRANSITIONS",
    "InvalidTransition",
    "PlanError",
    "SubTask",
    "Task",
    "TaskBoard",
    "TaskStatus",
    "TaskTransition",
    "plan_layers",
    "task_event",
]


def _index(tasks: Iterable[SubTask]) -> dict[str, SubTask]:
    """The tasks by id, in plan order; `PlanError` for a repeated id or an unknown dependency."""
    by_id: dict[str, SubTask] = {}
    for task in tasks:
        if task.task_id in by_id:
            raise PlanError(
                f"the plan has two tasks with id {task.task_id!r}; give every task its own id"
            )
        by_id[task.task_id] = task
    for task in by_id.values():
        unknown = [d for d in task.depends_on if d not in by_id]
        if unknown:
            raise PlanError(
                f"task {task.task_id!r} depends on {', '.join(map(repr, unknown))}, which the "
                f"plan does not have (its tasks: {', '.join(by_id)}); depend only on tasks of "
                "the same plan"
            )
    return by_id


def _cycle(left: Mapping[str, SubTask]) -> list[str]:
    """One dependency cycle among `left` (tasks none of which could be ordered), as ids with
    the first repeated at the end."""
    start = next(iter(left))
    seen: dict[str, int] = {}
    path: list[str] = []
    node = start
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        # every task left waits on at least one other task left (else it would be ordered)
        node = next(d for d in left[node].depends_on if d in left)
    return [*path[seen[node] :], node]


def plan_layers(tasks: Iterable[SubTask]) -> list[list[str]]:
    """The task ids in layers: each task's dependencies are all in earlier layers, and the
    tasks of one layer do not depend on each other (they may run in parallel). Within a layer
    the plan's order is kept.

    Raises `PlanError` for two tasks with one id, a dependency on a task the plan lacks, or a
    cycle (naming the tasks on it).
    """
    by_id = _index(tasks)
    waiting = {tid: set(t.depends_on) for tid, t in by_id.items()}
    layers: list[list[str]] = []
    while waiting:
        layer = [tid for tid, deps in waiting.items() if not deps]
        if not layer:
            left = {tid: by_id[tid] for tid in waiting}
            cycle = " -> ".join(_cycle(left))
            raise PlanError(
                f"tasks depend on each other in a cycle ({cycle}), so none of them can start "
                f"(tasks that cannot be ordered: {', '.join(waiting)}); break the cycle"
            )
        layers.append(layer)
        for tid in layer:
            del waiting[tid]
        for deps in waiting.values():
            deps.difference_update(layer)
    return layers


class TaskBoard:
    """The tasks of one plan, checked and ordered when the board is built (`PlanError` as for
    `plan_layers`); it holds the `Task` objects themselves, so it sees their steps."""

    def __init__(self, tasks: Iterable[Task]) -> None:
        listed = list(tasks)
        self.layers = plan_layers(listed)
        """Task ids by layer (see `plan_layers`)."""
        self.tasks: dict[str, Task] = {t.task_id: t for t in listed}
        """The tasks by id, in plan order."""

    @classmethod
    def from_subtasks(cls, subtasks: Iterable[SubTask], *, max_retries: int = 3) -> TaskBoard:
        """A board of new `pending` tasks for a planner's subtasks."""
        return cls(Task.from_subtask(s, max_retries=max_retries) for s in subtasks)

    def __getitem__(self, task_id: str) -> Task:
        return self.tasks[task_id]

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks.values())

    def __len__(self) -> int:
        return len(self.tasks)

    def ready(self) -> list[Task]:
        """The `pending` tasks whose dependencies have all completed, in plan order: they may
        be queued now, together."""
        return [
            t
            for t in self.tasks.values()
            if t.status == "pending"
            and all(self.tasks[d].status == "completed" for d in t.depends_on)
        ]

    def blocked(self) -> list[Task]:
        """The tasks not yet started (`pending`) that can never run, because a dependency
        ended failed or cancelled: cancel them, naming it."""
        return [
            t
            for t in self.tasks.values()
            if t.status == "pending"
            and any(
                self.tasks[d].final and self.tasks[d].status != "completed" for d in t.depends_on
            )
        ]

    @property
    def finished(self) -> bool:
        """True when every task is final."""
        return all(t.final for t in self.tasks.values())

    def counts(self) -> dict[TaskStatus, int]:
        """How many tasks are in each status (statuses with none left out)."""
        out: dict[TaskStatus, int] = {}
        for t in self.tasks.values():
            out[t.status] = out.get(t.status, 0) + 1
        return out


def task_event(base: Mapping[str, Any], task: Task, step: TaskTransition) -> TaskTransitioned:
    """The `task_transitioned` event of `step` (a step of `task`); `base` holds the fields
    every event of the run carries (`trace_id`, `session_id`, `run_id`, `agent`, `hop`)."""
    return TaskTransitioned(
        **{**base, "ts": step.at},
        task_id=task.task_id,
        from_status=step.from_status,
        to_status=step.to_status,
        reason=step.reason,
        attempt=step.attempt,
        final=step.final,
    )
