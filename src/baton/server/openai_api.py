"""The OpenAI-compatible endpoint: `POST /v1/chat/completions` and `GET /v1/models`.

A chat client that speaks the OpenAI API (the `openai` SDK, Open WebUI, LibreChat) fronts the
served team as one model. Each request is one run, checked and bound like `POST /runs`: the
last user message of `messages` is the run's message, and the rest of `messages` is the
client's own copy of the conversation, never sent to the team (the session keeps the team's
transcript; a client's system message is neither an instruction to the team nor state). The
desk's reply is the assistant message; tool calls and hand-offs stay inside the run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Header, Path
from fastapi.responses import JSONResponse, StreamingResponse

from baton.core.events import Event, TextDelta
from baton.core.ids import new_id
from baton.runtime.result import RunResult
from baton.server import sse
from baton.server.context import Ctx, Operator, ServerContext, Viewer
from baton.server.errors import RESPONSES, UnknownModel
from baton.server.ids import REQUEST_ID, SESSION_ID
from baton.server.openai_schemas import (
    MODEL_ID,
    ChatCompletionIn,
    ChatCompletionOut,
    ChatMessageOut,
    ChoiceOut,
    ModelListOut,
    ModelOut,
    OpenAIErrorOut,
    UsageOut,
    chunk,
)
from baton.server.runs import failure, precheck, summary
from baton.server.schemas import MAX_MESSAGE_CHARS, RunIn, RunSummary


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` entries of these error statuses, in OpenAI's error shape."""
    described = {**RESPONSES, 400: {"description": "Invalid request (body, header or query)."}}
    return {
        code: {"model": OpenAIErrorOut, "description": described[code]["description"]}
        for code in codes
    }


router = APIRouter(prefix="/v1", tags=["openai"], responses=responses(400, 413, 421))

SESSION_HEADER = "X-Baton-Session"
"""The request header naming the session to continue; answers carry the session in it."""

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""The request header that is the run's retry key (`request_id` of `POST /runs`)."""

DONE = b"data: [DONE]\n\n"
"""The last message of a streamed answer."""


def message_of(body: ChatCompletionIn) -> str:
    """The text of the last user message; raises `ValueError` naming what is wrong."""
    users = [m for m in body.messages if m.role == "user"]
    if not users:
        raise ValueError(
            "messages holds no user message; the last user message is what the desk answers"
        )
    content = users[-1].content
    if content is None:
        raise ValueError("the last user message has no content")
    if isinstance(content, str):
        text = content
    else:
        other = sorted({p.type for p in content if p.type != "text"})
        if other:
            raise ValueError(
                f"the last user message holds {', '.join(other)} parts; this endpoint takes text "
                "only (send the message as a string or as text parts)"
            )
        text = "\n".join(p.text or "" for p in content)
    if len(text) > MAX_MESSAGE_CHARS:
        raise ValueError(
            f"the last user message is {len(text)} characters, over the limit of "
            f"{MAX_MESSAGE_CHARS}; send less"
        )
    return text


def session_of(body: ChatCompletionIn, header: str | None) -> str | None:
    """The session the request continues: the header, or `metadata.session_id`."""
    named = body.metadata.session_id if body.metadata is not None else None
    if header is not None and named is not None and header != named:
        raise ValueError(
            f"the {SESSION_HEADER} header ({header!r}) and metadata.session_id ({named!r}) "
            "name two sessions; send one of them"
        )
    return header if header is not None else named


def status_note(s: RunSummary) -> str:
    """What the reply's text says of a run that did not simply complete ("" if it did)."""
    if s.status == "awaiting_approval":
        aid = s.approval.id if s.approval is not None else "?"
        return (
            f"[baton: awaiting approval {aid}; an approver decides it in the dashboard or with "
            f"POST /approvals/{aid}/approve or /reject, and this session takes no new message "
            "until then]"
        )
    if s.status == "interrupted":
        iid = s.interrupt.id if s.interrupt is not None else "?"
        return f"[baton: waiting for an answer to interrupt {iid} (POST /interrupts/{iid}/answer)]"
    if s.status == "escalated":
        ticket = f" as ticket {s.ticket_id}" if s.ticket_id is not None else ""
        return f"[baton: escalated to a person{ticket} in the human queue]"
    if s.status == "failed":
        return f"[baton: the run failed: {s.error or 'no reason given'}]"
    if s.status == "cancelled":
        return "[baton: the run was cancelled]"
    return ""


def reply_text(s: RunSummary) -> str:
    """The assistant message of a run: its output, then the note of its status if any."""
    note = status_note(s)
    text = s.output or ""
    return f"{text}\n\n{note}" if text and note else text or note


def _model(ctx: ServerContext, asked: str) -> None:
    if asked != ctx.model_id:
        raise UnknownModel(
            f"no model {asked!r} here; this server serves its team as the model "
            f"{ctx.model_id!r} (GET /v1/models)"
        )


@router.get(
    "/models",
    response_model=ModelListOut,
    summary="The served team, as an OpenAI model",
    responses=responses(401, 403),
)
async def list_models(ctx: Ctx, who: Viewer) -> ModelListOut:
    """One model: the team this server serves (its id: `baton serve --model-id`)."""
    return ModelListOut(data=[ModelOut(id=ctx.model_id, created=ctx.started)])


@router.get(
    "/models/{model}",
    response_model=ModelOut,
    summary="One served model",
    responses=responses(401, 403, 404),
)
async def get_model(
    model: Annotated[
        str, Path(pattern=MODEL_ID, description="A model id ([A-Za-z0-9._:-], 1 to 128).")
    ],
    ctx: Ctx,
    who: Viewer,
) -> ModelOut:
    """The served team's model, or 404 for another id."""
    _model(ctx, model)
    return ModelOut(id=ctx.model_id, created=ctx.started)


@router.post(
    "/chat/completions",
    response_model=ChatCompletionOut,
    summary="Run the last user message (OpenAI chat completions; streamed with stream: true)",
    responses={
        200: {
            "content": {sse.MEDIA_TYPE: {}},
            "description": "JSON, or with `stream: true` `chat.completion.chunk` messages "
            "ending with `data: [DONE]`.",
        },
        **responses(401, 403, 404, 409, 503),
    },
)
async def chat_completions(
    body: ChatCompletionIn,
    ctx: Ctx,
    who: Operator,
    session: Annotated[
        str | None,
        Header(
            alias=SESSION_HEADER,
            pattern=SESSION_ID,
            description="The session to continue; a new one when omitted (its id comes back "
            "in this header and in `baton.session_id`).",
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_HEADER,
            pattern=REQUEST_ID,
            description="Retry key: a request the session answered is not run again (needs "
            "a session).",
        ),
    ] = None,
) -> JSONResponse | StreamingResponse:
    """One run of the served team; refusals (auth, an unknown model, a session waiting for a
    person) come back before anything runs, in OpenAI's error shape."""
    _model(ctx, body.model)
    session_id = session_of(body, session)
    if idempotency_key is not None and session_id is None:
        raise ValueError(
            f"{IDEMPOTENCY_HEADER} names a request within its session: send the session too "
            f"({SESSION_HEADER}), or no {IDEMPOTENCY_HEADER}"
        )
    # a new session is named here, so that a streamed answer's header can carry it
    session_id = session_id or new_id("s_")
    run = RunIn.model_construct(
        message=message_of(body),
        session_id=session_id,
        user_id=body.user,
        request_id=idempotency_key,
    )
    message, user_id = await precheck(ctx, run, who)
    created = int(time.time())
    head: dict[str, Any] = {"id": "", "created": created, "model": ctx.model_id}
    if body.stream:
        usage = body.stream_options is not None and body.stream_options.include_usage
        items = ctx.team.stream(
            message, session_id=session_id, user_id=user_id, request_id=idempotency_key
        )
        response = sse.stream(_chunks(ctx, items, head, usage))
        response.headers[SESSION_HEADER] = session_id
        return response
    result = await ctx.team.run(
        message, session_id=session_id, user_id=user_id, request_id=idempotency_key
    )
    s = await summary(ctx, result)
    out = ChatCompletionOut(
        id=f"chatcmpl-{s.run_id}",
        created=created,
        model=ctx.model_id,
        choices=[ChoiceOut(message=ChatMessageOut(content=reply_text(s)))],
        usage=UsageOut.of(s),
        baton=s,
    )
    return JSONResponse(out.model_dump(mode="json"), headers={SESSION_HEADER: s.session_id})


async def _chunks(
    ctx: ServerContext,
    items: AsyncIterator[Event | RunResult],
    head: dict[str, Any],
    usage: bool,
) -> AsyncIterator[bytes]:
    """The run's reply as `chat.completion.chunk`s: each `text_delta` as it comes, then what
    the streamed text lacks of the final reply (all of it from a model that does not stream;
    a status note), the summary, and `[DONE]`."""
    last: list[str] = []  # the last unbroken run of deltas: the final reply's, if it streamed
    in_deltas = False
    started = False
    try:
        async with contextlib.aclosing(sse.paced(items)) as paced:
            async for item in paced:
                if item is None:
                    yield sse.PING
                    continue
                if not started:  # the first item names the run: the chunks' id
                    head = {**head, "id": f"chatcmpl-{item.run_id}"}
                    yield sse.data_message(chunk(head, {"role": "assistant", "content": ""}))
                    started = True
                if isinstance(item, TextDelta):
                    if not in_deltas:
                        last, in_deltas = [], True
                    last.append(item.text)
                    yield sse.data_message(chunk(head, {"content": item.text}))
                    continue
                in_deltas = False
                if isinstance(item, RunResult):
                    s = await summary(ctx, item)
                    text, streamed = reply_text(s), "".join(last)
                    if text.startswith(streamed):
                        rest = text[len(streamed) :]
                    else:  # what streamed was not the reply (a turn before a hand-off)
                        rest = f"\n\n{text}" if text else ""
                    if rest:
                        yield sse.data_message(chunk(head, {"content": rest}))
                    yield sse.data_message(chunk(head, {}, finish_reason="stop", baton=s))
                    if usage:
                        yield sse.data_message(
                            {**chunk(head, {}), "choices": [], "usage": _usage(s)}
                        )
    except Exception as exc:
        code, detail = failure(exc)
        kind = "server_error" if code >= 500 else "invalid_request_error"
        error = {"message": detail, "type": kind, "param": None, "code": str(code)}
        yield sse.data_message({"error": error})
    yield DONE


def document(app: FastAPI) -> None:
    """Make `app`'s OpenAPI schema say what `/v1/` answers: an invalid request there is a
    400 (FastAPI lists a 422 for every route that validates its input)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            for path, operations in schema["paths"].items():
                if path.startswith(router.prefix + "/"):
                    for operation in operations.values():
                        operation["responses"].pop("422", None)
        return build()

    app.openapi = openapi  # type: ignore[method-assign]


def _usage(s: RunSummary) -> dict[str, Any]:
    return UsageOut.of(s).model_dump()
