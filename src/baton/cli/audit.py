"""`baton audit verify` and `baton audit show`: the store's hash-chained audit trail.

Both open a SQLite store read-only: they migrate nothing and write nothing (an evidence copy
may be read-only, and a file that is not a Baton store stays as it is). `$BATON_AUDIT_KEY`,
when set, is the key the chain was sealed with.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail, open_cli_store, sqlite_file
from baton.core.errors import BatonError

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from baton.backends.audit import AuditRecord, AuditTrail

STORE_HELP = f"Store URL: sqlite:///path.db (default {DEFAULT_STORE_URL})."
"""Help text of the `--store` option."""

T = TypeVar("T")

audit_app = typer.Typer(
    help="Verify and read the hash-chained audit trail of a store.", no_args_is_help=True
)
"""The `baton audit` command group."""


def _with_trail(url: str, action: Callable[[AuditTrail], Coroutine[Any, Any, T]]) -> T:
    """Open the store at `url`, run `action` on its audit trail, close it."""
    from baton.backends.audit import AuditTrail

    db = sqlite_file(url)
    if db is not None and not db.exists():
        raise CLIError(f"no store at {db}: run `baton run ...` first, or pass --store URL", code=1)
    if db is not None:
        from baton.backends.sqlite import SQLiteStore

        try:
            store: Any = SQLiteStore(url, read_only=True)
        except BatonError as exc:
            raise CLIError(f"cannot read the audit trail of {url}: {exc}", code=1) from None
    else:
        store = open_cli_store(url)

    async def go() -> T:
        try:
            if not isinstance(store, AuditTrail):
                raise CLIError(
                    f"the store {url} keeps no audit chain; use a SQLite store (sqlite:///path.db)"
                )
            return await action(store)
        finally:
            await store.close()

    try:
        return asyncio.run(go())
    except BatonError as exc:
        raise CLIError(f"cannot read the audit trail of {url}: {exc}", code=1) from None


@audit_app.command("verify")
def verify(
    store: Annotated[str | None, typer.Option("--store", help=STORE_HELP)] = None,
    anchor: Annotated[
        str | None,
        typer.Option(
            "--anchor",
            metavar="SEQ:HASH",
            help="A head printed by an earlier verify: also prove nothing up to it was cut.",
        ),
    ] = None,
) -> None:
    """Check every audit record's hash and link, and that the stored events and messages are
    the ones the chain records; exit 1 naming the first bad record or row.

    The store is opened read-only. Set BATON_AUDIT_KEY to the key the store was written with.
    """
    from rich.console import Console
    from rich.text import Text

    from baton.backends.audit import parse_anchor

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    url = store or DEFAULT_STORE_URL
    try:
        try:
            pinned = None if anchor is None else parse_anchor(anchor)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        result = _with_trail(url, lambda trail: trail.verify_audit(pinned))
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    if not result.ok:
        if result.table is not None and result.row is not None:
            where = f"{result.table} row {result.row}"
        else:  # a record, or a row it vouches for that is gone (the problem names its id)
            where = f"record {result.first_bad_seq}"
        err.print(
            Text.assemble(
                ("chain broken: ", "bold red"),
                f"{where} {result.tamper}: {result.problem} ",
                (f"({result.checked} records checked)", "dim"),
            ),
            soft_wrap=True,
        )
        raise typer.Exit(1)
    rows = [f"{result.events} events"] if result.events is not None else []
    if result.messages is not None:
        rows.append(f"{result.messages} messages")
    agreed = f"; {' and '.join(rows)} agree with it" if rows else ""
    out.print(
        Text.assemble(("chain intact: ", "bold green"), f"{result.checked} records{agreed}"),
        soft_wrap=True,
    )
    if result.checked:
        out.print(Text.assemble(("head: ", "dim"), result.anchor), soft_wrap=True)
    if result.keyed_from is not None:
        before = (
            f"; records 1 to {result.keyed_from - 1} predate the key (plain sha256, vouched "
            f"for by record {result.keyed_from})"
            if result.keyed_from > 1
            else ""
        )
        out.print(
            Text.assemble(
                ("keyed: ", "dim"), f"{result.keyed} records sealed with the key{before}"
            ),
            soft_wrap=True,
        )
    if result.events is not None and result.messages is None:
        out.print(
            Text.assemble(
                ("note: ", "bold yellow"),
                "this store predates message auditing (schema version 3 or older): its "
                "messages were not checked; open it read-write once (on a copy) to chain them",
            ),
            soft_wrap=True,
        )


@audit_app.command("show")
def show(
    store: Annotated[str | None, typer.Option("--store", help=STORE_HELP)] = None,
    session: Annotated[
        str | None, typer.Option("--session", "-s", help="Only this session's records.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="Show the last N records.")
    ] = 50,
) -> None:
    """List the last audit records: position, time, session, event, agent and hashes."""
    from rich.console import Console

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    url = store or DEFAULT_STORE_URL
    try:
        records = _with_trail(url, lambda trail: trail.audit_records(session, limit))
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    if not records:
        where = f" for session {session!r}" if session else ""
        out.print(f"no audit records{where} in {url}")
        return
    out.print(audit_table(records))


def audit_table(records: Sequence[AuditRecord]) -> Any:
    """A rich table of audit records (hashes shortened to 12 hex digits)."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in ("seq", "time (UTC)", "session", "type", "agent", "hop", "event", "prev", "hash"):
        table.add_column(name, no_wrap=True, justify="right" if name in ("seq", "hop") else "left")
    for r in records:
        try:
            event = r.event()
        except ValueError:
            event = {}
        when = dt.datetime.fromtimestamp(r.ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        table.add_row(
            str(r.seq),
            when[:-3],
            r.session_id,
            r.type,
            str(event.get("agent") or "-"),
            str(event.get("hop", "")),
            r.event_id,
            r.prev_hash[:12],
            r.hash[:12],
        )
    return table
