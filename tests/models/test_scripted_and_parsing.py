"""`ScriptedModel` and the shared parser (`baton.models.parsing`)."""

from __future__ import annotations

import json
import time

import pytest

from baton import Message, ModelError, ModelRequest, ParseError, ScriptedModel
from baton.models import Model, ModelResponse, Step, estimate_tokens
from baton.models.base import StreamingModel
from baton.models.parsing import parse_json_object, parse_text_mode, strip_fences

S = ScriptedModel


def _req(agent: str = "a", text: str = "hi") -> ModelRequest:
    return ModelRequest(agent=agent, messages=[Message(role="user", content=text)])


# ---------------------------------------------------------------- ScriptedModel


def test_scripted_model_is_a_model() -> None:
    assert isinstance(S([]), Model)


def test_step_builders() -> None:
    call = S.call("query_invoice", order_id="ORD-1", note="发票")
    assert call.calls == (("query_invoice", '{"order_id": "ORD-1", "note": "发票"}'),)
    assert call.text is None
    assert S.say("hello") == Step(text="hello")
    both = S.calls(S.call("a", x=1), S.call("b"))
    assert both.calls == (("a", '{"x": 1}'), ("b", "{}"))
    assert S.raw_call("a", "{oops").calls == (("a", "{oops"),)
    assert S.text('{"tool": "a"}') == Step(text='{"tool": "a"}', text_mode=True)
    assert S.fail("down").error == "down"
    slow = S.slow(S.call("a", x=1), 0.5)
    assert slow.calls == (("a", '{"x": 1}'),) and slow.delay_s == 0.5


async def test_a_list_script_is_replayed_in_order_and_requests_are_recorded() -> None:
    model = S([S.call("lookup", key="k"), S.say("done")])
    r1 = await model.generate(_req("a"))
    r2 = await model.generate(_req("b"))
    assert [c.name for c in r1.tool_calls] == ["lookup"]
    assert json.loads(r1.tool_calls[0].arguments) == {"key": "k"}
    assert r1.text is None
    assert r2.text == "done" and r2.tool_calls == []
    assert [r.agent for r in model.requests] == ["a", "b"]
    assert r1.usage.input_tokens > 0 and r1.usage.output_tokens > 0
    assert r1.tool_calls[0].id != (await S([S.call("lookup")]).generate(_req())).tool_calls[0].id


async def test_a_dict_script_gives_each_agent_its_own_steps() -> None:
    model = S({"a": [S.say("a1"), S.say("a2")], "b": [S.say("b1")]})
    assert (await model.generate(_req("a"))).text == "a1"
    assert (await model.generate(_req("b"))).text == "b1"
    assert (await model.generate(_req("a"))).text == "a2"
    with pytest.raises(ModelError, match="no steps for agent 'c'"):
        await model.generate(_req("c"))


async def test_exhausted_scripts_raise_unless_looping() -> None:
    model = S({"a": [S.say("only")]})
    await model.generate(_req("a"))
    with pytest.raises(ModelError, match="exhausted after 1 steps"):
        await model.generate(_req("a"))

    looping = S([S.say("x"), S.say("y")], loop=True)
    texts = [(await looping.generate(_req())).text for _ in range(5)]
    assert texts == ["x", "y", "x", "y", "x"]

    with pytest.raises(ModelError, match="exhausted"):
        await S([], loop=True).generate(_req())


async def test_a_callable_script_sees_the_request() -> None:
    def policy(request: ModelRequest) -> Step:
        return S.say(f"{request.agent} heard {request.messages[-1].content}")

    model = S(policy)
    assert (await model.generate(_req("billing", "发票"))).text == "billing heard 发票"


async def test_a_callable_may_return_several_steps() -> None:
    model = S(lambda r: [S.call("a"), S.call("b")])
    assert [c.name for c in (await model.generate(_req())).tool_calls] == ["a", "b"]


async def test_fail_raises_model_error() -> None:
    with pytest.raises(ModelError, match="rate limited"):
        await S([S.fail("rate limited")]).generate(_req())


async def test_slow_steps_and_latency_delay_the_answer() -> None:
    t0 = time.perf_counter()
    await S([S.slow(S.say("x"), 0.05)]).generate(_req())
    await S([S.say("y")], latency_s=0.05).generate(_req())
    assert time.perf_counter() - t0 >= 0.09


async def test_text_steps_are_flagged_for_text_mode_parsing() -> None:
    resp = await S([S.text("plain")]).generate(_req())
    assert resp.text_tool_calls is True and resp.text == "plain"


def test_scripts_must_hold_steps() -> None:
    with pytest.raises(TypeError, match="script entries must be steps"):
        S(["hello"])  # type: ignore[list-item]


def test_estimate_tokens() -> None:
    assert estimate_tokens(None) == 0
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("中文") == 2
    assert estimate_tokens("ab中文") == 3


# ---------------------------------------------------------------- ScriptedModel.stream


async def _stream(model: ScriptedModel, request: ModelRequest) -> tuple[list[str], ModelResponse]:
    *deltas, final = [item async for item in model.stream(request)]
    assert all(isinstance(d, str) and d for d in deltas)
    assert isinstance(final, ModelResponse)
    return [str(d) for d in deltas], final


def test_scripted_model_streams() -> None:
    assert isinstance(S([]), StreamingModel)


async def test_stream_yields_word_deltas_then_what_generate_returns() -> None:
    text = "Your invoice ORD-1 is ISSUED, 发票 299 元."
    streamed, generated = S([S.say(text)]), S([S.say(text)])
    deltas, final = await _stream(streamed, _req())
    expected = await generated.generate(_req())
    assert deltas == ["Your ", "invoice ", "ORD-1 ", "is ", "ISSUED, ", "发票 ", "299 ", "元."]
    assert "".join(deltas) == text
    assert (final.text, final.usage, final.text_tool_calls) == (
        expected.text,
        expected.usage,
        expected.text_tool_calls,
    )


async def test_stream_consumes_the_script_as_generate_does() -> None:
    model = S({"a": [S.call("lookup", key="k"), S.say("done")], "b": [S.say("b1")]})
    deltas, first = await _stream(model, _req("a"))
    assert deltas == [] and [(c.name, c.arguments) for c in first.tool_calls] == [
        ("lookup", '{"key": "k"}')
    ]
    assert (await model.generate(_req("b"))).text == "b1"
    deltas, second = await _stream(model, _req("a"))
    assert deltas == ["done"] and second.text == "done"
    assert [r.agent for r in model.requests] == ["a", "b", "a"]
    with pytest.raises(ModelError, match="exhausted"):
        await _stream(model, _req("a"))


async def test_stream_of_a_failing_step_raises_before_any_delta() -> None:
    seen: list[object] = []
    with pytest.raises(ModelError, match="down"):
        async for item in S([S.fail("down")]).stream(_req()):
            seen.append(item)
    assert seen == []


async def test_stream_of_text_mode_steps_hides_tool_call_json() -> None:
    handoff = '{"tool": "transfer_to_billing", "arguments": {"reason": "invoice"}}'
    model = S([S.text(handoff), S.text('{"final": "Your invoice is ISSUED."}')])
    deltas, final = await _stream(model, _req())
    assert deltas == [] and final.text == handoff and final.text_tool_calls
    deltas, final = await _stream(model, _req())
    assert "".join(deltas) == "Your invoice is ISSUED." and len(deltas) == 4


# ---------------------------------------------------------------- parse_json_object


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        (None, {}),
        ("   ", {}),
        ("{}", {}),
        ('{"a": 1,}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
        ('Here you go: {"a": "x"} done', {"a": "x"}),
        ("{'a': 'x'}", {"a": "x"}),
        ('{"a": "中文"}', {"a": "中文"}),
        ("{a: 1, 'b': True, 'c': None}", {"a": 1, "b": True, "c": None}),
        ('{"a": 1 "b": 2}', {"a": 1, "b": 2}),
    ],
)
def test_parse_json_object_parses_and_repairs(raw: str | None, expected: dict) -> None:
    assert parse_json_object(raw) == expected


# a missing closing brace used to be repaired; it is text cut off, so it is re-asked now
@pytest.mark.parametrize("raw", ['{"a": {"b": 1}', '{"order_id": ', '{"order_id":"ORD-'])
def test_cut_off_arguments_raise_a_parse_error(raw: str) -> None:
    with pytest.raises(ParseError, match="cut off"):
        parse_json_object(raw)


@pytest.mark.parametrize("raw", ["order_id=ORD-1", "not json at all", "<<<>>>", "{{{"])
def test_unrepairable_arguments_raise_a_parse_error_quoting_the_input(raw: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_json_object(raw)
    msg = str(err.value)
    assert "not valid JSON" in msg
    assert "line 1 column" in msg  # the strict parser's position
    assert repr(raw) in msg


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "42"])
def test_non_objects_raise_a_parse_error(raw: str) -> None:
    with pytest.raises(ParseError, match="expected a JSON object"):
        parse_json_object(raw)


def test_strip_fences() -> None:
    assert strip_fences('```json\n{"a": 1}\n```') == '{"a": 1}'
    assert strip_fences("before ```\nx\n``` after") == "x"
    assert strip_fences("  plain  ") == "plain"


# ---------------------------------------------------------------- parse_text_mode


def test_text_mode_plain_text_is_an_answer() -> None:
    found = parse_text_mode("Your invoice is issued.", {"query_invoice"})
    assert found.text == "Your invoice is issued." and found.calls == []
    assert parse_text_mode(None, set()).text is None


def test_text_mode_finds_a_tool_call() -> None:
    found = parse_text_mode(
        "Let me check.\n```json\n"
        '{"tool": "query_invoice", "arguments": {"order_id": "ORD-1"}}\n```',
        {"query_invoice"},
    )
    assert found.text is None
    (call,) = found.calls
    assert call.name == "query_invoice"
    assert json.loads(call.arguments) == {"order_id": "ORD-1"}


def test_text_mode_accepts_other_key_spellings_and_lists() -> None:
    found = parse_text_mode(
        '[{"name": "a", "args": {"x": 1}}, {"function": "b", "parameters": "{\\"y\\": 2}"}]',
        {"a", "b"},
    )
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == [
        ("a", {"x": 1}),
        ("b", {"y": 2}),
    ]


def test_text_mode_final_answer_object() -> None:
    found = parse_text_mode('{"final": "All done."}', {"a"})
    assert found.text == "All done." and found.calls == []


def test_text_mode_keeps_calls_to_unknown_tools_so_the_kernel_can_answer_them() -> None:
    found = parse_text_mode('{"tool": "rm_rf", "arguments": {}}', {"a"})
    assert [c.name for c in found.calls] == ["rm_rf"]


def test_text_mode_json_that_is_not_a_call_stays_text() -> None:
    text = 'The config is {"debug": true}.'
    found = parse_text_mode(text, {"a"})
    assert found.text == text and found.calls == []
