"""`ReplayModel`: answers an agent's model calls with the responses a recording holds, in
order, through the kernel's own parsing path, under the recorded model's name; a call that
failed when recorded fails again with the same message. Asked once more than the record
answered, it fails with a `ModelError` that says so (the replay then shows where the runs
parted)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence

from baton.core.errors import ModelError
from baton.core.messages import ToolCall, Usage
from baton.models.base import ModelRequest, ModelResponse, estimate_tokens
from baton.models.streaming import word_chunks
from baton.replay.record import Response
from baton.runtime.model_call import request_lane

_FAILED = re.compile(r"model '.*?' failed for agent \S+: (?P<type>\w+): (?P<msg>.*)\Z", re.S)
_HINT = " (check the provider's URL, key and model name)"


class RecordedResponses:
    """One run's recorded model responses, each agent's given out in order."""

    def __init__(self, responses: Sequence[Response] = ()) -> None:
        self._queues: dict[tuple[str, str | None], list[tuple[int, Response]]] = {}
        self.load(responses)

    def load(self, responses: Sequence[Response]) -> None:
        """Answer from `responses` from now on (one run's, in the order they were given)."""
        self._queues = {}
        for i, r in enumerate(responses):
            self._queues.setdefault((r.agent, r.lane), []).append((i, r))

    def _queue(self, agent: str, request: ModelRequest | None) -> list[tuple[int, Response]]:
        """The lane of `request` (the fingerprint of its last user message) when the record
        has answers of `agent` under it; else the agent's earliest answer left in any lane
        (a record made before lanes were kept, or a message masked in an exported fixture)."""
        key = request_lane(request) if request is not None else None
        queue = self._queues.get((agent, key))
        if queue:
            return queue
        left = [q for (a, _), q in self._queues.items() if a == agent and q]
        return min(left, key=lambda q: q[0][0]) if left else []

    def peek(self, agent: str) -> Response | None:
        """The agent's next response, left in place."""
        queue = self._queue(agent, None)
        return queue[0][1] if queue else None

    def take(self, agent: str, request: ModelRequest | None = None) -> Response | None:
        """The agent's next response for `request`'s lane."""
        queue = self._queue(agent, request)
        return queue.pop(0)[1] if queue else None

    def left(self) -> dict[str, int]:
        """Agent -> responses not asked for (a replay that stopped early)."""
        out: dict[str, int] = {}
        for (agent, _), queue in self._queues.items():
            if queue:
                out[agent] = out.get(agent, 0) + len(queue)
        return out


def _failure(recorded: str) -> Exception:
    """The exception that makes the kernel write `recorded` again."""
    m = _FAILED.match(recorded)
    if m is None:
        return ModelError(recorded)
    kind, msg = m["type"], m["msg"]
    # an exception of the recorded type's name, so the kernel's message comes out the same
    if msg.endswith(_HINT):  # the kernel adds it to errors that are not ModelErrors
        plain: type[Exception] = type(kind, (Exception,), {})
        return plain(msg[: -len(_HINT)])
    named: type[ModelError] = type(kind, (ModelError,), {})
    return named(msg)


class ReplayModel:
    """The recorded model of one agent (`baton.replay.replay` gives each agent one)."""

    def __init__(self, agent: str, responses: RecordedResponses) -> None:
        self.agent = agent
        self.responses = responses
        self.asked = 0
        self.name = "replay"
        self.renamed()

    def renamed(self) -> None:
        """Take the name of the model that gave the agent's next response."""
        nxt = self.responses.peek(self.agent)
        if nxt is not None:
            self.name = nxt.model

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """The agent's next recorded response."""
        self.asked += 1
        r = self.responses.take(self.agent, request)
        try:
            if r is None:
                raise ModelError(
                    f"replay: the record holds no more model responses for agent {self.agent!r} "
                    f"(asked {self.asked} times): this run took a step the recorded one did not"
                )
            if r.error is not None:
                raise _failure(r.error)
        finally:
            self.renamed()
        calls = [ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in r.calls]
        out = estimate_tokens(r.text or "") + sum(estimate_tokens(c.arguments) for c in r.calls)
        used = sum(estimate_tokens(m.content) for m in request.messages)
        return ModelResponse(
            text=r.text, tool_calls=calls, usage=Usage(input_tokens=used, output_tokens=out)
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        """The same response, its text in word-sized pieces first."""
        response = await self.generate(request)
        for piece in word_chunks(response.text or ""):
            yield piece
        yield response
