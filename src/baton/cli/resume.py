"""`baton resume`: continue an unfinished run, or list the unfinished runs of a store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail
from baton.cli.driver import run_and_report, with_store
from baton.cli.options import QuietOption, StoreOption, VerboseOption
from baton.cli.output import ago, utc
from baton.core.errors import BatonError, NoRunToResume
from baton.observe.console import ConsoleSink
from baton.observe.terminal import safe

if TYPE_CHECKING:
    from baton.backends.base import Checkpoint, Store


def resume(
    session: Annotated[
        str | None, typer.Argument(help="The session whose unfinished run continues.")
    ] = None,
    team: Annotated[
        str | None,
        typer.Option(
            "--team",
            "-t",
            metavar="MODULE:ATTRIBUTE",
            help="The team the run belongs to, e.g. examples.customer_service:team.",
        ),
    ] = None,
    list_: Annotated[
        bool, typer.Option("--list", "-l", help="List the unfinished runs of the store.")
    ] = False,
    discard: Annotated[
        bool,
        typer.Option(
            "--discard",
            help="Drop the session's unfinished run without running more of it (what it "
            "committed stays); for a run whose team changed or whose checkpoint is damaged.",
        ),
    ] = False,
    store: StoreOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Continue a session's unfinished run (crashed, or waiting for approval), or --list them.

    A run waiting for approval stays waiting (decide it with `baton approvals`) unless its
    approval timed out, which escalates it.
    """
    from rich.console import Console

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    url = store or DEFAULT_STORE_URL
    try:
        if list_:
            if session is not None:
                raise CLIError("give either SESSION (with --team) or --list, not both")
            _list(out, url)
            return
        if discard:
            if session is None:
                raise CLIError("give the SESSION whose unfinished run to discard")
            dropped = _discard(url, session)
            out.print(
                safe(
                    f"discarded run {dropped.run_id} of session {session} "
                    f"({dropped.status}, checkpoint {dropped.seq})"
                ),
                soft_wrap=True,
            )
            return
        if session is None or team is None:
            raise CLIError(
                "give the SESSION to resume and its --team MODULE:ATTRIBUTE "
                "(or --list to see the unfinished runs)"
            )
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    sid = session
    live = None if quiet else ConsoleSink(out, verbose=verbose)
    run_and_report(out, err, team, url, lambda t: t.resume(sid), live=live, existing=True)


def _discard(url: str, session_id: str) -> Checkpoint:
    async def drop(st: Store) -> Checkpoint:
        cp = await st.get_checkpoint(session_id)
        if cp is None:
            raise NoRunToResume(f"session {session_id!r} has no unfinished run to discard")
        await st.delete_checkpoint(session_id, cp.run_id)
        return cp

    try:
        dropped = with_store(url, drop)
    except BatonError as exc:
        raise CLIError(str(exc), code=1) from None
    if dropped is None:
        raise CLIError(f"no store at {url}", code=1)
    return dropped


def _list(out: Any, url: str) -> None:
    try:
        checkpoints = with_store(url, lambda st: st.list_checkpoints())
    except BatonError as exc:
        raise CLIError(f"cannot read the store {url}: {exc}", code=1) from None
    if not checkpoints:
        out.print(safe(f"no unfinished runs in {url}"), soft_wrap=True)
        return
    out.print(checkpoint_table(checkpoints))


def checkpoint_table(checkpoints: Sequence[Checkpoint]) -> Any:
    """A rich table of unfinished runs: session, run, status, agent, approval, the key its
    state is sealed with (`cannot open` when this store cannot read it), updated.

    Every cell is literal text, control, bidi and invisible characters shown as escapes."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in ("session", "run", "status", "agent", "approval", "key", "updated (UTC)"):
        table.add_column(name, no_wrap=True)
    for cp in checkpoints:
        card = cp.meta.get("approval") or {}
        status_style = {"awaiting_approval": "yellow", "cancelled": "magenta"}.get(cp.status, "red")
        table.add_row(
            safe(cp.session_id),
            safe(cp.run_id),
            safe(cp.status, status_style),
            safe(str(cp.meta.get("agent") or "-")),
            safe(str(card.get("id") or "-")),
            _key_cell(cp),
            f"{utc(cp.updated_at)} ({ago(cp.updated_at)} ago)",
        )
    return table


def _key_cell(cp: Checkpoint) -> Any:
    """The checkpoint key its state is sealed with, `-` in clear, flagged when unreadable."""
    if cp.unreadable is not None:
        return safe(f"{cp.sealed_with or '?'} (cannot open)", "red")
    return safe(cp.sealed_with or "-")
