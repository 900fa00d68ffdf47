"""The task state machine of plan-execute-review runs: a planner emits subtasks, executors run
them, a reviewer passes them or asks for a fix (seed 001 §3-4).

A `Task` moves only through `Task.transition`, which checks the table below and records every
step in `Task.history`; a request the table does not allow raises `InvalidTransition` and
leaves the task as it was.

| from          | to            | when                                                         |
|---------------|---------------|--------------------------------------------------------------|
| `pending`     | `queued`      | its dependencies are completed; it waits for an executor     |
| `queued`      | `dispatching` | an executor for its `agent_role` is being picked             |
| `dispatching` | `processing`  | an executor took it (`attempts` + 1)                         |
| `dispatching` | `failed`      | no executor has its `agent_role` or its `requires_tool`      |
| `processing`  | `reviewing`   | the executor returned a result                               |
| `processing`  | `failed`      | the executor raised or timed out                             |
| `reviewing`   | `completed`   | the reviewer passed the result                               |
| `reviewing`   | `retry`       | the reviewer said fix and retries remain (`advice` kept)     |
| `reviewing`   | `failed`      | the reviewer said fix with retries spent, or the review failed |
| `failed`      | `retry`       | retries remain and the failure was not marked final         |
| `retry`       | `queued`      | back in the queue, with the advice and the last result      |
| any non-final | `cancelled`   | a dependency ended failed or cancelled, or the run was dropped |

Retries are counted, not attempts: entering `retry` needs `retries < max_retries` and adds
one to `retries`; entering `processing` adds one to `attempts`, so `attempts` never exceeds
`max_retries + 1` and every task ends. `dispatching -> failed` is allowed because a missing
executor or tool is found before any model call is spent (seed 001 §4.4: refuse at once
rather than let an executor invent a result); the caller marks it `final=True` when no
executor ever will have it, else it may be retried like any failure.

Terminal states: `completed`, `cancelled`, and `failed` with `final` set. `final` is set on
entering `failed` when the retries are spent or the caller says no retry follows
(`transition("failed", ..., final=True)`); a `failed` task that is not final must go on to
`retry` (or `cancelled`). Once `final` is True the task takes no more steps, so every task
ends in exactly one terminal state, and exactly one entry of its history is `final`.

This module is pure data (no I/O), so events and stores carry tasks too;
`baton.runtime.tasks` adds the dependency ordering and the events.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from baton.core.errors import InvalidTransition
from baton.core.ids import now

TaskStatus = Literal[
    "pending",
    "queued",
    "dispatching",
    "processing",
    "reviewing",
    "completed",
    "failed",
    "retry",
    "cancelled",
]
"""Where a task is in its life; see the transition table in `baton.core.tasks`."""

# `cancelled` is a status of its own, not a kind of failure: when a task ends failed, the
# tasks that depend on it can never run, and when a run is dropped its open tasks stop; both
# must still end in a terminal state, and calling them `failed` would blame an executor that
# never ran them (and would need `pending -> failed`, which no executor causes).

TASK_STATUSES: tuple[TaskStatus, ...] = get_args(TaskStatus)
"""Every `TaskStatus`, in the order of a task's life."""

TERMINAL_STATUSES: frozenset[TaskStatus] = frozenset(("completed", "failed", "cancelled"))
"""Statuses a task may end in (`failed` only when `final`)."""

TRANSITIONS: dict[TaskStatus, tuple[TaskStatus, ...]] = {
    "pending": ("queued", "cancelled"),
    "queued": ("dispatching", "cancelled"),
    "dispatching": ("processing", "failed", "cancelled"),
    "processing": ("reviewing", "failed", "cancelled"),
    "reviewing": ("completed", "retry", "failed", "cancelled"),
    "failed": ("retry", "cancelled"),
    "retry": ("queued", "cancelled"),
    "completed": (),
    "cancelled": (),
}
"""Status -> the statuses it may move to (before the retry budget and `final` are applied:
see `Task.allowed`)."""


class TaskTransition(BaseModel):
    """One step of a task's history."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    from_status: TaskStatus
    to_status: TaskStatus
    reason: str = ""
    """Why it moved (an executor's error, the reviewer's verdict, ...)."""
    attempt: int = 0
    """The task's `attempts` after the step (0 before its first run)."""
    final: bool = False
    """True for the step into the task's terminal state (one per task at most)."""
    at: float = Field(default_factory=now)
    """Epoch seconds."""


class SubTask(BaseModel):
    """One task of a plan, as the planner writes it (its structured output)."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    task_id: str = Field(min_length=1, description="Unique id of the task within the plan.")
    description: str = Field(min_length=1, description="What the executor must do.")
    agent_role: str = Field(min_length=1, description="Role of the agent that executes it.")
    requires_tool: list[str] | None = Field(
        default=None, description="Tools the executor must have; none if it needs no tool."
    )
    output_format: str = Field(
        default="text", description="The shape of the expected result, e.g. a markdown table."
    )
    depends_on: list[str] = Field(
        default_factory=list, description="Ids of the tasks whose results it needs first."
    )


class Task(SubTask):
    """A subtask with its place in the state machine: status, attempts, retries, result,
    the reviewer's advice and its history. Change the status only with `transition`."""

    status: TaskStatus = "pending"
    attempts: int = Field(default=0, ge=0)
    """Executor runs started (entries into `processing`)."""
    retries: int = Field(default=0, ge=0)
    """Retries granted so far (entries into `retry`)."""
    max_retries: int = Field(default=3, ge=0)
    """Most retries; a failure with none left is final."""
    final: bool = False
    """True once the task is in its terminal state (`completed`, `cancelled`, or `failed`
    with no retry to follow); it then takes no more steps."""
    result: str | None = None
    """The executor's latest result."""
    advice: str | None = None
    """The reviewer's latest advice (a `fix` verdict), for the next attempt."""
    error: str | None = None
    """The latest error (executor, dispatch or review)."""
    history: list[TaskTransition] = Field(default_factory=list)
    """Every step so far, oldest first."""
    version: int = Field(default=0, ge=0)
    """Saves so far; `put_task` is compare-and-set on it (set by the store)."""
    session_id: str | None = None
    """Session of the run the task belongs to (set by the store when saved)."""
    run_id: str | None = None
    """Run the task belongs to (set by the store when saved)."""

    @model_validator(mode="after")
    def _consistent(self) -> Task:
        """A task read back (from a store or JSON) must be one the state machine can reach."""
        problems = []
        if self.final and self.status not in TERMINAL_STATUSES:
            problems.append(f"final while {self.status!r}")
        if not self.final and self.status in ("completed", "cancelled"):
            problems.append(f"{self.status!r} but not final")
        if not self.final and self.status == "failed" and self.retries >= self.max_retries:
            problems.append("failed with no retries left but not final")
        if self.retries > self.max_retries:
            problems.append(f"{self.retries} retries of at most {self.max_retries}")
        if self.attempts > self.retries + 1:
            problems.append(f"{self.attempts} attempts after {self.retries} retries")
        if problems:
            raise ValueError(f"task {self.task_id!r} is inconsistent: {'; '.join(problems)}")
        return self

    @classmethod
    def from_subtask(cls, subtask: SubTask, *, max_retries: int = 3) -> Task:
        """A new, `pending` task for a planner's subtask (of a task: its planner's part)."""
        return cls(**subtask.model_dump(include=set(SubTask.model_fields)), max_retries=max_retries)

    def subtask(self) -> SubTask:
        """The planner's part of the task (without its state)."""
        return SubTask(**self.model_dump(include=set(SubTask.model_fields)))

    @property
    def retries_left(self) -> int:
        """Retries that may still be granted."""
        return max(self.max_retries - self.retries, 0)

    def allowed(self) -> tuple[TaskStatus, ...]:
        """The statuses the task may move to now: none once final, and `retry` only while
        retries remain."""
        if self.final:
            return ()
        nexts = TRANSITIONS[self.status]
        if self.retries >= self.max_retries:
            nexts = tuple(s for s in nexts if s != "retry")
        return nexts

    def transition(
        self,
        new_status: TaskStatus,
        reason: str = "",
        *,
        final: bool = False,
        result: str | None = None,
        advice: str | None = None,
        error: str | None = None,
    ) -> TaskTransition:
        """Move to `new_status` and record the step (with `reason`); returns the history entry.

        `final=True` (only with `failed`) says no retry follows; a failure with no retries
        left is final anyway. `result`, `advice` and `error`, when given, are recorded with the
        step. Raises `InvalidTransition`, changing nothing, when the table does not allow the
        move from the current status (see the module's docstring).
        """
        allowed = self.allowed()
        if new_status not in allowed or (final and new_status != "failed"):
            raise self._refusal(new_status, allowed, final)
        ends = new_status in ("completed", "cancelled") or (
            new_status == "failed" and (final or self.retries >= self.max_retries)
        )
        attempts = self.attempts + (new_status == "processing")
        retries = self.retries + (new_status == "retry")
        step = TaskTransition(
            from_status=self.status,
            to_status=new_status,
            reason=reason,
            attempt=attempts,
            final=ends,
        )
        self.status, self.final = new_status, ends
        self.attempts, self.retries = attempts, retries
        if result is not None:
            self.result = result
        if advice is not None:
            self.advice = advice
        if error is not None:
            self.error = error
        self.history.append(step)
        return step

    def _refusal(
        self, new_status: str, allowed: tuple[TaskStatus, ...], final: bool
    ) -> InvalidTransition:
        """The error for a move that `transition` refuses, saying what may be done instead."""
        where = f"task {self.task_id!r} cannot go from {self.status!r} to {new_status!r}"
        options = ", ".join(allowed) or "nothing"
        if self.final:
            why = f"it is final ({self.status}) and takes no more steps"
        elif new_status not in TASK_STATUSES:
            why = f"{new_status!r} is not a task status (one of {', '.join(TASK_STATUSES)})"
        elif final and new_status in allowed:
            why = "only a move to 'failed' can be marked final"
        elif new_status == "retry" and "retry" in TRANSITIONS[self.status]:
            why = (
                f"its retries are spent ({self.retries} of {self.max_retries}); move it to "
                "'failed' instead"
            )
        else:
            why = "the task state machine has no such step"
        return InvalidTransition(
            f"{where}: {why}; allowed from {self.status!r}: {options}",
            task_id=self.task_id,
            current=self.status,
            requested=str(new_status),
            allowed=allowed,
        )
