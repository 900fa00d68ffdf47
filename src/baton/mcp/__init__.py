"""Baton and the Model Context Protocol, with the official `mcp` SDK (`pip install
'baton-relay[mcp]'`): tools from MCP servers (`MCPServer`, `server.tools(...)`) and a team
served as an MCP server (`baton.mcp.server`, `baton mcp serve`). Nothing here imports the SDK
until a name is used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton.mcp.client import MCPServer, MCPServerError
    from baton.mcp.toolset import MCPTool, MCPToolError, MCPToolset

__all__ = ["MCPServer", "MCPServerError", "MCPTool", "MCPToolError", "MCPToolset"]

_WHERE = {
    "MCPServer": "client",
    "MCPServerError": "client",
    "MCPTool": "toolset",
    "MCPToolError": "toolset",
    "MCPToolset": "toolset",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'baton.mcp' has no attribute {name!r}")
    import importlib

    try:
        module = importlib.import_module(f"baton.mcp.{where}")
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in ("mcp", "mcp_types"):
            raise ImportError(
                f"baton.mcp.{name} needs the MCP SDK: pip install 'baton-relay[mcp]'"
            ) from exc
        raise
    return getattr(module, name)
