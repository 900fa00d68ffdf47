"""A replay report for people: one line per run, and the first divergence side by side with
the steps before it (rich). Whatever a user, model or tool wrote is shown as literal text."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from baton.observe.terminal import safe, safe_clip
from baton.replay.run import Divergence, ReplayReport
from baton.replay.steps import Step

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

CONTEXT = 3
"""Equal steps shown before the divergence."""


def _cell(step: Step | None, width: int = 400) -> Text:
    from rich.text import Text

    if step is None:
        return Text("(nothing: the run ended)", style="dim italic")
    t = Text()
    t.append(safe(step.label(), "bold"))
    t.append(f"  hop {step.hop}\n", style="dim")
    body = json.dumps(step.data, ensure_ascii=False, sort_keys=True, default=str)
    t.append(safe_clip(body, width))
    return t


def divergence_table(d: Divergence) -> Table:
    """The steps around the divergence: recorded left, replayed right."""
    from rich.table import Table

    table = Table(title=f"run {d.run_id}: first divergence at step {d.index + 1}", expand=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("recorded", ratio=1)
    table.add_column("replayed", ratio=1)
    for i in range(max(0, d.index - CONTEXT), d.index):
        table.add_row(str(i + 1), _cell(d.recorded[i], 120), "[dim](same)[/dim]")
    table.add_row(str(d.index + 1), _cell(d.expected), _cell(d.got), style="red")
    return table


def print_report(console: Console, report: ReplayReport) -> None:
    """Each run's outcome, then the first divergence (if any) side by side."""
    from rich.text import Text

    mode = "live model, recorded tools" if report.live_model else "recorded model and tools"
    console.print(Text.assemble(("replay ", "bold"), safe(report.session_id), f"  ({mode})"))
    for r in report.runs:
        mark = ("diverged", "bold red") if r.divergence else ("same", "green")
        console.print(
            Text.assemble(
                "  ",
                (f"{mark[0]:<9}", mark[1]),
                safe(r.run.run_id),
                f"  {r.compared} steps, ",
                safe(r.status),
                "  ",
                safe_clip(r.run.message, 60),
            )
        )
    if report.stopped is not None:
        console.print(Text.assemble(("stopped: ", "yellow"), safe(report.stopped)))
    d = report.divergence
    if d is not None:
        console.print(divergence_table(d))
    elif report.end is not None:
        console.print(Text.assemble(("end state differs: ", "bold red"), safe(report.end)))
    else:
        console.print(Text("every step as recorded", style="bold green"))
