"""`OTelSink`: every run as one OpenTelemetry trace whose trace id is the run's `trace_id`.

Span tree of a run (GenAI semantic conventions, plus `baton.*` attributes):

    invoke_workflow baton              run_started .. run_finished
      invoke_agent <agent>             agent_started .. the baton moves on
        chat <model>                   one per model_called (start = ts - latency)
        execute_tool <tool>            one per tool_called
        handoff <source> -> <target>   handoff / handoff_refused (refusals have status ERROR)

Route decisions and escalations are span events of the run span; guard trips and state updates
are span events of the agent span they happened in. Spans take their start and end times from
the events, so replaying stored events gives the same trace. Payload and state values never
leave the process: only their keys are recorded.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlsplit

from baton.core.events import (
    AgentStarted,
    Escalated,
    Event,
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
    span: Span
    turn: _Turn | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    last_ts: float = 0.0
    escalated: bool = False


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
        run = self._run_for(event)
        run.last_ts = max(run.last_ts, event.ts)
        if isinstance(event, RunStarted):
            return False  # the run span was opened by `_run_for`
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
            self._model_span(run, event)
        elif isinstance(event, ToolCalled):
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

    def _run_for(self, event: Event) -> _RunSpans:
        run = self._runs.get(event.run_id)
        if run is not None:
            return run
        trace_id, derived = otel_trace_id(event.trace_id)
        attrs: dict[str, Any] = {
            OPERATION: "invoke_workflow",
            AGENT: self.workflow,
            CONVERSATION: event.session_id,
            "baton.session.id": event.session_id,
            "baton.run.id": event.run_id,
            "baton.trace_id": event.trace_id,
        }
        if derived:
            attrs["baton.trace_id.original"] = event.trace_id
        if not isinstance(event, RunStarted):
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
            start_time=to_ns(event.ts),
        )
        run = _RunSpans(span=span, last_ts=event.ts)
        self._runs[event.run_id] = run
        while len(self._runs) > MAX_OPEN_RUNS:
            _, stale = self._runs.popitem(last=False)
            self._close_partial(stale)
        return run

    def _start_turn(self, run: _RunSpans, event: Event) -> _Turn:
        agent = event.agent or "unknown"
        attrs: dict[str, Any] = {
            OPERATION: "invoke_agent",
            AGENT: agent,
            CONVERSATION: event.session_id,
            "baton.hop": event.hop,
            "baton.run.id": event.run_id,
        }
        if isinstance(event, AgentStarted):
            if event.reason:
                attrs["baton.turn.reason"] = event.reason
            if event.policy:
                attrs["baton.context.policy"] = event.policy
            if event.context_tokens:
                attrs["baton.context.tokens"] = event.context_tokens
        span = self._tracer.start_span(
            f"invoke_agent {agent}",
            context=trace.set_span_in_context(run.span),
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=to_ns(event.ts),
        )
        return _Turn(agent=agent, span=span)

    def _turn_of(self, run: _RunSpans, event: Event) -> _Turn:
        """The open turn of `event.agent`, opened now if the sink missed its agent_started."""
        if run.turn is None or run.turn.agent != (event.agent or "unknown"):
            self._end_turn(run, event.ts, "handoff")
            run.turn = self._start_turn(run, event)
        return run.turn

    def _holder_span(self, run: _RunSpans, event: Event) -> Span:
        """The agent span for an event of the holder, else the run span."""
        if run.turn is not None and event.agent == run.turn.agent:
            return run.turn.span
        return run.span

    def _end_turn(self, run: _RunSpans, ts: float, outcome: str) -> None:
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
        }
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
        run.input_tokens += usage.input_tokens
        run.output_tokens += usage.output_tokens

    def _tool_span(self, run: _RunSpans, event: ToolCalled) -> None:
        turn = self._turn_of(run, event)
        attrs: dict[str, Any] = {
            OPERATION: "execute_tool",
            TOOL_NAME: event.tool,
            TOOL_CALL_ID: event.call_id,
            TOOL_TYPE: "function",
            AGENT: turn.agent,
            CONVERSATION: event.session_id,
            "baton.hop": event.hop,
            "baton.tool.ok": event.ok,
            "baton.tool.argument_keys": sorted(str(k) for k in event.arguments),
            "baton.tool.result_chars": event.result_chars,
            "baton.tool.truncated": event.truncated,
        }
        span = self._tracer.start_span(
            f"execute_tool {event.tool}",
            context=trace.set_span_in_context(turn.span),
            kind=SpanKind.INTERNAL,
            attributes=attrs,
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
        elif event.status == "failed":
            outcome = "failed"
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
