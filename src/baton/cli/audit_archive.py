"""`baton audit archive`: move the audit chain's oldest records to a file, keep an anchor.

The rules, what the anchor proves and what it does not are `baton.backends.archive`'s;
docs/deploy.md has them ("Retention").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from baton.backends.retention import parse_age
from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail
from baton.cli.driver import require_store, with_store
from baton.cli.options import STORE_HELP
from baton.core.errors import BatonError
from baton.observe.terminal import safe

if TYPE_CHECKING:
    from baton.backends.archive import ArchiveReport
    from baton.backends.base import Store


def archive_command(
    store: Annotated[str | None, typer.Argument(metavar="STORE_URL", help=STORE_HELP)] = None,
    to: Annotated[
        Path | None,
        typer.Option(
            "--to",
            metavar="FILE",
            help="The new archive file (JSONL, one record a line); never overwritten.",
        ),
    ] = None,
    before: Annotated[
        str | None,
        typer.Option(
            "--before",
            metavar="AGE",
            help="Archive the records older than this (90s, 30m, 12h, 90d, 2w).",
        ),
    ] = None,
    keep: Annotated[
        int | None,
        typer.Option("--keep", metavar="N", min=0, help="Keep the newest N records in the store."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be archived; write nothing.")
    ] = False,
) -> None:
    """Write the audit chain's oldest records to a new file, then delete them from the store
    and keep an anchor (the last archived record's position and hash, and the file's sha256)
    in one transaction. The cut never passes a record that vouches for an event or message
    still stored: run `baton store gc` first. Verify later with `baton audit verify --archive
    FILE` (every archive of the store, oldest first)."""
    from rich.console import Console

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    url = store or DEFAULT_STORE_URL
    try:
        path, age = _checked(to, before, keep)
        require_store(url)
        report = _archive(url, path, age, keep, dry_run)
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    out.print(safe(summary(report), newlines=True), soft_wrap=True)


def _checked(to: Path | None, before: str | None, keep: int | None) -> tuple[Path, float | None]:
    """The archive path and age, or `CLIError` (exit 2) naming the flag at fault."""
    if to is None:
        raise CLIError("give --to FILE: the new file the archived records are written to", code=2)
    if before is None and keep is None:
        raise CLIError(
            "give --before AGE and/or --keep N: which records to archive (without a rule "
            "nothing would be)",
            code=2,
        )
    try:
        age = None if before is None else parse_age(before)
    except BatonError as exc:
        raise CLIError(f"--before: {exc}", code=2) from None
    if to.exists():
        raise CLIError(
            f"--to {to}: the file exists; an audit archive is never overwritten, give a new name",
            code=2,
        )
    if not to.parent.is_dir():
        raise CLIError(f"--to {to}: the directory {to.parent} does not exist", code=2)
    return to, age


def _archive(
    url: str, path: Path, age: float | None, keep: int | None, dry_run: bool
) -> ArchiveReport:
    from baton.backends.archive import ArchiveFileError, Archiving

    async def work(st: Store) -> ArchiveReport:
        if not isinstance(st, Archiving):
            raise CLIError(
                f"the store {url} keeps no audit chain to archive (SQLite, PostgreSQL and "
                "Redis stores do)",
                code=1,
            )
        return await st.archive_audit(path, max_age_s=age, keep=keep, dry_run=dry_run)

    try:
        found: Any = with_store(url, work)
    except ArchiveFileError as exc:
        raise CLIError(f"--to {path}: {exc}", code=2) from None
    except BatonError as exc:
        raise CLIError(f"cannot archive the audit chain of {url}: {exc}", code=1) from None
    if found is None:
        raise CLIError(f"no store at {url}", code=1)
    report: ArchiveReport = found
    return report


def summary(report: ArchiveReport) -> str:
    """What an archive did (or would do), in lines."""
    verb = "would archive" if report.dry_run else "archived"
    if not report.archived:
        lines = [
            "nothing to archive: no record is past the rules, or the oldest one kept "
            "vouches for a row still stored"
        ]
    else:
        lines = [
            f"{verb} {report.archived:,} records ({report.first_seq} to {report.last_seq})"
            + ("" if report.dry_run else f" to {report.path}"),
            f"anchor: {report.anchor} (the store's chain now starts after record {report.last_seq})"
            if not report.dry_run
            else f"anchor would be: {report.anchor}",
        ]
        if report.sha256:
            lines.append(f"sha256 of the archive: {report.sha256}")
    lines.append(f"records kept in the store: {report.kept:,}")
    if report.held_at is not None:
        lines.append(
            f"record {report.held_at} vouches for an event or message still stored: the cut "
            "stops before it (`baton store gc` deletes old rows; rows of a session holding a "
            "checkpoint stay)"
        )
    before, after = report.bytes_before, report.bytes_after
    if before is not None and after is not None:
        lines.append(f"size: {before:,} bytes before, {after:,} bytes after ({report.measured})")
    if report.dry_run:
        lines.append("dry run: nothing was written or deleted")
    return "\n".join(lines)
