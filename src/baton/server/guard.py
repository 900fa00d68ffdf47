"""`RequestGuard`: what the request's headers alone refuse, before any of its body is read.

In order: a `Host` the open-mode server does not answer to (421: a DNS-rebinding page); a
state-changing request (POST, PUT, PATCH, DELETE) of a stranger — with a token file, no valid
bearer token (401); in the open mode, neither the dashboard's own `Origin` nor this start's
local token, in its header or as the bearer token (403: a page of another site); a path with
an encoded slash (422: the router decodes it, so `/sessions/victim%2Ftrace` would be the trace
of `victim`, not the session `victim/trace` its client meant); then a `Content-Length` over
the body limit (413). Under `/v1/` the refusals take OpenAI's error shape.

Hand-written ASGI middleware because no Starlette piece does this: `TrustedHostMiddleware`
ignores the port and answers 400, and the body limit Starlette has (`RequestBodyLimitMiddleware`,
installed inside this one for bodies of unknown length) only refuses a body once the endpoint
reads it, i.e. after an endpoint without a body (claiming a ticket) has already acted.
"""

from __future__ import annotations

import hmac
import re
from typing import Any

from fastapi import HTTPException
from fastapi.responses import JSONResponse
from fastapi.security.utils import get_authorization_scheme_param
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from baton.server.auth import AuthConfig
from baton.server.context import bearer_user
from baton.server.errors import answer
from baton.server.hosts import LocalAddress, same_origin

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing (the API has no state-changing GET)."""

LOCAL_TOKEN_HEADER = "X-Baton-Local-Token"
"""Open mode: the header that carries this start's local token (scripts, the dashboard)."""

_ENCODED_SLASH = re.compile(rb"%(2f|5c)", re.IGNORECASE)
"""`%2F` and `%5C` in a path: a slash (or backslash) hidden from the client's own split."""

_SHOWN_CHARS = 80
"""How much of a refused header value a message repeats."""


def _shown(value: str) -> str:
    return repr(value[:_SHOWN_CHARS] + ("…" if len(value) > _SHOWN_CHARS else ""))


class RequestGuard:
    """ASGI middleware: refuses, from the headers alone, a request of a site or a caller the
    server does not serve, and a body declared over the limit."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        auth: AuthConfig | None,
        local: LocalAddress | None,
        local_token: str | None,
        max_body_bytes: int,
    ) -> None:
        if auth is None and (local is None or not local_token):
            raise ValueError("the open mode needs its local address and its local token")
        self.app = app
        self.auth = auth
        self.local = local
        self.local_token = (local_token or "").encode("ascii")
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        else:
            await refusal(scope, receive, send)

    def refusal(self, scope: Scope) -> JSONResponse | None:
        """The answer that refuses the request, or None to let it in."""
        headers = Headers(scope=scope)
        path = str(scope.get("path", ""))
        scheme = str(scope.get("scheme", "http"))
        hosts = headers.getlist("host")
        if self.local is not None and (len(hosts) != 1 or not self.local.allows(hosts[0], scheme)):
            return answer(path, 421, self._misdirected(hosts))
        if scope["method"] not in SAFE_METHODS:
            if self.auth is not None:
                try:
                    bearer_user(self.auth, _bearer(headers.get("authorization")))
                except HTTPException as exc:
                    return answer(path, exc.status_code, str(exc.detail), exc.headers)
            elif not self._local_caller(headers, hosts[0], scheme):
                return answer(path, 403, self._cross_site(scope["method"], headers.get("origin")))
        raw_path = scope.get("raw_path")
        if isinstance(raw_path, bytes) and _ENCODED_SLASH.search(raw_path):
            return _invalid_path(path, raw_path)
        return self._too_large(path, headers.get("content-length"))

    def _local_caller(self, headers: Headers, host: str, scheme: str) -> bool:
        """Open mode: the request comes from the server's own page, or knows the local token
        (in its own header, or as the bearer token: all an OpenAI client can send)."""
        for token in (headers.get(LOCAL_TOKEN_HEADER), _bearer(headers.get("authorization"))):
            if token is not None and hmac.compare_digest(token.encode("latin-1"), self.local_token):
                return True
        origins = headers.getlist("origin")
        return len(origins) == 1 and same_origin(origins[0], host, scheme)

    def _too_large(self, path: str, length: str | None) -> JSONResponse | None:
        if length is None or not length.isdigit() or int(length) <= self.max_body_bytes:
            return None  # an unknown length is counted while it is read
        return answer(
            path,
            413,
            f"the request body is {int(length)} bytes, over this server's limit of "
            f"{self.max_body_bytes} bytes (baton serve --max-body-bytes); send less",
            {"Connection": "close"},
        )

    def _misdirected(self, hosts: list[str]) -> str:
        assert self.local is not None
        named = _shown(hosts[0]) if len(hosts) == 1 else f"{len(hosts)} Host headers"
        return (
            f"this server answers to {self.local.describe()} only (the open mode, no token "
            f"file), not to {named}: a page of another site reached it, e.g. by DNS "
            "rebinding. Open the server by one of its own addresses, or serve other names with "
            "a token file (baton serve --auth FILE)"
        )

    @staticmethod
    def _cross_site(method: str, origin: str | None) -> str:
        seen = f"Origin {_shown(origin)}" if origin is not None else "no Origin header"
        return (
            f"refused: in the open mode (no token file) a {method} must come from the "
            f"dashboard's own page (a same-origin Origin header) or carry the local token "
            f"`baton serve` printed at start (in the header {LOCAL_TOKEN_HEADER}, or as "
            f"`Authorization: Bearer <token>`, an OpenAI client's api_key); this request "
            f"has {seen} and no valid token, so a page of another site may have sent it"
        )


def _bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` value, read as the endpoints' own
    `HTTPBearer` reads it, or None."""
    scheme, token = get_authorization_scheme_param(authorization)
    if not (authorization and scheme and token) or scheme.lower() != "bearer":
        return None
    return token


def _invalid_path(path: str, raw_path: bytes) -> JSONResponse:
    shown = _shown(raw_path.decode("latin-1"))
    msg = (
        "the path holds an encoded slash (%2F) or backslash (%5C); no id holds one (ids are "
        "A-Z a-z 0-9 . _ : - and 1 to 128 long)"
    )
    problem: dict[str, Any] = {"loc": ["path"], "msg": msg, "type": "string_pattern_mismatch"}
    detail = f"path {shown}: {msg}; see /docs for the expected shape"
    return answer(path, 422, detail, problems=[problem])
