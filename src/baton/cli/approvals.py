"""`baton approvals list|approve|reject`: the calls runs wait on, and a person's decision."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Sequence
from typing import Annotated, Any

import typer

from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail
from baton.cli.driver import run_and_report, with_store
from baton.cli.options import QuietOption, StoreOption, TeamOption, VerboseOption
from baton.cli.output import ago
from baton.core.approval import ApprovalCard
from baton.core.errors import BatonError
from baton.observe.console import ConsoleSink
from baton.observe.terminal import safe, safe_clip
from baton.runtime.result import RunResult
from baton.topologies.team import Team

approvals_app = typer.Typer(
    help="Approvals: list the calls runs wait on; approve or reject one (the run continues).",
    no_args_is_help=True,
)
"""The `baton approvals` command group."""

SessionArg = Annotated[str, typer.Argument(help="The session whose run waits.")]
ApprovalArg = Annotated[str, typer.Argument(help="The approval id (see `baton approvals list`).")]
ByOption = Annotated[str, typer.Option("--by", help="Who decides (recorded on the card).")]
RoleOption = Annotated[
    str | None,
    typer.Option("--role", help="The role you decide in, when the card names roles."),
]


def _consoles() -> tuple[Any, Any]:
    from rich.console import Console

    return Console(highlight=False), Console(stderr=True, highlight=False)


@approvals_app.command("list")
def list_approvals(store: StoreOption = None) -> None:
    """Every approval a run of the store waits for, oldest first."""
    out, err = _consoles()
    url = store or DEFAULT_STORE_URL
    try:
        try:
            checkpoints = with_store(url, lambda st: st.list_checkpoints("awaiting_approval"))
        except BatonError as exc:
            raise CLIError(f"cannot read the store {url}: {exc}", code=1) from None
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    cards = [
        ApprovalCard.model_validate(cp.meta["approval"])
        for cp in checkpoints or []
        if "approval" in cp.meta
    ]
    if not cards:
        out.print(safe(f"no approvals waiting in {url}"), soft_wrap=True)
        return
    out.print(approval_table(cards))


def approval_table(cards: Sequence[ApprovalCard]) -> Any:
    """A rich table of approval cards (arguments shortened); every cell is literal text."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in ("approval", "session", "agent", "tool/target", "arguments", "reason"):
        table.add_column(name, no_wrap=name not in ("arguments", "reason"))
    for name in ("roles", "signed", "age", "expired?"):
        table.add_column(name, no_wrap=True)
    for card in cards:
        what = f"tool {card.tool}" if card.kind == "tool" else f"hand-off -> {card.target}"
        signers = [a.by for a in card.approvals if a.approved]
        signed = f"{len(signers)}/{card.needed}" + (f" ({', '.join(signers)})" if signers else "")
        args = json.dumps(card.arguments, ensure_ascii=False, default=str)
        table.add_row(
            safe(card.id),
            safe(card.session_id),
            safe(card.agent),
            safe(what),
            safe_clip(args, 48),
            safe_clip(card.reason, 60),
            safe(", ".join(card.required_roles) or "anyone"),
            safe(signed),
            ago(card.requested_at),
            Text("yes", style="bold red") if card.expired() else Text("no"),
        )
    return table


def _decide(
    target: str,
    url: str,
    quiet: bool,
    verbose: bool,
    decision: Callable[[Team], Coroutine[Any, Any, RunResult]],
) -> None:
    """Run `decision(team)` (approve or reject) and print the continued run's result. The
    decision is recorded as unauthenticated: the command line takes `--by` on trust."""
    out, err = _consoles()
    out.print(
        "[dim]recorded as unauthenticated: the command line cannot verify --by; decide through "
        "`baton serve --auth` for decisions bound to a token's user[/dim]"
    )
    live = None if quiet else ConsoleSink(out, verbose=verbose)
    run_and_report(out, err, target, url, decision, live=live, existing=True)


@approvals_app.command("approve")
def approve(
    session: SessionArg,
    approval_id: ApprovalArg,
    by: ByOption,
    team: TeamOption,
    role: RoleOption = None,
    store: StoreOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Sign the call off; the run continues exactly where it stopped."""

    async def decision(t: Team) -> RunResult:
        return await t.approve(session, approval_id, by=by, role=role)

    _decide(team, store or DEFAULT_STORE_URL, quiet, verbose, decision)


@approvals_app.command("reject")
def reject(
    session: SessionArg,
    approval_id: ApprovalArg,
    by: ByOption,
    team: TeamOption,
    reason: Annotated[
        str, typer.Option("--reason", help="Why; the agent reads it and tells the user.")
    ] = "",
    role: RoleOption = None,
    store: StoreOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Refuse the call (it never runs); the agent reads the rejection and tells the user."""

    async def decision(t: Team) -> RunResult:
        return await t.reject(session, approval_id, by=by, reason=reason, role=role)

    _decide(team, store or DEFAULT_STORE_URL, quiet, verbose, decision)
