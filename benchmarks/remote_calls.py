"""What an MCP tool call and an A2A hand-off add over a native tool call and a local
hand-off, in one run.

    python benchmarks/remote_calls.py [--n 300]

Each row runs `--n` conversations of one tool call (a zero-latency `ScriptedModel` calls
`echo`, then answers) on `MemoryStore`: a native `@tool`, the same tool on an MCP server over
stdio, and over streamable HTTP on 127.0.0.1 (the tests' demo server, made with the `mcp`
SDK's own `MCPServer`). The MCP rows also time the bare SDK round trip (`server.call_tool`,
no kernel) so that what Baton adds and what the protocol costs read apart.

The hand-off rows run `--n` conversations in which `triage` hands the baton to `tech`, which
answers: a local `tech`, and `RemoteAgent("tech", url)` reached over A2A (JSON-RPC over HTTP on
127.0.0.1) at `baton a2a serve remote_team:team --store memory://`, a process of its own that
runs the same one-agent team. The A2A row also times the bare SDK round trip (the a2a-sdk's
client sends the message to the same server, no local kernel): the protocol's cost and the
served team's run. Mean, p50 and p99 in microseconds per conversation; every conversation must
complete with the expected text, or the script stops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE.parent))
DEMO = HERE.parents[1] / "tests" / "mcp" / "demo_server.py"

import httpx  # noqa: E402
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory  # noqa: E402
from a2a.types import SendMessageRequest  # noqa: E402
from remote_team import ANSWER, technician  # noqa: E402

from baton import Agent, ScriptedModel, Team, tool  # noqa: E402
from baton.a2a import RemoteAgent, wire  # noqa: E402
from baton.mcp import MCPServer  # noqa: E402


@tool
async def echo(text: str) -> str:
    """Say `text` back."""
    return f"echo: {text}"


def _script(request: Any) -> Any:
    done = [m.content for m in request.messages if m.role == "tool"]
    return ScriptedModel.say(done[0]) if done else ScriptedModel.call("echo", text="hi")


def _triage(request: Any) -> Any:
    if request.agent == "triage":
        return ScriptedModel.call(
            "transfer_to_tech", reason="a server", objective="restart srv-bj-001"
        )
    return ScriptedModel.say(ANSWER)


async def _conversations(
    team: Team, n: int, message: str = "echo hi", expect: str = "echo: hi"
) -> list[float]:
    out = []
    for i in range(n):
        started = time.perf_counter()
        result = await team.run(message, session_id=f"s{i}")
        out.append((time.perf_counter() - started) * 1e6)
        if result.status != "completed" or result.output != expect:
            raise SystemExit(f"conversation {i} went wrong: {result.status} {result.output!r}")
    return out


async def _handoffs(team: Team, n: int) -> list[float]:
    return await _conversations(team, n, "please restart srv-bj-001", ANSWER)


async def _bare_a2a(url: str, n: int) -> list[float]:
    out = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        for i in range(n + 5):
            message = wire.handoff_message(
                "please restart srv-bj-001", message_id=f"bare-{i}", context_id=f"bare-{i}"
            )
            started = time.perf_counter()
            answers = [a async for a in client.send_message(SendMessageRequest(message=message))]
            took = (time.perf_counter() - started) * 1e6
            reply = wire.read_task(answers[-1].task)
            if reply.state != "completed" or reply.text != ANSWER:
                raise SystemExit(f"bare A2A call {i} went wrong: {reply.state} {reply.text!r}")
            if i >= 5:  # the first five warm the connection and the server
                out.append(took)
    return out


async def _bare(server: MCPServer, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        await server.call_tool("echo", {"text": "hi"})
        out.append((time.perf_counter() - started) * 1e6)
    return out


async def measure(n: int, url: str, a2a_url: str) -> dict[str, list[float]]:
    """Row name -> µs per conversation (or per bare call)."""
    rows: dict[str, list[float]] = {}
    servers = {
        "mcp stdio": MCPServer.stdio(sys.executable, [str(DEMO), "stdio"], name="demo"),
        "mcp http": MCPServer.http(url, name="demo"),
    }
    native = Team([Agent(name="desk", tools=[echo])], entry="desk", model=ScriptedModel(_script))
    async with native:
        await _conversations(native, 5)  # warm
        rows["native tool"] = await _conversations(native, n)
    for label, server in servers.items():
        agent = Agent(name="desk", tools=[server.tools(include=["echo"])])
        async with Team([agent], entry="desk", model=ScriptedModel(_script)) as team:
            await _conversations(team, 5)  # starts the server, lists its tools
            rows[label] = await _conversations(team, n)
            rows[f"{label}, SDK call only"] = await _bare(server, n)
    triage = Agent(name="triage", handoffs=["tech"])
    local = Team([triage, technician()], entry="triage", model=ScriptedModel(_triage))
    async with local:
        await _handoffs(local, 5)  # warm
        rows["local hand-off"] = await _handoffs(local, n)
    remote = RemoteAgent("tech", a2a_url, description="Restarts servers.")
    async with Team([triage, remote], entry="triage", model=ScriptedModel(_triage)) as team:
        await _handoffs(team, 5)  # reads the card, opens the connection
        rows["a2a hand-off"] = await _handoffs(team, n)
    rows["a2a hand-off, SDK call only"] = await _bare_a2a(a2a_url, n)
    return rows


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(proc: subprocess.Popen[bytes], port: int, what: str) -> None:
    """Wait until `proc` listens on `port` (60 s at most)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{what} did not start") from None
            time.sleep(0.05)


@contextlib.contextmanager
def http_demo() -> Iterator[str]:
    """The demo server over streamable HTTP on 127.0.0.1: its URL."""
    port = _port()
    proc = subprocess.Popen(
        [sys.executable, str(DEMO), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _listening(proc, port, "the demo MCP server")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def a2a_served() -> Iterator[str]:
    """`baton a2a serve remote_team:team` on 127.0.0.1 (memory store): its URL."""
    port = _port()
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1] / "src"), "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "baton", "a2a", "serve", "remote_team:team"),
            *("--port", str(port), "--store", "memory://", "--log-level", "warning"),
        ],
        cwd=HERE.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _listening(proc, port, "baton a2a serve")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    with http_demo() as url, a2a_served() as a2a_url:
        rows = asyncio.run(measure(args.n, url, a2a_url))
    native = statistics.mean(rows["native tool"])
    local = statistics.mean(rows["local hand-off"])
    print(f"python benchmarks/remote_calls.py --n {args.n}")
    print(f"{platform.python_version()} on {platform.machine()}, {args.n} conversations per row")
    print(f"{'row':<30}{'mean µs':>10}{'p50 µs':>10}{'p99 µs':>10}{'added µs':>12}")
    for name, us in rows.items():
        us = sorted(us)
        mean = statistics.mean(us)
        base = local if "hand-off" in name else native
        extra = "" if "SDK" in name else f"{mean - base:+10.0f}"
        p99 = us[min(len(us) - 1, int(len(us) * 0.99))]
        print(f"{name:<30}{mean:>10.0f}{statistics.median(us):>10.0f}{p99:>10.0f}{extra:>12}")


if __name__ == "__main__":
    main()
