"""`baton.a2a.wire`: a hand-off written as an A2A message reads back as it was, whatever text
and JSON it carries (Chinese, lone surrogates, nesting), and a malformed hand-off part is
refused with what is wrong."""

from __future__ import annotations

import math

import pytest
from a2a.types import Message, Part, Role
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.a2a import wire
from baton.core.payload import HandoffPayload
from baton.core.text import clean_text, clean_value

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
any_text = st.text(st.characters(exclude_categories=()))  # lone surrogates included
json_leaf = st.none() | st.booleans() | any_text | st.integers(-(2**52), 2**52)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=12,
)


def _payload(objective: str, state: dict) -> HandoffPayload:
    return HandoffPayload(
        reason="a server is down",
        objective=objective,
        state=state,
        trace_id=TRACE,
        session_id="s-1",
        source="triage",
        target="tech",
        hop=1,
        path=["triage"],
        history_ref="s-1",
    )


def _same(a: object, b: object) -> bool:
    """Equal as JSON, numbers compared as numbers (protobuf carries them as doubles)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b)
    return a == b


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(st.characters(exclude_categories=()), min_size=1),
    objective=st.text().filter(lambda t: bool(t.strip())),  # pydantic refuses surrogates
    state=st.dictionaries(any_text, json_value, max_size=4),
)
def test_a_handoff_reads_back_as_it_was_sent(text, objective, state):
    sent = _payload(objective, state)
    message = wire.handoff_message(
        text, message_id="m-1", context_id="c-1", payload=sent, trace_id=TRACE
    )
    got = wire.read_message(Message.FromString(message.SerializeToString()))
    sent_text = clean_text(text)
    assert got.text == (sent_text if sent_text.strip() else "")  # a blank part reads as none
    assert got.trace_id == TRACE
    assert got.payload is not None
    assert clean_text(got.payload.objective) == clean_text(objective)
    assert _same(got.payload.state, clean_value(state))


def test_chinese_text_and_state_cross_unchanged():
    sent = _payload("重启服务器 srv-bj-001", {"server_id": "srv-bj-001", "备注": "生产环境"})
    message = wire.handoff_message(
        "大事不好了，请紧急重启！", message_id="m", context_id="c", payload=sent
    )
    got = wire.read_message(Message.FromString(message.SerializeToString()))
    assert got.text == "大事不好了，请紧急重启！"
    assert got.payload == sent


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (["not", "an", "object"], "must hold a JSON object"),
        ({"reason": "x"}, "not a valid HandoffPayload"),
        ({**_payload("o", {}).model_dump(mode="json"), "holder": "admin"}, "holder"),
    ],
)
def test_a_malformed_handoff_part_is_refused_naming_the_problem(data, why):
    message = Message(
        message_id="m",
        context_id="c",
        role=Role.ROLE_USER,
        parts=[
            Part(text="hi"),
            Part(data=wire.to_value(data), media_type=wire.HANDOFF_MEDIA_TYPE),
        ],
    )
    with pytest.raises(wire.WireError, match=why):
        wire.read_message(message)


@pytest.mark.parametrize("traceparent", ["", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", "junk", 7])
def test_a_malformed_traceparent_starts_a_new_trace(traceparent):
    assert wire.trace_id_of(traceparent) is None


def test_the_citations_of_a_handoff_cross_unchanged():
    cited = {
        "kb": "refunds",
        "source": "examples/policies/refunds/refunds-zh.md",
        "heading": "退款规则（中文） > POL-RF-006 退款到账时间",
        "start": 113,
        "end": 402,
        "chunk_id": "refunds-7f3a",
        "sha256": "0" * 64,
    }
    sent = _payload("退款多久到账", {}).model_copy(update={"citations": [cited]})
    message = wire.handoff_message("退款", message_id="m", context_id="c", payload=sent)
    got = wire.read_message(Message.FromString(message.SerializeToString()))
    assert got.payload == sent
    assert type(got.payload.citations[0]["start"]) is int  # not protobuf's double
