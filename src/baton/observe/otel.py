"""`OTelSink`: every run as one OpenTelemetry trace whose trace id is the run's `trace_id`.

Span tree of a run (GenAI semantic conventions, plus `baton.*` attributes):

    invoke_workflow baton              run_started .. run_finished
      invoke_agent <agent>             agent_started .. the baton moves on
        chat <model>                   one per model_called (start = ts - latency)
        execute_tool <tool>            one per tool_called
        handoff <source> -> <target>   handoff / handoff_refused (refusals have status ERROR)
        execute_tool ask_<worker>      a supervisor's call: first event of its sub-run .. its
          invoke_agent <worker>          tool_called; the worker's sub-run nests under it
            chat <model>
            execute_tool <tool>

A sub-run's events (`parent_run_id` / `parent_call_id` set) carry no `run_started` and come
before the `tool_called` of the call that delegated them, so the call's span is opened by the
first of them and ended by that `tool_called` (or, when none comes, at the sub-run's last event,
once the delegating agent moves on or its run ends). Sub-run spans carry `baton.parent_run_id`
and `baton.parent_call_id`; parallel workers get one call span each.

Route decisions and escalations are span events of the run span; guard trips and state updates
are span events of the agent span they happened in, and so are guardrail trips and rewrites
(`baton.guardrail_tripped`, `baton.guardrail_rewrote`). Spans take their start and end times from
the events, so replaying stored events gives the same trace. Payload and state values never
leave the process: only their keys are recorded.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any
from urllib.parse import urlsplit

from baton.core.events import (
    AgentStarted,
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
    RunStarted,
    StateUpdated,
    ToolCalled,
)

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
        SpanExporter,
    )
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
    from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "OTelSink needs the OpenTelemetry SDK: pip install opentelemetry-sdk "
        "opentelemetry-exporter-otlp-proto-http"
    ) from exc

log = logging.getLogger("baton.observe")

MAX_OPEN_RUNS = 1_000
"""Runs tracked at once; the oldest unfinished run is closed (marked partial) past this."""

# GenAI semantic-convention attribute names (written out: the Python semconv package marks the
# GenAI names deprecated since they moved to their own repository).
OPERATION = "gen_ai.operation.name"
AGENT = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHED_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
ERROR_TYPE = "error.type"


def to_ns(ts: float) -> int:
    """Epoch seconds (an event's `ts`) as OpenTelemetry's epoch nanoseconds."""
    return int(ts * 1_000_000_000)


def otel_trace_id(trace_id: str) -> tuple[int, bool]:
    """(OpenTelemetry trace id, derived?) for a run's `trace_id`.

    A 32-hex-char id (what runs use) is taken as is. Anything else is hashed with sha256 into a
    valid id, deterministically, so every event of that run still lands in one trace.
    """
    tid = trace_id.lower()
    if len(tid) == 32 and all(c in "0123456789abcdef" for c in tid):
        value = int(tid, 16)
        if value:
            return value, False
    value = int(hashlib.sha256(trace_id.encode("utf-8")).hexdigest()[:32], 16)
    return value or 1, True


def model_provider(model: str) -> tuple[str, str]:
    """(`gen_ai.provider.name`, `gen_ai.request.model`) for a Baton model name.

    `openai:gpt-4o-mini` -> (`openai`, `gpt-4o-mini`); `local:<card>` -> (`baton.local`, card);
    a name without a provider prefix (e.g. a scripted model) -> (`_OTHER`, name).
    """
    prefix, sep, rest = model.partition(":")
    if not sep or not prefix or not rest:
        return "_OTHER", model
    return ("baton.local" if prefix == "local" else prefix), rest


class _RunTraceIds(IdGenerator):
    """Random span ids; a root span's trace id is the one set for it, else random."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._pending = threading.local()

    def use_next(self, trace_id: int) -> None:
        """The next root span started on this thread gets `trace_id`."""
        self._pending.value = trace_id

    def generate_span_id(self) -> int:
        """A random 64-bit span id."""
        return self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        """The trace id set by `use_next` (once), else a random one."""
        value: int | None = getattr(self._pending, "value", None)
        self._pending.value = None
        return value if value else self._random.generate_trace_id()


@dataclass
class _Turn:
    agent: str
    span: Span
    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    tool_calls: int = 0


@dataclass
class _RunSpans:
    """A run being recorded; for a sub-run, `span` is the span of the call that delegated it."""

    span: Span
    run_id: str
    turn: _Turn | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    last_ts: float = 0.0
    escalated: bool = False
    holder_event: Event | None = None
    """The run's latest event that names an agent (a resumed run's turn is reopened from it)."""
    calls: dict[str, _RunSpans] = field(default_factory=dict)
    """Sub-runs of this run's open delegating calls, by call id."""
    parent: _RunSpans | None = None
    """For a sub-run: the run whose call delegated it."""
    call_id: str = ""
    """For a sub-run: the delegating call's id."""
    answered: bool = False
    """For a sub-run: its latest model call gave a final answer (no tool calls, no error)."""


class OTelSink:
    """An `EventSink` that exports each run as an OpenTelemetry trace.

    The sink owns its `TracerProvider` (`self.provider`); the global provider is left alone
    unless `set_global=True`. Give an `exporter` (any SDK `SpanExporter`) or use a factory:
    `OTelSink.console()`, `OTelSink.otlp(endpoint=...)`, `OTelSink.in_memory()`.
    `batch` selects a `BatchSpanProcessor` (background export) over a `SimpleSpanProcessor`
    (export as each span ends); batched spans are flushed at the end of every run, on a
    background thread so a slow collector never holds up the team.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        batch: bool = True,
        service_name: str = "baton",
        workflow: str = "baton",
        flush_on_run_end: bool = True,
        set_global: bool = False,
    ) -> None:
        self.exporter = exporter
        """Where finished spans go."""
        self.workflow = workflow
        """Name of the run spans (`invoke_workflow <workflow>`), e.g. the team's name."""
        self.flush_on_run_end = flush_on_run_end
        self._ids = _RunTraceIds()
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": service_name}), id_generator=self._ids
        )
        """The sink's own tracer provider (add span processors to it to export elsewhere too)."""
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        self.provider.add_span_processor(processor)
        self.batch = batch
        self._tracer = self.provider.get_tracer("baton.observe.otel")
        self._runs: OrderedDict[str, _RunSpans] = OrderedDict()
        self._subruns: dict[str, _RunSpans] = {}
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._flush_wanted = False
        self._flusher: threading.Thread | None = None
        self._warned = False
        if set_global:
            trace.set_tracer_provider(self.provider)

    # ------------------------------------------------------------------ factories
    @classmethod
    def console(cls, out: IO[str] | None = None, **kw: Any) -> OTelSink:
        """A sink that prints every finished span as JSON (to `out`, default stdout)."""
        exporter = ConsoleSpanExporter() if out is None else ConsoleSpanExporter(out=out)
        kw.setdefault("batch", False)
        return cls(exporter, **kw)

    @classmethod
    def otlp(
        cls,
        endpoint: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        **kw: Any,
    ) -> OTelSink:
        """A sink that sends spans over OTLP/HTTP (protobuf) to a collector.

        `endpoint` is the collector's URL, e.g. `http://localhost:4318` (the `/v1/traces`
        path is added when missing); None uses `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
        `OTEL_EXPORTER_OTLP_ENDPOINT`, else `http://localhost:4318/v1/traces`.
        """
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        if endpoint is not None and urlsplit(endpoint).path in ("", "/"):
            endpoint = endpoint.rstrip("/") + "/v1/traces"
        exporter = OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=timeout_s)
        return cls(exporter, **kw)

    @classmethod
    def in_memory(cls, **kw: Any) -> OTelSink:
        """A sink that keeps finished spans in memory (`finished_spans()`), for tests."""
        kw.setdefault("batch", False)
        return cls(InMemorySpanExporter(), **kw)

    # ------------------------------------------------------------------ public
    def finished_spans(self) -> tuple[ReadableSpan, ...]:
        """Spans exported so far (in-memory exporter only)."""
        if not isinstance(self.exporter, InMemorySpanExporter):
            raise TypeError("finished_spans() needs the in-memory exporter (OTelSink.in_memory())")
        return self.exporter.get_finished_spans()

    def emit(self, event: Event) -> None:
        """Turn `event` into spans or span events; never raises (a failure is logged once)."""
        try:
            with self._lock:
                finished = self._handle(event)
        except Exception as exc:  # a sink must never break a run
            if not self._warned:
                self._warned = True
                log.warning(
                    "OTelSink could not record a %s event: %s", getattr(event, "type", event), exc
                )
            return
        if finished and self.batch and self.flush_on_run_end:
            self._flush_soon()

    def replay(self, events: Iterable[Event]) -> None:
        """Record stored events (e.g. from `store.get_events(...)`), then flush."""
        for event in events:
            self.emit(event)
        self.flush()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Export every finished span now; True when the exporters kept up."""
        return self.provider.force_flush(int(timeout_s * 1000))

    def shutdown(self) -> None:
        """Close the runs still open (marked partial), flush and shut the exporters down."""
        with self._lock:
            while self._runs:
                _, run = self._runs.popitem(last=False)
                self._close_partial(run)
        self.provider.shutdown()

    # ------------------------------------------------------------------ events -> spans
    def _handle(self, event: Event) -> bool:
        """Record one event; True when it finished a run."""
        of_subrun = event.parent_run_id is not None
        run = self._subrun_for(event) if of_subrun else self._run_for(event)
        up: _RunSpans | None = run
        while up is not None:  # a sub-run's time is its parents' time too
            up.last_ts = max(up.last_ts, event.ts)
            up = up.parent
        if event.agent:
            run.holder_event = event
        if isinstance(event, RunStarted):
            return False  # the run span was opened by `_run_for`
        if run.parent is not None and isinstance(event, RunFinished):
            # a sub-run answers through its call (ended by the call's `tool_called`)
            self._end_turn(run, event.ts, _sub_outcome(event.status))
            return False
        if isinstance(event, RouteDecided):
            attrs: dict[str, Any] = {
                "baton.route.target": event.target,
                "baton.route.tier": event.tier,
                "baton.route.latency_ms": event.latency_ms,
            }
            if event.score is not None:
                attrs["baton.route.score"] = event.score
            if event.candidates:
                attrs["baton.route.candidates"] = list(event.candidates)
            run.span.add_event("baton.route_decided", attrs, to_ns(event.ts))
        elif isinstance(event, AgentStarted):
            self._end_turn(run, event.ts, "handoff")
            run.turn = self._start_turn(run, event)
        elif isinstance(event, ModelCalled):
            # the agent is asked again only once every call of its last response is answered
            self._end_calls(run)
            self._model_span(run, event)
            run.answered = not event.tool_calls and event.error is None
        elif isinstance(event, ToolCalled):
            sub = run.calls.get(event.call_id)
            if sub is not None:
                self._end_call(run, sub, event)
            else:
                self._tool_span(run, event)
        elif isinstance(event, (Handoff, HandoffRefused)):
            self._handoff_span(run, event)
        elif isinstance(event, GuardTripped):
            self._holder_span(run, event).add_event(
                "baton.guard_tripped",
                {
                    "baton.guard.name": event.guard,
                    "baton.guard.detail": event.detail,
                    "baton.hop": event.hop,
                    **({AGENT: event.agent} if event.agent else {}),
                },
                to_ns(event.ts),
            )
        elif isinstance(event, (GuardrailTripped, GuardrailRewrote)):
            # the reason may quote the text a rule read (a guard agent's words): not recorded
            stage, failed = (
                (event.stage, event.failed)
                if isinstance(event, GuardrailTripped)
                else ("output", False)
            )
            self._holder_span(run, event).add_event(
                f"baton.{event.type}",
                {
                    "baton.guardrail.name": event.guardrail,
                    "baton.guardrail.stage": stage,
                    "baton.guardrail.failed": failed,
                    "baton.hop": event.hop,
                    **({AGENT: event.agent} if event.agent else {}),
                },
                to_ns(event.ts),
            )
        elif isinstance(event, StateUpdated):
            attrs = {
                "baton.state.keys": sorted(str(k) for k in event.slots),
                "baton.state.source": event.source,
                "baton.hop": event.hop,
            }
            if event.tool:
                attrs[TOOL_NAME] = event.tool
            if event.cause:
                attrs["baton.state.cause"] = event.cause
            self._holder_span(run, event).add_event("baton.state_updated", attrs, to_ns(event.ts))
        elif isinstance(event, Escalated):
            run.escalated = True
            self._end_turn(run, event.ts, "escalated")
            run.span.add_event(
                "baton.escalated",
                {
                    "baton.escalation.to": event.to,
                    "baton.escalation.reasons": list(event.card.reasons),
                    "baton.escalation.path": list(event.card.path),
                    "baton.payload.keys": sorted(str(k) for k in event.card.state),
                    "baton.hop": event.hop,
                    **({AGENT: event.agent} if event.agent else {}),
                },
                to_ns(event.ts),
            )
        elif isinstance(event, RunFinished):
            self._finish_run(run, event)
            return True
        return False

    def _run_for(
        self, event: Event, run_id: str | None = None, start: float | None = None
    ) -> _RunSpans:
        """The open run `run_id` (default: the event's run), opened now (at `start`, default
        the event's time) if unknown."""
        run_id = run_id or event.run_id
        run = self._runs.get(run_id)
        if run is not None:
            return run
        trace_id, derived = otel_trace_id(event.trace_id)
        attrs: dict[str, Any] = {
            OPERATION: "invoke_workflow",
            AGENT: self.workflow,
            CONVERSATION: event.session_id,
            "baton.session.id": event.session_id,
            "baton.run.id": run_id,
            "baton.trace_id": event.trace_id,
        }
        if derived:
            attrs["baton.trace_id.original"] = event.trace_id
        if not isinstance(event, RunStarted) or run_id != event.run_id:
            attrs["baton.run.partial"] = True  # the sink joined in the middle of the run
        links = []
        caller = trace.get_current_span().get_span_context()
        if caller.is_valid:  # the code that started the run is traced elsewhere: link to it
            links.append(Link(caller))
        self._ids.use_next(trace_id)
        span = self._tracer.start_span(
            f"invoke_workflow {self.workflow}",
            context=Context(),  # always a root span: the trace id is the run's own
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            links=links,
            start_time=to_ns(event.ts if start is None else start),
        )
        run = _RunSpans(span=span, run_id=run_id, last_ts=event.ts)
        self._runs[run_id] = run
        while len(self._runs) > MAX_OPEN_RUNS:
            _, stale = self._runs.popitem(last=False)
            self._close_partial(stale)
        return run

    def _subrun_for(self, event: Event) -> _RunSpans:
        """The sub-run of `event`, nested under the span of the call that delegated it; that
        span is opened now, at this event, when this is the first event of the sub-run."""
        sub = self._subruns.get(event.run_id)
        if sub is not None:
            return sub
        parent_id = event.parent_run_id or event.run_id
        parent = self._subruns.get(parent_id) or self._run_for(event, parent_id, _began(event))
        call_id = event.parent_call_id or event.run_id
        sub = parent.calls.get(call_id)
        if sub is not None:  # the same call continued in another sub-run
            self._subruns[event.run_id] = sub
            return sub
        last = parent.holder_event
        if parent.turn is None and last is not None and last.agent:
            # e.g. a resumed run: its holder's turn began before this process saw it
            parent.turn = self._start_turn(parent, last)
        holder = parent.turn.span if parent.turn is not None else parent.span
        # (imported here: the sinks depend on `baton.core` alone when they load)
        from baton.runtime.delegation import ask_tool_name

        worker = event.agent or "unknown"
        tool = ask_tool_name(worker)  # the call's own `tool_called`, when it comes, renames it
        attrs: dict[str, Any] = {
            OPERATION: "execute_tool",
            TOOL_NAME: tool,
            TOOL_CALL_ID: call_id,
            TOOL_TYPE: "function",
            CONVERSATION: event.session_id,
            "baton.delegation.worker": worker,
            "baton.subrun.id": event.run_id,
        }
        if parent.parent is not None:  # a call made inside a sub-run is part of that sub-run
            attrs["baton.parent_run_id"] = parent.parent.run_id
            attrs["baton.parent_call_id"] = parent.call_id
        if parent.turn is not None:
            attrs[AGENT] = parent.turn.agent
            parent.turn.tool_calls += 1
        span = self._tracer.start_span(
            f"execute_tool {tool}",
            context=trace.set_span_in_context(holder),
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=to_ns(_began(event)),
        )
        sub = _RunSpans(
            span=span, run_id=event.run_id, last_ts=event.ts, parent=parent, call_id=call_id
        )
        parent.calls[call_id] = sub
        self._subruns[event.run_id] = sub
        return sub

    def _end_call(self, run: _RunSpans, sub: _RunSpans, event: ToolCalled | None) -> None:
        """End a delegating call's span: with its `tool_called` (`event`), else at the last
        event of its sub-run; the sub-run's own spans end first."""
        run.calls.pop(sub.call_id, None)
        for key in [k for k, v in self._subruns.items() if v is sub]:
            del self._subruns[key]
        if event is None:
            outcome = "answer" if sub.answered else "unfinished"
        else:
            outcome = "answer" if event.ok else "no_answer"
        self._end_turn(sub, sub.last_ts, outcome)
        span, end = sub.span, sub.last_ts
        if event is not None:
            agent = run.turn.agent if run.turn is not None else (event.agent or "unknown")
            span.update_name(f"execute_tool {event.tool}")
            span.set_attributes(_tool_attrs(event, agent))
            if not event.ok:
                span.set_attribute(ERROR_TYPE, "tool_error")
                span.set_status(Status(StatusCode.ERROR, event.error or "tool call failed"))
            end = max(end, event.ts)
        span.end(end_time=to_ns(end))

    def _end_calls(self, run: _RunSpans) -> None:
        """End the spans of the run's delegating calls that are still open."""
        for sub in list(run.calls.values()):
            self._end_call(run, sub, None)

    def _start_turn(self, run: _RunSpans, event: Event, start: float | None = None) -> _Turn:
        agent = event.agent or "unknown"
        attrs: dict[str, Any] = {
            OPERATION: "invoke_agent",
            AGENT: agent,
            CONVERSATION: event.session_id,
            "baton.hop": event.hop,
            "baton.run.id": event.run_id,
            **_lineage(event),
        }
        if isinstance(event, AgentStarted):
            if event.reason:
                attrs["baton.turn.reason"] = event.reason
            if event.policy:
                attrs["baton.context.policy"] = event.policy
            if event.context_tokens:
                attrs["baton.context.tokens"] = event.context_tokens
            if event.conductor:  # decided in code: no gen_ai.request.model, no model spans
                attrs["baton.agent.conductor"] = True
        span = self._tracer.start_span(
            f"invoke_agent {agent}",
            context=trace.set_span_in_context(run.span),
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=to_ns(event.ts if start is None else start),
        )
        return _Turn(agent=agent, span=span)

    def _turn_of(self, run: _RunSpans, event: Event) -> _Turn:
        """The open turn of `event.agent`, opened now if the sink missed its agent_started."""
        if run.turn is None or run.turn.agent != (event.agent or "unknown"):
            self._end_turn(run, event.ts, "handoff")
            # a sub-run's turn holds its call's first event whole, as the call's span does
            start = _began(event) if run.parent is not None else None
            run.turn = self._start_turn(run, event, start)
        return run.turn

    def _holder_span(self, run: _RunSpans, event: Event) -> Span:
        """The agent span for an event of the holder, else the run span."""
        if run.turn is not None and event.agent == run.turn.agent:
            return run.turn.span
        return run.span

    def _end_turn(self, run: _RunSpans, ts: float, outcome: str) -> None:
        self._end_calls(run)  # a call's span is a child of the turn (or of the run)
        turn = run.turn
        if turn is None:
            return
        run.turn = None
        turn.span.set_attributes(
            {
                INPUT_TOKENS: turn.input_tokens,
                OUTPUT_TOKENS: turn.output_tokens,
                "baton.turn.model_calls": turn.model_calls,
                "baton.turn.tool_calls": turn.tool_calls,
                "baton.turn.outcome": outcome,
            }
        )
        if outcome == "failed":
            turn.span.set_status(Status(StatusCode.ERROR, "the run failed in this turn"))
            turn.span.set_attribute(ERROR_TYPE, "run_failed")
        turn.span.end(end_time=to_ns(ts))

    def _model_span(self, run: _RunSpans, event: ModelCalled) -> None:
        turn = self._turn_of(run, event)
        provider, model = model_provider(event.model)
        usage = event.usage
        attrs: dict[str, Any] = {
            OPERATION: "chat",
            PROVIDER: provider,
            REQUEST_MODEL: model,
            AGENT: turn.agent,
            CONVERSATION: event.session_id,
            INPUT_TOKENS: usage.input_tokens,
            OUTPUT_TOKENS: usage.output_tokens,
            "baton.model": event.model,
            "baton.hop": event.hop,
            "baton.model.reask": event.reask,
            **_lineage(event),
        }
        if usage.cached_input_tokens:
            attrs[CACHED_INPUT_TOKENS] = usage.cached_input_tokens
        if event.tool_calls:
            attrs["baton.model.tool_calls"] = list(event.tool_calls)
        start = event.ts - event.latency_ms / 1000
        span = self._tracer.start_span(
            f"chat {model}",
            context=trace.set_span_in_context(turn.span),
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=to_ns(start),
        )
        if event.error:
            span.set_attribute(ERROR_TYPE, "model_error")
            span.set_status(Status(StatusCode.ERROR, event.error))
        span.end(end_time=to_ns(event.ts))
        turn.input_tokens += usage.input_tokens
        turn.output_tokens += usage.output_tokens
        turn.model_calls += 1
        up: _RunSpans | None = run
        while up is not None:  # a worker's tokens count for the run that asked it
            up.input_tokens += usage.input_tokens
            up.output_tokens += usage.output_tokens
            up = up.parent

    def _tool_span(self, run: _RunSpans, event: ToolCalled) -> None:
        turn = self._turn_of(run, event)
        span = self._tracer.start_span(
            f"execute_tool {event.tool}",
            context=trace.set_span_in_context(turn.span),
            kind=SpanKind.INTERNAL,
            attributes=_tool_attrs(event, turn.agent),
            start_time=to_ns(event.ts - event.latency_ms / 1000),
        )
        if not event.ok:
            span.set_attribute(ERROR_TYPE, "tool_error")
            span.set_status(Status(StatusCode.ERROR, event.error or "tool call failed"))
        span.end(end_time=to_ns(event.ts))
        turn.tool_calls += 1

    def _handoff_span(self, run: _RunSpans, event: Handoff | HandoffRefused) -> None:
        turn = self._turn_of(run, event)
        if isinstance(event, Handoff):
            p = event.payload
            source, target, reason = p.source, p.target, p.reason
            attrs: dict[str, Any] = {
                "baton.hop": p.hop,
                "baton.handoff.priority": p.priority,
                "baton.handoff.path": list(p.path),
                "baton.payload.keys": sorted(str(k) for k in p.state),
            }
        else:
            source, target, reason = turn.agent, event.target, event.reason
            attrs = {"baton.hop": event.hop}
        attrs.update(
            {
                OPERATION: "handoff",
                AGENT: source,
                CONVERSATION: event.session_id,
                "baton.handoff.source": source,
                "baton.handoff.target": target,
                "baton.handoff.reason": reason,
                "baton.handoff.accepted": isinstance(event, Handoff),
                **_lineage(event),
            }
        )
        span = self._tracer.start_span(
            f"handoff {source} -> {target}",
            context=trace.set_span_in_context(turn.span),
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=to_ns(event.ts),
        )
        if isinstance(event, HandoffRefused):
            span.set_attribute(ERROR_TYPE, "handoff_refused")
            span.set_status(Status(StatusCode.ERROR, event.reason))
        span.end(end_time=to_ns(event.ts))

    def _finish_run(self, run: _RunSpans, event: RunFinished) -> None:
        if event.status == "completed":
            outcome = "answer"
        elif event.status in ("failed", "blocked"):
            outcome = event.status
        elif run.turn is not None and run.turn.agent == event.agent:
            outcome = "answer"  # the fallback agent took over the escalation and answered
        else:
            outcome = "escalated"
        self._end_turn(run, event.ts, outcome)
        self._runs.pop(event.run_id, None)
        span = run.span
        span.set_attributes(
            {
                "baton.run.status": event.status,
                "baton.run.path": list(event.path),
                "baton.hop": event.hop,
                INPUT_TOKENS: run.input_tokens,
                OUTPUT_TOKENS: run.output_tokens,
                "baton.run.escalated": run.escalated,
            }
        )
        if event.agent:
            span.set_attribute("baton.run.holder", event.agent)
        if event.status == "failed":
            span.set_attribute(ERROR_TYPE, "run_failed")
            span.set_status(Status(StatusCode.ERROR, event.error or "the run failed"))
        elif event.status == "completed":
            span.set_status(Status(StatusCode.OK))
        span.end(end_time=to_ns(event.ts))

    def _close_partial(self, run: _RunSpans) -> None:
        """End an unfinished run's spans at its last event (it never sent `run_finished`)."""
        self._end_turn(run, run.last_ts, "unfinished")
        run.span.set_attribute("baton.run.status", "unfinished")
        run.span.end(end_time=to_ns(run.last_ts))

    def _flush_soon(self) -> None:
        """Flush the batch processor on a background thread: one flusher at a time, which
        goes round again when more runs finished while it was exporting."""
        with self._flush_lock:
            self._flush_wanted = True
            if self._flusher is not None and self._flusher.is_alive():
                return
            self._flusher = threading.Thread(
                target=self._flush_loop, name="baton-otel-flush", daemon=True
            )
            self._flusher.start()

    def _flush_loop(self) -> None:
        while True:
            with self._flush_lock:
                if not self._flush_wanted:
                    self._flusher = None
                    return
                self._flush_wanted = False
            try:
                self.provider.force_flush()
            except Exception as exc:  # pragma: no cover - exporter failures are logged once
                if not self._warned:
                    self._warned = True
                    log.warning("OTelSink could not flush spans: %s", exc)


def _tool_attrs(event: ToolCalled, agent: str) -> dict[str, Any]:
    """Attributes of a tool call's span (`agent` made the call)."""
    return {
        OPERATION: "execute_tool",
        TOOL_NAME: event.tool,
        TOOL_CALL_ID: event.call_id,
        TOOL_TYPE: "function",
        AGENT: agent,
        CONVERSATION: event.session_id,
        "baton.hop": event.hop,
        "baton.tool.ok": event.ok,
        "baton.tool.argument_keys": sorted(str(k) for k in event.arguments),
        "baton.tool.result_chars": event.result_chars,
        "baton.tool.truncated": event.truncated,
        **_lineage(event),
    }


def _lineage(event: Event | None) -> dict[str, Any]:
    """`baton.parent_run_id` / `baton.parent_call_id` for an event of a sub-run, else nothing."""
    if event is None or event.parent_run_id is None:
        return {}
    attrs: dict[str, Any] = {"baton.parent_run_id": event.parent_run_id}
    if event.parent_call_id is not None:
        attrs["baton.parent_call_id"] = event.parent_call_id
    return attrs


def _began(event: Event) -> float:
    """When what `event` reports began: a model or tool call's start, else the event's time."""
    if isinstance(event, (ModelCalled, ToolCalled)):
        return event.ts - event.latency_ms / 1000
    return event.ts


def _sub_outcome(status: str) -> str:
    """A sub-run's turn outcome for the status of a `run_finished` it sent."""
    return {"completed": "answer", "failed": "failed"}.get(status, status)
