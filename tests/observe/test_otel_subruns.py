"""`OTelSink` and sub-runs: a supervisor's workers nest under the `ask_<worker>` calls that
asked them, parallel workers side by side, and every span ends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode, format_trace_id

from baton import Agent, ScriptedModel, Supervisor, Team, tool
from baton.core.events import AgentStarted, Event, ModelCalled, RunFinished, ToolCalled
from baton.core.messages import Usage
from baton.models.base import ModelRequest
from baton.observe import OTelSink
from baton.observe.otel import to_ns

S = ScriptedModel
SID = "S-sub"
WORKERS = ("policies", "faq")


class OpenSpans(SpanProcessor):
    """Names of the spans started and not ended yet."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        self.open.pop(span.context.span_id, None)


@pytest.fixture
def sink() -> Iterator[OTelSink]:
    s = OTelSink.in_memory()
    yield s
    s.shutdown()


@pytest.fixture
def opened(sink: OTelSink) -> OpenSpans:
    rec = OpenSpans()
    sink.provider.add_span_processor(rec)
    return rec


def worker(name: str, ran: list[str], gate: asyncio.Event | None = None) -> Agent:
    @tool(name=f"search_{name}")
    async def search(query: str) -> str:
        """Search the knowledge base."""
        ran.append(f"{name}:start")
        if gate is not None:
            await gate.wait()
        ran.append(f"{name}:done")
        return f"{name} says: refunds take 5 days"

    return Agent(name=name, description=f"the {name} knowledge base", tools=[search])


def respond(request: ModelRequest) -> Any:
    """The lead asks both workers at once, then answers; a worker searches, then answers."""
    last = request.messages[-1]
    if request.agent == "lead":
        if last.role == "tool":
            return S.say("Refunds take 5 days.")
        return S.calls(*(S.call(f"ask_{w}", question="How long do refunds take?") for w in WORKERS))
    if last.role == "tool":
        return S.say(last.content or "")
    return S.call(f"search_{request.agent}", query="refund time")


def desk(ran: list[str], gate: asyncio.Event | None = None, **kw: Any) -> Supervisor:
    workers = [worker("policies", ran, gate), worker("faq", ran)]
    return Supervisor(Agent(name="lead"), workers=workers, model=S(respond), **kw)


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan | None) -> list[ReadableSpan]:
    """Spans whose parent is `parent` (roots for None), by start time."""
    pid = parent.context.span_id if parent is not None else None
    found = [s for s in spans if (s.parent.span_id if s.parent else None) == pid]
    return sorted(found, key=lambda s: s.start_time or 0)


def below(spans: Sequence[ReadableSpan], top: ReadableSpan) -> list[ReadableSpan]:
    """Every descendant of `top`."""
    out: list[ReadableSpan] = []
    for child in children(spans, top):
        out += [child, *below(spans, child)]
    return out


def attr(span: ReadableSpan, key: str) -> Any:
    return (span.attributes or {}).get(key)


def call_spans(spans: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    """The `ask_<worker>` call spans, by worker."""
    return {
        attr(s, "baton.delegation.worker"): s
        for s in spans
        if (s.name or "").startswith("execute_tool ask_")
    }


def ask_call_ids(events: Sequence[Event], run_id: str) -> dict[str, str]:
    """worker -> the id of the lead's call that asked it, from the workers' events."""
    return {
        e.agent: e.parent_call_id
        for e in events
        if e.parent_run_id == run_id and e.agent and e.parent_call_id
    }


async def test_workers_nest_under_the_ask_calls_of_the_leads_turn(
    sink: OTelSink, opened: OpenSpans
) -> None:
    sup = desk([], sinks=[sink])
    result = await sup.run("How long do refunds take?", session_id=SID)
    assert result.status == "completed"
    assert opened.open == {}  # every span ended with the run
    spans = sink.finished_spans()
    assert {format_trace_id(s.context.trace_id) for s in spans} == {result.trace_id}

    # run -> the lead's turn -> chat, one call span per worker, chat
    (root,) = children(spans, None)
    assert attr(root, "baton.run.id") == result.run_id
    assert "baton.run.partial" not in (root.attributes or {})
    (lead,) = children(spans, root)
    assert lead.name == "invoke_agent lead"
    under_lead = children(spans, lead)
    assert [s.name for s in under_lead[:1] + under_lead[-1:]] == ["chat scripted"] * 2
    calls = call_spans(spans)
    assert sorted(calls) == sorted(WORKERS)
    assert sorted(under_lead[1:-1], key=lambda s: s.name or "") == [calls["faq"], calls["policies"]]
    assert attr(lead, "baton.turn.tool_calls") == 2

    ids = ask_call_ids(result.events, result.run_id)
    for name, call in calls.items():
        assert call.name == f"execute_tool ask_{name}"
        assert attr(call, "gen_ai.operation.name") == "execute_tool"
        assert attr(call, "gen_ai.tool.name") == f"ask_{name}"
        assert attr(call, "gen_ai.tool.call.id") == ids[name]
        assert attr(call, "gen_ai.agent.name") == "lead"
        # the call span -> the worker's turn -> its model and tool calls
        (turn,) = children(spans, call)
        assert turn.name == f"invoke_agent {name}"
        assert attr(turn, "baton.turn.outcome") == "answer"
        assert attr(call, "baton.subrun.id") == attr(turn, "baton.run.id") != result.run_id
        assert [s.name for s in children(spans, turn)] == [
            "chat scripted",
            f"execute_tool search_{name}",
            "chat scripted",
        ]
        # within its call: the worker's turn, and the turn's calls within the turn
        assert call.start_time is not None and call.end_time is not None
        for s in below(spans, call):
            assert s.start_time is not None and s.end_time is not None
            assert call.start_time <= s.start_time <= s.end_time <= call.end_time
            assert attr(s, "gen_ai.agent.name") == name
            assert attr(s, "baton.parent_run_id") == result.run_id
            assert attr(s, "baton.parent_call_id") == ids[name]
    assert lead.end_time is not None and max(c.end_time or 0 for c in calls.values()) <= (
        lead.end_time
    )

    # the lead's spans are its own; the run's tokens include the workers'
    for s in [root, lead, *children(spans, lead)]:
        if s not in calls.values():
            assert "baton.parent_run_id" not in (s.attributes or {}), s.name
    assert attr(root, "gen_ai.usage.input_tokens") == result.total_usage.input_tokens
    assert attr(root, "gen_ai.usage.output_tokens") == result.total_usage.output_tokens
    assert attr(lead, "gen_ai.usage.input_tokens") == result.usage["lead"].input_tokens


async def test_parallel_workers_overlap_each_under_its_own_call(
    sink: OTelSink, opened: OpenSpans
) -> None:
    ran: list[str] = []
    gate = asyncio.Event()
    sup = desk(ran, gate, sinks=[sink])
    task = asyncio.ensure_future(sup.run("refunds?", session_id=SID))
    for _ in range(500):  # faq answers while policies waits at the gate
        if "faq:done" in ran:
            break
        await asyncio.sleep(0.01)
    assert "policies:start" in ran and "policies:done" not in ran
    assert ran.index("policies:start") < ran.index("faq:done")
    gate.set()
    result = await task
    assert result.status == "completed"
    assert opened.open == {}
    spans = sink.finished_spans()
    calls = call_spans(spans)
    pol, faq = calls["policies"], calls["faq"]
    assert pol.start_time is not None and pol.end_time is not None
    assert faq.start_time is not None and faq.end_time is not None
    # the two calls were open at once: each began before the other ended
    assert pol.start_time < faq.end_time and faq.start_time < pol.end_time
    assert pol.parent is not None and faq.parent is not None
    assert pol.parent.span_id == faq.parent.span_id  # both are calls of the lead's turn
    # nothing of one worker sits under the other's call
    ids = ask_call_ids(result.events, result.run_id)
    for name, call in calls.items():
        inside = below(spans, call)
        assert len(inside) == 4  # its turn, chat, execute_tool, chat
        assert {attr(s, "gen_ai.agent.name") for s in inside} == {name}
        assert {attr(s, "baton.parent_call_id") for s in inside} == {ids[name]}
        tool_names = {attr(s, "gen_ai.tool.name") for s in inside} - {None}
        assert tool_names == {f"search_{name}"}


def with_ask_results(events: Sequence[Event], run_id: str, failed: str) -> list[Event]:
    """The events with one `tool_called` of the lead per `ask_*` call, right after the last
    event of the call's sub-run (`failed`'s with an error result)."""
    ids = ask_call_ids(events, run_id)
    out = [e for e in events if not (isinstance(e, ToolCalled) and e.call_id in ids.values())]
    for name, call_id in ids.items():
        at = max(i for i, e in enumerate(out) if e.parent_call_id == call_id)
        last = out[at]
        ok = name != failed
        out.insert(
            at + 1,
            ToolCalled(
                ts=last.ts + 0.001,
                trace_id=last.trace_id,
                session_id=last.session_id,
                run_id=run_id,
                agent="lead",
                tool=f"ask_{name}",
                call_id=call_id,
                arguments={"question": "How long do refunds take?"},
                ok=ok,
                error=None if ok else f"{name} could not answer",
                latency_ms=2.0,
                result_chars=40,
            ),
        )
    return out


async def test_the_calls_tool_called_ends_its_span_with_the_tool_attributes() -> None:
    collected: list[Event] = []

    class Keep:
        def emit(self, event: Event) -> None:
            collected.append(event)

    result = await desk([], sinks=[Keep()]).run("refunds?", session_id=SID)
    events = with_ask_results(collected, result.run_id, failed="faq")
    sink = OTelSink.in_memory()
    opened = OpenSpans()
    sink.provider.add_span_processor(opened)
    sink.replay(events)
    assert opened.open == {}
    spans = sink.finished_spans()
    tools = [s for s in spans if attr(s, "gen_ai.tool.name") in ("ask_policies", "ask_faq")]
    assert len(tools) == 2  # the call's span took the tool_called: no second span for it
    calls = call_spans(spans)
    by_id = {e.call_id: e for e in events if isinstance(e, ToolCalled) and e.agent == "lead"}
    for name, call in calls.items():
        ev = by_id[attr(call, "gen_ai.tool.call.id")]
        assert call.name == f"execute_tool {ev.tool}" == f"execute_tool ask_{name}"
        assert call.end_time == to_ns(ev.ts)
        assert attr(call, "baton.tool.ok") is ev.ok
        assert attr(call, "baton.tool.result_chars") == 40
        assert tuple(attr(call, "baton.tool.argument_keys")) == ("question",)
        assert attr(call, "gen_ai.agent.name") == "lead"
        (turn,) = children(spans, call)
        assert attr(turn, "baton.turn.outcome") == ("answer" if ev.ok else "no_answer")
    assert calls["faq"].status.status_code is StatusCode.ERROR
    assert attr(calls["faq"], "error.type") == "tool_error"
    assert calls["policies"].status.status_code is StatusCode.UNSET
    sink.shutdown()


async def test_a_resumed_runs_worker_nests_under_its_call(
    tmp_path: Path, dies_when_cancelled: None, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []
    gate = asyncio.Event()
    url = f"sqlite:///{tmp_path / 'b.db'}"
    first = desk(ran, gate, store=url)
    task = asyncio.ensure_future(first.run("refunds?", session_id=SID))
    for _ in range(500):
        if "faq:done" in ran:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # the faq answer's checkpoint
    task.cancel()  # the process dies while policies still works
    with pytest.raises(asyncio.CancelledError):
        await task

    sink = OTelSink.in_memory()
    opened = OpenSpans()
    sink.provider.add_span_processor(opened)
    again = desk([], store=url, sinks=[sink])  # another process, with its own sink
    with caplog.at_level(logging.WARNING, logger="baton.observe"):
        result = await again.resume(SID)
    assert result.status == "completed"
    assert not [r for r in caplog.records if "OTelSink" in r.getMessage()]
    assert opened.open == {}
    spans = sink.finished_spans()
    (root,) = children(spans, None)  # the workers' events opened no run of their own
    assert attr(root, "baton.run.partial") is True
    assert attr(root, "baton.run.id") == result.run_id
    (lead,) = children(spans, root)
    assert lead.name == "invoke_agent lead"
    calls = call_spans(spans)
    assert list(calls) == ["policies"]  # faq answered before the crash: it is not asked again
    call = calls["policies"]
    assert call.parent is not None and call.parent.span_id == lead.context.span_id
    (turn,) = children(spans, call)
    assert turn.name == "invoke_agent policies"
    assert [s.name for s in children(spans, turn)] == [
        "execute_tool search_policies",
        "chat scripted",
    ]
    for s in below(spans, call):
        assert call.start_time is not None and s.start_time is not None
        assert call.start_time <= s.start_time
    await first.aclose()
    await again.aclose()
    sink.shutdown()


def event(kind: type[Any], ts: float, **fields: Any) -> Any:
    base: dict[str, Any] = {"trace_id": "f" * 32, "session_id": SID, "ts": ts}
    return kind(**{**base, **fields})


def test_odd_sub_run_events_never_raise_and_every_span_ends(
    sink: OTelSink, opened: OpenSpans, caplog: pytest.LogCaptureFixture
) -> None:
    sub = {"run_id": "run_w", "agent": "w", "parent_run_id": "run_lead", "parent_call_id": "c1"}
    model = {"model": "scripted", "usage": Usage(input_tokens=3, output_tokens=2)}
    with caplog.at_level(logging.WARNING, logger="baton.observe"):
        # the sink never saw the lead's run start: the worker's first event opens it
        sink.emit(event(ModelCalled, 10.0, latency_ms=500, tool_calls=("search",), **model, **sub))
        sink.emit(event(ToolCalled, 11.0, tool="search", call_id="t1", ok=True, **sub))
        sink.emit(event(ModelCalled, 12.0, latency_ms=100, **model, **sub))
        sink.emit(event(RunFinished, 12.5, status="completed", **sub))  # not the lead's end
        # a sub-run event without its call id, then one whose parent is itself
        orphan = {"run_id": "run_x", "agent": "x", "parent_run_id": "run_lead"}
        sink.emit(event(AgentStarted, 12.6, **orphan))
        sink.emit(event(AgentStarted, 12.7, run_id="run_y", agent="y", parent_run_id="run_y"))
        sink.emit(event(RunFinished, 13.0, run_id="run_lead", agent="lead", status="completed"))
        # only the run that named itself its parent is open: nothing of the lead's is left
        assert sorted(opened.open.values()) == [
            "execute_tool ask_y",
            "invoke_agent y",
            "invoke_workflow baton",
        ]
        # a late worker event after its run finished
        sink.emit(event(ModelCalled, 14.0, latency_ms=1, **model, **sub))
    sink.shutdown()
    assert not [r for r in caplog.records if "OTelSink" in r.getMessage()]
    assert opened.open == {}
    spans = sink.finished_spans()
    lead = next(s for s in children(spans, None) if attr(s, "baton.run.id") == "run_lead")
    assert attr(lead, "baton.run.partial") is True
    assert lead.start_time == to_ns(9.5)
    assert attr(lead, "gen_ai.usage.input_tokens") == 6
    call = next(s for s in children(spans, lead) if attr(s, "gen_ai.tool.call.id") == "c1")
    assert call.name == "execute_tool ask_w"
    assert call.start_time == to_ns(9.5)  # the first event's model call began at 9.5
    assert call.end_time == to_ns(12.5)
    (turn,) = children(spans, call)
    assert (turn.start_time, turn.end_time) == (to_ns(9.5), to_ns(12.5))
    assert attr(turn, "baton.turn.outcome") == "answer"
    assert [s.name for s in children(spans, turn)] == [
        "chat scripted",
        "execute_tool search",
        "chat scripted",
    ]


async def test_a_plain_teams_spans_carry_nothing_of_sub_runs(
    sink: OTelSink, opened: OpenSpans
) -> None:
    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return "shipped"

    team = Team(
        [Agent(name="a", tools=[lookup])],
        entry="a",
        model=S({"a": [S.call("lookup", order_id="ORD-1"), S.say("It shipped.")]}),
        sinks=[sink],
    )
    result = await team.run("where is ORD-1?")
    assert result.status == "completed"
    assert opened.open == {}
    spans = sink.finished_spans()
    (root,) = children(spans, None)
    (turn,) = children(spans, root)
    assert [s.name for s in children(spans, turn)] == [
        "chat scripted",
        "execute_tool lookup",
        "chat scripted",
    ]
    for s in spans:
        keys = set(s.attributes or {})
        assert not {k for k in keys if k.startswith(("baton.parent_", "baton.delegation."))}
        assert "baton.subrun.id" not in keys
    # same as before sub-runs existed: a tool span starts at its event's time minus latency
    (called,) = [e for e in result.events if isinstance(e, ToolCalled)]
    (tool_span,) = [s for s in spans if s.name == "execute_tool lookup"]
    assert tool_span.start_time == to_ns(called.ts - called.latency_ms / 1000)
    assert attr(tool_span, "gen_ai.tool.call.id") == called.call_id


async def test_a_conductors_turn_is_marked_and_has_no_model_span(sink: OTelSink) -> None:
    from baton.topologies.pipeline import Pipeline

    pipe = Pipeline([Agent(name="draft")], model=S(lambda request: S.say("drafted")), sinks=[sink])
    result = await pipe.run("write it", session_id=SID)
    assert result.status == "completed", result.error
    spans = sink.finished_spans()
    turns = {s.name: dict(s.attributes or {}) for s in spans if s.name.startswith("invoke_agent")}
    assert turns["invoke_agent pipeline"]["baton.agent.conductor"] is True
    assert "baton.agent.conductor" not in turns["invoke_agent draft"]
    chats = [s for s in spans if s.name.startswith("chat")]
    assert [dict(s.attributes or {})["gen_ai.agent.name"] for s in chats] == ["draft"]
