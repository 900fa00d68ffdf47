"""`MetricsSink`: Prometheus metrics of hand-offs, hops, tokens, latency, guards and routes.

Metrics (on the sink's own `CollectorRegistry` unless one is given):

- `baton_runs_total{status}`: finished runs by status (completed, escalated, failed,
  blocked, ...).
- `baton_handoffs_total{source,target}`: accepted hand-offs.
- `baton_handoffs_resolved_total{source,target}`: hand-offs whose receiver resolved the
  request: the run finished `completed`, nothing escalated, and the receiver is the agent that
  gave the final answer (the baton did not move again). Counted when the run finishes.
- `baton_handoff_efficiency`: resolved hand-offs / hand-offs of finished runs (seed 000 §6);
  NaN until a finished run had a hand-off.
- `baton_handoffs_refused_total{source,target}`: refused hand-offs.
- `baton_hops`: histogram of hand-offs per finished run.
- `baton_tokens_total{agent,kind}`: model tokens, kind `input` or `output`.
- `baton_agent_latency_seconds{agent}`: histogram of one observation per agent turn: the
  model and tool time of that turn (the sum of its `model_called` and `tool_called`
  latencies), so the kernel's own bookkeeping does not count.
- `baton_guard_trips_total{guard}`, `baton_route_decisions_total{tier}`,
  `baton_tool_calls_total{tool,ok}`, `baton_escalations_total{to}`.
- `baton_guardrail_trips_total{guardrail,stage}`: runs a guardrail blocked, by the rule's
  name and stage (input, output); `baton_guardrail_rewrites_total{guardrail}`: replies an
  output guardrail rewrote.
- `baton_board_writes_total{writer}`: blackboard writes; `baton_board_conflicts_total{key}`:
  the conflicts those writes met (another writer got there between read and write, so the
  writer read again and re-applied its change), by the entry's key.

`metrics_from_events` builds the same metrics from stored events by feeding them through a
fresh sink, so live and after-the-fact numbers come from one code path.

Label values are only names the team declared (`Team.declared_names`: its agents and `human`,
what they may call, the board keys it names); the team hands them to the sink when the sink
is attached (`Team(sinks=...)`, `team.add_sink`, `baton serve`). A name a model invented (an
unknown tool, a hand-off to an agent that does not exist, a board key of its own) is counted
under `other`, so no reply can add series. Statuses, kinds, tiers and guard names come from the
kernel's code. A sink no team is attached to (`metrics_from_events` without `names`) labels
every name as it comes.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from baton.core.events import (
    AgentStarted,
    BoardWritten,
    Escalated,
    Event,
    GuardrailRewrote,
    GuardrailTripped,
    GuardTripped,
    Handoff,
    HandoffRefused,
    ModelCalled,
    RouteDecided,
    RunFinished,
    ToolCalled,
)
from baton.observe.declared import OTHER, DeclaredNames, NamesSource

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("MetricsSink needs prometheus-client: pip install prometheus-client") from exc

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

log = logging.getLogger("baton.observe")

HOP_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 8, 10)
"""Buckets of `baton_hops` (hand-offs per run)."""

LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
"""Buckets of `baton_agent_latency_seconds` (model + tool seconds per agent turn)."""

MAX_OPEN_RUNS = 1_000
"""Runs tracked at once; the oldest unfinished run is dropped past this."""


@dataclass
class _OpenRun:
    handoffs: list[tuple[str, str]] = field(default_factory=list)
    agent: str | None = None
    """Agent of the open turn."""
    turn_s: float = 0.0
    """Model and tool seconds of the open turn."""
    escalated: bool = False


class MetricsSink:
    """An `EventSink` that keeps Prometheus metrics; `render()` gives the text format."""

    def __init__(
        self, registry: CollectorRegistry | None = None, *, names: DeclaredNames | None = None
    ) -> None:
        """`names`: the only label values besides `other`, for a sink no team is attached to
        (a team attaching the sink adds its own)."""
        self.registry = registry if registry is not None else CollectorRegistry()
        """Where the metrics live (the sink's own registry unless one was given)."""
        r = self.registry
        self.runs = Counter("baton_runs", "Finished runs by status.", ["status"], registry=r)
        self.handoffs = Counter(
            "baton_handoffs", "Accepted hand-offs.", ["source", "target"], registry=r
        )
        self.handoffs_resolved = Counter(
            "baton_handoffs_resolved",
            "Hand-offs whose receiver resolved the request (run completed, baton did not move "
            "again, nothing escalated).",
            ["source", "target"],
            registry=r,
        )
        self.handoff_efficiency = Gauge(
            "baton_handoff_efficiency",
            "Resolved hand-offs / hand-offs of finished runs (NaN before the first).",
            registry=r,
        )
        self.handoff_efficiency.set(math.nan)
        self.handoffs_refused = Counter(
            "baton_handoffs_refused", "Refused hand-offs.", ["source", "target"], registry=r
        )
        self.hops = Histogram(
            "baton_hops", "Hand-offs per finished run.", buckets=HOP_BUCKETS, registry=r
        )
        self.tokens = Counter(
            "baton_tokens", "Model tokens by agent and kind.", ["agent", "kind"], registry=r
        )
        self.agent_latency = Histogram(
            "baton_agent_latency_seconds",
            "Model and tool seconds of one agent turn.",
            ["agent"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.guard_trips = Counter(
            "baton_guard_trips", "Guard trips by guard.", ["guard"], registry=r
        )
        self.guardrail_trips = Counter(
            "baton_guardrail_trips",
            "Runs a guardrail blocked, by rule and stage.",
            ["guardrail", "stage"],
            registry=r,
        )
        self.guardrail_rewrites = Counter(
            "baton_guardrail_rewrites",
            "Replies an output guardrail rewrote, by rule.",
            ["guardrail"],
            registry=r,
        )
        self.route_decisions = Counter(
            "baton_route_decisions", "Routing decisions by tier.", ["tier"], registry=r
        )
        self.tool_calls = Counter(
            "baton_tool_calls", "Tool calls by tool and outcome.", ["tool", "ok"], registry=r
        )
        self.escalations = Counter(
            "baton_escalations", "Escalations by destination.", ["to"], registry=r
        )
        self.board_writes = Counter(
            "baton_board_writes", "Blackboard writes by writer.", ["writer"], registry=r
        )
        self.board_conflicts = Counter(
            "baton_board_conflicts",
            "Conflicts blackboard writes met and retried, by key.",
            ["key"],
            registry=r,
        )
        self._settled = 0
        self._resolved = 0
        self._runs: OrderedDict[str, _OpenRun] = OrderedDict()
        self._lock = threading.Lock()
        self._warned = False
        self._sources: list[NamesSource] = [] if names is None else [lambda: names]
        """Where the declared names of the teams the sink serves come from; none: no team,
        every name is a label."""
        self._names: DeclaredNames | None = None
        """Those names as last read (None: to be read on the next event)."""

    def bind_names(self, source: NamesSource) -> None:
        """Count the names of one more team (a `Team` calls this when the sink is attached;
        they are read on the next event, once the topology is fully built)."""
        with self._lock:
            self._sources.append(source)
            self._names = None

    def unbind_names(self, source: NamesSource) -> None:
        """Forget a team's names (`Team.remove_sink`)."""
        with self._lock:
            if source in self._sources:
                self._sources.remove(source)
            self._names = None

    def _declared(self, name: str, kind: str) -> str:
        """`name` if the teams declared it as an agent, tool or board key (`kind`), else
        `other`. A miss reads the names again first: a topology may have added some since."""
        if not self._sources:
            return name
        names = self._names
        if names is not None and name in getattr(names, kind):
            return name
        self._names = names = DeclaredNames.union(s() for s in self._sources)
        return name if name in getattr(names, kind) else OTHER

    @property
    def efficiency(self) -> float | None:
        """Resolved hand-offs / hand-offs of finished runs; None before the first."""
        with self._lock:
            return self._resolved / self._settled if self._settled else None

    def emit(self, event: Event) -> None:
        """Update the metrics for `event`; never raises (a failure is logged once)."""
        try:
            with self._lock:
                self._handle(event)
        except Exception as exc:  # a sink must never break a run
            if not self._warned:
                self._warned = True
                log.warning(
                    "MetricsSink could not count a %s event: %s", getattr(event, "type", event), exc
                )

    def render(self) -> str:
        """The metrics in the Prometheus text exposition format."""
        return generate_latest(self.registry).decode("utf-8")

    def serve(self, port: int = 9464, addr: str = "127.0.0.1") -> WSGIServer:
        """Serve the metrics over HTTP on `addr:port` from a background thread.

        Returns the server (`.shutdown()` stops it). The default address is local only; pass
        `addr="0.0.0.0"` to let a Prometheus on another host scrape it.
        """
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr, registry=self.registry)
        return server

    # ------------------------------------------------------------------ events
    def _handle(self, event: Event) -> None:
        run = self._runs.get(event.run_id)
        if run is None:
            run = self._runs[event.run_id] = _OpenRun()
            while len(self._runs) > MAX_OPEN_RUNS:
                self._runs.popitem(last=False)
        if isinstance(event, AgentStarted):
            self._end_turn(run)
            run.agent = event.agent
        elif isinstance(event, ModelCalled):
            self._turn(run, event.agent).turn_s += event.latency_ms / 1000
            agent = self._agent(event.agent)
            self.tokens.labels(agent, "input").inc(event.usage.input_tokens)
            self.tokens.labels(agent, "output").inc(event.usage.output_tokens)
        elif isinstance(event, ToolCalled):
            self._turn(run, event.agent).turn_s += event.latency_ms / 1000
            tool = self._declared(event.tool, "tools")
            self.tool_calls.labels(tool, "true" if event.ok else "false").inc()
        elif isinstance(event, Handoff):
            pair = (self._agent(event.payload.source), self._agent(event.payload.target))
            run.handoffs.append(pair)
            self.handoffs.labels(*pair).inc()
        elif isinstance(event, HandoffRefused):
            self.handoffs_refused.labels(self._agent(event.agent), self._agent(event.target)).inc()
        elif isinstance(event, GuardTripped):
            self.guard_trips.labels(event.guard).inc()
        elif isinstance(event, GuardrailTripped):
            self.guardrail_trips.labels(event.guardrail, event.stage).inc()
        elif isinstance(event, GuardrailRewrote):
            self.guardrail_rewrites.labels(event.guardrail).inc()
        elif isinstance(event, RouteDecided):
            self.route_decisions.labels(event.tier).inc()
        elif isinstance(event, BoardWritten):
            self.board_writes.labels(self._agent(event.agent)).inc()
            key = self._declared(event.key, "board_keys")
            self.board_conflicts.labels(key).inc(event.conflicts)
        elif isinstance(event, Escalated):
            run.escalated = True
            self.escalations.labels(self._agent(event.to)).inc()
        elif isinstance(event, RunFinished):
            self._end_turn(run)
            del self._runs[event.run_id]
            self._finish(run, event)

    def _agent(self, agent: str | None) -> str:
        return "unknown" if agent is None else self._declared(agent, "agents")

    def _turn(self, run: _OpenRun, agent: str | None) -> _OpenRun:
        """The run, with its open turn switched to `agent` if the sink missed agent_started."""
        if agent != run.agent:
            self._end_turn(run)
            run.agent = agent
        return run

    def _end_turn(self, run: _OpenRun) -> None:
        if run.agent is not None:
            self.agent_latency.labels(self._agent(run.agent)).observe(run.turn_s)
        run.agent, run.turn_s = None, 0.0

    def _finish(self, run: _OpenRun, event: RunFinished) -> None:
        self.runs.labels(event.status).inc()
        self.hops.observe(event.hop)
        if not run.handoffs:
            return
        self._settled += len(run.handoffs)
        source, target = run.handoffs[-1]
        if event.status == "completed" and not run.escalated and target == self._agent(event.agent):
            self._resolved += 1
            self.handoffs_resolved.labels(source, target).inc()
        self.handoff_efficiency.set(self._resolved / self._settled)


def metrics_from_events(
    events: Iterable[Event],
    registry: CollectorRegistry | None = None,
    *,
    names: DeclaredNames | None = None,
) -> MetricsSink:
    """A `MetricsSink` fed with `events` (e.g. from `store.get_events()`), in order; with
    `names` (e.g. `team.declared_names()`), other names count as `other`."""
    sink = MetricsSink(registry, names=names)
    for event in events:
        sink.emit(event)
    return sink
