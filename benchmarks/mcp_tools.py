"""What an MCP tool call adds over a native tool call, in one run.

    python benchmarks/mcp_tools.py [--n 300]

Each row runs `--n` conversations of one tool call (a zero-latency `ScriptedModel` calls
`echo`, then answers) on `MemoryStore`: a native `@tool`, the same tool on an MCP server over
stdio, and over streamable HTTP on 127.0.0.1 (the tests' demo server, made with the `mcp`
SDK's own `MCPServer`). The MCP rows also time the bare SDK round trip (`server.call_tool`,
no kernel) so that what Baton adds and what the protocol costs read apart. Mean, p50 and p99
in microseconds per conversation; every conversation must complete with the echoed text, or
the script stops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
DEMO = HERE.parents[1] / "tests" / "mcp" / "demo_server.py"

from baton import Agent, ScriptedModel, Team, tool  # noqa: E402
from baton.mcp import MCPServer  # noqa: E402


@tool
async def echo(text: str) -> str:
    """Say `text` back."""
    return f"echo: {text}"


def _script(request: Any) -> Any:
    done = [m.content for m in request.messages if m.role == "tool"]
    return ScriptedModel.say(done[0]) if done else ScriptedModel.call("echo", text="hi")


async def _conversations(team: Team, n: int) -> list[float]:
    out = []
    for i in range(n):
        started = time.perf_counter()
        result = await team.run("echo hi", session_id=f"s{i}")
        out.append((time.perf_counter() - started) * 1e6)
        if result.status != "completed" or result.output != "echo: hi":
            raise SystemExit(f"conversation {i} went wrong: {result.status} {result.output!r}")
    return out


async def _bare(server: MCPServer, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        await server.call_tool("echo", {"text": "hi"})
        out.append((time.perf_counter() - started) * 1e6)
    return out


async def measure(n: int, url: str) -> dict[str, list[float]]:
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
    return rows


@contextlib.contextmanager
def http_demo() -> Iterator[str]:
    """The demo server over streamable HTTP on 127.0.0.1: its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(DEMO), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the demo MCP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    with http_demo() as url:
        rows = asyncio.run(measure(args.n, url))
    native = statistics.mean(rows["native tool"])
    print(f"python benchmarks/mcp_tools.py --n {args.n}")
    print(f"{platform.python_version()} on {platform.machine()}, {args.n} conversations per row")
    print(f"{'row':<28}{'mean µs':>10}{'p50 µs':>10}{'p99 µs':>10}{'vs native':>12}")
    for name, us in rows.items():
        us = sorted(us)
        mean = statistics.mean(us)
        extra = "" if "SDK" in name else f"{mean - native:+10.0f}"
        p99 = us[min(len(us) - 1, int(len(us) * 0.99))]
        print(f"{name:<28}{mean:>10.0f}{statistics.median(us):>10.0f}{p99:>10.0f}{extra:>12}")


if __name__ == "__main__":
    main()
