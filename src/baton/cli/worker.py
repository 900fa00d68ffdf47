"""`baton worker` (consume turns from a bus and run them with a team) and `baton submit`
(queue a turn, optionally waiting for its result)."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import typer
from rich.console import Console

from baton.bus import open_bus
from baton.bus.base import BusError, Envelope
from baton.bus.headers import trace_headers
from baton.cli.common import CLIError, fail, load_team
from baton.cli.options import STORE_HELP
from baton.core.errors import BatonError
from baton.core.ids import new_id
from baton.core.text import blank, clean_text
from baton.worker import Worker

BUS_HELP = "Bus URL: redis://host:6379/0 (workers in other processes) or memory://."
"""Help text of the `--bus` option."""


def worker(
    target: Annotated[
        str,
        typer.Argument(help="The team as MODULE:ATTRIBUTE, e.g. examples.customer_service:team."),
    ],
    bus: Annotated[str, typer.Option("--bus", help=BUS_HELP)],
    store: Annotated[str | None, typer.Option("--store", help=STORE_HELP)] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Turns in flight at once.")
    ] = 1000,
    name: Annotated[
        str | None, typer.Option("--name", help="Consumer name (default: host-pid-random).")
    ] = None,
    drain_s: Annotated[
        float,
        typer.Option(
            "--drain-s", help="On SIGTERM, seconds turns in flight get to finish before release."
        ),
    ] = 10.0,
    tune_gc: Annotated[
        bool,
        typer.Option(
            "--tune-gc/--no-tune-gc",
            help="gc.freeze() after start-up and raised collector thresholds (thousands of "
            "conversations in flight).",
        ),
    ] = True,
) -> None:
    """Consume turns from the bus and run them with the team until SIGTERM or Ctrl-C.

    SIGTERM is a graceful shutdown: turns in flight get --drain-s seconds to finish, the rest
    are released at their last checkpoint for another worker to resume.
    """
    err = Console(stderr=True, highlight=False)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        team = load_team(target)
        served = team.bind(store=store)  # --store: opened, checked and closed by the binding
        consumer = Worker(
            served,
            open_bus(bus),
            name=name,
            concurrency=concurrency,
            drain_s=drain_s,
            tune_gc=tune_gc,
        )
    except (CLIError, BatonError, ValueError) as exc:
        error = exc if isinstance(exc, CLIError) else CLIError(str(exc))
        fail(err, error)
        raise typer.Exit(error.code) from None

    async def main() -> None:
        try:
            await consumer.serve()
        finally:
            await consumer.bus.close()
            await served.aclose()
            if store is None:  # it served the team's own store until the process stops
                await team.aclose()

    asyncio.run(main())
    s = consumer.stats
    err.print(
        f"worker {consumer.name} stopped: {s.answered} answered ({s.errors} errors), "
        f"{s.retried} retried, {s.dead} dead-lettered, {s.released} released"
    )


def submit(
    message: Annotated[str, typer.Argument(help="The user message.")],
    bus: Annotated[str, typer.Option("--bus", help=BUS_HELP)],
    session: Annotated[str, typer.Option("--session", "-s", help="Session id.")],
    user: Annotated[str | None, typer.Option("--user", "-u", help="End-user id.")] = None,
    request_id: Annotated[
        str | None,
        typer.Option(
            "--request-id",
            help="Request id in the session (a retry with the same id runs once; the same id "
            "in another session is another request).",
        ),
    ] = None,
    wait_s: Annotated[
        float,
        typer.Option("--wait", "-w", help="Seconds to wait for the result (0: do not wait)."),
    ] = 0.0,
) -> None:
    """Queue one message for the workers; print its request id, and its result with --wait."""
    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    if blank(message):
        fail(
            err,
            CLIError(
                "the message is empty (only white space, control or invisible characters)", code=2
            ),
        )
        raise typer.Exit(2)

    async def main() -> int:
        b = open_bus(bus)
        try:
            envelope = Envelope(
                session_id=session,
                message=clean_text(message),  # argv may hold lone surrogates (undecodable bytes)
                user_id=user,
                headers=trace_headers(),
                id=request_id or new_id("req_"),
            )
            await b.publish(envelope)
            out.print(f"submitted {envelope.id} (session {session})")
            if wait_s <= 0:
                return 0
            found = await b.get_result(session, envelope.id, wait_s=wait_s)
            if found is None:
                err.print(f"no result within {wait_s:g}s: is a worker running on {b.url}?")
                return 1
            out.print(
                f"[bold]{found.status}[/bold] by {found.worker}: {found.output or found.error}"
            )
            return 0 if found.status not in ("failed", "error") else 1
        finally:
            await b.close()

    try:
        code = asyncio.run(main())
    except (BusError, BatonError, ValueError) as exc:
        fail(err, CLIError(str(exc)))
        raise typer.Exit(1) from None
    raise typer.Exit(code)
