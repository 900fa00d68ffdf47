"""`baton metrics`: the Prometheus metrics of the runs kept in a store, as a table or as text."""

from __future__ import annotations

import asyncio
import math
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from baton.backends.base import Store
from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail, open_cli_store, sqlite_file
from baton.core.errors import BatonError
from baton.core.events import Event

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from rich.table import Table


class MetricsFormat(str, Enum):
    """Output formats of `baton metrics`."""

    table = "table"
    prometheus = "prometheus"


async def _load(store: Store, session: str | None) -> tuple[list[Event], list[str]]:
    try:
        events = await store.get_events(session_id=session)
        recent = (
            [s.session_id for s in await store.list_sessions(limit=5)]
            if not events and session
            else []
        )
        return events, recent
    finally:
        await store.close()


def _value(v: float) -> str:
    if math.isnan(v):
        return "-"
    return str(int(v)) if v == int(v) else f"{v:.4g}"


def metrics_table(registry: CollectorRegistry) -> Table:
    """One row per metric series: counters and gauges with their value, histograms with their
    count, sum and mean (bucket counts are in the Prometheus format)."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("metric", no_wrap=True)
    table.add_column("labels", no_wrap=True)
    table.add_column("value / count", justify="right", no_wrap=True)
    table.add_column("sum", justify="right", no_wrap=True)
    table.add_column("mean", justify="right", no_wrap=True)
    for family in registry.collect():
        if family.type == "histogram":
            series: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
            for s in family.samples:
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                series.setdefault(labels, {})[s.name.removeprefix(family.name)] = s.value
            for labels, parts in series.items():
                count, total = parts.get("_count", 0.0), parts.get("_sum", 0.0)
                table.add_row(
                    family.name,
                    ", ".join(f"{k}={v}" for k, v in labels),
                    _value(count),
                    _value(total),
                    _value(total / count) if count else "-",
                )
            continue
        for s in family.samples:
            if s.name.endswith("_created"):
                continue  # creation timestamps of counters: no use in a table
            labels_text = ", ".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            table.add_row(s.name, labels_text, _value(s.value), "", "")
    return table


def metrics(
    store: Annotated[
        str | None,
        typer.Option(
            "--store", help=f"Store URL: sqlite:///path.db (default {DEFAULT_STORE_URL})."
        ),
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", "-s", help="Only this session's runs.")
    ] = None,
    format: Annotated[
        MetricsFormat,
        typer.Option("--format", "-f", help="table, or prometheus (the text exposition format)."),
    ] = MetricsFormat.table,
) -> None:
    """Hand-offs, efficiency, hops, tokens, latency, guard trips and routes of stored runs."""
    from rich.console import Console

    from baton.observe.metrics import metrics_from_events

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    url = store or DEFAULT_STORE_URL
    try:
        db = sqlite_file(url)
        if db is not None and not db.exists():
            raise CLIError(
                f"no store at {db}: run `baton run ...` first, or pass --store URL", code=1
            )
        st = open_cli_store(url)
        try:
            events, recent = asyncio.run(_load(st, session))
        except BatonError as exc:
            raise CLIError(f"cannot read the store {url}: {exc}", code=1) from None
        if not events:
            where = f"session {session!r}" if session else "the store"
            hint = f"; recent sessions: {', '.join(recent)}" if recent else ""
            raise CLIError(f"{where} has no events in {url}{hint}", code=1)
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    sink = metrics_from_events(events)
    if format is MetricsFormat.prometheus:
        typer.echo(sink.render(), nl=False)
        return
    runs = len({e.run_id for e in events})
    scope = f"session {session}" if session else f"{runs} run{'s' if runs != 1 else ''}"
    out.print(f"baton metrics · {url} · {scope}", style="bold", soft_wrap=True)
    out.print(metrics_table(sink.registry))
    efficiency = sink.efficiency
    out.print(
        "hand-off efficiency: "
        + ("- (no hand-offs)" if efficiency is None else f"{efficiency:.1%}")
        + "  (hand-offs whose receiver resolved the request / all hand-offs)",
        soft_wrap=True,
    )
