"""Helpers of the MCP client tests."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEMO = str(HERE / "demo_server.py")
STDIO_MARKERS = ("mcp_server_time", "mcp_server_fetch", "demo_server.py stdio")


def children(*markers: str) -> list[int]:
    """Pids of this process's children whose command line holds one of `markers`."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z" and any(m in cmdline for m in markers):
            found.append(int(entry.name))
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


Seen = list[list[str]]
"""The tool names each model request offered, in order."""


def script_of(*calls: tuple[str, dict[str, object]], seen: Seen | None = None) -> Callable:
    """A `ScriptedModel` function: the calls in order, one per model step, then an answer
    quoting every tool result it read."""
    from baton import ScriptedModel

    def step(request: object) -> object:
        messages = request.messages  # type: ignore[attr-defined]
        if seen is not None:
            seen.append([t.name for t in request.tools])  # type: ignore[attr-defined]
        done = sum(1 for m in messages if m.role == "tool")
        if done < len(calls):
            name, args = calls[done]
            return ScriptedModel.call(name, **args)
        results = [m.content for m in messages if m.role == "tool"]
        return ScriptedModel.say(" | ".join(results))

    return step
