"""`baton route` and `baton bench routing`: see each tier's verdict; measure a router."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.cli.common import CLIError

if TYPE_CHECKING:
    from rich.console import Console

    from baton.routing.band import BandReport
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
            Text(
                v.target or (f"proposes {v.proposal}" if v.proposal else "abstains"),
                style="green" if v.target else "yellow" if v.proposal else "dim",
            ),
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


def print_band(console: Console, title: str, band: BandReport) -> None:
    """The ambiguous band with and without the judge, as a table."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    ins, unk = band.in_scope, band.unknown
    rows = [
        ("test queries", str(band.n_queries)),
        ("semantic tier alone: overall", f"{band.semantic.overall_accuracy:.3f}"),
        ("band (semantic abstains or proposes)", f"{band.n_band} ({band.share:.1%})"),
        ("band queries judged (random sample)", str(band.n_sample)),
        ("band accuracy without judge", f"{band.without_judge:.3f}"),
        ("band accuracy with judge", f"{band.with_judge:.3f} ({band.gain:+.3f})"),
        ("  in-scope without -> with", f"{ins[0]:.3f} -> {ins[1]:.3f} (n={ins[2]})"),
        ("  unknown without -> with", f"{unk[0]:.3f} -> {unk[1]:.3f} (n={unk[2]})"),
        ("judge answers", ", ".join(f"{k} {v}" for k, v in band.judge_answers.items())),
        ("judge latency p50", f"{band.judge_p50_ms:.0f} ms"),
        ("judge latency p99", f"{band.judge_p99_ms:.0f} ms"),
        ("judge latency mean", f"{band.judge_mean_ms:.0f} ms"),
        ("overall with judge (estimated)", f"{band.overall_estimate:.3f}"),
    ]
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def print_langs(console: Console, title: str, report: Any) -> None:
    """Accuracy per language (overall, in-scope, out-of-scope); nothing when the queries carry
    no language."""
    from rich import box
    from rich.table import Table

    if not report.by_lang:
        return
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("language")
    table.add_column("queries", justify="right")
    table.add_column("overall", justify="right")
    table.add_column("in-scope", justify="right")
    table.add_column("out-of-scope", justify="right")
    for lang, s in report.by_lang.items():
        table.add_row(
            lang,
            str(s.n),
            f"{s.overall:.3f}",
            f"{s.in_scope:.3f} ({s.n_in})" if s.n_in else "-",
            f"{s.out_of_scope:.3f} ({s.n_out})" if s.n_out else "-",
        )
    console.print(table)


def print_fit(console: Console, fitted: Any) -> None:
    """What `router.fit` chose (the fit report's summary), its warnings highlighted."""
    from rich.text import Text

    summary = getattr(fitted, "summary", None)
    if not callable(summary):
        return
    console.print(Text("fit on calibration:", style="bold"))
    for line in str(summary()).splitlines():
        warn = line.lstrip().startswith("warning:")
        console.print(Text(line, style="yellow" if warn else ""))
