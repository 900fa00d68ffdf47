"""Helpers of the A2A server tests: the a2a-sdk's own client over HTTP (in process through
httpx's ASGI transport, or to a `baton a2a serve` process on loopback), and the messages of
Baton's wire convention."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import AgentCard, Message, SendMessageRequest, StreamResponse, Task

from baton.a2a import wire
from baton.core.payload import HandoffPayload

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
"""This checkout's sources, put on the server's PYTHONPATH so it runs this code."""

TEAM = "a2a_server_team:team"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def message(
    text: str,
    *,
    context_id: str,
    message_id: str | None = None,
    task_id: str | None = None,
    payload: HandoffPayload | None = None,
    trace_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Message:
    """A message of the wire convention (`wire.handoff_message`)."""
    return wire.handoff_message(
        text,
        message_id=message_id or str(uuid.uuid4()),
        context_id=context_id,
        task_id=task_id,
        payload=payload,
        trace_id=trace_id,
        metadata=metadata,
    )


def payload(**changes: Any) -> HandoffPayload:
    """A hand-off from another desk's `triage` to this desk."""
    fields: dict[str, Any] = {
        "reason": "the user asks about an order",
        "objective": "tell the user where ORD-7 is",
        "state": {"order_id": "ORD-7"},
        "trace_id": TRACE_ID,
        "session_id": "s-remote",
        "source": "triage",
        "target": "desk",
        "hop": 1,
        "path": ["triage"],
        "history_ref": "s-remote",
    }
    fields.update(changes)
    return HandoffPayload(**fields)


async def send(client: Client, msg: Message) -> Task:
    """Send `msg` without streaming: the task the server answers with."""
    answers = [r async for r in client.send_message(SendMessageRequest(message=msg))]
    assert len(answers) == 1, answers
    assert answers[0].HasField("task"), answers[0]
    return answers[0].task


async def stream(client: Client, msg: Message) -> list[StreamResponse]:
    """Send `msg` with `message/stream`: every event the server sent."""
    return [r async for r in client.send_message(SendMessageRequest(message=msg))]


@asynccontextmanager
async def clients(
    base_url: str,
    *,
    token: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncIterator[tuple[AgentCard, Client, Client]]:
    """The agent's card (fetched with `A2ACardResolver`) and two clients of the SDK built from
    it by `ClientFactory`: one that sends `message/send`, one `message/stream`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, transport=transport, timeout=60
    ) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        plain = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        streamed = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        yield card, plain, streamed


def free_port() -> int:
    """A port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env() -> dict[str, str]:
    """The environment of a server process: this checkout first on the path, no colour."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "PYTHONPATH")}
    env.update(PYTHONPATH=str(SRC), NO_COLOR="1", TERM="dumb", PYTHONIOENCODING="utf-8")
    return env


def start_server(store: str, port: int, *extra: str, team: str = TEAM) -> subprocess.Popen[str]:
    """`baton a2a serve team` (by default TEAM) on 127.0.0.1:`port`, up and listening."""
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "baton", "a2a", "serve", team),
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
            raise AssertionError(f"baton a2a serve exited with {proc.returncode}: {out}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("baton a2a serve did not listen within 60 s")


def stop(proc: subprocess.Popen[str]) -> None:
    """Stop a server started by `start_server`."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
