"""`baton bench tau2`: replay τ²-bench tasks through Baton teams and grade the end states."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from baton.cli.common import CLIError, fail

if TYPE_CHECKING:
    from rich.console import Console, JustifyMethod

    from baton.bench.tau2.bench import BenchSummary
    from baton.bench.tau2.grading import DomainSummary
    from baton.models.base import Model


class Tau2Domain(str, Enum):
    """Domains `baton bench tau2` can run."""

    retail = "retail"
    airline = "airline"


class Tau2Split(str, Enum):
    """Task splits of the τ² workload."""

    base = "base"
    train = "train"
    test = "test"


def _mark(ok: bool) -> str:
    return "[green]yes[/]" if ok else "[red]no[/]"


def print_domain(console: Console, summary: DomainSummary, model: str | None = None) -> None:
    """One row per task: end state vs oracle, writes, escalations, info, errors, verdict."""
    from rich import box
    from rich.table import Table

    title = f"τ² {summary.domain} · split {summary.split} · {summary.total} tasks"
    table = Table(
        title=title + (f" · model {model}" if model else " · gold-action replay"),
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("task", "right"),
        ("actions", "right"),
        ("writes", "right"),
        ("db", "center"),
        ("log", "center"),
        ("esc", "right"),
        ("info", "center"),
        ("errors", "right"),
        ("turns", "right"),
        ("result", "left"),
    )
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for r in summary.results:
        ok = r.reward if model else r.passed
        verdict = ("reward" if model else "pass") if ok else ("no reward" if model else "FAIL")
        table.add_row(
            r.task_id,
            str(r.actions),
            str(r.writes),
            _mark(r.db_match),
            _mark(r.writes_match),
            str(r.escalations) if r.escalations else "-",
            _mark(r.communicated),
            f"{r.errors}/{r.gold_errors}" if r.errors or r.gold_errors else "0",
            str(r.turns),
            (f"[green]{verdict}[/]" if ok else f"[red]{verdict}[/]")
            + "".join(f" · {p}" for p in r.problems),
        )
    console.print(table)
    console.print(
        "db: end state equals the oracle's · log: write calls equal the gold's · esc: runs "
        "that ended escalated · info: communicate_info told · errors: tool errors / gold "
        "actions that fail · turns: user messages",
        style="dim",
    )


def print_summary(console: Console, summary: BenchSummary) -> None:
    """Every domain's table, then one totals line per domain and overall."""
    for d in summary.domains:
        print_domain(console, d, summary.model)
    for d in summary.domains:
        verdict = (
            f"{d.rewarded}/{d.total} rewarded (pass^1 {d.rewarded / max(d.total, 1):.3f})"
            if summary.model
            else f"{d.passed}/{d.total} passed"
        )
        console.print(
            f"[bold]{d.domain}[/]: {d.db_matches}/{d.total} end states equal to the oracle · "
            f"{verdict} · {d.escalated} escalated · {d.errors} tool errors · {d.seconds:.1f} s"
        )
    if summary.model:
        console.print(
            f"total: pass^1 {summary.pass_1:.3f} ({summary.passed}/{summary.total} rewarded, "
            f"model {summary.model}, NL assertions not judged) in {summary.seconds:.1f} s",
            style="bold",
        )
        return
    console.print(
        f"total: {summary.passed}/{summary.total} passed "
        f"({summary.db_matches}/{summary.total} end states equal) in {summary.seconds:.1f} s",
        style="bold green" if summary.ok else "bold red",
    )


def _load(model: str, console: Console) -> Model:
    """The model named by `--model`, loaded up front when it is the embedded one."""
    from baton.cli.demo import load_model
    from baton.core.errors import BatonError
    from baton.models.registry import resolve_model

    try:
        brain = resolve_model(model)
    except BatonError as exc:
        raise CLIError(str(exc)) from None
    load_model(brain, console)
    return brain


def bench_tau2(
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="The τ²-bench workload folder (default: <repo>/../shared/workloads/tau2).",
        ),
    ] = None,
    domain: Annotated[
        Tau2Domain | None, typer.Option("--domain", help="retail or airline (default: both).")
    ] = None,
    split: Annotated[
        Tau2Split, typer.Option("--split", help="base (all tasks), train or test.")
    ] = Tau2Split.base,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Run the team on a real model (local, openai:<name>) that also plays a "
            "simulated user per task, and report pass^1. Without it, the gold actions are "
            "replayed (the acceptance check).",
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only the first N tasks per domain.")
    ] = None,
) -> None:
    """Run τ²-bench tasks through Baton teams; compare each end state with the oracle's."""
    from rich.console import Console

    from baton.bench.tau2.bench import run_bench
    from baton.bench.tau2.data import DOMAINS, WorkloadMissing, load_domain

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    name = domain.value if domain is not None else None
    try:
        for d in [name] if name else DOMAINS:
            load_domain(d, data)  # a missing workload fails before any model loads
        brain = _load(model, out) if model is not None else None
        with out.status(f"running τ² tasks {'on ' + model if model else '(replay)'} ..."):
            summary = run_bench(data, name, split.value, brain, limit=limit)
    except (WorkloadMissing, ValueError) as exc:
        fail(err, CLIError(str(exc)))
        raise typer.Exit(2) from None
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    print_summary(out, summary)
    if not summary.ok and summary.model is None:
        raise typer.Exit(1)
