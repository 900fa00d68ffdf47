"""`PlanExecuteReview`: a planner splits the request into tasks, executors run them by
dependency, a reviewer passes or sends back each result, the planner aggregates (seed 001 §3-4).

The lead is a conductor (`baton.runtime.conduct`): it decides each step in code from the
results so far, and every decision is replayed from the turn's scratch, so a resumed run
decides exactly as the interrupted one would. The steps:

1. **Plan.** The planner answers with its subtasks as JSON (`SubTask`: `task_id, description,
   agent_role, requires_tool, output_format, depends_on`). Before anything runs, a pre-check
   refuses a plan whose tasks name an executor the run does not have, or tools that executor
   lacks, or that cannot be ordered (a cycle, an unknown dependency): the planner is told why
   and plans again, at most `max_replans` (2) times; then the run fails.
2. **Execute.** Tasks whose dependencies are completed go to their executors (`agent_role` is
   the executor's name), independent ones in parallel; each sees its task, the results of the
   tasks it depends on and, on a retry, the reviewer's advice. Results are cut to 1,500
   characters.
3. **Review.** The reviewer judges each result on completeness, accuracy, format and safety and
   answers `pass` or `fix` with advice. `fix` sends the task back to its executor with the
   advice, at most `max_fix` (3) times; then the task is `failed` and the tasks depending on
   it are `cancelled`.
4. **Aggregate.** The planner writes the answer from the completed results, told which tasks
   failed.

Every task moves through the state machine of `baton.core.tasks`; each step is a
`task_transitioned` event (`baton trace` shows them) and the tasks are saved through the
store's `Tasks` capability.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from baton.agents import Agent
from baton.backends.base import Tasks
from baton.core.errors import ConfigError, PlanError
from baton.core.messages import ToolCall
from baton.runtime.blueprint import TASKS, Blueprint
from baton.runtime.conduct import Conducted, Done, answered
from baton.runtime.delegation import Ask, ask_tool_name
from baton.runtime.kernel import Kernel
from baton.runtime.model_call import Parsed, Reply
from baton.runtime.outcomes import Failed
from baton.runtime.output import OutputSpec, compile_output
from baton.runtime.state import RunState, TurnState
from baton.runtime.tasks import (
    SubTask,
    Task,
    TaskBoard,
    TaskStatus,
    TaskTransition,
    task_event,
)
from baton.topologies.mermaid import Flowchart
from baton.topologies.supervisor import delegation
from baton.topologies.team import Team

MAX_RESULT_CHARS = 1500
"""Executor results are cut to this many characters before review and aggregation."""


class Plan(BaseModel):
    """The planner's answer."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[SubTask] = Field(min_length=1)


def plan_type(executors: dict[str, tuple[str, ...]]) -> type[BaseModel]:
    """The planner's output type for these executors: a `Plan` whose `agent_role` can only
    name an executor and whose `requires_tool` can only name their tools, so a model whose
    output is constrained to the schema (the embedded model's grammar, strict structured
    outputs) cannot invent either. A tool an executor lacks is still refused by the pre-check."""
    roles: Any = Literal.__getitem__(tuple(executors))
    every = sorted({t for tools in executors.values() for t in tools})
    tool_list: Any = list[Literal.__getitem__(tuple(every))] | None if every else None  # type: ignore[misc]
    task = create_model(
        "PlannedTask",
        __config__=ConfigDict(extra="forbid"),
        task_id=(str, Field(min_length=1, description="Unique id of the task, e.g. t1.")),
        description=(str, Field(min_length=1, description="What the executor must do.")),
        agent_role=(roles, Field(description="The executor that does it.")),
        requires_tool=(tool_list, Field(default=None, description="Tools it needs, if any.")),
        output_format=(str, Field(default="text", description="Shape of the result.")),
        depends_on=(list[str], Field(default_factory=list, description="Ids it needs first.")),
    )
    return create_model(
        "Plan",
        __config__=ConfigDict(extra="forbid"),
        tasks=(list[task], Field(min_length=1)),  # type: ignore[valid-type]
    )


class Check(BaseModel):
    """One dimension of a review."""

    ok: bool
    reason: str = ""


class Review(BaseModel):
    """The reviewer's answer for one result."""

    verdict: Literal["pass", "fix"]
    completeness: Check
    accuracy: Check
    format: Check
    safety: Check
    advice: str = ""


class PlanExecuteReview(Team):
    """Plan, execute by dependency (in parallel), review with a bounded fix loop, aggregate.

    `PlanExecuteReview(planner=..., executors=[...], reviewer=..., max_fix=3, max_replans=2,
    max_parallel=4, model=..., **team)`.
    """

    def __init__(
        self,
        *,
        planner: Agent,
        executors: Sequence[Agent],
        reviewer: Agent,
        max_fix: int = 3,
        max_replans: int = 2,
        max_parallel: int = 4,
        max_tasks: int = 12,
        name: str = "plan_execute_review",
        **team: Any,
    ) -> None:
        if not executors:
            raise ConfigError("a PlanExecuteReview needs at least one executor")
        if max_fix < 0 or max_replans < 0:
            raise ConfigError("max_fix and max_replans must be 0 or more")
        for a in [planner, *executors, reviewer]:
            if a.handoffs:
                raise ConfigError(
                    f"{a.name!r} has handoffs; planner, executors and reviewer answer"
                )
        # typed hand-overs: the planner plans as `Plan`, the reviewer judges as `Review`; the
        # planner's aggregation is free text, so it runs as a copy without the output type
        writer = planner.model_copy(
            update={
                "name": f"{planner.name}_writer",
                "output_type": None,
                "description": f"{planner.name}, writing the answer from the results",
            }
        )
        tools = {e.name: tuple(t.name for t in e.tools) for e in executors}
        planned = plan_type(tools)
        if planner.output_type is None:
            planner = planner.model_copy(update={"output_type": planned})
        if reviewer.output_type is None:
            reviewer = reviewer.model_copy(update={"output_type": Review})
        everyone = [planner, writer, *executors, reviewer]
        asks = (max_replans + 2) + max_tasks * (max_fix + 1) * 2
        lead = Agent(
            name=name,
            description="Plans, runs and reviews the tasks of a request.",
        )
        conductor = _Conductor(
            compile_output(planned, native=False),
            planner.name,
            writer.name,
            reviewer.name,
            tools,
            max_fix,
            max_replans,
            max_tasks,
        )
        blueprint = delegation(
            name, everyone, max_parallel, Ask(max_delegations=asks), "plan-execute-review"
        ) | Blueprint(conductors={name: Conducted(conductor, asks + 1)})
        blueprint |= Blueprint(needs=(TASKS,))  # the tasks are saved as they move
        super().__init__([lead, *everyone], entry=name, blueprint=blueprint, **team)
        self.planner, self.reviewer = planner.name, reviewer.name
        self.executors = tools
        self.max_fix, self.max_replans = max_fix, max_replans

    def to_mermaid(self) -> str:
        chart = Flowchart()
        chart.node("user", "circle")
        chart.node(self.planner, note="plans, aggregates")  # (its writer copy aggregates)
        chart.node(self.reviewer, note=f"pass or fix, {self.max_fix} fixes at most")
        chart.edge("user", self.planner)
        for name, tools in self.executors.items():
            chart.node(name, note=", ".join(tools))
            chart.edge(self.planner, name, "tasks by dependency", dotted=True)
            chart.edge(name, self.reviewer, "result")
            chart.edge(self.reviewer, name, "fix", dotted=True)
        chart.edge(self.reviewer, self.planner, "passed results")
        chart.edge(self.planner, "user", "answer")
        return chart.text()


# ------------------------------------------------------------------ the conductor
@dataclass
class _Replay:
    """What the turn's results so far mean: the plan, its tasks and their steps."""

    board: TaskBoard | None = None
    replans: int = 0
    rejection: str = ""
    answer: str | None = None
    failed: str | None = None
    steps: list[tuple[Task, TaskTransition]] = field(default_factory=list)
    """Every task step, in the order the run made them."""

    def move(self, task: Task, status: TaskStatus, reason: str, **kw: Any) -> None:
        self.steps.append((task, task.transition(status, reason, **kw)))


@dataclass(frozen=True, slots=True)
class _Conductor:
    plans: OutputSpec
    """How a plan is read back from the planner's answer (its output type, compiled once)."""
    planner: str
    writer: str
    reviewer: str
    executors: dict[str, tuple[str, ...]]
    max_fix: int
    max_replans: int
    max_tasks: int

    async def __call__(self, kernel: Kernel, run: RunState, turn: TurnState) -> Reply | Failed:
        state = self._replay(turn)
        board = state.board
        calls = self._decide(state, run.message) if state.failed is None else []
        await self._record(kernel, run, turn, state)
        if state.failed is not None:
            return Failed(state.failed)
        if state.answer is not None:
            return state.answer, []
        if calls:
            return None, calls
        if board is not None and board.finished:
            question = self._aggregation(run.message, board)
            return None, [_call("aggregate", self.writer, question=question)]
        return Failed("the plan stalled: no task can run and none is running")

    # -- replay: every result and every decision again, in order ---------------------------
    def _replay(self, turn: TurnState) -> _Replay:
        state = _Replay()
        results = {d.call_id: d for d in answered(turn)}
        for m in turn.scratch:
            if m.role == "assistant":  # a decision: the steps it made happen again
                if state.board is not None:
                    self._advance(state)
            elif m.role == "tool" and m.tool_call_id in results:
                self._apply(state, results[m.tool_call_id])
        return state

    def _apply(self, state: _Replay, done: Done) -> None:
        kind, _, rest = done.call_id.partition(":")
        if kind == "plan":
            self._planned(state, done)
        elif kind == "aggregate":
            if done.failed:
                state.failed = f"the planner could not aggregate the results: {done.answer}"
            else:
                state.answer = done.answer
        elif kind in ("exec", "review") and state.board is not None:
            task = state.board[rest.rsplit(":", 1)[0]]
            if kind == "exec":
                _executed(state, task, done)
            else:
                _reviewed(state, task, done)

    def _decide(self, state: _Replay, message: str) -> list[Parsed]:
        """The calls of the decision made now."""
        if state.answer is not None:
            return []
        if state.board is None:
            return [self._plan_call(message, state)]
        return self._advance(state)

    def _planned(self, state: _Replay, done: Done) -> None:
        if done.failed:
            why = f"the planner failed: {done.answer}"
        else:
            checked = self.plans.check(done.answer)
            if isinstance(checked, str):
                why = f"the plan is not valid JSON of the expected shape: {checked}"
            else:
                plan = Plan.model_validate(checked.data)
                why = self._precheck(plan)
                if not why:
                    state.board = TaskBoard.from_subtasks(plan.tasks, max_retries=self.max_fix)
                    return
        state.replans += 1
        state.rejection = why
        if state.replans > self.max_replans:
            state.failed = f"no usable plan after {state.replans} attempts: {why}"

    def _precheck(self, plan: Plan) -> str:
        """Why the plan cannot run, or '': a task needs a tool no executor holds, names an
        executor the run lacks (with no tool to pick one by), or the tasks cannot be ordered.
        A task whose named executor lacks its tools goes to one that has them (`executor`)."""
        if len(plan.tasks) > self.max_tasks:
            return f"the plan has {len(plan.tasks)} tasks; at most {self.max_tasks} are allowed"
        problems = []
        held = {t for tools in self.executors.values() for t in tools}
        for task in plan.tasks:
            missing = [x for x in task.requires_tool or () if x not in held]
            if missing:
                problems.append(
                    f"task {task.task_id!r} needs {', '.join(missing)}, which no executor has "
                    f"(the tools are: {', '.join(sorted(held)) or 'none'})"
                )
            elif self.executor(task) is None:
                problems.append(
                    f"task {task.task_id!r} names agent_role {task.agent_role!r}, but the "
                    f"executors are {', '.join(self.executors)}"
                )
        try:
            TaskBoard.from_subtasks(plan.tasks)
        except PlanError as exc:
            problems.append(str(exc))
        return "; ".join(problems)

    def executor(self, task: SubTask) -> str | None:
        """Who runs `task`: its `agent_role` when that executor has every tool it needs, else
        the first executor that has them all; None when none fits."""
        need = set(task.requires_tool or ())
        named = self.executors.get(task.agent_role)
        if named is not None and need <= set(named):
            return task.agent_role
        if not need:
            return None  # an unknown executor, and no tool to choose one by
        return next((n for n, tools in self.executors.items() if need <= set(tools)), None)

    def _advance(self, state: _Replay) -> list[Parsed]:
        """One decision: move the tasks on as far as the results allow, and the calls that
        follow (executors for the tasks that can run, the reviewer for new results)."""
        board = state.board
        assert board is not None
        calls: list[Parsed] = []
        while blocked := board.blocked():  # a cancelled task blocks its own dependents in turn
            for task in blocked:
                failed = [
                    d for d in task.depends_on if board[d].final and board[d].status != "completed"
                ]
                reason = f"depends on {', '.join(failed)}, which did not complete"
                state.move(task, "cancelled", reason)
        for task in board:
            if task.status == "failed" and not task.final:
                state.move(task, "retry", task.error or "failed")
            if task.status == "retry":
                state.move(task, "queued", "back in the queue")
        for task in board.ready():
            state.move(task, "queued", "its dependencies are completed")
        for task in board:
            if task.status == "queued":
                runner = self.executor(task) or task.agent_role
                why = "" if runner == task.agent_role else f" ({task.agent_role} lacks its tools)"
                state.move(task, "dispatching", f"to {runner}{why}")
                state.move(task, "processing", f"{runner} works on it")
                calls.append(self._exec_call(board, task))
            elif task.status == "reviewing":
                calls.append(self._review_call(task))
        return calls

    # -- calls ----------------------------------------------------------------------------
    def _plan_call(self, message: str, state: _Replay) -> Parsed:
        roster = "\n".join(
            f"- {name}: tools {', '.join(tools) or 'none'}"
            for name, tools in self.executors.items()
        )
        question = (
            f"Request: {message}\n\nSplit it into tasks for these executors (agent_role is the "
            f"executor's name; requires_tool only tools it has):\n{roster}\n\nAnswer with the "
            "plan: its tasks, each with a task_id, and depends_on naming the tasks it needs first."
        )
        if state.rejection:
            question += f"\n\nYour previous plan was refused: {state.rejection}. Plan again."
        return _call(f"plan:{state.replans}", self.planner, question=question)

    def _exec_call(self, board: TaskBoard, task: Task) -> Parsed:
        inputs = "\n".join(f"- {d}: {_cut(board[d].result or '')}" for d in task.depends_on)
        context = f"Expected output format: {task.output_format}."
        if inputs:
            context += f"\nResults of the tasks it builds on:\n{inputs}"
        if task.advice and task.attempts > 1:
            context += (
                f"\nYour previous result was sent back by the reviewer: {task.advice}\n"
                f"Previous result: {_cut(task.result or '')}"
            )
        if task.requires_tool:
            context += f"\nUse the tools: {', '.join(task.requires_tool)}."
        return _call(
            f"exec:{task.task_id}:{task.attempts}",
            self.executor(task) or task.agent_role,
            question=task.description,
            context=context,
        )

    def _review_call(self, task: Task) -> Parsed:
        question = (
            f"Task: {task.description}\nExpected output format: {task.output_format}\n"
            f"Result:\n{_cut(task.result or '')}\n\nJudge the result on completeness, "
            "accuracy, format and safety (each ok or not, with a reason). Verdict `pass` if it "
            "is good enough, else `fix` with advice the executor can act on."
        )
        return _call(f"review:{task.task_id}:{task.attempts}", self.reviewer, question=question)

    def _aggregation(self, message: str, board: TaskBoard) -> str:
        done = "\n".join(
            f"- {t.task_id} ({t.description}): {_cut(t.result or '')}"
            for t in board
            if t.status == "completed"
        )
        missing = "\n".join(
            f"- {t.task_id} ({t.description}): {t.status}: {t.error or ''}"
            for t in board
            if t.status != "completed"
        )
        text = f"Request: {message}\n\nResults of the tasks:\n{done or '(none)'}"
        if missing:
            text += f"\n\nTasks that did not complete:\n{missing}\nSay what is missing."
        return text + "\n\nWrite the final answer to the request from these results."

    # -- recording ------------------------------------------------------------------------
    async def _record(self, kernel: Kernel, run: RunState, turn: TurnState, state: _Replay) -> None:
        """Emit the steps not emitted yet (the replay makes every step again) and save the
        tasks that moved (`Tasks` capability of the store)."""
        emitted = sum(
            1 for e in run.events if e.type == "task_transitioned" and e.run_id == run.run_id
        )
        new = state.steps[emitted:]
        if not new:
            return
        base = run.base(turn.agent)
        for task, step in new:
            kernel.emit(run, task_event(base, task, step))
        store = kernel.cfg.store
        if isinstance(store, Tasks):
            stored = {x.task_id: x.version for x in await store.list_tasks(run_id=run.run_id)}
            for task in {task.task_id: task for task, _ in new}.values():
                await store.put_task(
                    run.session.session_id, run.run_id, task, stored.get(task.task_id, 0)
                )


def _executed(state: _Replay, task: Task, done: Done) -> None:
    if done.failed:
        state.move(task, "failed", done.answer, error=done.answer)
    else:
        state.move(task, "reviewing", "the executor answered", result=_cut(done.answer))


def _reviewed(state: _Replay, task: Task, done: Done) -> None:
    why = done.answer
    review: Review | None = None
    if not done.failed:
        checked = _reviews().check(done.answer)
        if isinstance(checked, str):
            why = f"the review is not valid JSON of the expected shape: {checked}"
        else:
            review = Review.model_validate(checked.data)
    if review is None:
        state.move(task, "failed", f"the review failed: {why}", error=why)
        return
    if review.verdict == "pass":
        state.move(task, "completed", "the reviewer passed it")
        return
    problems = "; ".join(
        f"{name}: {check.reason}"
        for name, check in (
            ("completeness", review.completeness),
            ("accuracy", review.accuracy),
            ("format", review.format),
            ("safety", review.safety),
        )
        if not check.ok
    )
    advice = review.advice or problems or "the reviewer asked for a fix"
    if task.retries_left:
        state.move(task, "retry", f"reviewer: fix ({problems or advice})", advice=advice)
    else:
        state.move(task, "failed", f"reviewer: fix, no fixes left ({advice})", error=advice)


@cache
def _reviews() -> OutputSpec:
    """How a review is read back from the reviewer's answer (compiled on first use)."""
    return compile_output(Review, native=False)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_RESULT_CHARS else text[: MAX_RESULT_CHARS - 1] + "…"


def _call(call_id: str, agent: str, **args: Any) -> Parsed:
    name = ask_tool_name(agent)
    return Parsed(
        ToolCall(id=call_id, name=name, arguments=json.dumps(args, ensure_ascii=False)), args
    )
