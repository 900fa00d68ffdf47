"""Load check of the API server: concurrent clients posting runs to `baton serve`.

    python benchmarks/server.py [--clients 200] [--runs 2000] [--latency 0.1]
        [--stores memory sqlite]

For each store: `baton serve benchmarks.distributed_team:team --store URL` starts in a process
of its own (uvicorn, one worker, the loopback open mode); `--clients` concurrent HTTP clients
(aiohttp, keep-alive) in this process post `POST /runs` until `--runs` runs are done, each a new
session running the kernel-overhead conversation (3 model calls of `--latency` s on a
`ScriptedModel`, 1 hand-off, 1 tool call). Every response must be 200 with status `completed`
and the scripted answer: the others are counted as errors, listed, and the script fails.
Prints request latency (p50, p99, max) and runs/s. The server, the clients and the store
share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.distributed_team import ANSWER  # noqa: E402

EXPECTED = ANSWER.text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(store: str, port: int, latency: float) -> subprocess.Popen[str]:
    cmd = [
        sys.executable,
        "-m",
        "baton",
        "serve",
        "benchmarks.distributed_team:team",
        "--store",
        store,
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    env = {**os.environ, "BENCH_LATENCY_S": str(latency), "BENCH_STORE": "memory://"}
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def local_token(proc: subprocess.Popen[str]) -> str:
    """The local token the open-mode server printed at start: its POSTs need it."""
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("local token"):
            return line.rsplit(": ", 1)[1].strip()
    raise SystemExit(f"the server printed no local token (exit code {proc.wait()})")


async def wait_ready(base: str, proc: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(base_url=base) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited: {proc.stderr.read() if proc.stderr else ''}")
            try:
                if (await client.get("/ready")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise SystemExit("the server did not become ready in time")


async def load(
    base: str, token: str, clients: int, runs: int, tag: str
) -> tuple[list[float], float, list[str]]:
    """`runs` runs posted by `clients` concurrent clients; (latencies in ms, wall seconds,
    the errors: a response that is not 200 with the run completed as scripted).

    The clients use aiohttp, whose connection pool stays cheap at hundreds of connections
    (httpx's pool costs the client more CPU than the server spends on the runs)."""
    latencies: list[float] = []
    errors: list[str] = []
    left = iter(range(runs))
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=120)
    headers = {"X-Baton-Local-Token": token}
    async with aiohttp.ClientSession(
        base, connector=connector, timeout=timeout, headers=headers
    ) as http:

        async def client() -> None:
            for i in left:
                t0 = time.perf_counter()
                payload = {"message": "where is my invoice?", "session_id": f"{tag}-{i}"}
                try:
                    async with http.post("/runs", json=payload) as reply:
                        status = reply.status
                        body: Any = await reply.json() if status == 200 else await reply.text()
                except aiohttp.ClientError as exc:
                    errors.append(f"run {tag}-{i}: {type(exc).__name__}: {exc}")
                    continue
                latencies.append((time.perf_counter() - t0) * 1000)
                if (
                    status != 200
                    or body.get("status") != "completed"
                    or body.get("output") != EXPECTED
                ):
                    errors.append(f"run {tag}-{i}: {status} {body!r}")

        t0 = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return latencies, time.perf_counter() - t0, errors


async def one_store(label: str, store: str, args: argparse.Namespace) -> None:
    port = free_port()
    proc = start_server(store, port, args.latency)
    base = f"http://127.0.0.1:{port}"
    try:
        token = await asyncio.to_thread(local_token, proc)
        await wait_ready(base, proc)
        *_, warm_errors = await load(base, token, min(args.clients, 50), 200, "warm")
        latencies, wall, errors = await load(base, token, args.clients, args.runs, "run")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    errors = warm_errors + errors
    q = statistics.quantiles(latencies, n=100)
    print(
        f"{label:<12} {args.runs / wall:9.0f} {q[49]:9.0f} {q[98]:9.0f} {max(latencies):9.0f}"
        f" {len(errors):>7}"
    )
    if errors:
        raise SystemExit("errors:\n" + "\n".join(errors[:10]))


async def main(args: argparse.Namespace) -> None:
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    )
    print(
        f"# {args.clients} concurrent clients, {args.runs} runs, "
        f"{args.latency * 1000:.0f} ms per model call (3 per run)"
    )
    print(f"{'store':<12} {'runs/s':>9} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9} {'errors':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        stores = {"memory": "memory://", "sqlite": f"sqlite:///{tmp}/bench.db"}
        for label in args.stores:
            await one_store(label, stores[label], args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument(
        "--stores", nargs="+", default=["memory", "sqlite"], choices=["memory", "sqlite"]
    )
    asyncio.run(main(parser.parse_args()))
