"""`baton mcp serve`: a team as an MCP server, over stdio or streamable HTTP (see
docs/mcp-server.md)."""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail, load_team
from baton.cli.options import STORE_HELP
from baton.cli.serve import refuse_open_network
from baton.core.errors import BatonError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from baton.server.auth import AuthConfig
    from baton.topologies.team import Team

mcp_app = typer.Typer(
    help="The Model Context Protocol: serve a team to MCP clients (see docs/mcp-server.md).",
    no_args_is_help=True,
)
"""The `baton mcp` command group."""


class Transport(str, enum.Enum):
    """How `baton mcp serve` speaks MCP."""

    stdio = "stdio"
    http = "http"


async def _serve(
    team: Team,
    server: MCPServer[object],
    transport: Transport,
    auth: AuthConfig | None,
    host: str,
    port: int,
    log_level: str,
) -> None:
    """Serve until the client leaves (stdio) or Ctrl-C (HTTP); then close the binding."""
    try:
        if transport is Transport.stdio:
            await server.run_stdio_async()
        else:
            import uvicorn

            from baton.mcp.server import http_app

            app = http_app(server, auth=auth, host=host)
            config = uvicorn.Config(app, host=host, port=port, log_level=log_level)
            await uvicorn.Server(config).serve()
    finally:
        await team.aclose()


@mcp_app.command("serve")
def serve(
    target: Annotated[
        str,
        typer.Argument(help="The team as MODULE:ATTRIBUTE, e.g. examples.customer_service:team."),
    ],
    transport: Annotated[
        Transport,
        typer.Option(
            "--transport",
            help="stdio: the MCP client starts this command and speaks over its stdin/stdout "
            "(a desktop client); http: streamable HTTP at http://HOST:PORT/mcp.",
        ),
    ] = Transport.stdio,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (http).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port (http).")] = 8000,
    store: Annotated[str | None, typer.Option("--store", help=STORE_HELP)] = None,
    auth: Annotated[
        str | None,
        typer.Option(
            "--auth",
            metavar="FILE",
            help="Bearer tokens and their roles, the file of `baton serve --auth` (http only). "
            "Required unless the host is a loopback address; with it, approvers get the tools "
            "approvals_list, approve and reject.",
        ),
    ] = None,
    log_level: Annotated[
        str, typer.Option("--log-level", help="uvicorn's log level (http: debug, info, warning).")
    ] = "info",
) -> None:
    """Serve the team to MCP clients: the tool `ask`, and sessions and traces as resources."""
    err = Console(stderr=True, highlight=False)
    try:
        if transport is Transport.stdio and auth is not None:
            raise CLIError(
                "--auth applies to --transport http: over stdio the MCP client that starts "
                "this command is the local user, and no approval is decided over MCP"
            )
        if transport is Transport.http:
            refuse_open_network(host, auth)
        try:
            from baton.mcp.server import build_server
            from baton.server.auth import AuthConfig
        except ImportError as exc:
            raise CLIError(
                f"baton mcp serve needs the mcp extra ({exc.name or exc} is missing): "
                "pip install 'baton-relay[mcp]'"
            ) from None
        tokens = AuthConfig.from_file(auth) if auth is not None else None
        team = load_team(target)
        # a binding on the store it opens and closes at the end; the imported team is unchanged
        served = team.bind(store=store or DEFAULT_STORE_URL)
        server = build_server(served, auth=tokens)
    except (CLIError, BatonError, ValueError) as exc:
        error = exc if isinstance(exc, CLIError) else CLIError(str(exc))
        fail(err, error)
        raise typer.Exit(error.code) from None
    if transport is Transport.http:
        shown = f"[{host}]" if ":" in host else host
        who = f"{len(tokens)} token(s) from {auth}" if tokens else "no --auth: the local user"
        err.print(
            f"Baton serving {target} over MCP on http://{shown}:{port}/mcp ({who})",
            style="bold",
            soft_wrap=True,
        )
    asyncio.run(_serve(served, server, transport, tokens, host, port, log_level))
