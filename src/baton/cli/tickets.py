"""`baton tickets [list]|claim|answer|close`: the human queue that escalations land in."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail
from baton.cli.driver import require_store, with_store, with_team
from baton.cli.options import StoreOption, TeamOption
from baton.cli.output import ago
from baton.core.errors import BatonError, ConfigError, ConflictError, TicketError
from baton.observe.terminal import safe, safe_clip
from baton.runtime.tickets import Tickets

if TYPE_CHECKING:
    from baton.backends.base import HumanTicket, Store

tickets_app = typer.Typer(
    help="The human queue: list escalation tickets (the default), claim, answer, close them."
)
"""The `baton tickets` command group."""


class StatusChoice(str, Enum):
    """Ticket statuses `baton tickets --status` can show."""

    open = "open"
    claimed = "claimed"
    answered = "answered"
    closed = "closed"
    all = "all"


StatusOption = Annotated[
    StatusChoice, typer.Option("--status", help="Show tickets with this status (or all).")
]
IdArg = Annotated[int, typer.Argument(help="The ticket id (see `baton tickets`).")]
ByOption = Annotated[str, typer.Option("--by", help="Who takes the step (recorded).")]


def _consoles() -> tuple[Any, Any]:
    from rich.console import Console

    return Console(highlight=False), Console(stderr=True, highlight=False)


@tickets_app.callback(invoke_without_command=True)
def tickets_root(
    ctx: typer.Context,
    status: StatusOption = StatusChoice.open,
    store: StoreOption = None,
) -> None:
    """The human queue: `baton tickets` lists the open tickets; see the commands below."""
    if ctx.invoked_subcommand is None:
        _list(status, store)


@tickets_app.command("list")
def list_tickets(status: StatusOption = StatusChoice.open, store: StoreOption = None) -> None:
    """Tickets with a status (open by default), oldest first."""
    _list(status, store)


def _list(status: StatusChoice, store: str | None) -> None:
    out, err = _consoles()
    url = store or DEFAULT_STORE_URL
    wanted = None if status is StatusChoice.all else status.value
    try:
        try:
            tickets = with_store(url, lambda st: st.list_human(wanted))
        except BatonError as exc:
            raise CLIError(f"cannot read the store {url}: {exc}", code=1) from None
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    if not tickets:
        which = "" if wanted is None else f"{wanted} "
        out.print(safe(f"no {which}tickets in {url}"), soft_wrap=True)
        return
    out.print(ticket_table(tickets))


def ticket_table(tickets: Sequence[HumanTicket]) -> Any:
    """A rich table of tickets: id, status, session, path, reasons, user's words, who, age.

    Every cell is literal text, control, bidi and invisible characters shown as escapes."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in ("id", "status", "session", "path", "reasons", "user said", "by", "answer/note"):
        table.add_column(
            name,
            no_wrap=name not in ("reasons", "user said", "answer/note"),
            justify="right" if name == "id" else "left",
        )
    table.add_column("updated", no_wrap=True)
    for t in tickets:
        card = t.card
        table.add_row(
            str(t.id),
            safe(t.status),
            safe(card.session_id),
            safe(" -> ".join(card.path) or "-"),
            safe_clip("; ".join(card.reasons), 60),
            safe_clip(card.last_user_message, 60),
            safe(t.claimed_by or "-"),
            safe_clip(" · ".join(x for x in (t.answer, t.note) if x) or "-", 40),
            f"{ago(t.updated_at)} ago",
        )
    return table


def _step(url: str, action: Callable[[Store], Coroutine[Any, Any, HumanTicket]]) -> HumanTicket:
    """Take a ticket step on the store `url` (no team needed)."""
    require_store(url)
    try:
        ticket = with_store(url, action)
    except (TicketError, ConflictError) as exc:
        raise CLIError(str(exc), code=1) from None
    except BatonError as exc:
        raise CLIError(f"cannot update the store {url}: {exc}", code=1) from None
    assert ticket is not None  # the store file exists
    return ticket


@tickets_app.command("claim")
def claim(ticket_id: IdArg, by: ByOption, store: StoreOption = None) -> None:
    """Take an open ticket: nobody else may answer it."""
    out, err = _consoles()
    try:
        ticket = _step(store or DEFAULT_STORE_URL, lambda st: Tickets(st).claim(ticket_id, by))
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    out.print(
        safe(f"ticket {ticket.id} claimed by {by} (session {ticket.card.session_id})"),
        soft_wrap=True,
    )


@tickets_app.command("answer")
def answer(
    ticket_id: IdArg,
    by: ByOption,
    reply: Annotated[str, typer.Option("--reply", help="What the user reads.")],
    team: TeamOption,
    hand_back_to: Annotated[
        str | None,
        typer.Option(
            "--hand-back-to",
            metavar="AGENT",
            help="Give the baton back to this agent; without it the person keeps it, and the "
            "user's next message comes to the queue again.",
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Answer a ticket: the reply goes into the user's session (claims an open ticket)."""
    out, err = _consoles()
    url = store or DEFAULT_STORE_URL
    try:
        try:
            ticket, _ = with_team(
                team,
                url,
                lambda t: t.answer_ticket(ticket_id, by=by, reply=reply, hand_back_to=hand_back_to),
                existing=True,
            )
        except ConfigError as exc:
            raise CLIError(str(exc)) from None
        except (TicketError, ConflictError) as exc:
            raise CLIError(str(exc), code=1) from None
        except BatonError as exc:
            message = f"cannot answer ticket {ticket_id}: {exc}"
            raise CLIError(message, code=1) from None
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    holder = (
        f"the baton goes back to {hand_back_to}"
        if hand_back_to
        else "the baton stays with a person: the user's next message comes to the queue"
    )
    out.print(
        safe(
            f"ticket {ticket.id} answered by {by}; the reply is in session "
            f"{ticket.card.session_id}; {holder}"
        ),
        soft_wrap=True,
    )


@tickets_app.command("close")
def close(
    ticket_id: IdArg,
    by: ByOption,
    note: Annotated[str, typer.Option("--note", help="Why it needs nothing more.")] = "",
    store: StoreOption = None,
) -> None:
    """Close a ticket that needs nothing more."""
    out, err = _consoles()
    try:
        ticket = _step(
            store or DEFAULT_STORE_URL, lambda st: Tickets(st).close(ticket_id, by, note)
        )
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    out.print(safe(f"ticket {ticket.id} closed by {by}: {ticket.note}"), soft_wrap=True)
