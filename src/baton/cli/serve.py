"""`baton serve`: the API server and dashboard of a team (see docs/server.md)."""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer
from rich.console import Console

from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail, load_team
from baton.cli.options import STORE_HELP
from baton.core.errors import BatonError

BUS_HELP = (
    "Bus URL (redis://host:6379/0): POST /runs queues turns for `baton worker` processes "
    "instead of running them in the server."
)
"""Help text of the `--bus` option."""

LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")

DEFAULT_MODEL_ID = "baton"
"""`--model-id` by default (the server's own default)."""

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""`--max-body-bytes` by default (the server's own default, 1 MiB)."""


def is_loopback(host: str) -> bool:
    """True when `host` names this machine only (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def refuse_open_network(host: str, auth: object, what: str = "run the team") -> None:
    """Raise `CLIError` when a server would listen beyond this machine without `--auth`."""
    if auth is None and not is_loopback(host):
        raise CLIError(
            f"refusing to serve on {host} without --auth: anyone who reaches it could {what}. "
            "Pass --auth tokens.yaml (bearer tokens with roles, see docs/server.md), or "
            "listen on 127.0.0.1"
        )


def serve(
    target: Annotated[
        str,
        typer.Argument(help="The team as MODULE:ATTRIBUTE, e.g. examples.customer_service:team."),
    ],
    store: Annotated[str | None, typer.Option("--store", help=STORE_HELP)] = None,
    bus: Annotated[str | None, typer.Option("--bus", help=BUS_HELP)] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 8000,
    auth: Annotated[
        str | None,
        typer.Option(
            "--auth",
            metavar="FILE",
            help="Bearer tokens and their roles (YAML or JSON; see docs/server.md). Required "
            "unless the host is a loopback address.",
        ),
    ] = None,
    max_body_bytes: Annotated[
        int,
        typer.Option(
            "--max-body-bytes",
            min=1,
            help="Longest request body in bytes (413 above it, before the body is read).",
        ),
    ] = DEFAULT_MAX_BODY_BYTES,
    model_id: Annotated[
        str,
        typer.Option(
            "--model-id",
            help="The model id the OpenAI-compatible endpoint (/v1/chat/completions) serves "
            "the team as.",
        ),
    ] = DEFAULT_MODEL_ID,
    log_level: Annotated[
        str, typer.Option("--log-level", help="uvicorn's log level (debug, info, warning).")
    ] = "info",
) -> None:
    """Serve the team's API and dashboard over HTTP (FastAPI on uvicorn) until Ctrl-C."""
    err = Console(stderr=True, highlight=False)
    try:
        refuse_open_network(host, auth, "run the team and decide approvals")
        try:
            import uvicorn

            from baton.server import AuthConfig, create_app
            from baton.server.guard import LOCAL_TOKEN_HEADER
        except ImportError as exc:
            raise CLIError(
                f"baton serve needs the server extra ({exc.name or exc} is missing): "
                "pip install 'baton-relay[server]'"
            ) from None
        tokens = AuthConfig.from_file(auth) if auth is not None else None
        team = load_team(target)
        # a binding on the store it opens and closes at shutdown; the imported team is unchanged
        served = team.bind(store=store or DEFAULT_STORE_URL)
        app = create_app(
            served,
            auth=tokens,
            bus=bus,
            close_team=True,
            host=host,
            port=port,
            max_body_bytes=max_body_bytes,
            model_id=model_id,
        )
    except (CLIError, BatonError, ValueError) as exc:
        error = exc if isinstance(exc, CLIError) else CLIError(str(exc))
        fail(err, error)
        raise typer.Exit(error.code) from None
    if tokens is None:
        err.print(
            "[bold yellow]warning:[/] no --auth: every request acts as user 'local' with every "
            "role (viewer, operator, act_for_users, approver:*); only this machine can reach "
            "the server, and only by its own address.",
            soft_wrap=True,
        )
        err.print(
            "local token (new at every start; scripts send it with each POST as the header "
            f"{LOCAL_TOKEN_HEADER}, the dashboard reads it from its page): "
            f"{app.state.local_token}",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
    else:
        err.print(f"{len(tokens)} token(s) from {auth}", style="dim")
    shown = f"[{host}]" if ":" in host else host
    err.print(
        f"Baton serving {target} on http://{shown}:{port}/  (API: /docs)",
        style="bold",
        soft_wrap=True,
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level)
