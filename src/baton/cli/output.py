"""What the run-type commands print: the live reply and events, a run's result, approval cards.

Text from users, models, tools and the store goes through `baton.observe.terminal.safe`: literal
(never rich markup), with control, bidi and invisible characters shown as dim escapes.
"""

from __future__ import annotations

import datetime as dt
import shlex
from typing import TYPE_CHECKING

from baton.cli.common import DEFAULT_STORE_URL
from baton.core.approval import ApprovalCard
from baton.core.events import (
    Event,
    TextDelta,
)
from baton.core.ids import now
from baton.observe.console import ConsoleSink, agent_style
from baton.observe.terminal import safe
from baton.runtime.result import RunResult

if TYPE_CHECKING:
    from rich.console import Console

APPROVER = "YOUR_NAME"
"""Placeholder for the approver's name in the printed `baton approvals` commands."""


def store_flag(url: str) -> str:
    """` --store URL` for commands printed for the user (empty for the default store)."""
    return "" if url == DEFAULT_STORE_URL else f" --store {shlex.quote(url)}"


def ago(ts: float, at: float | None = None) -> str:
    """How long ago `ts` was, for people: `12s`, `5m`, `3h`, `2d`."""
    s = max(0.0, (at if at is not None else now()) - ts)
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s / 60:.0f}m"
    if s < 86400:
        return f"{s / 3600:.0f}h"
    return f"{s / 86400:.0f}d"


def utc(ts: float) -> str:
    """`ts` as `YYYY-MM-DD HH:MM:SS` in UTC."""
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


class LivePrinter:
    """Prints a streamed run as it happens: event lines, and the reply as its text arrives.

    Events and text pieces are printed in the order the run produced them (from `team.stream`),
    so the reply sits between its agent's lines. `quiet` prints nothing.
    """

    def __init__(self, out: Console, *, quiet: bool = False, verbose: bool = False) -> None:
        self.out = out
        self.quiet = quiet
        self.sink = ConsoleSink(out, verbose=verbose)
        self._speaking: str | None = None
        """The agent whose reply line is open (no newline printed yet)."""

    def feed(self, event: Event) -> None:
        """Print `event`: a `text_delta` piece on the open reply line, others on their own."""
        if self.quiet:
            return
        if isinstance(event, TextDelta):
            self._piece(event.agent or "?", event.text)
        else:
            self.end_line()
            self.sink.emit(event)

    def _piece(self, agent: str, text: str) -> None:
        from rich.text import Text

        if self._speaking != agent:
            self.end_line()
            line = Text("  ")
            line.append(safe(agent, agent_style(agent)))
            line.append(" says: ", style="dim")
            self.out.print(line, end="", soft_wrap=True)
            self._speaking = agent
        self.out.print(safe(text, newlines=True), end="", soft_wrap=True)

    def end_line(self) -> None:
        """Close the reply line being streamed, if one is open."""
        if self._speaking is not None:
            self._speaking = None
            self.out.print()


def print_result(out: Console, result: RunResult, url: str, events_file: str) -> None:
    """The summary after a run: reply, path, status, escalation, error, tokens, session."""
    from rich.text import Text

    status_style = {"completed": "bold green", "failed": "bold red", "blocked": "bold red"}.get(
        result.status, "bold yellow"
    )
    total = result.total_usage
    out.print()
    reply = safe(result.output, newlines=True) if result.output else Text("(no reply)")
    out.print(Text.assemble(("reply: ", "bold"), reply), soft_wrap=True)
    out.print(
        Text.assemble(("path: ", "bold"), safe(" -> ".join(result.path) or "-")), soft_wrap=True
    )
    out.print(
        Text.assemble(("status: ", "bold"), safe(result.status, status_style)), soft_wrap=True
    )
    if result.escalation is not None:
        out.print(
            Text.assemble(("escalated: ", "bold"), safe("; ".join(result.escalation.reasons))),
            soft_wrap=True,
        )
    if result.error:
        out.print(Text.assemble(("error: ", "bold red"), safe(result.error)), soft_wrap=True)
    out.print(
        Text.assemble(
            ("tokens: ", "bold"),
            f"{total.total_tokens} ({total.input_tokens} in / {total.output_tokens} out)",
        ),
        soft_wrap=True,
    )
    out.print(
        Text.assemble(
            ("session: ", "bold"),
            safe(result.session_id),
            safe(f"  (baton trace {result.session_id}{store_flag(url)})", "dim"),
        ),
        soft_wrap=True,
    )
    out.print(Text.assemble(("events: ", "bold"), safe(events_file)), soft_wrap=True)


def decide_commands(card: ApprovalCard, target: str, url: str) -> tuple[str, str]:
    """The `baton approvals approve ...` and `... reject ...` lines that decide `card`."""
    role = f" --role {shlex.quote(card.required_roles[0])}" if card.required_roles else ""
    tail = f" --team {shlex.quote(target)}{store_flag(url)}"
    head = f"{shlex.quote(card.session_id)} {shlex.quote(card.id)} --by {APPROVER}{role}"
    return (
        f"baton approvals approve {head}{tail}",
        f'baton approvals reject {head} --reason "..."{tail}',
    )


def print_approval(out: Console, card: ApprovalCard, target: str, url: str) -> None:
    """The card a person must decide, and the exact commands that decide it."""
    from rich.panel import Panel
    from rich.text import Text

    signed = sum(1 for a in card.approvals if a.approved)
    title = "approval needed" + (f" ({signed}/{card.needed} signed)" if card.approvals else "")
    body = safe(card.render(), newlines=True)
    out.print(Panel(body, title=Text(title), border_style="yellow", expand=False))
    approve, reject = decide_commands(card, target, url)
    if card.required_roles and len(card.required_roles) > 1:
        roles = ", ".join(card.required_roles)
        out.print(safe(f"(any of the roles {roles} may decide)", "dim"), soft_wrap=True)
    out.print(Text.assemble(("approve: ", "bold"), safe(approve)), soft_wrap=True)
    out.print(Text.assemble(("reject:  ", "bold"), safe(reject)), soft_wrap=True)


def print_outcome(out: Console, result: RunResult, url: str, events_file: str, target: str) -> None:
    """`print_result`, then the approval card and its commands when the run waits for one."""
    print_result(out, result, url, events_file)
    if result.status == "awaiting_approval" and result.approval is not None:
        out.print()
        print_approval(out, result.approval, target, url)
