"""`baton audit verify`, `baton audit show` and `baton audit archive`: the store's
hash-chained audit trail.

`verify` and `show` open a SQLite store read-only: they migrate nothing and write nothing (an
evidence copy may be read-only, and a file that is not a Baton store stays as it is).
`archive` (`baton.cli.audit_archive`) moves the oldest records to a file. `$BATON_AUDIT_KEY`,
when set, is the key the chain was sealed with.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from baton.cli.audit_archive import archive_command
from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail, open_cli_store, sqlite_file
from baton.core.errors import BatonError

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from baton.backends.archive import Anchor
    from baton.backends.audit import AuditRecord, AuditTrail, VerifyResult

STORE_HELP = f"Store URL: sqlite:///path.db (default {DEFAULT_STORE_URL})."
"""Help text of the `--store` option."""

T = TypeVar("T")

audit_app = typer.Typer(
    help="Verify, read and archive the hash-chained audit trail of a store.",
    no_args_is_help=True,
)
"""The `baton audit` command group."""

audit_app.command("archive")(archive_command)


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
    archives: Annotated[
        list[Path] | None,
        typer.Option(
            "--archive",
            metavar="FILE",
            help="An archive `baton audit archive` wrote; repeat for each, oldest first: "
            "archives and store are verified as one chain.",
        ),
    ] = None,
    archive_only: Annotated[
        bool,
        typer.Option(
            "--archive-only", help="Verify the --archive files on their own; open no store."
        ),
    ] = False,
) -> None:
    """Check every audit record's hash and link, and that the stored events and messages are
    the ones the chain records; exit 1 naming the first bad record or row.

    A store whose oldest records were archived is checked from its last anchor; with
    --archive, the archive files too, from record 1, as one chain with the store's records.
    The store is opened read-only. Set BATON_AUDIT_KEY to the key the store was written with.
    """
    from rich.console import Console
    from rich.text import Text

    from baton.backends.audit import parse_anchor

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    url = store or DEFAULT_STORE_URL
    files = list(archives or [])
    try:
        try:
            pinned = None if anchor is None else parse_anchor(anchor)
        except ValueError as exc:
            raise CLIError(f"--anchor: {exc}", code=2) from None
        if archive_only and not files:
            raise CLIError("--archive-only needs at least one --archive FILE", code=2)
        for path in files:
            if not path.is_file():
                raise CLIError(f"--archive {path}: no such file", code=2)
        anchors: list[Anchor] = []
        if archive_only:
            result = _archives_alone(files, pinned)
        else:
            result, anchors = _with_trail(url, lambda trail: _verified(trail, files, pinned))
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    if not result.ok:
        if result.table is not None and result.row is not None:
            where = f"{result.table} row {result.row}"
        else:  # a record, or a row it vouches for that is gone (the problem names its id)
            where = f"record {result.first_bad_seq}"
        what = f"{where} {result.tamper}: " if result.tamper else f"{where}: "
        err.print(
            Text.assemble(
                ("chain broken: " if result.tamper else "not verified: ", "bold red"),
                f"{what}{result.problem} ",
                (f"({result.checked} records checked)", "dim"),
            ),
            soft_wrap=True,
        )
        raise typer.Exit(1)
    if archive_only:
        _print_archives(out, files, result)
        return
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
    _print_archived(out, anchors, files, result)
    if result.events is not None and result.messages is None:
        out.print(
            Text.assemble(
                ("note: ", "bold yellow"),
                "this store predates message auditing (schema version 3 or older): its "
                "messages were not checked; open it read-write once (on a copy) to chain them",
            ),
            soft_wrap=True,
        )


async def _verified(
    trail: AuditTrail, files: list[Path], pinned: tuple[int, str] | None
) -> tuple[VerifyResult, list[Anchor]]:
    """The store's verification, joined with its archives' when `files` are given."""
    from baton.backends.archive import Archiving, joined, verify_archives

    anchors = list(await trail.audit_anchors()) if isinstance(trail, Archiving) else []
    last = anchors[-1].seq if anchors else 0
    in_files = files and pinned is not None and pinned[0] <= last
    store = await trail.verify_audit(None if in_files else pinned)
    if not files:
        return store, anchors
    key = getattr(trail, "audit_key", None)
    try:
        found = verify_archives(files, anchors, key=key, anchor=pinned if in_files else None)
    except BatonError as exc:
        raise CLIError(str(exc), code=2) from None
    return joined(found, store, anchors), anchors


def _archives_alone(files: list[Path], pinned: tuple[int, str] | None) -> VerifyResult:
    from baton.backends.archive import verify_archives
    from baton.backends.audit import resolve_key

    try:
        return verify_archives(files, key=resolve_key(), anchor=pinned)
    except BatonError as exc:
        raise CLIError(str(exc), code=2) from None


def _print_archives(out: Any, files: list[Path], result: VerifyResult) -> None:
    from rich.text import Text

    from baton.backends.archive import file_sha256

    start = result.head_seq - result.checked + 1
    out.print(
        Text.assemble(
            ("archive intact: ", "bold green"),
            f"records {start} to {result.head_seq} form one chain",
        ),
        soft_wrap=True,
    )
    out.print(Text.assemble(("head: ", "dim"), result.anchor), soft_wrap=True)
    for path in files:
        out.print(
            Text.assemble(("sha256: ", "dim"), f"{file_sha256(path)}  {path}"), soft_wrap=True
        )
    out.print(
        Text.assemble(
            ("note: ", "bold yellow"),
            "compare the head and sha256 with the store's anchor (verify with the store to do "
            "so): on its own an archive proves only that it was not edited inside",
        ),
        soft_wrap=True,
    )


def _print_archived(
    out: Any, anchors: list[Anchor], files: list[Path], result: VerifyResult
) -> None:
    from rich.text import Text

    if not anchors:
        return
    last = anchors[-1]
    if files:
        said = (
            f"records {result.start_seq + 1} to {last.seq} verified in {len(files)} archive "
            "file(s), joined to the store's chain"
        )
        if result.start_seq:
            said += f"; records 1 to {result.start_seq} were not given (earlier archives)"
    else:
        said = (
            f"records 1 to {last.seq} are archived ({len(anchors)} archive(s)); the store's "
            "chain continues from the last anchor: give --archive FILE for each to verify them"
        )
    out.print(Text.assemble(("archived: ", "dim"), said), soft_wrap=True)


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
