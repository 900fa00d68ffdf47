"""How errors become HTTP answers: `{"detail": "..."}` (under `/v1/`, the OpenAI-compatible
endpoint, OpenAI's `{"error": {"message", "type", "param", "code"}}` with 400 for an invalid
request), a 4xx for anything the caller can fix (a 503 when the store or the bus cannot be
reached), never a 5xx for bad input."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from baton.bus.base import BusError
from baton.core.errors import (
    ApprovalError,
    BatonError,
    ConfigError,
    ConflictError,
    InterruptError,
    NoRunToResume,
    PayloadError,
    RunReleased,
    SessionOwnerError,
    StoreError,
    TicketError,
)
from baton.server.schemas import ErrorOut, ValidationErrorOut


class NotFound(Exception):
    """An unknown session, approval, interrupt, ticket or request (404)."""


class Forbidden(Exception):
    """The user may not take this step (403)."""


class Conflict(Exception):
    """The step conflicts with the current state, e.g. a session that waits for a person
    (409)."""


class UnknownModel(NotFound):
    """A model id the OpenAI-compatible endpoint does not serve (404, `model_not_found`)."""

    code = "model_not_found"


OPENAI_PREFIX = "/v1/"
"""Where the OpenAI-compatible endpoint lives: its errors take OpenAI's shape."""

_OPENAI_TYPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    409: ("conflict_error", None),
    413: ("invalid_request_error", "request_too_large"),
    421: ("invalid_request_error", "misdirected_request"),
}
"""OpenAI's error `type` (and a default `code`) per status; anything else is `server_error`."""


def answer(
    path: str,
    status: int,
    detail: str,
    headers: Mapping[str, str] | None = None,
    *,
    problems: list[dict[str, Any]] | None = None,
    code: str | None = None,
) -> JSONResponse:
    """The error answer of a request to `path`: `{"detail", "errors"?}`, or OpenAI's error
    object under `/v1/` (an invalid request is a 400 there, as OpenAI clients expect)."""
    if not path.startswith(OPENAI_PREFIX):
        content: dict[str, Any] = {"detail": detail}
        if problems is not None:
            content["errors"] = problems
        return JSONResponse(status_code=status, content=content, headers=headers)
    if status == 422:
        status = 400
    kind, default_code = _OPENAI_TYPES.get(status, ("server_error", None))
    param = None
    if problems:
        loc = [str(p) for p in problems[0]["loc"] if p not in ("body", "header", "query")]
        param = ".".join(loc) or None
    error = {"message": detail, "type": kind, "param": param, "code": code or default_code}
    return JSONResponse(status_code=status, content={"error": error}, headers=headers)


def status_of(exc: BaseException) -> int:
    """The HTTP status an exception raised while serving a request stands for."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, (Forbidden, SessionOwnerError)):
        return 403
    if isinstance(exc, (ConfigError, PayloadError, ValueError)):
        return 422
    if isinstance(exc, (Conflict, ConflictError)):
        return 409
    if isinstance(exc, (StoreError, BusError, RunReleased, TimeoutError)):
        return 503
    if isinstance(exc, (ApprovalError, InterruptError, TicketError, NoRunToResume, BatonError)):
        return 409
    return 500


def _loc(loc: Any) -> list[str | int]:
    return [p if isinstance(p, (str, int)) else str(p) for p in loc]


def _problems(exc: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": _loc(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type"))}
        for e in exc.errors()
    ]


def _describe(problems: list[dict[str, Any]]) -> str:
    parts = []
    for p in problems[:5]:
        where = ".".join(str(x) for x in p["loc"]) or "request"
        parts.append(f"{where}: {p['msg']}")
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    return "; ".join(parts) + more + "; see /docs for the expected shape"


RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "Missing, malformed or unknown bearer token."},
    403: {
        "model": ErrorOut,
        "description": "The token lacks the role this step needs (or may not serve the end "
        "user); open mode: a state-changing request from another site's page.",
    },
    404: {"model": ErrorOut, "description": "No such session, approval, ticket or request."},
    409: {"model": ErrorOut, "description": "The step conflicts with the current state."},
    413: {"model": ErrorOut, "description": "The request body is over the server's limit."},
    421: {
        "model": ErrorOut,
        "description": "Open mode: the Host header is not the server's own address.",
    },
    422: {"model": ValidationErrorOut, "description": "Invalid request."},
    503: {"model": ErrorOut, "description": "The store or the bus cannot be reached."},
}
"""The documented error answers, picked per route by status."""


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` entries of these error statuses."""
    return {code: RESPONSES[code] for code in codes}


def install(app: FastAPI) -> None:
    """Register the handlers that turn errors into `{"detail": ...}` answers."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = _problems(exc)
        return answer(request.url.path, 422, _describe(problems), problems=problems)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail
        code = exc.status_code
        if code == 400:  # a body FastAPI could not parse (not UTF-8, not JSON)
            code = 422
            detail = f"the request body cannot be read ({detail}); send a JSON object, see /docs"
        elif code == 413:  # cut while it was read: its length was not declared
            limit = request.app.state.baton.max_body_bytes
            detail = (
                f"the request body is over this server's limit of {limit} bytes "
                "(baton serve --max-body-bytes); send less"
            )
        elif exc.status_code == 404 and detail == "Not Found":
            detail = f"no endpoint {request.url.path}; the API is listed at /docs"
        elif exc.status_code == 405:
            detail = f"{request.method} is not allowed on {request.url.path}; see /docs"
        headers = getattr(exc, "headers", None)
        if code == 413:  # the rest of the body is never read: the connection cannot go on
            headers = {**(headers or {}), "Connection": "close"}
        return answer(request.url.path, code, str(detail), headers)

    for kind in (
        NotFound,
        Forbidden,
        Conflict,
        BatonError,
        BusError,
        ValueError,
        TimeoutError,
    ):
        app.add_exception_handler(kind, _baton)


async def _baton(request: Request, exc: Exception) -> JSONResponse:
    code = status_of(exc)
    if code == 500:
        raise exc
    detail = str(exc) or type(exc).__name__
    return answer(request.url.path, code, detail, code=getattr(exc, "code", None))
