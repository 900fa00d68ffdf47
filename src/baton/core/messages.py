"""Messages, tool calls and token usage: the data a model sees and returns."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from baton.core.ids import new_id, now

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """One tool call as the model emitted it; `arguments` is the raw JSON text, parsed later."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=lambda: new_id("call_"), description="Call id, unique per run.")
    name: str = Field(description="Name of the tool the model asked for.")
    arguments: str = Field(default="{}", description="Arguments as the model wrote them (JSON).")


class Usage(BaseModel):
    """Token usage of one or more model calls."""

    input_tokens: int = Field(default=0, description="Prompt tokens sent to the model.")
    output_tokens: int = Field(default=0, description="Tokens the model generated.")

    @property
    def total_tokens(self) -> int:
        """Prompt plus generated tokens."""
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        """Add another usage into this one, in place."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens


class Message(BaseModel):
    """One entry of a session transcript, in chat-completions shape plus provenance."""

    id: str = Field(default_factory=lambda: new_id("msg_"), description="Message id in the store.")
    role: Role = Field(description="system, user, assistant or tool.")
    content: str | None = Field(default=None, description="Text; None for pure tool-call turns.")
    agent: str | None = Field(default=None, description="Agent that produced or received it.")
    tool_calls: list[ToolCall] | None = Field(default=None, description="Tool calls requested.")
    tool_call_id: str | None = Field(default=None, description="For role=tool: the call answered.")
    name: str | None = Field(default=None, description="For role=tool: the tool's name.")
    run_id: str | None = Field(default=None, description="Run that produced the message.")
    ts: float = Field(default_factory=now, description="Creation time, epoch seconds.")

    def to_chat(self) -> dict[str, object]:
        """The message as an OpenAI chat-completions dict."""
        out: dict[str, object] = {"role": self.role, "content": self.content}
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


class ToolSpec(BaseModel):
    """A tool as a model sees it: name, description and JSON schema of its arguments."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})

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
