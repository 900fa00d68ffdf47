"""JSONLSink and ConsoleSink: what they write and what they never show."""

from __future__ import annotations

import io
import subprocess
import sys

from rich.console import Console

from baton import Agent, Guards, ScriptedModel, Team
from baton.core.events import (
    Escalated,
    EscalationCard,
    GuardTripped,
    HandoffRefused,
    ModelCalled,
    RunFinished,
    ToolCalled,
    event_from_json,
)
from baton.core.messages import Usage
from baton.observe import ConsoleSink, EventSink, JSONLSink

SECRET = "hunter2-secret"


def ping_pong_team() -> Team:
    """a hands to b with a secret in the state, b hands back, the ping-pong guard escalates."""
    script = {
        "a": [
            ScriptedModel.call(
                "transfer_to_b",
                reason="needs b",
                objective="finish",
                state={"order_id": "ORD-1", "password": SECRET},
            )
        ],
        "b": [ScriptedModel.call("transfer_to_a", reason="back to a", objective="finish")],
    }
    return Team(
        [Agent(name="a", handoffs=["b"]), Agent(name="b", handoffs=["a"])],
        entry="a",
        model=ScriptedModel(script, loop=True),
        # the planted values are never said by the user
        guards=Guards(grounded_ids=False, slot_provenance=False),
    )


def simple_team() -> Team:
    """a hands the baton to b, which answers."""
    script = {
        "a": [
            ScriptedModel.call(
                "transfer_to_b", reason="b owns it", objective="answer", state={"secret": SECRET}
            )
        ],
        "b": [ScriptedModel.say("你好，已经处理好了。")],
    }
    return Team(
        [Agent(name="a", handoffs=["b"]), Agent(name="b")],
        entry="a",
        model=ScriptedModel(script),
        # the planted value is never said by the user
        guards=Guards(grounded_ids=False, slot_provenance=False),
    )


def capture(verbose: bool = False) -> tuple[ConsoleSink, io.StringIO]:
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_terminal=False, color_system=None)
    return ConsoleSink(console, verbose=verbose), buf


def test_console_sink_names_a_conductor_as_one():
    from baton.topologies.pipeline import Pipeline

    sink, buf = capture()
    pipe = Pipeline(
        [Agent(name="draft")],
        model=ScriptedModel(lambda request: ScriptedModel.say("drafted")),
        sinks=[sink],
    )
    assert pipe.run_sync("write it").status == "completed"
    lines = buf.getvalue().splitlines()
    assert any("pipeline takes the baton (conductor)" in line for line in lines)
    assert not any("draft takes the baton (conductor)" in line for line in lines)


def test_sinks_satisfy_the_protocol(tmp_path):
    with JSONLSink(tmp_path / "e.jsonl") as jsonl:
        assert isinstance(jsonl, EventSink)
    assert isinstance(ConsoleSink(), EventSink)


def test_jsonl_sink_writes_parseable_events_in_order(tmp_path):
    path = tmp_path / "deep" / "dir" / "events.jsonl"
    team = simple_team()
    with JSONLSink(path) as sink:
        team.add_sink(sink)
        result = team.run_sync("hello")
        # line-buffered: everything is on disk before close
        lines = path.read_text(encoding="utf-8").splitlines()
    assert sink.closed
    events = [event_from_json(line) for line in lines]
    assert [e.id for e in events] == [e.id for e in result.events]
    assert events[0].type == "run_started"
    assert events[-1].type == "run_finished"
    assert "你好" in lines[-1]  # UTF-8, not escaped


def test_jsonl_sink_appends_and_ignores_events_after_close(tmp_path):
    path = tmp_path / "events.jsonl"
    team = simple_team()
    first = JSONLSink(path)
    team.add_sink(first)
    team.run_sync("one")
    first.close()
    first.close()  # twice is harmless
    n = len(path.read_text(encoding="utf-8").splitlines())
    team.run_sync("two")  # the closed sink drops events without raising
    assert len(path.read_text(encoding="utf-8").splitlines()) == n
    with JSONLSink(path) as second:
        team.add_sink(second)
        team.run_sync("three")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) > n
    assert all(event_from_json(line) for line in lines)


def test_console_sink_prints_handoff_keys_but_never_values():
    sink, buf = capture(verbose=True)
    team = ping_pong_team()
    team.add_sink(sink)
    result = team.run_sync("please help")
    assert result.status == "escalated"
    out = buf.getvalue()
    assert "a -> b" in out
    assert "needs b" in out
    assert "order_id, password" in out
    assert "escalated" in out
    assert "guard" in out
    assert SECRET not in out
    assert "ORD-1" not in out


def test_console_sink_lines_for_a_run():
    sink, buf = capture()
    team = simple_team()
    team.add_sink(sink)
    team.run_sync("大事不好了，请帮我执行紧急重启！")
    out = buf.getvalue()
    assert "大事不好了，请帮我执行紧急重启！" in out
    assert "a takes the baton" in out
    assert "b takes the baton" in out
    assert "transfer_to_b" in out
    assert "state keys: secret" in out
    assert "completed" in out
    assert "path: a -> b" in out
    assert SECRET not in out


def test_console_sink_renders_errors_refusals_and_guards():
    sink, buf = capture(verbose=True)
    base = {"trace_id": "t", "session_id": "s", "run_id": "r", "agent": "a"}
    events = [
        ModelCalled(
            **base,
            model="m",
            usage=Usage(input_tokens=3, output_tokens=4),
            latency_ms=12.5,
            error="provider down",
        ),
        ToolCalled(
            **base,
            tool="query_invoice",
            call_id="c",
            arguments={"order_id": SECRET},
            ok=False,
            error="no such order",
            latency_ms=1500.0,
        ),
        HandoffRefused(**base, target="z", reason="a may not hand off to 'z'"),
        GuardTripped(**base, guard="max_hops", detail="5 hops"),
        Escalated(
            **base,
            to="human",
            card=EscalationCard(
                session_id="s",
                trace_id="t",
                path=["a"],
                reasons=["stuck"],
                state={"password": SECRET},
            ),
        ),
        RunFinished(**base, status="failed", path=["a"], error="model failed"),
    ]
    for e in events:
        sink.emit(e)
    out = buf.getvalue()
    for text in (
        "provider down",
        "no such order",
        "1.50 s",
        "refused",
        "max_hops",
        "to human",
        "stuck",
        "password",
        "failed",
        "model failed",
        "args: order_id",
    ):
        assert text in out, text
    assert SECRET not in out


def test_console_sink_never_raises():
    class Broken(io.StringIO):
        def write(self, s: str) -> int:
            raise OSError("disk full")

    sink = ConsoleSink(Console(file=Broken()))
    team = simple_team()
    team.add_sink(sink)
    assert team.run_sync("hello").status == "completed"


def test_importing_baton_does_not_import_rich():
    code = "import baton, baton.observe, sys; print('rich' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
