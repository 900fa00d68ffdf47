"""Third-party MCP servers over stdio (`mcp-server-time`, `mcp-server-fetch`, installed by
the project's own install), driven by scripted agents through team runs."""

from __future__ import annotations

import http.server
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from mcp_kit import DEMO, Seen, children, script_of

from baton import Agent, ConfigError, ScriptedModel, Team
from baton.mcp import MCPServer, MCPServerError

TIME_ARGS = ["-m", "mcp_server_time", "--local-timezone", "UTC"]


def time_server() -> MCPServer:
    return MCPServer.stdio(sys.executable, TIME_ARGS, name="time")


def called(result: Any) -> list[Any]:
    return [e for e in result.events if e.type == "tool_called"]


async def test_time_server_answers_a_team_run_and_only_the_included_tool_is_offered(
    seen: Seen,
) -> None:
    clock = Agent(name="clock", tools=[time_server().tools(include=["get_current_time"])])
    script = script_of(("get_current_time", {"timezone": "Asia/Tokyo"}), seen=seen)
    async with Team([clock], entry="clock", model=ScriptedModel(script)) as team:
        assert children("mcp_server_time") == []  # nothing starts before a run needs it
        assert team.describe()["agents"]["clock"]["toolsets"] == ["time"]
        result = await team.run("what time is it in Tokyo?", session_id="S1")

    assert result.status == "completed", result.error
    assert seen[0] == ["get_current_time"]  # convert_time was not included
    answer = json.loads(result.output)
    assert answer["timezone"] == "Asia/Tokyo"
    now = datetime.now(timezone.utc)
    assert abs((datetime.fromisoformat(answer["datetime"]) - now).total_seconds()) < 120
    (call,) = called(result)
    assert (call.tool, call.ok, call.arguments) == (
        "get_current_time",
        True,
        {"timezone": "Asia/Tokyo"},
    )


def test_one_connection_serves_runs_from_different_event_loops() -> None:
    """`run_sync` makes a new event loop each time: the server is started once and reused."""
    clock = Agent(name="clock", tools=[time_server().tools()])
    script = script_of(("get_current_time", {"timezone": "UTC"}))
    team = Team([clock], entry="clock", model=ScriptedModel(script))
    try:
        first = team.run_sync("time?", session_id="A")
        pids = children("mcp_server_time")
        second = team.run_sync("time?", session_id="B")
        assert (first.status, second.status) == ("completed", "completed")
        assert len(pids) == 1 and children("mcp_server_time") == pids
    finally:
        import asyncio

        asyncio.run(team.aclose())
    assert children("mcp_server_time") == []


async def test_a_server_killed_mid_run_fails_that_call_clearly_and_restarts_on_the_next() -> None:
    killed: list[int] = []
    steps = 0

    def script(request: Any) -> Any:
        nonlocal steps
        steps += 1
        done = [m.content for m in request.messages if m.role == "tool"]
        if len(done) == 1 and not killed:  # the server dies between two calls of the run
            (pid,) = children("mcp_server_time")
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            time.sleep(0.2)
        if len(done) < 3:  # three different calls: an identical one would reuse the first
            zone = ("UTC", "Asia/Shanghai", "Europe/Paris")[len(done)]
            return ScriptedModel.call("get_current_time", timezone=zone)
        return ScriptedModel.say("ok")

    clock = Agent(name="clock", tools=[time_server().tools()])
    async with Team([clock], entry="clock", model=ScriptedModel(script)) as team:
        result = await team.run("time, three times", session_id="S1")
        restarted = children("mcp_server_time")

    assert result.status == "completed", result.error
    first, second, third = called(result)
    assert first.ok and third.ok
    assert not second.ok
    assert "MCP server 'time'" in second.error and "mcp_server_time" in second.error
    assert "started again on the next call" in second.error
    assert len(restarted) == 1 and restarted != killed


async def test_a_server_that_cannot_come_back_fails_its_calls_and_the_run_goes_on() -> None:
    """Listed in an earlier run, then killed, then its command gone: each call fails as a
    tool error naming the server, and the run still answers."""
    server = time_server()
    clock = Agent(name="clock", tools=[server.tools()])
    twice = (("get_current_time", {"timezone": "UTC"}), ("get_current_time", {"timezone": "UTC"}))
    async with Team([clock], entry="clock", model=ScriptedModel(script_of(*twice))) as team:
        first = await team.run("time?", session_id="A")
        (pid,) = children("mcp_server_time")
        os.kill(pid, signal.SIGKILL)
        server.command = "/nonexistent/mcp-server-time"  # as if it was uninstalled meanwhile
        second = await team.run("time again?", session_id="B")
    assert first.status == second.status == "completed"
    lost, gone = called(second)
    assert not lost.ok and "failed during the call to get_current_time" in lost.error
    assert not gone.ok and "could not be started or reached" in gone.error
    assert "/nonexistent/mcp-server-time" in gone.error


async def test_a_server_that_cannot_start_names_itself_and_its_command() -> None:
    broken = MCPServer.stdio("/nonexistent/mcp-server-nothing", ["--flag"])
    clerk = Agent(name="clerk", tools=[broken.tools()])
    async with Team([clerk], entry="clerk", model=ScriptedModel([])) as team:
        with pytest.raises(MCPServerError) as raised:
            await team.run("hello", session_id="S1")
    message = str(raised.value)
    assert "MCP server 'mcp-server-nothing'" in message
    assert "/nonexistent/mcp-server-nothing --flag" in message
    assert "could not be started" in message


async def test_include_naming_a_tool_the_server_lacks_is_a_config_error() -> None:
    clock = Agent(name="clock", tools=[time_server().tools(include=["get_time"])])
    async with Team([clock], entry="clock", model=ScriptedModel([])) as team:
        with pytest.raises(ConfigError) as raised:
            await team.run("hello", session_id="S1")
    assert "has no tool named 'get_time'" in str(raised.value)
    assert "get_current_time, convert_time" in str(raised.value)


async def test_the_tool_list_is_listed_again_after_the_server_says_it_changed(
    seen: Seen,
) -> None:
    """The demo server's `grow` adds a tool and sends `notifications/tools/list_changed`: the
    next run offers the new tool, and it runs."""

    def script(request: Any) -> Any:
        names = [t.name for t in request.tools]
        seen.append(names)
        done = [m.content for m in request.messages if m.role == "tool"]
        if done:
            return ScriptedModel.say(done[-1])
        return ScriptedModel.call("extra" if "extra" in names else "grow")

    demo = MCPServer.stdio(sys.executable, [DEMO, "stdio"], name="demo")
    agent = Agent(name="desk", tools=[demo.tools(exclude=["hang"])])
    async with Team([agent], entry="desk", model=ScriptedModel(script)) as team:
        first = await team.run("grow", session_id="A")
        second = await team.run("use the new tool", session_id="B")
    assert (first.status, first.output) == ("completed", "added extra")
    assert "extra" not in seen[0]
    assert "extra" in seen[-1]
    assert (second.status, second.output) == ("completed", "extra ran")


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = (
            b"<html><head><title>Release notes</title></head><body><main><h1>Release 4.2"
            b"</h1><p>The kettle now whistles in three languages.</p></main></body></html>"
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def page_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/notes"
    finally:
        server.shutdown()
        server.server_close()


async def test_fetch_server_reads_a_loopback_page_for_the_agent(page_url: str) -> None:
    fetch = MCPServer.stdio(
        sys.executable,
        ["-m", "mcp_server_fetch", "--ignore-robots-txt", "--allow-private-ips"],
        name="fetch",
    )
    reader = Agent(name="reader", tools=[fetch.tools(include=["fetch"], max_result_chars=800)])
    script = script_of(("fetch", {"url": page_url}))
    async with Team([reader], entry="reader", model=ScriptedModel(script)) as team:
        result = await team.run(f"what is new in the release notes at {page_url}?", "S1")
    assert result.status == "completed", result.error
    assert "The kettle now whistles in three languages." in result.output
    (call,) = called(result)
    assert call.ok and call.arguments == {"url": page_url}


async def test_closing_a_server_ends_a_call_in_flight_with_an_error_and_it_opens_again() -> None:
    import asyncio

    demo = MCPServer.stdio(sys.executable, [DEMO, "stdio"], name="demo")
    await demo.list_tools()  # connected: the call below is in flight when the server closes
    hanging = asyncio.ensure_future(demo.call_tool("hang", {}))
    await asyncio.sleep(0.5)
    await demo.aclose()
    with pytest.raises(MCPServerError, match=r"MCP server 'demo'.*during the call to hang"):
        await asyncio.wait_for(hanging, 10)
    again = await demo.call_tool("echo", {"text": "again"})
    assert again.content[0].text == "echo: again"  # type: ignore[union-attr]
    await demo.aclose()


async def test_closing_a_server_while_it_starts_fails_the_waiting_call_clearly() -> None:
    import asyncio

    demo = MCPServer.stdio(sys.executable, [DEMO, "stdio"], name="demo")
    waiting = asyncio.ensure_future(demo.call_tool("echo", {"text": "x"}))
    await asyncio.sleep(0.05)  # the server's process is still starting
    await demo.aclose()
    with pytest.raises(MCPServerError, match=r"MCP server 'demo'.*closed \(aclose\)"):
        await asyncio.wait_for(waiting, 10)


async def test_env_and_cwd_given_to_a_stdio_server_reach_its_process(tmp_path: Path) -> None:
    demo = MCPServer.stdio(
        sys.executable, [DEMO, "stdio"], env={"DESK_REGION": "eu-2"}, cwd=str(tmp_path)
    )
    result = await demo.call_tool("setting", {"name": "DESK_REGION"})
    assert result.structured_content == {"env": "eu-2", "cwd": str(tmp_path), "header": None}
    assert demo.name == os.path.basename(sys.executable)  # the default name: the command's
    await demo.aclose()


async def test_a_command_that_never_answers_the_handshake_times_out_and_is_stopped() -> None:
    mute = MCPServer.stdio(
        sys.executable, ["-c", "import time; time.sleep(60)"], name="mute", connect_timeout_s=0.5
    )
    with pytest.raises(MCPServerError, match=r"'mute'.*did not complete the MCP handshake"):
        await mute.list_tools()
    assert children("time.sleep(60)") == []  # its process was stopped
    await mute.aclose()
