"""Rendering a session's stored events as a hop-by-hop trace (one table per run)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from baton.core.events import (
    AgentStarted,
    Escalated,
    Event,
    GuardTripped,
    Handoff,
    HandoffRefused,
    ModelCalled,
    RouteDecided,
    RunFinished,
    RunStarted,
    ToolCalled,
)
from baton.core.messages import Usage
from baton.observe.console import agent_style, clip, fmt_ms, state_keys, total_usage

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text


def group_runs(events: Sequence[Event]) -> list[list[Event]]:
    """The events split by run, runs in the order they first appear."""
    runs: dict[str, list[Event]] = {}
    for e in events:
        runs.setdefault(e.run_id, []).append(e)
    return list(runs.values())


def step_row(event: Event) -> tuple[str, str, str, str, str, str] | None:
    """(agent, step, detail, keys, tokens, ms) for one event, or None if it is no step."""
    agent = event.agent or "-"
    if isinstance(event, RouteDecided):
        return ("-", "route", f"to {event.target} ({event.tier})", "", "", "")
    if isinstance(event, AgentStarted):
        return (agent, "takes the baton", clip(event.reason, 60), "", "", "")
    if isinstance(event, ModelCalled):
        step = "model call (re-ask)" if event.reask else "model call"
        if event.error:
            detail = f"error: {clip(event.error, 80)}"
        elif event.tool_calls:
            detail = "requests " + ", ".join(event.tool_calls)
        else:
            detail = "reply: " + clip(event.text, 60)
        tokens = f"{event.usage.input_tokens}/{event.usage.output_tokens}"
        return (agent, step, detail, "", tokens, fmt_ms(event.latency_ms))
    if isinstance(event, ToolCalled):
        detail = event.tool + (" ok" if event.ok else f" error: {clip(event.error, 80)}")
        if event.truncated:
            detail += " (result truncated)"
        return (agent, "tool call", detail, "", "", fmt_ms(event.latency_ms))
    if isinstance(event, Handoff):
        p = event.payload
        detail = f"{p.source} -> {p.target}: {clip(p.reason, 80)}"
        if p.priority != "normal":
            detail += f" [{p.priority}]"
        return (agent, "hand-off", detail, state_keys(p.state), "", "")
    if isinstance(event, HandoffRefused):
        return (agent, "refusal", f"-> {event.target}: {clip(event.reason, 100)}", "", "", "")
    if isinstance(event, GuardTripped):
        return (agent, "guard", f"{event.guard}: {clip(event.detail, 100)}", "", "", "")
    if isinstance(event, Escalated):
        detail = f"to {event.to}: {clip('; '.join(event.card.reasons), 100)}"
        return (agent, "escalation", detail, state_keys(event.card.state), "", "")
    return None


def run_summary(run: Sequence[Event]) -> Text:
    """The summary line of one run: path, status, total tokens, latency."""
    from rich.text import Text

    finished = next((e for e in reversed(run) if isinstance(e, RunFinished)), None)
    if finished is not None:
        path, status = finished.path, finished.status
        usage = total_usage(finished.usage)
        latency: float | None = finished.latency_ms
    else:  # an unfinished run: rebuild what we can from the steps
        path, status, latency, usage = [], "unfinished", None, Usage()
        for e in run:
            if isinstance(e, AgentStarted) and e.agent and (not path or path[-1] != e.agent):
                path.append(e.agent)
            if isinstance(e, ModelCalled):
                usage.add(e.usage)
    style = {"completed": "bold green", "failed": "bold red"}.get(status, "bold yellow")
    t = Text()
    t.append("path: ", style="dim")
    t.append(" -> ".join(path) or "-", style="bold")
    t.append("  status: ", style="dim")
    t.append(status, style=style)
    t.append("  tokens: ", style="dim")
    t.append(f"{usage.total_tokens} ({usage.input_tokens} in / {usage.output_tokens} out)")
    if latency is not None:
        t.append("  latency: ", style="dim")
        t.append(fmt_ms(latency))
    if finished is not None and finished.error:
        t.append(f"\nerror: {clip(finished.error, 200)}", style="red")
    return t


def run_table(run: Sequence[Event]) -> Table:
    """One row per step of a run."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("#", justify="right", style="dim")
    table.add_column("agent", no_wrap=True)
    table.add_column("step", no_wrap=True)
    table.add_column("detail", overflow="fold")
    table.add_column("state keys", overflow="fold")
    table.add_column("tokens in/out", justify="right", no_wrap=True)
    table.add_column("ms", justify="right", no_wrap=True)
    n = 0
    for event in run:
        row = step_row(event)
        if row is None:
            continue
        n += 1
        agent, step, detail, keys, tokens, ms = row
        step_style = {
            "hand-off": "bold",
            "refusal": "bold red",
            "guard": "bold yellow",
            "escalation": "bold red",
        }.get(step, "")
        table.add_row(
            str(n),
            Text(agent, style=agent_style(agent) if agent != "-" else "dim"),
            Text(step, style=step_style),
            Text(detail),
            Text(keys, style="bold"),
            tokens,
            ms.removesuffix(" ms") if ms.endswith(" ms") else ms,
        )
    return table


def render_trace(console: Console, events: Sequence[Event]) -> None:
    """Print every run of the events: a header, the step table and a summary line."""
    from rich.text import Text

    runs = group_runs(events)
    session = events[0].session_id if events else "-"
    grand = Usage()
    for i, run in enumerate(runs, 1):
        first = run[0]
        started = next((e for e in run if isinstance(e, RunStarted)), None)
        console.rule(Text(f"run {i}/{len(runs)} · {first.run_id} · trace {first.trace_id}"))
        if started is not None:
            head = Text()
            head.append("user: ", style="bold")
            head.append(clip(started.message, 200))
            if started.user_id:
                head.append(f"  (user {started.user_id})", style="dim")
            console.print(head, soft_wrap=True)
        console.print(run_table(run))
        finished = next((e for e in reversed(run) if isinstance(e, RunFinished)), None)
        if finished is not None:
            grand.add(total_usage(finished.usage))
            if finished.output:
                reply = Text()
                reply.append("reply: ", style="bold")
                reply.append(clip(finished.output, 300))
                console.print(reply, soft_wrap=True)
        console.print(run_summary(run), soft_wrap=True)
    console.print()
    console.print(
        Text.assemble(
            ("session ", "dim"),
            (session, "bold"),
            (f": {len(runs)} run{'s' if len(runs) != 1 else ''}, ", "dim"),
            f"{grand.total_tokens} tokens ({grand.input_tokens} in / {grand.output_tokens} out)",
        ),
        soft_wrap=True,
    )
