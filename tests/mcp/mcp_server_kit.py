"""Helpers of the MCP server tests: `baton mcp serve` started as a user's MCP client starts it
(a subprocess of this interpreter, run from this folder), and the `mcp` client's sessions."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
"""This checkout's sources, put on the server's PYTHONPATH so it runs this code."""

TEAM = "mcp_server_team:team"


def server_env() -> dict[str, str]:
    """The environment of a server process: this checkout first on the path, no colour."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "PYTHONPATH")}
    env.update(PYTHONPATH=str(SRC), NO_COLOR="1", TERM="dumb", PYTHONIOENCODING="utf-8")
    return env


@asynccontextmanager
async def stdio_session(store: str) -> AsyncIterator[ClientSession]:
    """An initialised client session of `baton mcp serve TEAM` over stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "baton", "mcp", "serve", TEAM, "--store", store],
        env=server_env(),
        cwd=HERE,
    )
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def free_port() -> int:
    """A port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_http(store: str, port: int, *extra: str) -> subprocess.Popen[str]:
    """`baton mcp serve TEAM --transport http` on 127.0.0.1:`port`, up and listening."""
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "baton", "mcp", "serve", TEAM, "--transport", "http"),
            *("--port", str(port), "--store", store, "--log-level", "warning", *extra),
        ],
        cwd=HERE,
        env=server_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"baton mcp serve exited with {proc.returncode}: {out}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("baton mcp serve did not listen within 60 s")


def stop(proc: subprocess.Popen[str]) -> None:
    """Stop a server started by `start_http`."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@asynccontextmanager
async def http_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    """An initialised client session over streamable HTTP, with a bearer `token`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def structured(result: CallToolResult) -> Any:
    """The structured result of a successful tool call (fails the test on a tool error)."""
    assert not result.is_error, text(result)
    return result.structured_content


def text(result: CallToolResult) -> str:
    """The text content of a tool call's result."""
    return "".join(getattr(c, "text", "") for c in result.content)


async def read_json(session: ClientSession, uri: str) -> Any:
    """A resource's JSON."""
    read = await session.read_resource(uri)
    return json.loads(getattr(read.contents[0], "text", ""))
