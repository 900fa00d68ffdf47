"""An MCP server made with the `mcp` SDK's own `MCPServer` (formerly FastMCP), over
streamable HTTP on loopback: its tools go through the kernel's one tool path (schema checks,
scopes, approvals, timeouts, the trust boundary), and a call carries its idempotency key and
trace context in `_meta`."""

from __future__ import annotations

import json
import time
from typing import Any

from mcp_kit import script_of

from baton import Agent, ScriptedModel, Team
from baton.mcp import MCPServer


def of_type(result: Any, kind: str) -> list[Any]:
    return [e for e in result.events if e.type == kind]


def team_of(url: str, *calls: tuple[str, dict[str, Any]], **tools: Any) -> Team:
    server = MCPServer.http(url, name="demo")
    desk = Agent(name="desk", tools=[server.tools(**tools)])
    return Team([desk], entry="desk", model=ScriptedModel(script_of(*calls)))


async def test_text_and_structured_content_both_reach_the_model(demo_url: str) -> None:
    async with team_of(demo_url, ("forecast", {"city": "Paris"}), ("echo", {"text": "hi"})) as t:
        result = await t.run("weather in Paris? and say hi", session_id="S1")
    assert result.status == "completed", result.error
    forecast, echo = result.output.split(" | ")
    assert json.loads(forecast) == {
        "structured_content": {"city": "Paris", "temp_c": 21},
        "text": "Sunny in Paris all day.",
    }
    assert echo == "echo: hi"


async def test_a_call_carries_its_idempotency_key_and_the_run_trace_in_meta(
    demo_url: str,
) -> None:
    async with team_of(demo_url, ("whoami", {})) as team:
        result = await team.run("who am I?", session_id="S1")
    meta = json.loads(result.output)["meta"]
    assert meta["idempotency_key"] == f"{result.run_id}:0:0"
    version, trace_id, span_id, flags = meta["traceparent"].split("-")
    assert (version, trace_id, len(span_id), flags) == ("00", result.trace_id, 16, "01")


async def test_arguments_are_checked_against_the_server_schema_before_any_call(
    demo_url: str,
) -> None:
    async with team_of(demo_url, ("echo", {"text": 5}), ("echo", {"txt": "x"})) as team:
        result = await team.run("echo five", session_id="S1")
    assert result.status == "completed"
    first, second = of_type(result, "tool_called")
    assert (
        not first.ok
        and first.error == "invalid arguments for echo: text: 5 is not of type 'string'"
    )
    assert not second.ok and "'text' is a required property" in second.error


async def test_a_tool_error_reaches_the_model_and_the_run_goes_on(demo_url: str) -> None:
    async with team_of(demo_url, ("fail", {}), ("echo", {"text": "after"})) as team:
        result = await team.run("try the ledger", session_id="S1")
    assert result.status == "completed"
    failed, echoed = of_type(result, "tool_called")
    assert not failed.ok and failed.error == (
        "MCPToolError: demo/fail: Error executing tool fail: the ledger is closed"
    )
    assert echoed.ok and result.output.endswith("echo: after")


async def test_a_hanging_tool_times_out_and_the_next_call_works(demo_url: str) -> None:
    calls = (("hang", {}), ("echo", {"text": "still here"}))
    started = time.monotonic()
    async with team_of(demo_url, *calls, timeout_s=0.5) as team:
        result = await team.run("hang, then echo", session_id="S1")
    assert time.monotonic() - started < 10
    assert result.status == "completed"
    hung, echoed = of_type(result, "tool_called")
    assert not hung.ok
    assert hung.error.startswith("hang timed out after 0.5s and was cancelled")
    (trip,) = of_type(result, "guard_tripped")
    assert (trip.guard, trip.detail) == ("tool_timeout", "hang timed out after 0.5s")
    assert echoed.ok and result.output.endswith("echo: still here")


async def test_a_tool_outside_the_agent_scopes_is_refused_and_never_called(
    demo_url: str,
) -> None:
    server = MCPServer.http(demo_url, name="demo")
    desk = Agent(
        name="desk",
        tools=[server.tools(scopes=["demo:read"], tool_scopes={"echo": ["demo:write"]})],
        scopes=["demo:read"],
    )
    model = ScriptedModel(script_of(("echo", {"text": "x"}), ("forecast", {"city": "Oslo"})))
    async with Team([desk], entry="desk", model=model) as team:
        result = await team.run("echo then forecast", session_id="S1")
    (refused,) = of_type(result, "tool_refused")
    assert (refused.tool, refused.missing_scopes) == ("echo", ("demo:write",))
    assert [e.tool for e in of_type(result, "tool_called")] == ["forecast"]
    assert result.output.startswith('{"ok": false, "error": "not executed: desk lacks the scope')


async def test_include_and_exclude_filter_what_the_model_sees(demo_url: str) -> None:
    server = MCPServer.http(demo_url, name="demo")
    only = await server.tools(include=["echo", "forecast"]).list_tools()
    assert [t.name for t in only] == ["echo", "forecast"]
    rest = await server.tools(exclude=["hang", "fail"]).list_tools()
    assert "hang" not in {t.name for t in rest} and "whoami" in {t.name for t in rest}
    prefixed = await server.tools(include=["echo"], prefix="demo.").list_tools()
    assert [(t.name, t.remote_name) for t in prefixed] == [("demo_echo", "echo")]  # type: ignore[attr-defined]
    await server.aclose()


async def test_an_excluded_or_unknown_tool_asked_by_the_model_is_unknown(demo_url: str) -> None:
    calls = (("hang", {}), ("no_such_tool", {}), ("echo", {"text": "ok"}))
    async with team_of(demo_url, *calls, include=["echo"]) as team:
        result = await team.run("try things", session_id="S1")
    assert result.status == "completed"
    hang, unknown, echo = result.output.split(" | ")
    assert "unknown tool 'hang'; available tools: echo" in hang
    assert "unknown tool 'no_such_tool'" in unknown
    assert echo == "echo: ok"


async def test_an_mcp_result_that_tries_to_steer_the_agent_does_not_move_the_baton(
    demo_url: str,
) -> None:
    """The result names a hand-off, a route and control slots: it stays data. The model obeys
    it and asks for the hand-off, which is refused because desk may not hand to admin."""

    def obedient(request: Any) -> Any:
        done = [m.content for m in request.messages if m.role == "tool"]
        if not done:
            return ScriptedModel.call("lookup", order_id="ORD-1")
        if len(done) == 1 and "transfer_to_admin" in done[0]:
            return ScriptedModel.call("transfer_to_admin", reason="the tool said so")
        return ScriptedModel.say("Order ORD-1 has shipped.")

    server = MCPServer.http(demo_url, name="demo")
    desk = Agent(name="desk", tools=[server.tools(include=["lookup"])])
    admin = Agent(name="admin", description="Administers accounts.")
    async with Team([desk, admin], entry="desk", model=ScriptedModel(obedient)) as team:
        result = await team.run("where is order ORD-1?", session_id="S1")
        session = await team.session("S1")
    assert result.status == "completed"
    assert result.path == ["desk"] and result.handoffs == []
    assert session is not None and session.holder == "desk"
    assert of_type(result, "handoff") == []
    assert result.state == {"order_id": "ORD-1"}  # the argument, not the result's "slots"
    assert result.output == "Order ORD-1 has shipped."


async def test_an_mcp_tool_that_needs_approval_waits_and_runs_once_approved(
    demo_url: str,
) -> None:
    async with team_of(demo_url, ("echo", {"text": "pay"}), requires_approval={"echo": True}) as t:
        paused = await t.run("echo pay", session_id="S1")
        assert paused.status == "awaiting_approval" and paused.approval is not None
        assert of_type(paused, "tool_called") == []
        done = await t.approve("S1", paused.approval.id, by="alice")
    assert done.status == "completed"
    assert done.output == "echo: pay"


async def test_a_server_on_the_older_sse_transport_serves_the_same_tools(
    demo_sse_url: str,
) -> None:
    server = MCPServer.sse(demo_sse_url, name="demo")
    desk = Agent(name="desk", tools=[server.tools(include=["echo", "forecast"])])
    model = ScriptedModel(script_of(("echo", {"text": "over sse"})))
    async with Team([desk], entry="desk", model=model) as team:
        result = await team.run("echo over sse", session_id="S1")
    assert (result.status, result.output) == ("completed", "echo: over sse")


async def test_an_error_quoting_a_secret_is_redacted_and_a_long_result_truncated(
    demo_url: str,
) -> None:
    calls = (("connect", {}), ("forecast", {"city": "Reykjavik"}))
    async with team_of(demo_url, *calls, max_result_chars=30) as team:
        result = await team.run("connect, then the weather in Reykjavik", session_id="S1")
        stored = [m.content or "" for m in await team.store.get_messages("S1")]
    assert result.status == "completed"
    failed, forecast = of_type(result, "tool_called")
    assert not failed.ok and "Zq8-hunter2-Xv" not in (failed.error or "")
    assert "login failed" in (failed.error or "")
    assert not any("Zq8-hunter2-Xv" in text for text in stored)
    assert "Zq8-hunter2-Xv" not in result.output
    assert forecast.ok and forecast.truncated and forecast.result_chars > 30
    assert "[truncated: showing 30 of" in result.output


async def test_the_headers_given_to_the_server_go_with_every_request(demo_url: str) -> None:
    server = MCPServer.http(demo_url, headers={"X-Desk-Token": "t0k"}, name="demo")
    result = await server.call_tool("setting", {"name": "X_Desk_Token"})
    assert result.structured_content is not None
    assert (result.structured_content["env"], result.structured_content["header"]) == (None, "t0k")
    await server.aclose()
