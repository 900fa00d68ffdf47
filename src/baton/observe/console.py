"""`ConsoleSink`: one readable, coloured line per hop-relevant event, printed as it happens."""

from __future__ import annotations

import logging
import zlib
from typing import TYPE_CHECKING

from baton.core.events import (
    AgentStarted,
    ApprovalDecided,
    ApprovalRequested,
    BoardWritten,
    Escalated,
    Event,
    GuardrailRewrote,
    GuardrailTripped,
    GuardTripped,
    Handoff,
    HandoffRefused,
    ModelCalled,
    RouteDecided,
    RunFinished,
    RunResumed,
    RunStarted,
    TaskTransitioned,
    ToolCalled,
    ToolRefused,
)
from baton.core.messages import Usage
from baton.observe.terminal import safe, safe_clip

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

log = logging.getLogger("baton.observe")

_TASK_SHOWN = frozenset(("processing", "retry", "completed", "failed", "cancelled"))
"""Task steps the console shows (all of them with `verbose`): when work starts, comes back
for a fix, and how each task ends."""
_TASK_STYLE = {"completed": "green", "failed": "red", "retry": "yellow", "cancelled": "red"}

AGENT_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "bright_cyan", "bright_magenta")
"""Colours given to agents (stable per name)."""


def agent_style(name: str | None) -> str:
    """A stable colour for an agent name, so the same agent always looks the same."""
    if not name:
        return "white"
    return "bold " + AGENT_COLOURS[zlib.crc32(name.encode()) % len(AGENT_COLOURS)]


def fmt_ms(ms: float) -> str:
    """A latency for people: `0.4 ms`, `182 ms`, `2.31 s`."""
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 100:
        return f"{ms:.0f} ms"
    return f"{ms:.1f} ms"


def clip(text: str | None, limit: int = 80) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def total_usage(usage: dict[str, Usage]) -> Usage:
    """Tokens of all agents together."""
    total = Usage()
    for u in usage.values():
        total.add(u)
    return total


def state_keys(state: dict[str, object]) -> str:
    """The keys of a state dict, comma-separated (values are never shown)."""
    return ", ".join(str(k) for k in state) if state else "-"


class ConsoleSink:
    """Prints one coloured line per hop-relevant event; state shows its keys, never values."""

    def __init__(self, console: Console | None = None, verbose: bool = False) -> None:
        if console is None:
            from rich.console import Console

            console = Console(highlight=False)
        self.console = console
        self.verbose = verbose
        self._warned = False

    def emit(self, event: Event) -> None:
        """Print the line for `event`, if it has one; never raises."""
        try:
            line = self.render(event)
            if line is not None:
                self.console.print(line, soft_wrap=True)
        except Exception as exc:  # a sink must never break a run
            if not self._warned:
                self._warned = True
                log.warning("ConsoleSink could not print an event: %s", exc)

    def render(self, event: Event) -> Text | None:
        """The rich `Text` line for `event`, or None when it is not shown.

        Every value from a user, a model, a tool or the store goes through `safe` / `safe_clip`
        (`baton.observe.terminal`): appended as literal text (never markup), with control,
        bidi and invisible format characters shown as dim escapes.
        """
        from rich.text import Text

        t = Text()
        if isinstance(event, RunStarted):
            t.append("▶ run ", style="bold")
            t.append(safe(event.run_id, "dim"))
            t.append("  session ", style="dim")
            t.append(safe(event.session_id, "dim"))
            if event.user_id:
                t.append("  user ", style="dim")
                t.append(safe(event.user_id, "dim"))
            t.append("\n  user: ", style="bold")
            t.append(safe_clip(event.message, 200))
        elif isinstance(event, RouteDecided):
            if not self.verbose:
                return None
            t.append("  route → ", style="dim")
            _agent(t, event.target)
            t.append(" (", style="dim")
            t.append(safe(event.tier, "dim"))
            t.append(")", style="dim")
        elif isinstance(event, AgentStarted):
            t.append("● ", style=agent_style(event.agent))
            _agent(t, event.agent)
            t.append(" takes the baton", style="bold")
            if event.conductor:
                t.append(" (conductor)", style="dim")
            if event.reason:
                t.append("  (", style="dim")
                t.append(safe_clip(event.reason, 80, "dim"))
                t.append(")", style="dim")
        elif isinstance(event, ModelCalled):
            self._prefix(t, event.agent)
            t.append("model ", style="bold")
            t.append(safe(event.model, "dim"))
            if event.reask:
                t.append(" (re-ask)", style="yellow")
            u = event.usage
            t.append(f"  tokens {u.input_tokens} in / {u.output_tokens} out")
            if u.cached_input_tokens:  # the prompt tokens the model actually read
                t.append(f" ({u.evaluated_input_tokens} read)", style="dim")
            t.append(f"  {fmt_ms(event.latency_ms)}", style="dim")
            if event.error:
                t.append("  error: ", style="bold red")
                t.append(safe_clip(event.error, 120, "bold red"))
            elif event.tool_calls:
                t.append("  → ", style="dim")
                t.append(safe(", ".join(event.tool_calls), "bold"))
            else:
                t.append("  → reply", style="dim")
            if self.verbose and event.text:
                t.append("\n    “", style="italic dim")
                t.append(safe_clip(event.text, 160, "italic dim"))
                t.append("”", style="italic dim")
        elif isinstance(event, ToolCalled):
            self._prefix(t, event.agent)
            t.append("tool ", style="bold")
            t.append(safe(event.tool, "bold"))
            if event.ok:
                t.append("  ok", style="green")
            else:
                t.append("  error: ", style="bold red")
                t.append(safe_clip(event.error, 120, "bold red"))
            t.append(f"  {fmt_ms(event.latency_ms)}", style="dim")
            if self.verbose:
                t.append("  args: ", style="dim")
                t.append(safe(state_keys(event.arguments), "dim"))
                t.append(f"  result {event.result_chars} chars", style="dim")
                if event.truncated:
                    t.append(" (truncated)", style="yellow")
        elif isinstance(event, Handoff):
            p = event.payload
            t.append("⇢ hand-off ", style="bold")
            _agent(t, p.source)
            t.append(" -> ")
            _agent(t, p.target)
            t.append(f"  hop {p.hop}", style="dim")
            t.append("  reason: ", style="dim")
            t.append(safe_clip(p.reason, 100))
            t.append("  state keys: ", style="dim")
            t.append(safe(state_keys(p.state), "bold"))
            if p.unverified:
                t.append("  claimed keys: ", style="dim")
                t.append(safe(state_keys(p.unverified), "yellow"))
            if p.priority != "normal":
                t.append("  priority ", style="yellow")
                t.append(safe(p.priority, "yellow"))
            if self.verbose:
                t.append("\n    objective: ", style="dim")
                t.append(safe_clip(p.objective, 160, "dim"))
        elif isinstance(event, HandoffRefused):
            t.append("✗ hand-off refused ", style="bold red")
            _agent(t, event.agent)
            t.append(" -> ")
            _agent(t, event.target)
            t.append("  ", style="red")
            t.append(safe_clip(event.reason, 160, "red"))
        elif isinstance(event, GuardTripped):
            t.append("⚠ guard ", style="bold yellow")
            t.append(safe(event.guard, "bold yellow"))
            if event.agent:
                t.append("  at ", style="dim")
                t.append(safe(event.agent, "dim"))
            t.append("  ", style="yellow")
            t.append(safe_clip(event.detail, 160, "yellow"))
        elif isinstance(event, GuardrailTripped):
            t.append("⛔ guardrail ", style="bold red")
            t.append(safe(event.guardrail, "bold red"))
            t.append(f" blocked the {'message' if event.stage == 'input' else 'reply'}")
            if event.agent:
                t.append("  at ", style="dim")
                t.append(safe(event.agent, "dim"))
            t.append("  ", style="red")
            t.append(safe_clip(event.reason, 160, "red"))
        elif isinstance(event, GuardrailRewrote):
            t.append("✎ guardrail ", style="bold yellow")
            t.append(safe(event.guardrail, "bold yellow"))
            t.append(" rewrote the reply  ", style="yellow")
            t.append(safe_clip(event.reason, 160, "yellow"))
        elif isinstance(event, TaskTransitioned):
            if not self.verbose and event.to_status not in _TASK_SHOWN:
                return None
            style = _TASK_STYLE.get(event.to_status, "dim")
            t.append("  ◆ task ", style="bold")
            t.append(safe(event.task_id, "bold"))
            t.append(f" {event.from_status} → ", style="dim")
            t.append(safe(event.to_status, style))
            if event.reason:
                t.append("  ", style="dim")
                t.append(safe_clip(event.reason, 120, "dim"))
        elif isinstance(event, BoardWritten):
            self._prefix(t, event.agent)
            t.append("board ", style="bold")
            t.append(safe(event.key, "bold"))
            t.append(f" v{event.version}", style="dim")
            if event.mode != "set":
                t.append(f" ({event.mode})", style="dim")
            if event.conflicts:
                n = event.conflicts
                t.append(f"  {n} conflict{'s' if n > 1 else ''}, re-read and retried", "yellow")
        elif isinstance(event, Escalated):
            card = event.card
            t.append("⇡ escalated ", style="bold red")
            t.append("to ", style="bold")
            t.append(safe(event.to, "bold"))
            t.append("  reasons: ", style="dim")
            t.append(safe_clip("; ".join(card.reasons), 160))
            t.append("  state keys: ", style="dim")
            t.append(safe(state_keys(card.state), "bold"))
        elif isinstance(event, RunFinished):
            style = {
                "completed": "bold green",
                "failed": "bold red",
                "blocked": "bold red",
            }.get(event.status, "bold yellow")
            total = total_usage(event.usage)
            t.append("■ run ", style="bold")
            t.append(safe(event.status, style))
            t.append("  path: ", style="dim")
            t.append(safe(" -> ".join(event.path) or "-"))
            t.append(
                f"  tokens {total.total_tokens} ({total.input_tokens} in / "
                f"{total.output_tokens} out)"
            )
            t.append(f"  {fmt_ms(event.latency_ms)}", style="dim")
            if event.error:
                t.append("\n  error: ", style="red")
                t.append(safe_clip(event.error, 200, "red"))
        elif isinstance(event, ApprovalRequested):
            ask = event.card
            self._prefix(t, ask.agent)
            t.append("⏸ approval needed ", style="bold yellow")
            if ask.kind == "tool":
                t.append("tool ", style="bold")
                t.append(safe(ask.tool, "bold"))
            else:
                t.append("hand-off to ", style="bold")
                t.append(safe(ask.target, "bold"))
            t.append("  ", style="dim")
            t.append(safe(ask.id, "dim"))
        elif isinstance(event, ApprovalDecided):
            style = {"approved": "bold green", "pending": "bold yellow"}.get(
                event.decision, "bold red"
            )
            t.append("✔ " if event.decision in ("approved", "pending") else "✘ ", style=style)
            t.append("approval ", style="bold")
            t.append(safe(event.approval_id, "bold"))
            t.append(" ", style="bold")
            t.append(safe(event.decision, style))
            if event.by:
                t.append(" by ")
                t.append(safe(event.by))
            if event.role:
                t.append(" (", style="dim")
                t.append(safe(event.role, "dim"))
                t.append(")", style="dim")
            if event.reason:
                t.append("  ", style="dim")
                t.append(safe_clip(event.reason, 120, "dim"))
        elif isinstance(event, RunResumed):
            t.append("↻ run resumed ", style="bold")
            t.append("from checkpoint ", style="dim")
            t.append(safe(str(event.checkpoint), "dim"))
            if event.reason:
                t.append("  (", style="dim")
                t.append(safe_clip(event.reason, 120, "dim"))
                t.append(")", style="dim")
        elif isinstance(event, ToolRefused):
            self._prefix(t, event.agent)
            t.append("✗ tool refused ", style="bold red")
            t.append(safe(event.tool, "bold"))
            t.append("  ", style="red")
            t.append(safe_clip(event.reason, 160, "red"))
        else:  # text deltas are for the stream (`team.stream`), not for event lines
            return None
        return t

    @staticmethod
    def _prefix(t: Text, agent: str | None) -> None:
        t.append("  ")
        _agent(t, agent or "?")
        t.append(" · ", style="dim")


def _agent(t: Text, name: str | None) -> None:
    """Append an agent name (a model may invent one: a hand-off target) in its colour."""
    t.append(safe(name or "?", agent_style(name)))
