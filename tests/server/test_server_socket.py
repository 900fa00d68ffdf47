"""Over a real socket (uvicorn in the test's event loop): events arrive while the run goes on,
and a client that goes away cancels its streamed run."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import uvicorn
from tests.server.server_kit import local_headers

from baton import Agent, ScriptedModel, Team
from baton.server import create_app

S = ScriptedModel


@asynccontextmanager
async def listening(team: Team) -> AsyncIterator[tuple[str, dict[str, str]]]:
    """The open-mode app on a free port: its URL and the headers a script sends to it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(team, host="127.0.0.1", port=port)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", local_headers(app)
    finally:
        server.should_exit = True
        await task


async def test_events_arrive_while_the_run_goes_on_and_leaving_cancels_it() -> None:
    model = S([S.say("First."), S.slow(S.say("Second, after a long think."), 5.0)])
    team = Team([Agent(name="a")], entry="a", model=model)
    async with (
        listening(team) as (base, headers),
        httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as client,
    ):
        assert (
            await client.post("/runs", json={"message": "hi", "session_id": "L"})
        ).status_code == 200
        seen: list[str] = []
        async with client.stream(
            "POST", "/runs/stream", json={"message": "again", "session_id": "L"}
        ) as reply:
            async for line in reply.aiter_lines():
                if line.startswith("event: "):
                    seen.append(line.removeprefix("event: "))
                if "agent_started" in seen:
                    break  # mid-run: the model is still thinking
        assert seen[:2] == ["run_started", "route_decided"]
        for _ in range(100):
            cp = await team.store.get_checkpoint("L")
            if cp is not None and cp.status == "cancelled":
                break
            await asyncio.sleep(0.05)
        assert cp is not None and cp.status == "cancelled"
        listed = (await client.get("/sessions")).json()
        assert [(s["session_id"], s["status"]) for s in listed] == [("L", "cancelled")]
