"""`Supervisor`: a lead agent asks workers and answers the user itself (seed 000 §2.1).

The lead's model gets one `ask_<worker>(question, context)` tool per worker (agent-as-tool).
Each call runs the worker as a bounded sub-run with its own view — its instructions and the
question, never the conversation nor the other workers — and returns its answer as the
call's result; several calls in one response run in parallel (`max_parallel`). The lead stays
responsible: it answers, or asks again, at most `max_delegations` times per run. Everything
else is the team's: guards, events (a worker's carry `parent_run_id` / `parent_call_id`),
checkpoints (a resumed run never re-runs a worker that answered), approvals (a worker's call
that needs one pauses the whole run), stores and `RunResult` (per-worker usage).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from baton.agents import Agent
from baton.core.errors import ConfigError
from baton.runtime.blueprint import Blueprint
from baton.runtime.delegation import ASK, Ask, ask_spec, ask_tool_name
from baton.runtime.kernel import Kind
from baton.runtime.plan import CallEntry, Extra
from baton.topologies.team import Team


class Supervisor(Team):
    """A lead agent with workers it asks (in parallel) and answers for.

    `Supervisor(lead, workers=[...], model=..., max_parallel=4, max_delegations=8, store=...)`;
    every other keyword is `Team`'s (guards, sinks, redact, ...), and `run`, `run_sync`,
    `stream`, `resume`, `approve`, `cancel` work as they do on a team.
    """

    def __init__(
        self,
        lead: Agent,
        workers: Sequence[Agent],
        *,
        max_parallel: int = 4,
        max_delegations: int = 8,
        **team: Any,
    ) -> None:
        if not isinstance(lead, Agent):
            raise ConfigError(f"the lead must be an Agent object, got {type(lead).__name__}")
        if not workers:
            raise ConfigError("a Supervisor needs at least one worker")
        if max_parallel < 1:
            raise ConfigError("max_parallel must be at least 1 (workers running at once)")
        if max_delegations < 1:
            raise ConfigError("max_delegations must be at least 1 (workers asked per run)")
        for w in workers:
            if not isinstance(w, Agent):
                raise ConfigError(f"workers must be Agent objects, got {type(w).__name__}")
            if w.handoffs:
                raise ConfigError(
                    f"worker {w.name!r} has handoffs {list(w.handoffs)}: a worker answers the "
                    "lead that asked it; remove them"
                )
        asks = Ask(max_delegations=max_delegations)
        blueprint = delegation(lead.name, workers, max_parallel, asks, "supervisor")
        super().__init__([lead, *workers], entry=lead.name, blueprint=blueprint, **team)
        self.lead = lead.name
        self.workers = [w.name for w in workers]
        self.max_parallel = max_parallel
        self.max_delegations = max_delegations

    def to_mermaid(self) -> str:
        """The lead, the workers it asks (in parallel, up to `max_parallel`), their tools."""
        chart = self._chart()
        for worker in self.workers:
            chart.edge(self.lead, worker, f"ask, {self.max_parallel} at a time", dotted=True)
        return chart.text()

    def describe(self) -> dict[str, Any]:
        """The team summary, with the lead and its workers."""
        out = super().describe()
        out.update(topology="supervisor", lead=self.lead, workers=list(self.workers))
        return out


def delegation(
    lead: str, workers: Sequence[Agent], max_parallel: int, handler: Ask, topology: str
) -> Blueprint:
    """Give `lead` an `ask_<worker>` tool per worker, handled by `handler`, up to
    `max_parallel` of them running at once (the wiring of every delegating topology)."""
    ruled = [w.name for w in workers if w.guardrails or w.handoff_guardrails]
    if ruled:
        raise ConfigError(
            f"workers {ruled} have guardrails of their own, which would never run: a worker "
            f"answers {lead!r}, not the user. Put the rules on {lead!r} or on the team "
            "(Team(guardrails=...))"
        )
    asks = tuple(
        Extra(
            ask_tool_name(w.name),
            CallEntry(ASK, target=w.name),
            ask_spec(w),
            "the generated tool for asking that worker",
        )
        for w in workers
    )
    return Blueprint(
        entries={lead: asks}, kinds={ASK: Kind(handler, parallel=max_parallel)}, topology=topology
    )
