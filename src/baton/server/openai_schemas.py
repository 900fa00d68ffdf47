"""Request and response models of the OpenAI-compatible endpoint (`/v1/`).

Only what a chat client needs is read; the other fields of OpenAI's request (temperature,
max_tokens, tools, response_format, ...) are accepted and ignored: the team's agents choose
their own models, settings and tools.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from baton.server.ids import SESSION_ID, USER_ID
from baton.server.schemas import RunSummary

MODEL_ID = r"^[A-Za-z0-9._:-]{1,128}$"
"""A model id a server may be given (`baton serve --model-id`)."""

DEFAULT_MODEL_ID = "baton"
"""The model id of a served team unless one is configured."""

MAX_MESSAGES = 10_000
"""Most messages one request may carry (the client's copy of the conversation)."""


class _Lenient(BaseModel):
    """OpenAI's shapes grow: unknown fields are ignored, not refused."""

    model_config = ConfigDict(extra="ignore")


class ContentPart(_Lenient):
    """A part of a message's content; only `text` parts carry a user message here."""

    type: str
    text: str | None = None


class ChatMessageIn(_Lenient):
    """One message of the client's copy of the conversation."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class StreamOptions(_Lenient):
    """Options of a streamed answer."""

    include_usage: bool = Field(
        default=False, description="Send a last chunk with the run's token usage."
    )


class ChatMetadata(_Lenient):
    """The `metadata` this endpoint reads (other keys are ignored)."""

    session_id: str | None = Field(
        default=None,
        pattern=SESSION_ID,
        description="The Baton session to continue (or the `X-Baton-Session` header).",
    )


class ChatCompletionIn(_Lenient):
    """`POST /v1/chat/completions`: the last user message of `messages` is the run's message."""

    model: str = Field(min_length=1, max_length=128, description="The served team's model id.")
    messages: list[ChatMessageIn] = Field(
        min_length=1,
        max_length=MAX_MESSAGES,
        description="The conversation as the client keeps it; only its last user message is "
        "sent to the team (the session keeps the team's own transcript).",
    )
    stream: bool = Field(default=False, description="Answer as server-sent chunks.")
    stream_options: StreamOptions | None = None
    user: str | None = Field(
        default=None,
        pattern=USER_ID,
        description="The end user the run serves (as `user_id` of `POST /runs`).",
    )
    metadata: ChatMetadata | None = None
    n: int = Field(default=1, ge=1, le=1, description="Only 1: the desk gives one reply.")


class ChatMessageOut(BaseModel):
    """The desk's reply."""

    role: Literal["assistant"] = "assistant"
    content: str


class ChoiceOut(BaseModel):
    """The one choice of an answer."""

    index: int = 0
    message: ChatMessageOut
    finish_reason: Literal["stop"] = "stop"
    logprobs: None = None


class UsageOut(BaseModel):
    """The run's tokens, every agent's model calls together."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    @classmethod
    def of(cls, summary: RunSummary) -> UsageOut:
        """From a run's summary."""
        total = summary.total_tokens
        return cls(
            prompt_tokens=total.input_tokens,
            completion_tokens=total.output_tokens,
            total_tokens=total.input_tokens + total.output_tokens,
        )


class ChatCompletionOut(BaseModel):
    """`chat.completion`, with the run's summary under `baton`."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChoiceOut]
    usage: UsageOut
    baton: RunSummary = Field(
        description="The run: session_id (send it back as X-Baton-Session), status, "
        "approval, escalation, ticket, trace."
    )


class ModelOut(BaseModel):
    """A served team, as an OpenAI model."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "baton"


class ModelListOut(BaseModel):
    """`GET /v1/models`."""

    object: Literal["list"] = "list"
    data: list[ModelOut]


class OpenAIError(BaseModel):
    """What went wrong, as OpenAI reports it."""

    message: str = Field(description="What is wrong and what to do.")
    type: str = Field(description="invalid_request_error, authentication_error, ...")
    param: str | None = Field(default=None, description="The field at fault, if one is.")
    code: str | None = Field(default=None, description="e.g. model_not_found, invalid_api_key.")


class OpenAIErrorOut(BaseModel):
    """Every 4xx/5xx answer under `/v1/`."""

    error: OpenAIError


def chunk(
    head: dict[str, Any],
    delta: dict[str, Any],
    *,
    finish_reason: str | None = None,
    baton: RunSummary | None = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk` (`head`: its id, created and model)."""
    out: dict[str, Any] = {
        **head,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
    }
    if baton is not None:
        out["baton"] = baton.model_dump(mode="json")
    return out
