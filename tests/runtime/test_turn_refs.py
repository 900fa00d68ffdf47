"""How a checkpoint names a turn's messages (`baton.runtime.turn_refs`): a turn that is one
unbroken stretch of the run's messages is one span, any other list names its messages one by
one or whole, and every saved form loads back to the very messages of the run; a span the run
does not hold is a clear error, never a shorter turn."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.backends.base import SessionRecord
from baton.core.messages import Message
from baton.runtime.state import RunState, TurnState


def run_of(n: int) -> RunState:
    r = RunState(SessionRecord("S1"), "go", None, run_id="run_1", trace_id="t1")
    for i in range(n):
        r.messages.append(Message(role="assistant", content=f"m{i}", id=f"m{i}", ts=float(i)))
    return r


def saved_turn(r: RunState) -> dict[str, object]:
    turn = json.loads(r.to_json())["turn"]
    assert isinstance(turn, dict)
    return turn


def test_a_turn_that_is_a_stretch_of_the_run_is_one_span_whatever_its_length() -> None:
    sizes = []
    for n in (10, 1000):
        r = run_of(n + 1)
        r.turn = TurnState(0, "it", None, None, "routed", scratch=r.messages[1:])
        turn = saved_turn(r)
        assert turn["scratch"] == [{"span": ["m1", n]}]
        sizes.append(len(json.dumps(turn)))
        loaded = RunState.from_json(r.to_json())
        assert loaded.turn is not None
        assert loaded.turn.scratch == r.messages[1:]
        assert all(a is b for a, b in zip(loaded.turn.scratch, loaded.messages[1:], strict=True))
    assert sizes[1] - sizes[0] <= 2  # the turn's part does not grow with it (the count's digits)


def test_a_broken_stretch_is_named_message_by_message_and_others_whole() -> None:
    r = run_of(6)
    outsider = Message(role="system", content="be brief", id="sys")
    r.turn = TurnState(
        0,
        "it",
        None,
        None,
        "routed",
        view=[outsider, r.messages[0]],
        scratch=[r.messages[1], r.messages[3], r.messages[4]],
    )
    turn = saved_turn(r)
    assert turn["scratch"] == ["m1", "m3", "m4"]
    view = turn["view"]
    assert isinstance(view, list) and view[1] == "m0" and view[0]["content"] == "be brief"
    loaded = RunState.from_json(r.to_json())
    assert loaded.turn is not None
    assert [m.id for m in loaded.turn.scratch] == ["m1", "m3", "m4"]
    assert [m.id for m in loaded.turn.view] == ["sys", "m0"]


@pytest.mark.parametrize(
    ("span", "error"),
    [
        (["m2", 9], "names 9 messages from m2"),
        (["nowhere", 2], "does not hold"),
        (["m2", 0], "damaged span"),
        (["m2", "3"], "damaged span"),
    ],
)
def test_a_span_the_run_does_not_hold_is_a_clear_error(span: list[object], error: str) -> None:
    r = run_of(5)
    r.turn = TurnState(0, "it", None, None, "routed", scratch=r.messages[1:3])
    data = json.loads(r.to_json())
    data["turn"]["scratch"] = [{"span": span}]
    with pytest.raises(ValueError, match=error):
        RunState.from_json(json.dumps(data))


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 12), st.data())
def test_any_choice_of_the_runs_messages_loads_back_as_it_was(n: int, data: st.DataObject) -> None:
    r = run_of(n)
    picked = data.draw(st.lists(st.integers(0, n - 1), max_size=n))
    extra = data.draw(st.booleans())
    scratch = [r.messages[i] for i in picked]
    if extra:
        scratch.append(Message(role="tool", content="not recorded", id="x1", tool_call_id="c"))
    r.turn = TurnState(0, "it", None, None, "routed", scratch=scratch)
    loaded = RunState.from_json(r.to_json())
    assert loaded.turn is not None
    assert [m.model_dump() for m in loaded.turn.scratch] == [m.model_dump() for m in scratch]
    recorded = {id(m) for m in loaded.messages}
    assert all(id(m) in recorded for m in loaded.turn.scratch[: len(picked)])
