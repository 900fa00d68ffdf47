"""Fixtures of the MCP client tests: the demo server over streamable HTTP on loopback, a
scripted model that reads the last tool result, and a check that no stdio server outlives
its test."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from mcp_kit import DEMO, STDIO_MARKERS, Seen, children, free_port

if importlib.util.find_spec("mcp") is None:  # the `mcp` extra (the dev install brings it)
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(autouse=True)
def no_stdio_server_left() -> Iterator[None]:
    """Every stdio server a test started is gone when it ends (team.aclose closed it)."""
    yield
    deadline = time.monotonic() + 5
    while (left := children(*STDIO_MARKERS)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"MCP server processes outlived the test: {left}"


@contextlib.contextmanager
def demo_over(transport: str) -> Iterator[int]:
    """The demo server (the SDK's `MCPServer`) over `transport` on 127.0.0.1: its port."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, DEMO, transport, str(port)],
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
                    raise RuntimeError("the demo MCP server did not start") from None
                time.sleep(0.05)
        yield port
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def demo_url() -> Iterator[str]:
    """The demo server over streamable HTTP: its URL."""
    with demo_over("http") as port:
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def demo_sse_url() -> Iterator[str]:
    """The demo server over the older HTTP+SSE transport: its URL."""
    with demo_over("sse") as port:
        yield f"http://127.0.0.1:{port}/sse"


@pytest.fixture
def seen() -> Seen:
    """The tool names each model request offered, in order."""
    return []
