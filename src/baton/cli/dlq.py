"""`baton dlq list|retry`: the bus's dead-letter queue, where a turn goes after failing
`max_deliveries` times (with its last error)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import typer

from baton.bus import open_bus
from baton.bus.base import Bus, BusError, DeadLetter, EnvelopeError
from baton.cli.common import CLIError, fail
from baton.cli.output import ago, utc
from baton.cli.worker import BUS_HELP
from baton.core.errors import BatonError, ConfigError
from baton.observe.terminal import safe, safe_clip

if TYPE_CHECKING:
    from rich.console import Console

T = TypeVar("T")

ALL_LIMIT = 1_000_000
"""Dead letters `retry --all` requeues at most in one go."""

dlq_app = typer.Typer(
    help="The bus's dead-letter queue: turns that failed max_deliveries times. List them, and "
    "publish them again once the cause is fixed.",
    no_args_is_help=True,
)
"""The `baton dlq` command group."""


class DlqFormat(str, Enum):
    """How `baton dlq list` prints."""

    table = "table"
    json = "json"


BusOption = Annotated[str, typer.Option("--bus", help=BUS_HELP)]


def _consoles() -> tuple[Console, Console]:
    from rich.console import Console

    return Console(highlight=False), Console(stderr=True, highlight=False)


def shown(url: str) -> str:
    """The bus URL without its password (for messages)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def _on_bus(url: str, action: Callable[[Bus], Awaitable[T]]) -> T:
    """Run `action` on the bus `url`, closing it after; its failures as `CLIError`s."""

    async def main() -> T:
        bus = open_bus(url)
        try:
            return await action(bus)
        finally:
            await bus.close()

    try:
        return asyncio.run(main())
    except ConfigError as exc:
        raise CLIError(str(exc), code=2) from None
    except BusError as exc:
        raise CLIError(str(exc), code=1) from None
    except BatonError as exc:
        raise CLIError(f"the bus {shown(url)} failed: {exc}", code=1) from None


UNREADABLE = "(unreadable)"
"""What the table shows for the session and request of an entry that was not an envelope."""


def letter_json(letter: DeadLetter) -> dict[str, Any]:
    """A dead letter as JSON: its id, the envelope's fields (null for an entry that was not
    an envelope; `raw` then holds what it was), the error, the deliveries."""
    env = letter.envelope
    return {
        "id": letter.id,
        "session_id": env.session_id if env else None,
        "request_id": env.id if env else None,
        "user_id": env.user_id if env else None,
        "message": env.message if env else None,
        "deliveries": letter.deliveries,
        "error": letter.error,
        "failed_at": letter.failed_at,
        "submitted_at": env.submitted_at if env else None,
        "raw": letter.raw,
    }


def letter_table(letters: list[DeadLetter]) -> Any:
    """A rich table of dead letters: id, session, request id, deliveries, error, failed at.

    Every cell is literal text, control, bidi and invisible characters shown as escapes."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("session", no_wrap=True)
    table.add_column("request id", no_wrap=True)
    table.add_column("deliveries", justify="right", no_wrap=True)
    table.add_column("error")
    table.add_column("failed at (UTC)", no_wrap=True)
    for d in letters:
        table.add_row(
            safe(d.id),
            safe(d.envelope.session_id) if d.envelope else UNREADABLE,
            safe(d.envelope.id) if d.envelope else UNREADABLE,
            str(d.deliveries),
            safe_clip(d.error, 80),
            f"{utc(d.failed_at)} ({ago(d.failed_at)} ago)",
        )
    return table


@dlq_app.command("list")
def list_letters(
    bus: BusOption,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="Show at most this many, oldest first.")
    ] = 100,
    format: Annotated[
        DlqFormat, typer.Option("--format", "-f", help="table, or json (one array).")
    ] = DlqFormat.table,
) -> None:
    """The dead letters, oldest first: id, session, request id, deliveries, last error."""
    out, err = _consoles()
    try:
        letters = _on_bus(bus, lambda b: b.dead_letters(limit))
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    if format is DlqFormat.json:
        typer.echo(json.dumps([letter_json(d) for d in letters], ensure_ascii=False, indent=2))
        return
    if not letters:
        out.print(safe(f"no dead letters on {shown(bus)}"), soft_wrap=True)
        return
    out.print(letter_table(letters))
    out.print(
        safe(
            f"{len(letters)} dead letter{'s' if len(letters) != 1 else ''}; publish one again "
            f"with: baton dlq retry ID --bus {shown(bus)}"
        ),
        soft_wrap=True,
    )


@dlq_app.command("retry")
def retry(
    bus: BusOption,
    ids: Annotated[
        list[str] | None, typer.Argument(help="Dead letter ids (see `baton dlq list`).")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Publish every dead letter again.")] = False,
) -> None:
    """Publish dead letters again (their deliveries start over) and drop them from the queue.

    Fix the cause first (a store that was down, a bug in a tool): a turn that fails again goes
    back to the queue after max_deliveries.
    """
    out, err = _consoles()
    wanted = list(ids or [])
    if all_ == bool(wanted):
        fail(err, CLIError("give dead letter ids (see `baton dlq list`) or --all, not both"))
        raise typer.Exit(2)

    async def requeue(b: Bus) -> tuple[list[tuple[str, str, str]], list[str]]:
        todo = [d.id for d in await b.dead_letters(ALL_LIMIT)] if all_ else wanted
        done: list[tuple[str, str, str]] = []
        refused: list[str] = []
        for dead_id in todo:
            try:
                envelope = await b.requeue(dead_id)
            except (LookupError, EnvelopeError) as exc:  # unknown, or nothing to publish
                refused.append(str(exc.args[0]) if exc.args else dead_id)
                continue
            done.append((dead_id, envelope.session_id, envelope.id))
        return done, refused

    try:
        done, refused = _on_bus(bus, requeue)
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    for dead_id, session_id, request_id in done:
        out.print(
            safe(f"requeued {dead_id}: request {request_id} of session {session_id}"),
            soft_wrap=True,
        )
    for message in refused:
        fail(err, CLIError(message, code=1))
    if all_ and not done and not refused:
        out.print(safe(f"no dead letters on {shown(bus)}"), soft_wrap=True)
    if refused:
        raise typer.Exit(1)
