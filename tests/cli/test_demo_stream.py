"""`baton demo` shows a reply as the model writes it (from its first token), once."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from baton import Agent, Team
from baton.cli.demo import Player
from baton.models.scripted import ScriptedModel


def player(*steps: object) -> tuple[Player, io.StringIO]:
    model = ScriptedModel(list(steps))
    agent = Agent(name="billing", instructions="You answer invoice questions.")
    team = Team([agent], entry="billing", model=model, store="memory://")
    out = io.StringIO()
    return Player(team, Console(file=out, width=100, color_system=None)), out


async def test_a_streamed_reply_is_shown_as_it_is_written_and_only_once() -> None:
    play, out = player(ScriptedModel.say("Your invoice INV-7 is 299 CNY, paid on 1 March."))
    stream, pieces = play.team.stream, []

    async def watched(*args: Any, **kwargs: Any) -> Any:
        async for item in stream(*args, **kwargs):
            if getattr(item, "type", None) == "text_delta":
                pieces.append((item.text, out.getvalue()))  # what was shown before this piece
            yield item

    play.team.stream = watched
    await play.play("What is my invoice?", "S")
    text = out.getvalue()
    assert len(pieces) > 3  # the reply came in pieces ...
    assert "billing: Your" in pieces[-1][1]  # ... and was on screen before its last one came
    assert text.count("Your invoice INV-7 is 299 CNY, paid on 1 March.") == 1
    assert "billing: Your invoice" in text
    assert play.turns[0].result.output == "Your invoice INV-7 is 299 CNY, paid on 1 March."


async def test_a_run_that_ends_without_streaming_still_shows_its_reply() -> None:
    play, out = player(ScriptedModel.call("no_such_tool"), ScriptedModel.call("no_such_tool"))
    await play.play("hello", "S")
    result = play.turns[0].result
    assert f"({result.status}" in out.getvalue() or (result.output or "") in out.getvalue()
