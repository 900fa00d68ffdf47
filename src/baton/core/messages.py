"""Messages, tool calls and token usage: the data a model sees and returns."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from baton.core.data import Data
from baton.core.ids import id_factory

Role = Literal["system", "user", "assistant", "tool"]

# These are slotted dataclasses, not pydantic models: the kernel creates several per model call
# and stores keep them, so construction cost and GC-tracked objects per instance matter
# (see `baton.core.data`). Pydantic still validates and serialises them at the edges.


_call_id = id_factory("call_")
_message_id = id_factory("msg_")


def _object_schema() -> dict[str, Any]:
    return {"type": "object"}


@dataclass(slots=True, kw_only=True, frozen=True)
class ToolCall(Data):
    """One tool call as the model emitted it; `arguments` is the raw JSON text, parsed later."""

    id: str = field(default_factory=_call_id)
    """Call id, unique per run."""
    name: str
    """Name of the tool the model asked for."""
    arguments: str = "{}"
    """Arguments as the model wrote them (JSON)."""


@dataclass(slots=True, kw_only=True)
class Usage(Data):
    """Token usage of one or more model calls."""

    input_tokens: int = 0
    """Prompt tokens sent to the model."""
    output_tokens: int = 0
    """Tokens the model generated."""
    cached_input_tokens: int = 0
    """Of `input_tokens`, those the model took from a cache of an earlier call instead of
    reading them again (the embedded model's saved prompt states; an OpenAI-compatible
    server's `prompt_tokens_details.cached_tokens`)."""

    @property
    def total_tokens(self) -> int:
        """Prompt plus generated tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def evaluated_input_tokens(self) -> int:
        """Prompt tokens the model read (evaluated): `input_tokens` less the cached ones."""
        return self.input_tokens - self.cached_input_tokens

    def add(self, other: Usage) -> None:
        """Add another usage into this one, in place."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_input_tokens += other.cached_input_tokens


@dataclass(slots=True, kw_only=True)
class Message(Data):
    """One entry of a session transcript, in chat-completions shape plus provenance."""

    id: str = field(default_factory=_message_id)
    """Message id in the store."""
    role: Role
    """system, user, assistant or tool."""
    content: str | None = None
    """Text; None for pure tool-call turns."""
    agent: str | None = None
    """Agent that produced or received it."""
    tool_calls: list[ToolCall] | None = None
    """Tool calls requested."""
    tool_call_id: str | None = None
    """For role=tool: the call answered."""
    name: str | None = None
    """For role=tool: the tool's name."""
    run_id: str | None = None
    """Run that produced the message."""
    ts: float = field(default_factory=time.time)  # `ids.now`, without a call frame of its own
    """Creation time, epoch seconds."""

    def to_chat(self) -> dict[str, object]:
        """The message as an OpenAI chat-completions dict."""
        content = self.content
        if content is None and self.tool_calls:
            content = ""  # some servers (llama.cpp's among them) reject a null content here
        out: dict[str, object] = {"role": self.role, "content": content}
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
        return out


@dataclass(slots=True, kw_only=True, frozen=True)
class ToolSpec(Data):
    """A tool as a model sees it: name, description and JSON schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=_object_schema)

    def to_openai(self) -> dict[str, object]:
        """The spec in OpenAI `tools=[...]` form."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }
