"""`Pipeline`: stages in a fixed order, each one's output the next one's input (seed 003 §3.2).

A stage is an agent (run as a bounded sub-run, like a supervisor's worker, with its own view:
its instructions and its input) or a plain function (run as a tool, validated against its
signature). The order is the pipeline's, not a model's: the lead is a conductor
(`baton.runtime.conduct`) that calls the next stage with the previous stage's output. A stage
that fails is tried again (`retries`, default 1) with the failure fed back to an agent stage;
a stage that still fails ends the run `failed`, naming the stage and the reason. Stage
timeouts: `timeouts={"stage": seconds}`. What a stage's citing tools cited (a knowledge base's
search) reaches every later stage, shown in its view as quoted references
(`baton.runtime.citations`), since stages pass text, not a hand-off payload. The run's events,
checkpoints (a resumed run never runs a finished stage again), approvals and `RunResult` are
the kernel's as on a `Team`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from baton.agents import Agent
from baton.core.errors import ConfigError
from baton.runtime.blueprint import Blueprint
from baton.runtime.conduct import Conducted, answered, call
from baton.runtime.delegation import Ask, ask_tool_name
from baton.runtime.kernel import Kernel
from baton.runtime.model_call import Reply
from baton.runtime.outcomes import Failed, ToHuman
from baton.runtime.state import RunState, TurnState
from baton.tools import Tool
from baton.topologies.mermaid import Flowchart
from baton.topologies.supervisor import Supervisor, delegation
from baton.topologies.team import Team


@dataclass(frozen=True, slots=True)
class _Stage:
    name: str
    """The stage's name (the agent's, or the function's)."""
    call: str
    """What the conductor calls: `ask_<agent>` or the function's tool."""
    param: str | None
    """The function's input parameter (None for an agent stage)."""


class Pipeline(Team):
    """Stages run one after the other; the last stage's output is the run's output.

    `Pipeline([stage, ...], model=..., retries=1, timeouts={...}, name="pipeline", **team)`
    where a stage is an `Agent`, a `Supervisor` (its lead is the stage, asking its workers),
    an async or plain function of one argument, or a `Tool`. `escalate(stage, output)` may
    return a reason to send the run to the human queue after a stage (e.g. low confidence).
    """

    def __init__(
        self,
        stages: Sequence[Agent | Supervisor | Tool | Callable[..., Any]],
        *,
        retries: int = 1,
        timeouts: dict[str, float] | None = None,
        escalate: Callable[[str, str], str | None] | None = None,
        name: str = "pipeline",
        **team: Any,
    ) -> None:
        if not stages:
            raise ConfigError("a Pipeline needs at least one stage")
        if retries < 0:
            raise ConfigError("retries must be 0 or more (tries after a stage's first failure)")
        agents: list[Agent] = []
        tools: list[Tool] = []
        plan: list[_Stage] = []
        teams: list[Supervisor] = []
        helpers: list[Agent] = []
        for s in stages:
            if isinstance(s, Supervisor):  # its lead is the stage; its workers come along
                lead_agent = s.agents[s.lead]
                agents.append(lead_agent)
                helpers.extend(s.agents[w] for w in s.workers)
                teams.append(s)
                plan.append(_Stage(s.lead, ask_tool_name(s.lead), None))
                continue
            if isinstance(s, Agent):
                if s.handoffs:
                    raise ConfigError(
                        f"stage {s.name!r} has handoffs; a stage passes its output on"
                    )
                agents.append(s)
                plan.append(_Stage(s.name, ask_tool_name(s.name), None))
                continue
            limit = (timeouts or {}).get(getattr(s, "name", getattr(s, "__name__", "")))
            if isinstance(s, Tool):
                t = copy.copy(s)
                t.timeout_s = limit if limit is not None else s.timeout_s
            else:
                t = Tool(s, timeout_s=limit)
            params = list(t.spec.parameters.get("properties", {}))
            if len(params) != 1:
                raise ConfigError(
                    f"function stage {t.name!r} takes {len(params)} arguments; a stage takes one "
                    "(the previous stage's output)"
                )
            tools.append(t)
            plan.append(_Stage(t.name, t.name, params[0]))
        names = [p.name for p in plan]
        if len(set(names)) != len(names):
            raise ConfigError(f"stage names must be unique, got {names}")
        unknown = set(timeouts or {}) - set(names)
        if unknown:
            raise ConfigError(f"timeouts name unknown stages {sorted(unknown)}; stages: {names}")
        lead = Agent(
            name=name,
            description="Runs the pipeline's stages in order.",
            tools=tools,
        )
        per_worker = {
            a.name: (timeouts or {})[a.name] for a in agents if a.name in (timeouts or {})
        }
        asks = len(agents) * (retries + 1) + sum(t.max_delegations for t in teams)
        # each stage sees what the stages before it cited (`RunState.cited_in`)
        handler = Ask(max_delegations=asks, timeouts=per_worker, carries=frozenset({name}))
        parallel = max([1, *(t.max_parallel for t in teams)])
        blueprint = delegation(name, agents, parallel, handler, "pipeline")
        for sup in teams:  # a supervisor stage asks its workers as it would on its own
            workers = [sup.agents[w] for w in sup.workers]
            blueprint |= delegation(sup.lead, workers, parallel, handler, "pipeline")
        conductor = _Conductor(plan, retries, escalate)
        rounds = len(plan) * (retries + 1) + 1  # every stage, each retry, the answer
        blueprint |= Blueprint(conductors={name: Conducted(conductor, rounds)})
        super().__init__([lead, *agents, *helpers], entry=name, blueprint=blueprint, **team)
        self.stages = names
        self.retries = retries

    def to_mermaid(self) -> str:
        """The stages in order."""
        chart = Flowchart()
        chart.node("user", "circle")
        previous = "user"
        for stage in self.stages:
            chart.node(stage)
            chart.edge(previous, stage)
            previous = stage
        chart.edge(previous, "user", "output")
        return chart.text()


@dataclass(frozen=True, slots=True)
class _Conductor:
    """The pipeline's next step, from the stages' results so far."""

    stages: list[_Stage]
    retries: int
    escalate: Callable[[str, str], str | None] | None = None

    async def __call__(
        self, kernel: Kernel, run: RunState, turn: TurnState
    ) -> Reply | Failed | ToHuman:
        index, tries, output, error = 0, 0, run.message, ""
        for done in answered(turn):
            stage = self.stages[index]
            if done.name != stage.call:
                continue
            tries += 1
            if done.failed:
                error = done.answer
                if tries > self.retries:
                    return Failed(
                        f"stage {stage.name!r} failed after {tries} attempt"
                        f"{'s' if tries > 1 else ''}: {error}"
                    )
                continue
            index, tries, output, error = index + 1, 0, done.answer, ""
            why = self.escalate(stage.name, output) if self.escalate is not None else None
            if why:  # the stage's output needs a person: the run goes to the human queue
                return ToHuman(f"stage {stage.name!r}: {why}")
            if index == len(self.stages):
                return output, []  # the last stage's output answers the user
        stage = self.stages[index]
        if stage.param is not None:
            return None, [call(stage.call, **{stage.param: _value(output)})]
        question = output
        if error:
            question = (
                f"{output}\n\nYour previous attempt failed: {error}\nFix that and answer again."
            )
        return None, [call(stage.call, question=question)]


def _value(text: str) -> Any:
    """A stage's output as the next function's input: JSON data when it is JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return text
