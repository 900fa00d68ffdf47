"""`baton store gc`: delete what a retention policy does not keep, with sizes before and after.

The policy and what gc never deletes are `baton.backends.retention`'s; docs/deploy.md has the
rules ("Retention").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from baton.backends.retention import KINDS, Retaining, Retention, parse_age
from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail
from baton.cli.driver import require_store, with_store
from baton.cli.options import STORE_HELP
from baton.core.errors import BatonError
from baton.observe.terminal import safe

if TYPE_CHECKING:
    from baton.backends.base import Store
    from baton.backends.retention import GcReport

store_app = typer.Typer(
    help="Look after a store: delete what a retention policy does not keep.",
    no_args_is_help=True,
)
"""The `baton store` command group."""


@store_app.command("gc")
def gc(
    store: Annotated[str | None, typer.Argument(metavar="STORE_URL", help=STORE_HELP)] = None,
    max_age: Annotated[
        str | None,
        typer.Option(
            "--max-age",
            metavar="AGE",
            help="Keep what is younger (90s, 30m, 12h, 30d, 2w); also deletes cancelled and "
            "orphaned running checkpoints not saved for that long.",
        ),
    ] = None,
    keep_messages: Annotated[
        int | None,
        typer.Option("--keep-messages", metavar="N", min=0, help="Keep the newest N per session."),
    ] = None,
    keep_events: Annotated[
        int | None,
        typer.Option("--keep-events", metavar="N", min=0, help="Keep the newest N per session."),
    ] = None,
    keep_snapshots: Annotated[
        int | None,
        typer.Option(
            "--keep-snapshots", metavar="N", min=1, help="Keep the newest N per graph thread."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be deleted; delete nothing.")
    ] = False,
) -> None:
    """Delete what the policy does not keep: messages and events per session, graph
    snapshots per thread, stale checkpoints. A record is kept while any rule given keeps it.
    Never deleted: session records, checkpoints waiting for a person and the messages and
    events of sessions holding a checkpoint, and the audit chain (gc records what it deleted
    in it, so `baton audit verify` still verifies; `baton audit archive` trims the chain)."""
    from rich.console import Console

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    url = store or DEFAULT_STORE_URL
    rules = (max_age, keep_messages, keep_events, keep_snapshots)
    try:
        if all(rule is None for rule in rules):
            raise CLIError(
                "give a policy: at least one of --max-age, --keep-messages, --keep-events, "
                "--keep-snapshots (gc without one would keep everything)",
                code=2,
            )
        try:
            age = None if max_age is None else parse_age(max_age)
        except BatonError as exc:
            raise CLIError(f"--max-age: {exc}", code=2) from None
        policy = Retention(age, keep_messages, keep_events, keep_snapshots)
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    try:
        require_store(url)
        report = _gc(url, policy, dry_run)
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    out.print(report_table(report))
    out.print(safe(_summary(report)), soft_wrap=True)


def _gc(url: str, policy: Retention, dry_run: bool) -> GcReport:
    async def work(st: Store) -> GcReport:
        if not isinstance(st, Retaining):
            raise CLIError(f"the store {url} has no retention (no gc method)", code=1)
        return await st.gc(policy, dry_run=dry_run)

    try:
        found: Any = with_store(url, work)
    except BatonError as exc:
        raise CLIError(f"cannot collect the garbage of {url}: {exc}", code=1) from None
    if found is None:
        raise CLIError(f"no store at {url}", code=1)
    report: GcReport = found
    return report


def report_table(report: GcReport) -> Any:
    """A rich table of what gc deleted (or would delete) per kind."""
    from rich import box
    from rich.table import Table

    verb = "would delete" if report.dry_run else "deleted"
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("kind", no_wrap=True)
    table.add_column(verb, justify="right", no_wrap=True)
    for kind in KINDS:
        table.add_row(kind, f"{report.deleted.get(kind, 0):,}")
    return table


def _summary(report: GcReport) -> str:
    lines = [f"{report.sessions:,} sessions examined"]
    if report.held:
        lines.append(
            f"{report.held:,} kept their messages and events: they hold a checkpoint "
            "(a resumed run reads them back)"
        )
    if report.waiting:
        lines.append(
            f"{report.waiting:,} checkpoints wait for a person and were kept (approve, answer "
            "or discard them: `baton approvals`, `baton resume SESSION --discard`)"
        )
    before, after = report.bytes_before, report.bytes_after
    if before is not None and after is not None:
        unit = "" if report.measured.startswith("records") else " bytes"
        lines.append(f"size: {before:,}{unit} before, {after:,}{unit} after ({report.measured})")
    if report.dry_run:
        lines.append("dry run: nothing was deleted")
    else:
        lines.append(
            "the audit chain stays whole (gc recorded what it deleted in it): move its old "
            "records to a file with `baton audit archive STORE_URL --to FILE --before AGE`"
        )
    return "\n".join(lines)
