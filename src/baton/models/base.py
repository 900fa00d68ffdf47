"""The `Model` protocol and the request/response it speaks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from baton.core.messages import Message, ToolCall, ToolSpec, Usage


@dataclass
class ModelRequest:
    """What the kernel asks a model: the agent's own context view and the tools it may call."""

    agent: str
    """Name of the agent holding the baton."""
    messages: list[Message]
    """The agent's context view, system message first."""
    tools: list[ToolSpec] = field(default_factory=list)
    """Tools (including `transfer_to_*` hand-offs) the agent may call."""
    output_schema: dict[str, Any] | None = None
    """JSON schema the final answer (a reply without tool calls) must follow, or None for
    free text. Tool calls stay possible in the same request. A model honours it as best it
    can (a server's structured outputs, a grammar); the kernel validates the answer anyway."""
    output_name: str | None = None
    """A short name of that output type (`Weather`), for providers that name their schemas."""
    temperature: float = 0.0
    reask: bool = False
    """True when this request repeats the previous one after a parse error."""
    fixed_prefix: str = ""
    """The leading text of the system message that every call of this agent repeats (its
    instructions), or "" when none is known. Data never goes here: only what the agent was
    built with. A model that keeps prompt states (the embedded engine) saves its state after
    it, so a later call reads only what follows (the payload, known facts, the conversation)."""


@dataclass
class ModelResponse:
    """What a model returned: text and/or tool calls, plus token usage."""

    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    text_tool_calls: bool = False
    """True when tool calls may be written as JSON inside `text` (text-mode providers)."""
    raw: Any = None
    """Provider-specific raw response, for debugging."""


@runtime_checkable
class Model(Protocol):
    """Anything that turns a `ModelRequest` into a `ModelResponse`.

    A model may also set `native_output = True` when its provider itself makes answers follow
    `ModelRequest.output_schema` (a server's structured outputs): the kernel then leaves the
    expected JSON shape out of the agent's system prompt. The attribute is optional (read with
    `getattr`), so models without it still satisfy the protocol.
    """

    name: str

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Produce the next step for the agent."""
        ...


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can also stream its reply as it is generated."""

    def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        """Yield text deltas (`str`) as they are generated, then exactly one `ModelResponse`:
        the whole reply, the same `generate` would have returned (text, tool calls, usage).
        Tool-call arguments are not streamed as deltas."""
        ...


@runtime_checkable
class ChoiceModel(Model, Protocol):
    """A model that can also score a closed set of answers instead of writing one.

    `score_options` returns the log-probability of each option as the continuation of the
    reply's start `prefix` (e.g. `{"route": "` then `billing",`): a distribution over the
    options that is the model's own, not a confidence it reports about itself. The router's
    `LLMJudge` uses it where a model has it.
    """

    async def score_options(
        self, request: ModelRequest, prefix: str, options: Sequence[str]
    ) -> list[float]:
        """Log-probability of each option continuing the reply `prefix` to `request`."""
        ...


def estimate_tokens(text: str | None) -> int:
    """Documented estimate for models without a tokenizer.

    ASCII text averages about 4 characters per token in BPE vocabularies; CJK characters are
    mostly one token each. We count non-ASCII characters as one token each and ASCII as 1/4.
    """
    if not text:
        return 0
    if text.isascii():
        return (len(text) + 3) // 4
    non_ascii = sum(1 for ch in text if ord(ch) > 127)
    return (len(text) - non_ascii + 3) // 4 + non_ascii
