"""`baton a2a serve`: a team as an A2A agent over HTTP (JSON-RPC, streaming, push
notifications; see docs/a2a-server.md)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail, load_team
from baton.cli.options import STORE_HELP
from baton.cli.serve import refuse_open_network
from baton.core.errors import BatonError

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from baton.topologies.team import Team

a2a_app = typer.Typer(
    help="The Agent2Agent protocol: serve a team to A2A clients (see docs/a2a-server.md).",
    no_args_is_help=True,
)
"""The `baton a2a` command group."""


async def _serve(team: Team, app: ASGIApp, host: str, port: int, log_level: str) -> None:
    """Serve until Ctrl-C; then close the binding."""
    import uvicorn

    try:
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level)
        await uvicorn.Server(config).serve()
    finally:
        await team.aclose()


def card_url(host: str, port: int, public_url: str | None) -> str:
    """Where clients reach the server, as the Agent Card names it: `public_url` (behind a
    proxy), else `http://HOST:PORT/` (a wildcard address names this machine's loopback)."""
    if public_url is not None:
        if not public_url.startswith(("http://", "https://")):
            raise CLIError(f"--public-url must be an http:// or https:// URL, got {public_url!r}")
        return public_url if public_url.endswith("/") else public_url + "/"
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    shown = f"[{shown}]" if ":" in shown else shown
    return f"http://{shown}:{port}/"


@a2a_app.command("serve")
def serve(
    target: Annotated[
        str,
        typer.Argument(help="The team as MODULE:ATTRIBUTE, e.g. examples.customer_service:team."),
    ],
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 8780,
    store: Annotated[str | None, typer.Option("--store", help=STORE_HELP)] = None,
    auth: Annotated[
        str | None,
        typer.Option(
            "--auth",
            metavar="FILE",
            help="Bearer tokens and their roles, the file of `baton serve --auth`: a caller "
            "needs a token with the role operator (its user_id binds the runs to that end "
            "user). Required unless the host is a loopback address.",
        ),
    ] = None,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            metavar="URL",
            help="The URL clients reach the server at, for the Agent Card (behind a proxy); "
            "default http://HOST:PORT/.",
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", help="The agent's name on its card (default: the module's)."),
    ] = None,
    description: Annotated[
        str | None,
        typer.Option("--description", help="The agent's description on its card."),
    ] = None,
    log_level: Annotated[
        str, typer.Option("--log-level", help="uvicorn's log level (debug, info, warning).")
    ] = "info",
) -> None:
    """Serve the team as an A2A agent: its Agent Card, tasks, streaming, push notifications."""
    err = Console(stderr=True, highlight=False)
    try:
        refuse_open_network(host, auth)
        try:
            from baton.a2a.server import build_app
            from baton.server.auth import AuthConfig
        except ImportError as exc:
            raise CLIError(
                f"baton a2a serve needs the a2a extra ({exc.name or exc} is missing): "
                "pip install 'baton-relay[a2a]'"
            ) from None
        url = card_url(host, port, public_url)
        tokens = AuthConfig.from_file(auth) if auth is not None else None
        team = load_team(target)
        # a binding on the store it opens and closes at the end; the imported team is unchanged
        served = team.bind(store=store or DEFAULT_STORE_URL)
        agent = name or target.partition(":")[0].rpartition(".")[2]
        app = build_app(served, url=url, name=agent, description=description, auth=tokens)
    except (CLIError, BatonError, ValueError) as exc:
        error = exc if isinstance(exc, CLIError) else CLIError(str(exc))
        fail(err, error)
        raise typer.Exit(error.code) from None
    who = f"{len(tokens)} token(s) from {auth}" if tokens else "no --auth: the local user"
    err.print(
        f"Baton serving {target} over A2A at {url} (card: {url}.well-known/agent-card.json; {who})",
        style="bold",
        soft_wrap=True,
    )
    asyncio.run(_serve(served, app, host, port, log_level))
