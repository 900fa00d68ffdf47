"""`baton trace`: a session's stored events as a tree, a timeline, a table, JSON or Mermaid.

`--why SLOT` answers where a state slot's value came from (see `baton.observe.causality`).

Sub-runs (a supervisor's workers, a pipeline's stages) nest under the `ask_<worker>` call that
delegated them in every view: indented in the tree, the timeline and the table, in the call's
`subruns` in the JSON tree, and as a question to the worker and its answer in Mermaid.

Whatever a user, a model or a tool wrote is printed through `baton.observe.terminal`: as literal
text (never rich markup), with control, bidi and invisible characters shown as escapes; the JSON
formats write those characters as JSON escapes (the same text to a parser).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from baton.backends.base import Store
from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail, open_cli_store, sqlite_file
from baton.core.errors import BatonError
from baton.core.events import Event
from baton.observe.causality import SlotWrite, slot_history, written_slots
from baton.observe.console import agent_style, fmt_ms
from baton.observe.terminal import json_safe, one_line, safe, safe_clip, safe_text
from baton.observe.tree import ANSWERED, FAILED, RunNode, Step, Turn, build_tree, walk

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text
    from rich.tree import Tree

STORE_HELP = f"Store URL: sqlite:///path.db or memory:// (default {DEFAULT_STORE_URL})."
"""Help text of the `--store` option."""

BAR_WIDTH = 40
"""Characters of the timeline's bar column."""


class TraceFormat(str, Enum):
    """Output formats of `baton trace`."""

    text = "text"
    json = "json"
    mermaid = "mermaid"


class TraceView(str, Enum):
    """What `baton trace` shows (text: tree and timeline unless one view is chosen)."""

    tree = "tree"
    timeline = "timeline"
    table = "table"


_STEP_STYLES = {
    "handoff": "bold",
    "refusal": "bold red",
    "guard": "bold yellow",
    "escalation": "bold red",
    "state": "dim",
    "task": "cyan",
}


# ---------------------------------------------------------------------------------- text
def _tokens(step: Step) -> str:
    if step.input_tokens is None and step.output_tokens is None:
        return ""
    return f"{step.input_tokens or 0}/{step.output_tokens or 0}"


def _usage_text(input_tokens: int, output_tokens: int) -> str:
    total = input_tokens + output_tokens
    return f"{total} ({input_tokens} in / {output_tokens} out)"


def _step_text(step: Step) -> Text:
    from rich.text import Text

    t = Text()
    t.append(step.label, style=_STEP_STYLES.get(step.kind, "") or ("red" if step.failed else ""))
    t.append("  ")
    t.append(safe(step.detail, "red" if step.failed and step.kind != "refusal" else ""))
    if step.keys and step.kind in ("handoff", "escalation"):
        t.append("  [state keys: ", style="bold")
        t.append(safe(", ".join(step.keys), "bold"))
        t.append("]", style="bold")
    extra = [x for x in (_tokens(step) and f"{_tokens(step)} tokens",) if x]
    if step.latency_ms is not None:
        extra.append(fmt_ms(step.latency_ms))
    if extra:
        t.append("  · " + " · ".join(extra), style="dim")
    return t


def _turn_text(turn: Turn) -> Text:
    from rich.text import Text

    t = Text()
    t.append(safe(turn.agent, agent_style(turn.agent)))
    t.append(f"  hop {turn.hop}", style="dim")
    if turn.reason:
        t.append("  ")
        t.append(safe_clip(turn.reason, 60))
    calls = sum(s.kind == "model_call" for s in turn.steps)
    tools = sum(s.kind == "tool_call" for s in turn.steps)
    # a conductor decides in code: it has no model, so no model calls or tokens to show
    parts = ["conductor"] if turn.conductor else [f"{calls} model call{'s' if calls != 1 else ''}"]
    if tools:
        parts.append(f"{tools} tool call{'s' if tools != 1 else ''}")
    if not turn.conductor:
        parts.append(f"{turn.input_tokens + turn.output_tokens} tokens")
    parts.append(fmt_ms(turn.latency_ms))
    t.append("  · " + " · ".join(parts), style="dim")
    return t


def _add_steps(branch: Tree, steps: Sequence[Step]) -> None:
    """Add the steps to a tree branch, each delegating call with its sub-runs' turns below."""
    for step in steps:
        node = branch.add(_step_text(step))
        for sub in step.subruns:
            _add_steps(node, sub.steps)
            for turn in sub.turns:
                _add_steps(node.add(_turn_text(turn)), turn.steps)


def run_tree(run: RunNode) -> object:
    """A rich `Tree`: the run, its agent turns, and each turn's steps with tokens and latency;
    a delegating call holds the turns of its sub-runs."""
    from rich.text import Text
    from rich.tree import Tree

    head = Text()
    head.append(f"run {run.index}", style="bold")
    head.append("  ")
    head.append(safe(run.status, _status_style(run.status)))
    total = run.input_tokens + run.output_tokens
    head.append(
        f"  · {total} tokens ({run.input_tokens} in / {run.output_tokens} out)"
        f" · {fmt_ms(run.latency_ms)}",
        style="dim",
    )
    tree = Tree(head, guide_style="dim")
    _add_steps(tree, run.steps)
    for turn in run.turns:
        _add_steps(tree.add(_turn_text(turn)), turn.steps)
    return tree


def _bar(start: float, end: float, run: RunNode, style: str) -> Text:
    from rich.text import Text

    total = max(run.end - run.start, 1e-9)
    a = min(max((start - run.start) / total, 0.0), 1.0)
    b = min(max((end - run.start) / total, a), 1.0)
    left = min(int(a * BAR_WIDTH), BAR_WIDTH - 1)
    width = max(1, round(b * BAR_WIDTH) - left)
    t = Text(" " * left)
    t.append(("█" if end > start else "│") * width, style=style)
    return t


def run_timeline(run: RunNode) -> Table:
    """A rich table: each turn and step at its offset from the run's start, with a bar; a
    delegating call's sub-runs follow it, indented (parallel workers: overlapping bars)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        title=Text(f"timeline · {fmt_ms((run.end - run.start) * 1000)}", style="dim"),
        title_justify="left",
    )
    table.add_column("at ms", justify="right", style="dim", no_wrap=True)
    table.add_column("agent", no_wrap=True)
    table.add_column("step", no_wrap=True)
    table.add_column("ms", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True, min_width=BAR_WIDTH)

    def at(t: float) -> str:
        return f"{max(t - run.start, 0.0) * 1000:.1f}"

    def add_steps(steps: Sequence[Step], depth: int, in_turn: bool) -> None:
        pad = "  " * depth
        for step in steps:
            ms = "" if step.latency_ms is None else fmt_ms(step.latency_ms).removesuffix(" ms")
            if in_turn:
                label = Text(pad + "  " + step.label, style=_STEP_STYLES.get(step.kind, ""))
                bar = _bar(step.start, step.end, run, "red" if step.failed else "white")
                table.add_row(at(step.start), "", label, ms, bar)
            else:
                bar = _bar(step.start, step.end, run, "dim")
                table.add_row(at(step.start), pad + "-", pad + step.label, ms, bar)
            for sub in step.subruns:
                add_run(sub, depth + 1)

    def add_run(node: RunNode, depth: int) -> None:
        add_steps(node.steps, depth, in_turn=False)
        for turn in node.turns:
            style = agent_style(turn.agent)
            table.add_row(
                at(turn.start),
                safe("  " * depth + turn.agent, style),
                Text("  " * depth + "turn", style="bold"),
                fmt_ms(turn.latency_ms).removesuffix(" ms"),
                _bar(turn.start, turn.end, run, style),
            )
            add_steps(turn.steps, depth, in_turn=True)

    add_run(run, 0)
    return table


def run_table(run: RunNode) -> Table:
    """One row per step of a run (the compact view); sub-runs' steps follow the call that
    delegated them, their agents indented."""
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
    for n, (depth, _, step) in enumerate(walk(run), 1):
        agent = step.agent or "-"
        keys = ", ".join(step.keys) if step.kind in ("handoff", "escalation", "state") else ""
        ms = "" if step.latency_ms is None else fmt_ms(step.latency_ms).removesuffix(" ms")
        table.add_row(
            str(n),
            safe("  " * depth + agent, agent_style(agent) if agent != "-" else "dim"),
            Text(step.label, style=_STEP_STYLES.get(step.kind, "")),
            safe(step.detail),
            safe(keys, "bold"),
            _tokens(step),
            ms,
        )
    return table


def _status_style(status: str) -> str:
    return {"completed": "bold green", "failed": "bold red"}.get(status, "bold yellow")


def _run_title(run: RunNode, count: int) -> str:
    title = f"run {run.index}/{count} · {run.run_id} · trace {run.trace_id}"
    if run.is_subrun:  # its parent run is not among the events
        call = f", call {run.parent_call_id}" if run.parent_call_id else ""
        title += f" · sub-run of {run.parent_run_id}{call} (not among the stored events)"
    return title


def run_summary(run: RunNode) -> Text:
    """The summary line of one run: path, status, total tokens, latency."""
    from rich.text import Text

    t = Text()
    t.append("path: ", style="dim")
    t.append(safe(" -> ".join(run.path) or "-", "bold"))
    t.append("  status: ", style="dim")
    t.append(safe(run.status, _status_style(run.status)))
    t.append("  tokens: ", style="dim")
    t.append(_usage_text(run.input_tokens, run.output_tokens))
    t.append("  latency: ", style="dim")
    t.append(fmt_ms(run.latency_ms))
    if run.error:
        t.append("\nerror: ", style="red")
        t.append(safe_clip(run.error, 200, "red"))
    return t


def render_trace(console: Console, events: Sequence[Event], view: TraceView | None = None) -> None:
    """Print every run of the events: header, tree and timeline (or one `view`), summary."""
    from rich.text import Text

    runs = build_tree(events)
    session = events[0].session_id if events else "-"
    for run in runs:
        console.rule(safe(_run_title(run, len(runs))))
        if run.message is not None:
            head = Text()
            head.append("user: ", style="bold")
            head.append(safe_clip(run.message, 200))
            if run.user_id:
                head.append(safe(f"  (user {run.user_id})", "dim"))
            console.print(head, soft_wrap=True)
        if view in (None, TraceView.tree):
            console.print(run_tree(run))
        if view is None:
            console.print()
        if view in (None, TraceView.timeline):
            console.print(run_timeline(run))
        if view is TraceView.table:
            console.print(run_table(run))
        if run.output:
            said = "answer: " if run.is_subrun else "reply: "  # a sub-run answers its caller
            console.print(Text.assemble((said, "bold"), safe_clip(run.output, 300)), soft_wrap=True)
        console.print(run_summary(run), soft_wrap=True)
    console.print()
    counted = [r for r in runs if r.status != "unfinished" and not r.is_subrun]
    tokens_in = sum(r.input_tokens for r in counted)
    tokens_out = sum(r.output_tokens for r in counted)
    console.print(
        Text.assemble(
            ("session ", "dim"),
            safe(session, "bold"),
            (f": {len(runs)} run{'s' if len(runs) != 1 else ''}, ", "dim"),
            f"{tokens_in + tokens_out} tokens ({tokens_in} in / {tokens_out} out)",
        ),
        soft_wrap=True,
    )


# ------------------------------------------------------------------------------ mermaid
def _mm(text: str | None, limit: int = 80) -> str:
    """Text safe inside a Mermaid message: one line, no statement or entity breakers, and no
    control, bidi or invisible characters (shown as escapes: the diagram goes to a terminal)."""
    return safe_text(one_line(text, limit)).replace("#", "#35;").replace(";", "#59;") or "-"


def _agent_names(run: RunNode) -> list[str]:
    """The agents of a run and of its sub-runs, in order of appearance."""
    names = [turn.agent for turn in run.turns]
    for step in run.all_steps():
        if step.target and step.kind in ("handoff", "escalation", "refusal"):
            names.append(step.target)
    for sub in run.subruns():
        names.extend(_agent_names(sub))
    return names


def to_mermaid(runs: Sequence[RunNode]) -> str:
    """A Mermaid sequence diagram of the session: user, agents, hand-offs, tools, replies; a
    delegating call is a question to the worker and its answer back (parallel ones in `par`)."""
    ids: dict[str, str] = {}
    for run in runs:
        for name in _agent_names(run):
            ids.setdefault(name, f"A{len(ids) + 1}")
    lines = ["sequenceDiagram", "    actor U as user"]
    lines += [f"    participant {pid} as {_mm(name, 40)}" for name, pid in ids.items()]
    for run in runs:
        first = run.turns[0].agent if run.turns else None
        if first is not None and run.is_subrun:
            parent = f"sub-run of {_mm(run.parent_run_id)} (not among the stored events)"
            lines.append(f"    Note over {ids[first]}: run {run.index}: {parent}")
        elif first is not None:
            lines.append(f"    U->>{ids[first]}: run {run.index}: {_mm(run.message, 60)}")
        for step in run.steps:
            if step.kind == "route" and first is not None:
                lines.append(f"    Note over {ids[first]}: route {_mm(step.detail)}")
        for turn in run.turns:
            lines.extend(_mermaid_steps(turn.steps, ids[turn.agent], ids))
        last = run.turns[-1].agent if run.turns else None
        if last is not None and run.output and not run.is_subrun:
            lines.append(f"    {ids[last]}-->>U: {_mm(run.output, 60)}")
        elif last is not None:
            lines.append(f"    Note over {ids[last]}: run {run.index} {_mm(run.status)}")
    return safe_text("\n".join(lines) + "\n", newlines=True)


def _mermaid_steps(steps: Sequence[Step], me: str, ids: dict[str, str]) -> list[str]:
    """The lines of a turn's steps; delegating calls whose sub-runs overlap in time are drawn
    side by side in a `par` block."""
    lines: list[str] = []
    i = 0
    while i < len(steps):
        group = [steps[i]]
        if steps[i].subruns:
            end = max(sub.end for sub in steps[i].subruns)
            while i + len(group) < len(steps):
                nxt = steps[i + len(group)]
                if not nxt.subruns or min(sub.start for sub in nxt.subruns) >= end:
                    break
                group.append(nxt)
                end = max(end, *(sub.end for sub in nxt.subruns))
        if len(group) == 1:
            lines.extend(_mermaid_call(group[0], me, ids))
        else:
            for n, step in enumerate(group):
                label = _mm(step.detail.partition(" ")[0].rstrip(":"))
                lines.append(f"    {'par' if n == 0 else 'and'} {label}")
                lines.extend("    " + line for line in _mermaid_call(step, me, ids))
            lines.append("    end")
        i += len(group)
    return lines


def _mermaid_call(step: Step, me: str, ids: dict[str, str]) -> list[str]:
    """A step; a delegating call: the question to each worker, the worker's steps, its answer."""
    subs = [sub for sub in step.subruns if sub.turns]
    if not subs:
        return _mermaid_step(step, me, ids)
    ms = f" ({fmt_ms(step.latency_ms)})" if step.latency_ms is not None else ""
    lines: list[str] = []
    for sub in subs:
        worker = ids[sub.turns[0].agent]
        lines.append(f"    {me}->>{worker}: ask: {_mm(sub.message, 60)}")
        for turn in sub.turns:
            lines.extend(_mermaid_steps(turn.steps, ids[turn.agent], ids))
        last = ids[sub.turns[-1].agent]
        if sub.status == ANSWERED:
            lines.append(f"    {last}-->>{me}: answer: {_mm(sub.output, 60)}{ms}")
        elif sub.status == FAILED:
            lines.append(f"    {last}--x{me}: {_mm(sub.error)}{ms}")
        else:
            lines.append(f"    Note over {last}: {_mm(sub.status)}")
    return lines


def _mermaid_step(step: Step, me: str, ids: dict[str, str]) -> list[str]:
    ms = f" ({fmt_ms(step.latency_ms)})" if step.latency_ms is not None else ""
    if step.kind == "model_call":
        return [f"    Note right of {me}: model call {_tokens(step)} tokens{ms}"]
    if step.kind == "tool_call":
        return [f"    {me}->>{me}: tool {_mm(step.detail)}{ms}"]
    if step.kind == "handoff" and step.target in ids:
        keys = f" [{', '.join(step.keys)}]" if step.keys else ""
        reason = step.detail.split(": ", 1)[-1]
        return [f"    {me}->>{ids[step.target]}: hop {step.hop}: {_mm(reason + keys)}"]
    if step.kind == "refusal" and step.target in ids:
        return [f"    {me}-x{ids[step.target]}: refused {_mm(step.detail)}"]
    if step.kind == "escalation" and step.target in ids:
        return [f"    {me}->>{ids[step.target]}: escalation {_mm(step.detail)}"]
    if step.kind in ("guard", "refusal", "escalation", "task"):
        return [f"    Note over {me}: {step.label} {_mm(step.detail)}"]
    return []


# ----------------------------------------------------------------------------------- why
def render_why(console: Console, session: str, slot: str, writes: Sequence[SlotWrite]) -> None:
    """Print every write of `slot`, oldest first, each with the event that caused it."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    n = len(writes)
    console.print(
        Text.assemble(
            safe(slot, "bold"),
            safe(f" in session {session}: written {n} time{'s' if n != 1 else ''}; last value "),
            safe(_value(writes[-1].value), "bold"),
        ),
        soft_wrap=True,
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in ("#", "run", "hop", "agent", "source", "value", "set by", "event"):
        table.add_column(name, overflow="fold", no_wrap=name in ("#", "run", "hop"))
    for i, w in enumerate(writes, 1):
        agent = w.agent or "-"
        cause = w.cause.describe() if w.cause is not None else "(no cause recorded)"
        source = w.source + (f" {w.tool}" if w.tool else "")
        table.add_row(
            str(i),
            str(w.run),
            str(w.hop),
            safe(agent, agent_style(agent)),
            safe(source),
            safe(_value(w.value)),
            safe(cause),
            safe(f"{w.event_id} <- {w.cause.event_id if w.cause else '-'}", "dim"),
        )
    console.print(table)


def _value(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


# ------------------------------------------------------------------------------- command
async def _load_events(store: Store, session: str) -> tuple[list[Event], list[str]]:
    try:
        events = await store.get_events(session_id=session)
        recent = [] if events else [s.session_id for s in await store.list_sessions(limit=5)]
        return events, recent
    finally:
        await store.close()


def _read(url: str, session: str) -> list[Event]:
    db = sqlite_file(url)
    if db is not None and not db.exists():
        message = f"no store at {db}: run `baton run ...` first, or pass --store URL"
        raise CLIError(message, code=1)
    st = open_cli_store(url)
    try:
        events, recent = asyncio.run(_load_events(st, session))
    except BatonError as exc:
        raise CLIError(f"cannot read the store {url}: {exc}", code=1) from None
    if not events:
        hint = f"; recent sessions: {', '.join(recent)}" if recent else ""
        raise CLIError(f"session {session!r} has no events in {url}{hint}", code=1)
    return events


def _why(out: Console, session: str, slot: str, events: list[Event], fmt: TraceFormat) -> None:
    writes = slot_history(events, slot)
    if not writes:
        known = written_slots(events)
        hint = (
            f"; slots written: {', '.join(known)}"
            if known
            else "; no state writes are recorded for this session"
        )
        message = f"slot {slot!r} was never written in session {session!r}{hint}"
        raise CLIError(message, code=1)
    if fmt is TraceFormat.json:
        doc = {"session_id": session, "slot": slot, "writes": [w.model_dump() for w in writes]}
        typer.echo(json_safe(json.dumps(doc, ensure_ascii=False, indent=2, default=str)))
    else:
        render_why(out, session, slot, writes)


def trace(
    session: Annotated[str, typer.Argument(help="Session id (as printed by `baton run`).")],
    store: Annotated[str | None, typer.Option("--store", help=STORE_HELP)] = None,
    format: Annotated[
        TraceFormat,
        typer.Option(
            "--format",
            "-f",
            help="text (tree and timeline), json (the events as JSON lines; with --view tree, "
            "the tree as one document) or mermaid (a sequence diagram of the hops).",
        ),
    ] = TraceFormat.text,
    view: Annotated[
        TraceView | None,
        typer.Option("--view", help="Show only the tree, the timeline or the step table."),
    ] = None,
    why: Annotated[
        str | None,
        typer.Option(
            "--why", metavar="SLOT", help="Show who set a state slot, when, and from what."
        ),
    ] = None,
) -> None:
    """Show a session's hop-by-hop trace: every run as a tree and a timeline, with a summary."""
    from rich.console import Console

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    try:
        if format is TraceFormat.mermaid and (view is not None or why is not None):
            raise CLIError("--format mermaid draws the whole session; drop --view and --why")
        if format is TraceFormat.json and view not in (None, TraceView.tree):
            raise CLIError("--format json prints the events, or the tree with --view tree")
        if why is not None and view is not None:
            raise CLIError("--why prints the slot's history; drop --view")
        events = _read(store or DEFAULT_STORE_URL, session)
        if why is not None:
            _why(out, session, why, events, format)
            return
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    if format is TraceFormat.mermaid:
        typer.echo(to_mermaid(build_tree(events)), nl=False)  # escaped by `_mm` and at the end
    elif format is TraceFormat.json and view is TraceView.tree:
        doc = {
            "session_id": session,
            "runs": [r.model_dump(mode="json") for r in build_tree(events)],
        }
        typer.echo(json_safe(json.dumps(doc, ensure_ascii=False, indent=2)))
    elif format is TraceFormat.json:
        for event in events:
            typer.echo(json_safe(event.model_dump_json()))
    else:
        render_trace(out, events, view)
