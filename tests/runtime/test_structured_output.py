"""Structured output: `Agent(output_type=...)` answers are JSON validated into the type,
repaired for syntax only, re-asked once quoting the validation error, never completed
unvalidated; `RunResult.final` holds the typed value, also after a resume."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError
from runtime_kit import of_type

from baton import Agent, ConfigError, ModelRequest, ScriptedModel, Team, tool
from baton.models import Step
from baton.models.parsing import parse_text_mode
from baton.models.textmode import json_shape
from baton.runtime.output import compile_output
from baton.runtime.state import RunState

S = ScriptedModel


class Address(BaseModel):
    city: str
    street: str | None = None


class Weather(BaseModel):
    city: str
    temp_c: float
    summary: str = Field(description="One short sentence.")


class Contact(BaseModel):
    name: str
    address: Address
    tags: list[str] = []


GOOD = {"city": "Paris", "temp_c": 21.5, "summary": "Sunny."}


def _team(model: Any, output_type: Any = Weather, **agent_kwargs: Any) -> Team:
    agent = Agent(name="forecaster", output_type=output_type, **agent_kwargs)
    return Team([agent], entry="forecaster", model=model)


async def test_a_valid_json_answer_is_the_typed_final_value() -> None:
    model = S([S.say(json.dumps(GOOD))])
    result = await _team(model).run("weather in Paris?")
    assert result.status == "completed"
    assert result.final == Weather(**GOOD)
    assert isinstance(result.final, Weather)
    assert json.loads(result.output or "") == GOOD
    assert [e.reask for e in of_type(result.events, "model_called")] == [False]


async def test_the_schema_and_a_shape_note_reach_the_model() -> None:
    model = S([S.say(json.dumps(GOOD))])
    await _team(model).run("weather in Paris?")
    [request] = model.requests
    assert request.output_schema == Weather.model_json_schema()
    assert request.output_name == "Weather"
    system = request.messages[0].content or ""
    assert system.endswith(
        'Your final answer is JSON only, of this shape: {"city": string, "temp_c": number, '
        '"summary": string}'
    )


async def test_a_model_that_enforces_the_schema_itself_gets_no_shape_note() -> None:
    model = S([S.say(json.dumps(GOOD))])
    model.native_output = True  # type: ignore[attr-defined]
    await _team(model).run("weather in Paris?")
    assert "of this shape" not in (model.requests[0].messages[0].content or "")
    assert model.requests[0].output_schema is not None


async def test_agents_without_an_output_type_send_no_schema_and_get_no_final() -> None:
    model = S([S.say('{"city": "Paris"}')])
    team = Team([Agent(name="plain")], entry="plain", model=model)
    result = await team.run("hi")
    assert (result.output, result.final) == ('{"city": "Paris"}', None)
    assert model.requests[0].output_schema is None and model.requests[0].output_name is None


@pytest.mark.parametrize(
    "text",
    [
        f"```json\n{json.dumps(GOOD)}\n```",
        'Here it is: {"city": "Paris", "temp_c": 21.5, "summary": "Sunny.",}',
        "{'city': 'Paris', 'temp_c': 21.5, 'summary': 'Sunny.'}",
    ],
)
async def test_fences_prose_and_syntax_slips_are_repaired_without_a_re_ask(text: str) -> None:
    model = S([S.say(text)])
    result = await _team(model).run("weather in Paris?")
    assert result.status == "completed" and result.final == Weather(**GOOD)
    assert json.loads(result.output or "") == GOOD  # the normalised JSON, not the raw text
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    ("bad", "quoted"),
    [
        ({"city": "Paris", "summary": "Sunny."}, "temp_c: Field required"),
        (
            {"city": "Paris", "temp_c": "warm", "summary": "Sunny."},
            "temp_c: Input should be a valid number, unable to parse string as a number "
            '(got "warm")',
        ),
    ],
)
async def test_an_invalid_answer_is_re_asked_once_quoting_the_pydantic_error(
    bad: dict[str, Any], quoted: str
) -> None:
    model = S([S.say(json.dumps(bad)), S.say(json.dumps(GOOD))])
    result = await _team(model).run("weather in Paris?")
    assert result.status == "completed" and result.final == Weather(**GOOD)
    reask = model.requests[1]
    assert reask.reask and reask.output_schema == Weather.model_json_schema()
    assert reask.messages[-2].role == "assistant"
    assert reask.messages[-2].content == json.dumps(bad)
    nudge = reask.messages[-1].content or ""
    assert "1 validation error for Weather" in nudge and quoted in nudge
    assert "of this shape" in nudge
    assert [e.reask for e in of_type(result.events, "model_called")] == [False, True]


async def test_an_answer_invalid_twice_fails_the_run_with_the_error() -> None:
    bad = json.dumps({"city": "Paris"})
    model = S([S.say(bad), S.say(bad)])
    result = await _team(model).run("weather in Paris?")
    assert result.status == "failed" and result.final is None and result.output is None
    assert result.error is not None
    assert "does not match its output type after a re-ask" in result.error
    assert "2 validation errors for Weather" in result.error
    assert "temp_c: Field required" in result.error and "summary: Field required" in result.error
    [finished] = of_type(result.events, "run_finished")
    assert finished.status == "failed"


async def test_a_cut_off_answer_is_never_completed_by_a_guess() -> None:
    cut = '{"city": "Paris", "temp_c": 21.5, "summary": "Sun'
    model = S([S.say(cut), S.say(cut)])
    result = await _team(model).run("weather in Paris?")
    assert result.status == "failed" and result.error is not None
    assert "cut off" in result.error
    assert "cut off" in (model.requests[1].messages[-1].content or "")


async def test_an_invented_value_is_not_accepted_from_a_repair() -> None:
    model = S([S.say('{"city": "Paris", "temp_c": 3, "summary": }'), S.say(json.dumps(GOOD))])
    result = await _team(model).run("weather in Paris?")
    assert result.final == Weather(**GOOD)
    assert "invent an empty value for 'summary'" in (model.requests[1].messages[-1].content or "")


async def test_a_tool_call_then_a_typed_answer() -> None:
    looked: list[str] = []

    @tool
    async def forecast(city: str) -> dict[str, Any]:
        """The forecast of a city."""
        looked.append(city)
        return {"temp_c": 21.5, "sky": "clear"}

    model = S([S.call("forecast", city="Paris"), S.say(json.dumps(GOOD))])
    result = await _team(model, tools=[forecast]).run("weather in Paris?")
    assert looked == ["Paris"]
    assert result.status == "completed" and result.final == Weather(**GOOD)
    # both requests carry the schema: tool calls stay possible with an output type
    assert [r.output_schema is not None for r in model.requests] == [True, True]
    assert [r.tools[0].name for r in model.requests] == ["forecast", "forecast"]


async def test_an_invalid_answer_after_a_tool_call_gets_its_own_re_ask() -> None:
    @tool
    async def forecast(city: str) -> str:
        """The forecast of a city."""
        return "21.5 C, clear"

    model = S(
        [
            S.call("forecast", city="Paris"),
            S.say('{"city": "Paris"}'),
            S.say(json.dumps(GOOD)),
        ]
    )
    result = await _team(model, tools=[forecast]).run("weather in Paris?")
    assert result.final == Weather(**GOOD)
    assert [r.reask for r in model.requests] == [False, False, True]


async def test_text_mode_answers_in_the_final_envelope_are_unwrapped() -> None:
    @tool
    async def forecast(city: str) -> str:
        """The forecast of a city."""
        return "21.5 C, clear"

    model = S(
        [
            S.text('{"tool": "forecast", "arguments": {"city": "Paris"}}'),
            S.text(json.dumps({"final": GOOD})),
        ]
    )
    result = await _team(model, tools=[forecast]).run("weather in Paris?")
    assert result.status == "completed" and result.final == Weather(**GOOD)


async def test_text_mode_keeps_an_answer_whose_own_keys_look_like_an_envelope() -> None:
    class Verdict(BaseModel):
        answer: str
        name: str
        input: str

    verdict = {"answer": "yes", "name": "refund", "input": "ORD-1"}
    model = S([S.text(json.dumps(verdict))])
    result = await _team(model, output_type=Verdict).run("may I get a refund?")
    assert result.final == Verdict(**verdict)


async def test_chinese_text_in_fields_survives_as_written() -> None:
    answer = {"city": "北京", "temp_c": -3, "summary": "晴，有风。"}
    model = S([S.say(json.dumps(answer))])
    result = await _team(model).run("北京天气怎么样？")
    assert result.final == Weather(city="北京", temp_c=-3, summary="晴，有风。")
    assert "北京" in (result.output or "") and "\\u" not in (result.output or "")


async def test_nested_models_and_lists_validate() -> None:
    contact = {"name": "Li Lei", "address": {"city": "上海"}, "tags": ["vip"]}
    model = S([S.say(json.dumps(contact))])
    result = await _team(model, output_type=Contact).run("who?")
    assert result.final == Contact(name="Li Lei", address=Address(city="上海"), tags=["vip"])
    items = [{"city": "Paris", "temp_c": 1, "summary": "a"}, {"city": "Oslo", "temp_c": -4}]
    model = S([S.say(json.dumps(items)), S.say(json.dumps([GOOD]))])
    result = await _team(model, output_type=list[Weather]).run("weather?")
    assert "1.summary: Field required" in (model.requests[1].messages[-1].content or "")
    assert result.final == [Weather(**GOOD)]


def test_output_type_must_be_a_type_pydantic_understands() -> None:
    with pytest.raises(ValidationError, match="output_type takes a type"):
        Agent(name="a", output_type=Weather(**GOOD))

    class Opaque:
        pass

    with pytest.raises(ConfigError, match=r"output_type .* cannot be used"):
        _team(S([]), output_type=Opaque)


def test_shape_is_short_and_marks_optional_fields() -> None:
    assert json_shape(Contact.model_json_schema()) == (
        '{"name": string, "address": {"city": string, "street"?: string | null}, '
        '"tags"?: [string, ...]}'
    )
    spec = compile_output(Contact, native=False)
    assert spec.name == "Contact" and spec.note is not None
    assert compile_output(Contact, native=True).note is None


def test_text_mode_parsing_in_structured_mode() -> None:
    # an object holding an answer-like key is the answer itself, not an envelope
    found = parse_text_mode('{"answer": "yes", "score": 2}', set(), structured=True)
    assert (found.text, found.calls) == ('{"answer": "yes", "score": 2}', [])
    # the envelope is unwrapped; a tool call is still a call
    found = parse_text_mode('{"final": {"a": "中"}}', {"t"}, structured=True)
    assert found.text == '{"a": "中"}'
    found = parse_text_mode('{"tool": "t", "arguments": {"x": 1}}', {"t"}, structured=True)
    assert [c.name for c in found.calls] == ["t"]
    # a repaired envelope that would invent a value stays as written
    raw = '{"final": {"a": }}'
    assert parse_text_mode(raw, set(), structured=True).text == raw


def test_the_final_value_survives_a_checkpoint_as_json_data() -> None:
    from baton.backends.base import SessionRecord

    r = RunState(SessionRecord(session_id="S"), "hi", None)
    r.final = Weather(city="北京", temp_c=1, summary="晴").model_dump(mode="json")
    loaded = RunState.from_json(r.to_json())
    assert loaded.final == r.final
    assert Weather.model_validate(loaded.final).city == "北京"


@pytest.mark.usefixtures("dies_when_cancelled")
async def test_a_run_resumed_after_a_crash_mid_turn_still_returns_final(tmp_path: Path) -> None:
    attempts: list[str] = []

    @tool
    async def forecast(city: str) -> str:
        """The forecast of a city (hangs on its first attempt, as a process that dies)."""
        attempts.append(city)
        if len(attempts) == 1:
            await asyncio.sleep(30)
        return "21.5 C, clear"

    def script(request: ModelRequest) -> Step:
        if request.messages[-1].role == "user":
            return S.call("forecast", city="Paris")
        return S.say(json.dumps(GOOD))

    db = f"sqlite:///{tmp_path / 'b.db'}"
    team = Team(
        [Agent(name="forecaster", tools=[forecast], output_type=Weather)],
        entry="forecaster",
        model=S(script),
        store=db,
    )
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(team.run("weather in Paris?", session_id="S"), 0.3)
    await team.aclose()

    again = Team(
        [Agent(name="forecaster", tools=[forecast], output_type=Weather)],
        entry="forecaster",
        model=S(script),
        store=db,
    )
    try:
        [cp] = await again.unfinished()
        assert cp.status == "running"
        result = await again.resume("S")
        assert result.status == "completed" and result.final == Weather(**GOOD)
        assert attempts == ["Paris", "Paris"]
        assert of_type(result.events, "run_resumed")
    finally:
        await again.aclose()
