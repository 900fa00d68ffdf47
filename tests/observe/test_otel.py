"""`OTelSink`: each run of a real (scripted) team becomes one OpenTelemetry trace."""

from __future__ import annotations

import importlib
import io
import json
import re
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode, format_trace_id

from baton import Agent, Guards, ScriptedModel, Team
from baton.core.events import Event, RunStarted, event_from_json
from baton.observe import OTelSink
from baton.observe.otel import model_provider, otel_trace_id, to_ns

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

S = ScriptedModel
INVOICE = "please check the invoice for order ORD-202607-99"


@pytest.fixture
def desk(monkeypatch: pytest.MonkeyPatch) -> Team:
    """A fresh seed 000 desk (examples/customer_service.py) on its scripted policy."""
    monkeypatch.setenv("BATON_MODEL", "scripted")
    import examples.customer_service as module

    module = importlib.reload(module)
    return module.team


@pytest.fixture
def sink() -> Iterator[OTelSink]:
    s = OTelSink.in_memory()
    yield s
    s.shutdown()


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan | None) -> list[ReadableSpan]:
    """Spans whose parent is `parent` (roots for None), by start time."""
    pid = parent.context.span_id if parent is not None else None
    found = [s for s in spans if (s.parent.span_id if s.parent else None) == pid]
    return sorted(found, key=lambda s: s.start_time or 0)


def of_type(events: Sequence[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


def all_values(span: ReadableSpan) -> list[str]:
    """Every attribute value of a span and of its events, as text."""
    values = [str(v) for v in (span.attributes or {}).values()]
    for ev in span.events:
        values += [str(v) for v in (ev.attributes or {}).values()]
    return values


async def test_the_desk_invoice_run_is_one_trace_run_agent_model_tool_handoff(
    desk: Team, sink: OTelSink
) -> None:
    desk.add_sink(sink)
    result = await desk.run(INVOICE, session_id="S-otel", user_id="u-1")
    assert result.status == "completed" and result.path == ["triage", "billing"]
    spans = sink.finished_spans()

    # one trace, and its id is the run's trace_id
    assert re.fullmatch(r"[0-9a-f]{32}", result.trace_id)
    assert {format_trace_id(s.context.trace_id) for s in spans} == {result.trace_id}
    (root,) = children(spans, None)
    assert root.name == "invoke_workflow baton"
    assert root.parent is None
    attrs = root.attributes or {}
    assert attrs["gen_ai.operation.name"] == "invoke_workflow"
    assert attrs["baton.run.id"] == result.run_id
    assert attrs["baton.session.id"] == attrs["gen_ai.conversation.id"] == "S-otel"
    assert attrs["baton.run.status"] == "completed"
    assert tuple(attrs["baton.run.path"]) == ("triage", "billing")  # type: ignore[arg-type]
    assert root.status.status_code is StatusCode.OK
    started, finished = result.events[0], result.events[-1]
    assert (root.start_time, root.end_time) == (to_ns(started.ts), to_ns(finished.ts))
    (route,) = [e for e in root.events if e.name == "baton.route_decided"]
    assert (route.attributes or {})["baton.route.tier"] == "entry"

    # run -> one agent span per turn, in order
    turns = children(spans, root)
    assert [t.name for t in turns] == ["invoke_agent triage", "invoke_agent billing"]
    triage, billing = turns
    assert (triage.attributes or {})["gen_ai.agent.name"] == "triage"
    assert (triage.attributes or {})["baton.turn.outcome"] == "handoff"
    assert (billing.attributes or {})["baton.turn.outcome"] == "answer"
    assert (billing.attributes or {})["baton.hop"] == 1

    # triage -> model call, then the hand-off
    t_model, t_handoff = children(spans, triage)
    assert t_model.name == "chat scripted-desk" and t_model.kind is trace.SpanKind.CLIENT
    assert t_handoff.name == "handoff triage -> billing"
    (handoff,) = of_type(result.events, "handoff")
    h = t_handoff.attributes or {}
    assert h["baton.handoff.source"] == "triage" and h["baton.handoff.target"] == "billing"
    assert h["baton.handoff.reason"] == handoff.payload.reason == "billing question"
    assert tuple(h["baton.payload.keys"]) == ("order_id",)  # type: ignore[arg-type]
    assert h["baton.hop"] == 1

    # billing -> model call, tool call, model call
    b_spans = children(spans, billing)
    assert [s.name for s in b_spans] == [
        "chat scripted-desk",
        "execute_tool query_invoice",
        "chat scripted-desk",
    ]
    (tool_ev,) = of_type(result.events, "tool_called")
    tool = b_spans[1].attributes or {}
    assert tool["gen_ai.tool.name"] == "query_invoice"
    assert tool["gen_ai.tool.call.id"] == tool_ev.call_id
    assert tuple(tool["baton.tool.argument_keys"]) == ("order_id",)  # type: ignore[arg-type]
    assert b_spans[1].start_time == to_ns(tool_ev.ts - tool_ev.latency_ms / 1000)
    assert b_spans[1].end_time == to_ns(tool_ev.ts)

    # token attributes are the model_called usages, call by call, summed per turn and run
    calls = of_type(result.events, "model_called")
    chat_spans = [t_model, b_spans[0], b_spans[2]]
    for span, ev in zip(chat_spans, calls, strict=True):
        a = span.attributes or {}
        assert a["gen_ai.usage.input_tokens"] == ev.usage.input_tokens > 0
        assert a["gen_ai.usage.output_tokens"] == ev.usage.output_tokens > 0
        assert a["gen_ai.agent.name"] == ev.agent
        assert a["gen_ai.request.model"] == "scripted-desk"
        assert span.start_time == to_ns(ev.ts - ev.latency_ms / 1000)
        assert span.end_time == to_ns(ev.ts)
    billing_usage = result.usage["billing"]
    assert (billing.attributes or {})["gen_ai.usage.input_tokens"] == billing_usage.input_tokens
    assert (billing.attributes or {})["gen_ai.usage.output_tokens"] == billing_usage.output_tokens
    total = result.total_usage
    assert attrs["gen_ai.usage.input_tokens"] == total.input_tokens

    # state writes are span events of the agent that made them, with keys only
    for ev in of_type(result.events, "state_updated"):
        (turn,) = [t for t in turns if (t.attributes or {})["gen_ai.agent.name"] == ev.agent]
        marks = [e for e in turn.events if e.name == "baton.state_updated"]
        assert [tuple((m.attributes or {})["baton.state.keys"]) for m in marks] == [
            tuple(sorted(ev.slots))
        ]
        assert (marks[0].attributes or {})["baton.state.cause"] == ev.cause
    assert of_type(result.events, "state_updated"), "the hand-off wrote order_id"

    # no value of the payload or state ever leaves the process
    for span in spans:
        assert not any("ORD-202607-99" in v for v in all_values(span)), span.name


async def test_every_run_is_its_own_trace_and_a_session_continues(
    desk: Team, sink: OTelSink
) -> None:
    desk.add_sink(sink)
    first = await desk.run(INVOICE, session_id="S-two")
    second = await desk.run("and is it paid?", session_id="S-two")
    assert first.trace_id != second.trace_id
    spans = sink.finished_spans()
    roots = children(spans, None)
    assert [format_trace_id(r.context.trace_id) for r in roots] == [
        first.trace_id,
        second.trace_id,
    ]
    for root, result in zip(roots, (first, second), strict=True):
        in_trace = [s for s in spans if s.context.trace_id == root.context.trace_id]
        assert len(in_trace) == 1 + sum(
            1 for e in result.events if e.type in ("agent_started", "model_called", "tool_called")
        ) + len(of_type(result.events, "handoff"))
    (route,) = [e for e in roots[1].events if e.name == "baton.route_decided"]
    assert (route.attributes or {})["baton.route.tier"] == "session"
    assert [t.name for t in children(spans, roots[1])] == ["invoke_agent billing"]


async def test_guard_trip_and_escalation_are_span_events_and_refusals_error_spans(
    sink: OTelSink,
) -> None:
    model = S(
        {
            "a": [
                S.call("transfer_to_c", reason="x", objective="y"),
                S.call(
                    "transfer_to_b", reason="b owns it", objective="help", state={"ticket": "T-9"}
                ),
            ],
            "b": [S.call("transfer_to_a", reason="back to a", objective="help")],
        }
    )
    team = Team(
        [Agent(name="a", handoffs=["b"]), Agent(name="b", handoffs=["a"]), Agent(name="c")],
        entry="a",
        guards=Guards(max_hops=1),
        model=model,
        sinks=[sink],
    )
    result = await team.run("help me with ticket T-9", session_id="S-esc")
    assert result.status == "escalated"
    spans = sink.finished_spans()
    (root,) = children(spans, None)
    assert (root.attributes or {})["baton.run.status"] == "escalated"
    assert root.status.status_code is StatusCode.UNSET
    (esc,) = [e for e in root.events if e.name == "baton.escalated"]
    ea = esc.attributes or {}
    assert ea["baton.escalation.to"] == "human"
    assert tuple(ea["baton.payload.keys"]) == ("ticket",)  # type: ignore[arg-type]
    assert "T-9" not in json.dumps([str(v) for v in ea.values()])

    a_turn, b_turn = children(spans, root)
    assert (b_turn.attributes or {})["baton.turn.outcome"] == "escalated"
    (trip,) = [e for e in b_turn.events if e.name == "baton.guard_tripped"]
    (trip_ev,) = of_type(result.events, "guard_tripped")
    assert (trip.attributes or {})["baton.guard.name"] == trip_ev.guard == "max_hops"

    refused = [s for s in children(spans, a_turn) if s.name == "handoff a -> c"]
    (r,) = refused
    assert r.status.status_code is StatusCode.ERROR
    assert (r.attributes or {})["baton.handoff.accepted"] is False
    assert (r.attributes or {})["error.type"] == "handoff_refused"


async def test_a_fallback_agent_that_answers_an_escalation_gets_its_own_turn(
    sink: OTelSink,
) -> None:
    team = Team(
        [Agent(name="a", handoffs=["human"]), Agent(name="helper")],
        entry="a",
        fallback="helper",
        model=S(
            {
                "a": [S.call("transfer_to_b", reason="x", objective="y")] * 8,
                "helper": [S.say("I will take it from here.")],
            }
        ),
        sinks=[sink],
    )
    result = await team.run("help")
    assert result.status == "escalated" and result.output == "I will take it from here."
    spans = sink.finished_spans()
    (root,) = children(spans, None)
    a_turn, helper_turn = children(spans, root)
    assert (a_turn.attributes or {})["baton.turn.outcome"] == "escalated"
    assert (helper_turn.attributes or {})["baton.turn.outcome"] == "answer"
    (trip,) = [e for e in a_turn.events if e.name == "baton.guard_tripped"]
    assert (trip.attributes or {})["baton.guard.name"] == "max_iterations"
    (esc,) = [e for e in root.events if e.name == "baton.escalated"]
    assert (esc.attributes or {})["baton.escalation.to"] == "helper"
    refusals = [s for s in children(spans, a_turn) if s.name == "handoff a -> b"]
    assert len(refusals) == 8 and all(r.status.status_code is StatusCode.ERROR for r in refusals)


async def test_a_failed_model_call_marks_the_chat_span_and_the_run(sink: OTelSink) -> None:
    team = Team([Agent(name="a")], entry="a", model=S([S.fail("provider down")]), sinks=[sink])
    result = await team.run("hi")
    assert result.status == "failed"
    spans = sink.finished_spans()
    (root,) = children(spans, None)
    assert root.status.status_code is StatusCode.ERROR
    assert (root.attributes or {})["error.type"] == "run_failed"
    (turn,) = children(spans, root)
    (chat,) = children(spans, turn)
    assert chat.status.status_code is StatusCode.ERROR
    assert "provider down" in (chat.status.description or "")
    assert (turn.attributes or {})["baton.turn.outcome"] == "failed"


async def test_stored_events_replay_into_the_same_trace(desk: Team, tmp_path: Path) -> None:
    live = OTelSink.in_memory()
    desk.add_sink(live)
    desk.use_store(f"sqlite:///{tmp_path}/t.db")
    result = await desk.run(INVOICE, session_id="S-replay")
    events = await desk.store.get_events(session_id="S-replay")
    await desk.store.close()
    replayed = OTelSink.in_memory()
    replayed.replay(events)

    def shape(sink: OTelSink) -> list[tuple[str, int | None, int | None, int]]:
        return sorted(
            (s.name, s.start_time, s.end_time, s.context.trace_id) for s in sink.finished_spans()
        )

    assert shape(replayed) == shape(live)
    assert {format_trace_id(s.context.trace_id) for s in replayed.finished_spans()} == {
        result.trace_id
    }
    live.shutdown()
    replayed.shutdown()


def test_a_trace_id_that_is_not_32_hex_is_hashed_and_kept_as_an_attribute(
    sink: OTelSink,
) -> None:
    value, derived = otel_trace_id("legacy-trace-1")
    assert derived and 0 < value < 2**128
    assert otel_trace_id("legacy-trace-1") == (value, True)  # deterministic
    assert otel_trace_id("0af7651916cd43dd8448eb211c80319c") == (
        0x0AF7651916CD43DD8448EB211C80319C,
        False,
    )
    assert otel_trace_id("0" * 32)[1] is True  # the all-zero id is invalid in OpenTelemetry

    base = {"trace_id": "legacy-trace-1", "session_id": "s", "run_id": "run_1"}
    sink.emit(RunStarted(**base, message="hi"))
    sink.emit(
        event_from_json(
            json.dumps({"type": "run_finished", "status": "completed", "agent": None, **base})
        )
    )
    (root,) = sink.finished_spans()
    assert root.context.trace_id == value
    assert (root.attributes or {})["baton.trace_id.original"] == "legacy-trace-1"


def test_model_names_map_to_provider_and_model() -> None:
    assert model_provider("openai:gpt-4o-mini") == ("openai", "gpt-4o-mini")
    assert model_provider("local:qwen2.5-1.5b") == ("baton.local", "qwen2.5-1.5b")
    assert model_provider("scripted") == ("_OTHER", "scripted")


async def test_events_of_a_run_joined_midway_still_make_one_partial_trace(
    desk: Team, sink: OTelSink
) -> None:
    collected: list[Event] = []

    class Keep:
        def emit(self, event: Event) -> None:
            collected.append(event)

    desk.add_sink(Keep())
    result = await desk.run(INVOICE)
    for event in collected[3:]:  # missed run_started, route_decided and agent_started
        sink.emit(event)
    spans = sink.finished_spans()
    (root,) = children(spans, None)
    assert (root.attributes or {})["baton.run.partial"] is True
    assert format_trace_id(root.context.trace_id) == result.trace_id
    assert [t.name for t in children(spans, root)] == [
        "invoke_agent triage",
        "invoke_agent billing",
    ]


async def test_the_run_span_links_to_the_callers_span_but_keeps_its_own_trace(
    sink: OTelSink,
) -> None:
    app_tracer = TracerProvider().get_tracer("app")
    team = Team([Agent(name="a")], entry="a", model=S([S.say("hello")]), sinks=[sink])
    with app_tracer.start_as_current_span("http request") as outer:
        result = await team.run("hi")
    (root,) = children(sink.finished_spans(), None)
    assert format_trace_id(root.context.trace_id) == result.trace_id
    assert root.parent is None
    assert [link.context.span_id for link in root.links] == [outer.get_span_context().span_id]


def test_the_global_tracer_provider_is_left_alone() -> None:
    before = trace.get_tracer_provider()
    s = OTelSink.in_memory()
    assert trace.get_tracer_provider() is before
    assert s.provider is not before
    s.shutdown()


class _Exploding(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise RuntimeError("collector on fire")


async def test_a_failing_exporter_never_breaks_the_run() -> None:
    s = OTelSink(_Exploding(), batch=False)
    team = Team([Agent(name="a")], entry="a", model=S([S.say("hello")]), sinks=[s])
    result = await team.run("hi")
    assert result.status == "completed" and result.output == "hello"
    s.shutdown()


async def test_console_exporter_prints_spans_with_the_runs_trace_id() -> None:
    out = io.StringIO()
    s = OTelSink.console(out=out)
    team = Team([Agent(name="a")], entry="a", model=S([S.say("你好")]), sinks=[s])
    result = await team.run("你好")
    s.shutdown()
    text = out.getvalue()
    assert f'"trace_id": "0x{result.trace_id}"' in text
    assert '"name": "invoke_agent a"' in text and '"name": "chat scripted"' in text


class _Collector(BaseHTTPRequestHandler):
    """A minimal OTLP/HTTP collector: keeps every decoded export request."""

    received: ClassVar[list[tuple[str, ExportTraceServiceRequest]]] = []
    arrived: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        type(self).received.append((self.path, req))
        type(self).arrived.set()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


async def test_otlp_http_export_reaches_a_collector_when_the_run_ends(desk: Team) -> None:
    _Collector.received = []
    _Collector.arrived = threading.Event()
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    s = OTelSink.otlp(endpoint=f"http://127.0.0.1:{server.server_port}", service_name="desk")
    try:
        desk.add_sink(s)
        result = await desk.run(INVOICE)
        # flushed at run end on a background thread: no shutdown or flush call needed
        names: list[str] = []
        deadline = time.monotonic() + 10
        while "invoke_workflow baton" not in names and time.monotonic() < deadline:
            _Collector.arrived.wait(0.2)
            names = []
            for path, req in list(_Collector.received):
                assert path == "/v1/traces"
                for rs in req.resource_spans:
                    service = {a.key: a.value.string_value for a in rs.resource.attributes}
                    assert service["service.name"] == "desk"
                    for ss in rs.scope_spans:
                        for span in ss.spans:
                            assert span.trace_id == bytes.fromhex(result.trace_id)
                            names.append(span.name)
        assert "invoke_workflow baton" in names, names
        assert "handoff triage -> billing" in names
        assert "execute_tool query_invoice" in names
    finally:
        s.shutdown()
        server.shutdown()
        server.server_close()


def test_the_docs_tracing_section_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = doc_blocks("## Tracing (OpenTelemetry)")
    assert blocks
    namespace: dict[str, object] = {"__name__": "doc_tracing"}
    for i, block in enumerate(blocks, 1):
        exec(compile(block, f"observability.md tracing [{i}]", "exec"), namespace)


def doc_blocks(heading: str) -> list[str]:
    """The python code blocks under `heading` in docs/observability.md."""
    text = (ROOT / "docs" / "observability.md").read_text(encoding="utf-8")
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + len(heading))
    section = text[start : end if end != -1 else len(text)]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)
