"""`baton route` and `baton bench routing`: see each tier's verdict; measure a router."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.cli.common import CLIError

if TYPE_CHECKING:
    from rich.console import Console

    from baton.routing.base import RouteDecision


def router_of(team: Any) -> Any:
    """The team's router, or a clear error when its entry is a plain agent."""
    from baton.routing.router import Router

    entry = getattr(team, "entry", None)
    if not isinstance(entry, Router):
        raise CLIError(
            f"this team has no router: its entry is the agent {entry!r}; build it with "
            "Team(agents, entry=Router([...]))"
        )
    return entry


def print_decision(console: Console, text: str, decision: RouteDecision) -> None:
    """A table of every tier's verdict, then the decision."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"routing: {text}", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("tier", style="bold")
    table.add_column("verdict")
    table.add_column("score", justify="right")
    table.add_column("candidates", overflow="fold")
    table.add_column("ms", justify="right")
    table.add_column("detail", overflow="fold", style="dim")
    for v in decision.verdicts:
        table.add_row(
            v.tier,
            Text(v.target or "abstains", style="green" if v.target else "dim"),
            f"{v.score:.3f}" if v.score is not None else "",
            ", ".join(f"{n} {s:.2f}" for n, s in v.candidates[:3]),
            f"{v.latency_ms:.1f}",
            v.detail,
        )
    console.print(table)
    console.print(
        Text.assemble(
            ("decision: ", "bold"),
            (decision.target, "bold green"),
            f"  (tier {decision.tier}, {decision.latency_ms:.1f} ms)",
        )
    )


def print_report(console: Console, title: str, report: Any) -> None:
    """The metrics of `router.evaluate` as a table."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in report.as_rows():
        table.add_row(key, value)
    console.print(table)
