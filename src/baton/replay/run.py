"""Replay a recording through the real kernel of the current code and compare each step.

Every run of the recorded session is played again, in order, in a fresh in-memory session of
the same id and user (so the earlier runs set up the holder, state and history the later ones
start from). Each agent's model is a `ReplayModel` (or, with `live_model`, the team's own
model asked again) and each tool a `RecordedTool`: no tool function runs. The steps of each
replayed run are compared with the recorded ones; the first that differs is the divergence.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from baton.backends.memory import MemoryStore
from baton.replay.model import RecordedResponses, ReplayModel
from baton.replay.record import RecordedRun, Recording, read_recording
from baton.replay.steps import Step
from baton.replay.tools import RecordedCalls, RecordedResults, RecordedTool
from baton.runtime.kernel import Kind
from baton.runtime.plan import AgentPlan, CallEntry
from baton.tools import Tool

if TYPE_CHECKING:
    from baton.topologies.team import Team


PAUSED = ("awaiting_approval", "interrupted")
"""Statuses of a run that waits for a person."""


@dataclass
class Divergence:
    """Where a replayed run first differed from its record."""

    run_id: str
    """The recorded run."""
    index: int
    """Index of the first differing step."""
    recorded: list[Step]
    replayed: list[Step]

    @property
    def expected(self) -> Step | None:
        """The recorded step at the divergence (None: the replay took more steps)."""
        return self.recorded[self.index] if self.index < len(self.recorded) else None

    @property
    def got(self) -> Step | None:
        """The replayed step at the divergence (None: the replay stopped early)."""
        return self.replayed[self.index] if self.index < len(self.replayed) else None

    def describe(self) -> str:
        """One paragraph for an assertion message or a log."""
        e, g = self.expected, self.got
        return (
            f"run {self.run_id} diverged at step {self.index + 1}:\n"
            f"  recorded: {_short(e)}\n  replayed: {_short(g)}"
        )


def _short(step: Step | None) -> str:
    if step is None:
        return "(no step: the run ended here)"
    return f"{step.label()} hop {step.hop} {step.data}"


@dataclass
class RunReplay:
    """One run played again: its steps beside the recorded ones."""

    run: RecordedRun
    steps: list[Step]
    status: str
    compared: int
    """How many steps were compared (all, or up to `until`)."""
    divergence: Divergence | None = None


@dataclass
class ReplayReport:
    """A session replayed: each run, and the first divergence if any."""

    session_id: str
    runs: list[RunReplay] = field(default_factory=list)
    live_model: bool = False
    stopped: str | None = None
    """Why the replay stopped before the session's last run (None: it did not)."""
    end: str | None = None
    """How the session's end state differs from the recorded one (None: the same, or not
    compared: a divergence came first, or the record does not hold it)."""

    @property
    def divergence(self) -> Divergence | None:
        """The first divergence of the session (None: every run replayed as recorded)."""
        return next((r.divergence for r in self.runs if r.divergence is not None), None)

    @property
    def ok(self) -> bool:
        """Every run took the recorded steps and the session ended as recorded."""
        return self.divergence is None and self.end is None

    def describe(self) -> str:
        """What went differently, in a few lines (empty when nothing did)."""
        d = self.divergence
        if d is not None:
            return d.describe()
        return self.end or ""


def _entry(entry: CallEntry, agent: str, results: RecordedResults) -> CallEntry:
    if entry.tool is None:
        return entry
    return dataclasses.replace(entry, tool=RecordedTool(entry.tool, agent, results))


def _table(
    table: Mapping[str, CallEntry] | None, agent: str, results: RecordedResults
) -> Mapping[str, CallEntry] | None:
    if table is None:
        return None
    return {n: _entry(e, agent, results) for n, e in table.items()}


def recorded_plan(
    plan: AgentPlan, responses: RecordedResponses | None, results: RecordedResults
) -> AgentPlan:
    """`plan` with its tools answering from `results` and, unless `responses` is None (a live
    replay), its model answering from them. A conductor keeps its conductor."""
    agent = plan.agent.name
    tools: dict[str, Tool] = {n: RecordedTool(t, agent, results) for n, t in plan.tools.items()}
    recorded = responses is not None and plan.model is not None
    return dataclasses.replace(
        plan,
        model=ReplayModel(agent, responses) if recorded else plan.model,  # type: ignore[arg-type]
        tools=tools,
        table=_table(plan.table, agent, results) or {},
        received_table=_table(plan.received_table, agent, results),
    )


def _diverged(run_id: str, recorded: list[Step], replayed: list[Step], live: bool) -> int | None:
    for i in range(max(len(recorded), len(replayed))):
        if i >= len(recorded) or i >= len(replayed):
            return i
        if not recorded[i].same_as(replayed[i], live):
            return i
    return None


async def _end_differs(store: MemoryStore, recording: Recording) -> str | None:
    if recording.end_state is None or not recording.runs:
        return None
    session = await store.get_session(recording.session_id)
    state = dict(session.state) if session else {}
    holder = session.holder if session else None
    if _json(state) != _json(recording.end_state):
        return f"the session ended with state {_json(state)}, recorded {_json(recording.end_state)}"
    if holder != recording.end_holder:
        return f"the baton ended with {holder!r}, recorded with {recording.end_holder!r}"
    return None


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


async def replay(
    team: Team,
    recording: Recording,
    *,
    live_model: bool = False,
    until: int | None = None,
) -> ReplayReport:
    """Play `recording` again on `team` and compare every step (see the module docstring).

    `live_model`: ask the team's own models again (tools still answer from the record), to
    check that a new prompt or model still takes the recorded way; a model may then word its
    answers differently without that counting as a divergence. `until`: compare only the
    first `until` steps of the last run (the ones before the step being investigated).
    """
    responses = None if live_model else RecordedResponses()
    results = RecordedResults()
    store = MemoryStore()
    models: list[ReplayModel] = []

    def swap(plan: AgentPlan) -> AgentPlan:
        swapped = recorded_plan(plan, responses, results)
        if isinstance(swapped.model, ReplayModel):
            models.append(swapped.model)
        return swapped

    def kind(name: str, kind: Kind) -> Kind:
        return dataclasses.replace(kind, handler=RecordedCalls(results)) if kind.runs_code else kind

    bound = team.with_plans(swap, store, kind)
    report = ReplayReport(recording.session_id, live_model=live_model)
    try:
        for i, run in enumerate(recording.runs):
            if responses is not None:
                responses.load(run.responses)
                for m in models:
                    m.renamed()
            results.load(run.results)
            result = await bound.run(
                run.message, session_id=recording.session_id, user_id=run.user_id
            )
            # the replayed run as the store holds it, read as the recorded one was read
            steps = (await read_recording(store, recording.session_id)).runs[-1].steps
            recorded = run.steps
            paused = result.status in PAUSED
            if paused:  # the person's decision is not replayed: compare up to the pause
                recorded = recorded[: len(steps)]
            last = i == len(recording.runs) - 1
            if until is not None and last:
                recorded, steps = recorded[:until], steps[:until]
            at = _diverged(run.run_id, recorded, steps, live_model)
            replayed = RunReplay(run, steps, result.status, len(recorded))
            if at is not None:
                replayed.divergence = Divergence(run.run_id, at, recorded, steps)
            report.runs.append(replayed)
            if at is not None:
                break  # later runs start from a different place: their steps say nothing
            if paused:  # what the session holds now is not its recorded end
                if not last:
                    report.stopped = (
                        f"run {run.run_id} paused ({result.status}); a person's decision is "
                        "not replayed, so the session's later runs were not played"
                    )
                break
        else:
            report.end = await _end_differs(store, recording)
    finally:
        await bound.aclose()
        await store.close()
    return report
