"""Delegation (seed 000 §2.1): a supervisor asks workers, each in a bounded sub-run.

A supervisor's model sees one `ask_<worker>(question, context)` tool per worker. Each call runs
the worker's turn as a sub-run (`RunState.subrun`): the worker sees its instructions and the
question alone — never the conversation, nor the other workers — may use its own tools, and
its answer comes back as the call's result, with what its citing tools cited
(`baton.runtime.citations`). The supervisor stays responsible: it reads the
answers and answers the user or asks again. Several `ask_*` calls of one response run in
parallel (at most `max_parallel` at a time). A sub-run's events carry `parent_run_id` and
`parent_call_id`; its progress is saved in its parent's checkpoint (`PendingCall.sub`), so a
resumed run continues an unfinished worker and never re-runs a finished one; a worker's call
that needs approval pauses the whole run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from baton.agents import Agent
from baton.core.messages import ToolSpec, Usage
from baton.runtime.calls import called
from baton.runtime.citations import merged
from baton.runtime.kernel import sub_runs
from baton.runtime.outcomes import Answered, Failed, Paused, ToHuman, Tripped
from baton.runtime.state import PendingCall, RunState, TurnState
from baton.runtime.timeouts import timed
from baton.tools import error_content

if TYPE_CHECKING:
    from baton.runtime.calls import Handled
    from baton.runtime.kernel import Call, Kernel

ASK_PREFIX = "ask_"
ASK = "ask"
"""The call kind of `ask_<worker>` entries in a supervisor's call table."""


def ask_tool_name(worker: str) -> str:
    return f"{ASK_PREFIX}{worker}"


class AskArgs(BaseModel):
    """What a supervisor's model writes when it asks a worker."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, description="What the worker must find out or do.")
    context: str = Field(
        default="", description="Facts the worker needs (ids, what is known); it sees nothing else."
    )


def ask_spec(worker: Agent) -> ToolSpec:
    """The tool a supervisor's model sees for asking `worker`."""
    about = f" It handles: {worker.description}" if worker.description else ""
    return ToolSpec(
        name=ask_tool_name(worker.name),
        description=(
            f"Ask the worker {worker.name} and get its answer back.{about} It sees only the "
            "question and context you give it. Ask several workers in one response to have "
            "them work in parallel."
        ),
        parameters=AskArgs.model_json_schema(),
    )


@dataclass(frozen=True, slots=True)
class Ask:
    """The handler of `ask_<worker>` calls (registered as the runner's `ask` kind)."""

    max_delegations: int = 8
    """`ask_*` calls per run; the next one is refused and the run escalates."""
    timeouts: Mapping[str, float] = field(default_factory=dict)
    """Worker -> seconds its sub-run may take; past it the call is answered with a timeout
    error (the worker's unfinished work is dropped)."""
    carries: frozenset[str] = frozenset()
    """Askers whose run's citations go with the question into the sub-run, shown in its view
    (a pipeline's conductor: each stage sees what the stages before it cited). A supervisor's
    workers see none: each sees only its question."""

    async def __call__(self, kernel: Kernel, call: Call) -> Handled:
        """Run (or continue) the worker's sub-run for one call."""
        run, turn, pending, entry = call.run, call.turn, call.pending, call.entry
        subs = sub_runs(kernel)
        worker = entry.target
        assert worker is not None
        child = pending.sub
        if child is None:
            try:
                args = AskArgs.model_validate(pending.args or {})
            except ValidationError as exc:
                why = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                    for e in exc.errors()
                )
                return error_content(f"invalid arguments for {pending.call.name}: {why}"), None
            if run.delegations >= self.max_delegations:
                detail = (
                    f"max_delegations: {turn.agent} asked workers {run.delegations} times in this "
                    f"run (limit {self.max_delegations})"
                )
                subs.trip(run, turn.agent, "max_delegations", detail)
                return error_content(detail), Tripped(detail)
            run.delegations += 1
            question = args.question
            if args.context:
                question = f"{question}\n\nContext: {args.context}"
            child = pending.sub = run.subrun(worker, question, pending.call.id)
            if turn.agent in self.carries and run.citations:
                child.citations = child.cited_in = list(run.citations)
            child.turn = subs.new_turn(
                child, worker, None, child.user_msg_id, f"asked by {turn.agent}"
            )
            pending.started = True
        started = time.perf_counter()
        try:
            outcome = await timed(subs.turn(child), self.timeouts.get(worker))
        except TimeoutError:
            pending.sub = None
            limit = self.timeouts[worker]
            error = f"{worker} did not answer within {limit:g}s"
            subs.trip(run, turn.agent, "worker_timeout", error)
            return self._done(subs, run, turn, pending, started, error_content(error), error)
        if isinstance(outcome, Paused):  # a worker's call waits for a person: so does the run
            root = run.root
            if root.approval is None and root.interrupt is None:
                # one card at a time: a second is asked again on resume (an interrupt's card
                # is the root's already)
                root.approval = child.approval
            child.approval = None
            return outcome
        _merge_usage(run, child)
        pending.sub = None  # answered: nothing of it needs saving any more
        if isinstance(outcome, Answered):  # a worker with an `output_type` answers data
            run.citations = merged(run.citations, child.citations)  # what it cited comes back
            answer = child.final if child.final is not None else outcome.text
            content = json.dumps({"worker": worker, "answer": answer}, ensure_ascii=False)
            return self._done(subs, run, turn, pending, started, content, None)
        reason = outcome.reason if isinstance(outcome, (Failed, Tripped, ToHuman)) else "no answer"
        error = f"{worker} could not answer: {reason}"
        return self._done(subs, run, turn, pending, started, error_content(error), error)

    def _done(
        self,
        kernel: Kernel,
        run: RunState,
        turn: TurnState,
        pending: PendingCall,
        started: float,
        content: str,
        error: str | None,
    ) -> Handled:
        """The call's `tool_called` event (after its sub-run's events) and its result."""
        called(
            kernel,
            run,
            turn,
            pending,
            arguments=pending.args or {},
            ok=error is None,
            error=error,
            latency_ms=(time.perf_counter() - started) * 1000,
            result_chars=len(content),
        )
        return content, None


def _merge_usage(run: RunState, child: RunState) -> None:
    """The worker's tokens, model calls and cost count for the run that asked it."""
    for agent, used in child.usage.items():
        run.usage.setdefault(agent, Usage()).add(used)
    run.model_calls += child.model_calls
    run.cost += child.cost
