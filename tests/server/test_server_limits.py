"""The request-body limit, enforced before the body is read, and authentication before any
body is parsed: a stranger's body (malformed or huge) is never read, let alone parsed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from tests.server.server_kit import OPERATOR, auth, bearer, client_for, desk

from baton.core.errors import ConfigError
from baton.server import create_app

MiB = 1024 * 1024
CHUNK = 64 * 1024


class Metered:
    """An ASGI wrapper that counts the body bytes the app pulled from the client."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.read = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def counting() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                self.read += len(message.get("body", b""))
            return message

        await self.app(scope, counting, send)

    @property
    def state(self) -> Any:
        return self.app.state


async def chunks(total: int, piece: bytes = b"x") -> AsyncIterator[bytes]:
    """`total` bytes of a body of unknown length (sent chunked)."""
    sent = 0
    while sent < total:
        n = min(CHUNK, total - sent)
        yield piece * n
        sent += n


def _json_chunks(message_chars: int) -> AsyncIterator[bytes]:
    body = json.dumps({"message": "x" * message_chars}).encode()

    async def gen() -> AsyncIterator[bytes]:
        for i in range(0, len(body), CHUNK):
            yield body[i : i + CHUNK]

    return gen()


async def test_a_declared_length_over_the_limit_is_413_before_any_byte_is_read() -> None:
    app = Metered(create_app(desk(), max_body_bytes=1000))
    async with client_for(app) as client:
        for path in ("/runs", "/tickets/1/claim", "/approvals/a1/approve", "/sessions"):
            method = "GET" if path == "/sessions" else "POST"
            reply = await client.request(method, path, content=b"{" + b" " * 1500 + b"}")
            assert reply.status_code == 413, path
            assert reply.json()["detail"] == (
                "the request body is 1502 bytes, over this server's limit of 1000 bytes "
                "(baton serve --max-body-bytes); send less"
            )
            assert reply.headers["connection"] == "close"
    assert app.read == 0
    assert await app.state.baton.team.store.list_sessions() == []


async def test_a_chunked_body_is_cut_at_the_limit() -> None:
    app = Metered(create_app(desk()))  # the default: 1 MiB
    async with client_for(app) as client:
        reply = await client.post(
            "/runs",
            content=_json_chunks(5 * MiB),
            headers={"Content-Type": "application/json"},
        )
        assert reply.status_code == 413
        assert "limit of 1048576 bytes" in reply.json()["detail"]
        assert reply.headers["connection"] == "close"
    assert app.read <= MiB + CHUNK  # cut where it went over: the rest was never pulled
    assert await app.state.baton.team.store.list_sessions() == []


async def test_a_body_within_the_limit_is_served_and_the_limit_is_configurable() -> None:
    app = create_app(desk(), max_body_bytes=200)
    async with client_for(app) as client:
        ok = await client.post("/runs", json={"message": "invoice ORD-1"})
        assert ok.status_code == 200 and ok.json()["status"] == "completed"
        big = await client.post("/runs", json={"message": "x" * 300})
        assert big.status_code == 413
        streamed = await client.post(
            "/runs", content=_json_chunks(300), headers={"Content-Type": "application/json"}
        )
        assert streamed.status_code == 413
    chinese = "请帮我查一下订单 ORD-202607-99 的发票" * 1000  # 3 bytes a character in UTF-8
    async with client_for(create_app(desk())) as client:
        reply = await client.post("/runs", json={"message": chinese[:100_000]})
        assert reply.status_code == 200  # the longest message fits in the default limit


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "1024"])
def test_a_wrong_limit_is_a_config_error(value: Any) -> None:
    with pytest.raises(ConfigError, match="max_body_bytes"):
        create_app(desk(), max_body_bytes=value)


async def test_without_a_token_any_body_is_401_and_never_read() -> None:
    app = Metered(create_app(desk(), auth=auth()))
    async with client_for(app) as client:
        for body in (b"{garbage", b"\xff\xfe not utf-8", b'{"message": 1, "nope": []}', b""):
            for path in ("/runs", "/runs/stream", "/approvals/a1/approve", "/tickets/1/answer"):
                reply = await client.post(
                    path, content=body, headers={"Content-Type": "application/json"}
                )
                assert reply.status_code == 401, (path, body)
                assert reply.headers["www-authenticate"] == "Bearer"
        wrong = await client.post("/runs", content=b"{garbage", headers=bearer("x" * 30))
        assert wrong.status_code == 401
        assert wrong.headers["www-authenticate"] == 'Bearer error="invalid_token"'
        huge = await client.post("/runs", content=b"x" * (5 * MiB))
        assert huge.status_code == 401
        streamed = await client.post("/runs", content=chunks(5 * MiB))
        assert streamed.status_code == 401
        # a valid token's garbage is parsed, and refused as such
        parsed = await client.post(
            "/runs",
            content=b"{garbage",
            headers={**bearer(OPERATOR), "Content-Type": "application/json"},
        )
        assert parsed.status_code == 422
    assert app.read == len(b"{garbage")  # only the authenticated body was read


async def _status_of_upload(port: int, head: bytes, body_pieces: int, piece: bytes) -> bytes:
    """The status line the server answers while a client is still uploading: the client
    sends `head`, then up to `body_pieces` pieces, and reads as soon as an answer comes."""
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head)
        answer = asyncio.ensure_future(reader.readline())
        for _ in range(body_pieces):
            if answer.done():
                break
            writer.write(piece)
            try:
                await asyncio.wait_for(writer.drain(), 5)
            except (ConnectionError, TimeoutError):
                break  # the server stopped reading: its answer is on the way
            await asyncio.sleep(0)
        return await asyncio.wait_for(answer, 10)
    finally:
        writer.close()


async def test_over_a_real_socket_a_huge_upload_is_cut_and_the_server_goes_on() -> None:
    import asyncio
    import socket

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = Metered(create_app(desk(), host="127.0.0.1", port=port, max_body_bytes=MiB))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    token = app.state.local_token
    head = (
        f"POST /runs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Baton-Local-Token: {token}\r\n"
        "Content-Type: application/json\r\n"
    )
    piece = b"x" * CHUNK
    chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    try:
        chunked = (head + "Transfer-Encoding: chunked\r\n\r\n").encode()
        line = await _status_of_upload(port, chunked, 20 * MiB // CHUNK, chunk)
        assert line.startswith(b"HTTP/1.1 413"), line
        assert app.read <= MiB + CHUNK  # 20 MiB were offered; the server took its limit
        declared = (head + f"Content-Length: {20 * MiB}\r\n\r\n").encode()
        read_before = app.read
        line = await _status_of_upload(port, declared, 20 * MiB // CHUNK, piece)
        assert line.startswith(b"HTTP/1.1 413"), line
        assert app.read == read_before  # not one byte of it was read
        headers = {"X-Baton-Local-Token": token}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            ok = await client.post("/runs", json={"message": "invoice ORD-2"}, headers=headers)
        assert ok.status_code == 200 and ok.json()["status"] == "completed"
    finally:
        server.should_exit = True
        await task
