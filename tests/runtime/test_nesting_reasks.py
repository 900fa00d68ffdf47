"""JSON from a model nested thousands of levels deep is re-asked, naming the nesting limit:
never a `RecursionError` that fails the run (native and text-mode calls, typed answers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from baton import MAX_JSON_DEPTH, Agent, ScriptedModel, Team, tool
from baton.models import Step

S = ScriptedModel
LIMIT = f"more than {MAX_JSON_DEPTH} levels deep"


def deep(levels: int, shape: str) -> str:
    if shape == "object":
        return '{"a":' * levels + "1" + "}" * levels
    return "[" * levels + "]" * levels


def desk(model: S, ran: list[dict[str, Any]], store: Any = None) -> Team:
    @tool
    async def lookup(order_id: str, details: Any = None) -> str:
        """Look an order up."""
        ran.append({"order_id": order_id, "details": details})
        return f"{order_id}: shipped"

    return Team([Agent(name="orders", tools=[lookup])], entry="orders", model=model, store=store)


@pytest.mark.parametrize("levels", [5_000, 100_000])
@pytest.mark.parametrize("shape", ["object", "array"])
@pytest.mark.parametrize("mode", ["native", "text"])
async def test_deeply_nested_arguments_are_re_asked_naming_the_limit(
    levels: int, shape: str, mode: str, tmp_path: Path
) -> None:
    # a secret in the arguments sends them through masking at rest too
    args = f'{{"order_id": "ORD-1", "password": "hunter2-x9", "details": {deep(levels, shape)}}}'
    bad: Step = (
        S.raw_call("lookup", args)
        if mode == "native"
        else S.text(f'{{"tool": "lookup", "arguments": {args}}}')
    )
    model = S([bad, S.call("lookup", order_id="ORD-1", details=[1]), S.say("ORD-1 shipped.")])
    ran: list[dict[str, Any]] = []
    team = desk(model, ran, store=f"sqlite:///{tmp_path / 'b.db'}")

    result = await team.run("where is ORD-1?", session_id="S")

    assert (result.status, result.output) == ("completed", "ORD-1 shipped.")
    assert ran == [{"order_id": "ORD-1", "details": [1]}]  # the deep call never ran
    reask = model.requests[1]
    nudge = reask.messages[-1].content or ""
    assert reask.reask and "could not be parsed" in nudge and "lookup" in nudge
    assert LIMIT in nudge
    assert len(nudge) < 2_000  # the model's text is quoted by its two ends, not whole
    await team.aclose()


async def test_a_call_nested_too_deeply_twice_is_answered_with_the_limit_and_not_run() -> None:
    args = f'{{"order_id": "ORD-1", "details": {deep(5_000, "array")}}}'
    model = S([S.raw_call("lookup", args)] * 2 + [S.say("Sorry, I could not look it up.")])
    ran: list[dict[str, Any]] = []
    team = desk(model, ran)

    result = await team.run("where is ORD-1?")

    assert result.status == "completed" and ran == []
    answer = model.requests[2].messages[-1]
    assert answer.role == "tool" and LIMIT in json.loads(answer.content or "")["error"]


class Parcel(BaseModel):
    order_id: str
    contents: Any = None


async def test_a_typed_answer_nested_too_deeply_is_re_asked_naming_the_limit() -> None:
    model = S(
        [
            S.say(f'{{"order_id": "ORD-1", "contents": {deep(5_000, "object")}}}'),
            S.say('{"order_id": "ORD-1", "contents": [1, 2]}'),
        ]
    )
    team = Team([Agent(name="packer", output_type=Parcel)], entry="packer", model=model)

    result = await team.run("pack ORD-1")

    assert result.status == "completed"
    assert result.final == Parcel(order_id="ORD-1", contents=[1, 2])
    assert LIMIT in (model.requests[1].messages[-1].content or "")


async def test_deep_text_mode_prose_that_names_no_tool_is_an_answer_not_a_call() -> None:
    text = f'{{"final": {deep(5_000, "array")}}}'
    model = S([S.text(text)])
    team = desk(model, [])

    result = await team.run("hello")

    assert (result.status, result.output) == ("completed", text)
