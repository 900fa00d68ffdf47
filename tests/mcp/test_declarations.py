"""Declaring MCP servers and their toolsets: mistakes are `ConfigError`s that say what to
do, and a toolset lands in `Agent.toolsets`."""

from __future__ import annotations

import re

import pytest
from mcp_kit import script_of

from baton import Agent, ConfigError, MemoryStore, ScriptedModel, Team, tool
from baton.mcp import MCPServer, MCPToolset


def test_a_toolset_given_in_tools_lands_in_toolsets_beside_plain_tools() -> None:
    @tool
    def local(x: int) -> int:
        """Double x."""
        return 2 * x

    toolset = MCPServer.http("http://127.0.0.1:9/mcp", name="far").tools()
    agent = Agent(name="desk", tools=[toolset, local])
    assert [t.name for t in agent.tools] == ["local"]
    assert agent.toolsets == (toolset,)
    assert isinstance(toolset, MCPToolset)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: MCPServer.stdio(""), "needs the command"),
        (lambda: MCPServer.stdio("srv", "--flag"), "args takes a list"),
        (lambda: MCPServer.http("ftp://host/mcp"), "needs an http(s) URL"),
        (lambda: MCPServer.sse("not a url"), "needs an http(s) URL"),
        (lambda: MCPServer.http("http://h/mcp").tools(include="echo"), "include takes a list"),
    ],
)
def test_declaration_mistakes_are_clear_errors(make: object, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        make()  # type: ignore[operator]


def test_an_agent_rejects_a_toolset_that_is_not_one() -> None:
    with pytest.raises(ValueError, match="is not a toolset"):
        Agent(name="desk", toolsets=[object()])


async def test_a_server_tool_named_like_an_agent_tool_is_a_config_error(demo_url: str) -> None:
    @tool
    def echo(text: str) -> str:
        """A local echo."""
        return text

    server = MCPServer.http(demo_url, name="demo")
    desk = Agent(name="desk", tools=[echo, server.tools(include=["echo"])])
    async with Team([desk], entry="desk", model=ScriptedModel([])) as team:
        with pytest.raises(ConfigError, match=r"two tools named 'echo'.*prefix"):
            await team.run("echo", session_id="S1")
    prefixed = Agent(name="desk", tools=[echo, server.tools(include=["echo"], prefix="demo_")])
    model = ScriptedModel(script_of(("demo_echo", {"text": "remote"}), ("echo", {"text": "x"})))
    async with Team([prefixed], entry="desk", model=model) as team:
        result = await team.run("echo twice", session_id="S1")
    assert result.output == "echo: remote | x"


async def test_an_approval_is_decided_by_a_new_team_object_that_lists_the_tools_itself(
    demo_url: str,
) -> None:
    """As after a restart: the team that approves never ran, so it lists the server's tools
    before it resumes the paused call."""
    store = MemoryStore()

    def desk(model: ScriptedModel) -> Team:
        server = MCPServer.http(demo_url, name="demo")
        agent = Agent(name="desk", tools=[server.tools(requires_approval={"echo": True})])
        return Team([agent], entry="desk", model=model, store=store)

    model = ScriptedModel(script_of(("echo", {"text": "pay"})))
    async with desk(model) as first:
        paused = await first.run("echo pay", session_id="S1")
    assert paused.status == "awaiting_approval" and paused.approval is not None
    async with desk(model) as second:
        done = await second.approve("S1", paused.approval.id, by="alice")
    assert (done.status, done.output) == ("completed", "echo: pay")
