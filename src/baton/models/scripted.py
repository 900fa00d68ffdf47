"""`ScriptedModel`: a deterministic `Model` that replays a script, for tests and benchmarks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baton.core.errors import ModelError
from baton.core.ids import new_id
from baton.core.messages import ToolCall, Usage
from baton.models.base import ModelRequest, ModelResponse, estimate_tokens
from baton.models.streaming import VisibleText, word_chunks


@dataclass(frozen=True)
class Step:
    """One scripted model response. Build with `ScriptedModel.call/say/...`."""

    text: str | None = None
    calls: tuple[tuple[str, str], ...] = ()
    text_mode: bool = False
    error: str | None = None
    delay_s: float = 0.0

    def respond(self, request: ModelRequest) -> ModelResponse:
        """The response this step produces for `request`."""
        if self.error is not None:
            raise ModelError(self.error)
        input_tokens = 0
        for m in request.messages:
            input_tokens += estimate_tokens(m.content)
        return ModelResponse(
            text=self.text,
            tool_calls=[ToolCall(id=new_id("call_"), name=n, arguments=a) for n, a in self.calls],
            usage=Usage(input_tokens=input_tokens, output_tokens=self.output_tokens),
            text_tool_calls=self.text_mode,
        )

    @property
    def output_tokens(self) -> int:
        """Estimated tokens of the step's text and calls (what a model would have generated)."""
        out = estimate_tokens(self.text or "")
        for _, arguments in self.calls:
            out += estimate_tokens(arguments) + 4
        return out


ScriptFn = Callable[[ModelRequest], Step | Sequence[Step]]
Script = Sequence[Step] | Mapping[str, Sequence[Step]] | ScriptFn


class ScriptedModel:
    """A real `Model` that replays steps, through the same parsing path as real models.

    `script` is a list of steps (consumed in order), a dict agent name -> list of steps (each
    agent consumes its own), or a callable `(request) -> step`. With `loop=True` lists restart
    when exhausted; otherwise an exhausted script raises `ModelError` (the run ends `failed`).
    `latency_s` simulates model latency with `asyncio.sleep`.
    """

    def __init__(
        self,
        script: Script,
        *,
        name: str = "scripted",
        latency_s: float = 0.0,
        loop: bool = False,
        record: bool = True,
    ) -> None:
        self.name = name
        self.latency_s = latency_s
        self.loop = loop
        self._fn: ScriptFn | None = None
        self._lists: dict[str | None, list[Step]] = {}
        self._cursor: dict[str | None, int] = {}
        if callable(script) and not isinstance(script, (Sequence, Mapping)):
            self._fn = script
        elif isinstance(script, Mapping):
            self._lists = {k: _flatten(v) for k, v in script.items()}
        else:
            self._lists = {None: _flatten(script)}
        self.requests: list[ModelRequest] = []
        """Every request received (when `record` is true), for assertions in tests."""
        self.record = record

    @staticmethod
    def call(tool_name: str, /, **args: Any) -> Step:
        """A step in which the model calls one tool with `args`."""
        return Step(calls=((tool_name, json.dumps(args, ensure_ascii=False)),))

    @staticmethod
    def say(text: str) -> Step:
        """A step in which the model answers with `text` (ends the agent's turn)."""
        return Step(text=text)

    @staticmethod
    def calls(*steps: Step) -> Step:
        """Several tool calls in one response (e.g. two hand-offs: the first valid one wins)."""
        merged: tuple[tuple[str, str], ...] = ()
        for s in steps:
            merged += s.calls
        return Step(calls=merged)

    @staticmethod
    def raw_call(tool_name: str, arguments: str) -> Step:
        """A tool call whose argument text is given verbatim (malformed JSON for tests)."""
        return Step(calls=((tool_name, arguments),))

    @staticmethod
    def text(raw: str) -> Step:
        """Raw text from a text-mode model; JSON tool calls inside it are parsed."""
        return Step(text=raw, text_mode=True)

    @staticmethod
    def fail(message: str) -> Step:
        """A step in which the provider fails with `ModelError(message)`."""
        return Step(error=message)

    @staticmethod
    def slow(step: Step, delay_s: float) -> Step:
        """The same step, answered after `delay_s` seconds (to trip model timeouts)."""
        return Step(step.text, step.calls, step.text_mode, step.error, delay_s)

    def _next(self, request: ModelRequest) -> Step:
        if self._fn is not None:
            out = self._fn(request)
            return out if isinstance(out, Step) else ScriptedModel.calls(*out)
        key: str | None = request.agent if request.agent in self._lists else None
        if key not in self._lists:
            raise ModelError(
                f"ScriptedModel has no steps for agent {request.agent!r}; "
                f"add a list under that name (scripted agents: {sorted(map(str, self._lists))})"
            )
        steps = self._lists[key]
        i = self._cursor.get(key, 0)
        if i >= len(steps):
            if not self.loop or not steps:
                raise ModelError(
                    f"ScriptedModel script for {key or 'all agents'!r} is exhausted after "
                    f"{len(steps)} steps; add steps or pass loop=True"
                )
            i = 0
        self._cursor[key] = i + 1
        return steps[i]

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Reply with the next scripted step."""
        if self.record:
            self.requests.append(request)
        step = self._next(request)
        delay = step.delay_s or self.latency_s
        if delay:
            await asyncio.sleep(delay)
        return step.respond(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        """Reply with the next scripted step, streamed: its text in word-sized deltas, then
        the same `ModelResponse` as `generate` (the script is consumed exactly as there).

        Tool calls are not streamed; the JSON of a text-mode step (`ScriptedModel.text`) is
        shown as a text-mode provider's would be: prose and `{"final": ...}` answers only.
        """
        response = await self.generate(request)
        visible = VisibleText(text_mode=response.text_tool_calls)
        for piece in word_chunks(response.text or ""):
            shown = visible.feed(piece)
            if shown:
                yield shown
        rest = visible.finish(response.text, (t.name for t in request.tools))
        if rest:
            yield rest
        yield response


def _flatten(steps: Sequence[Step]) -> list[Step]:
    out = list(steps)
    for s in out:
        if not isinstance(s, Step):
            raise TypeError(
                f"script entries must be steps made with ScriptedModel.call/say/..., got {s!r}"
            )
    return out
