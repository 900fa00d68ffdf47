"""`baton demo`: the seed customer-service desk, played live with a summary table."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from baton.cli.common import CLIError, ensure_cwd_on_path
from baton.core.events import RunFinished
from baton.models.scripted import ScriptedModel
from baton.observe.console import ConsoleSink, clip
from baton.runtime.result import RunResult
from baton.topologies.team import Team

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

DEMO_MODULE = "examples.customer_service"
"""The module that defines the demo desk (its `team` attribute)."""

SCRIPTED_NOTICE = (
    "scripted model: a deterministic rule-based policy, not a language model; "
    "the embedded local model replaces it in a later release"
)
"""What the demo says at the top when the desk runs on its scripted policy."""

DEMO_REQUESTS: tuple[tuple[str, str], ...] = (
    ("invoice", "please check the invoice for order ORD-202607-99"),
    ("ops", "大事不好了，我们的生产服务器 srv-bj-001 发生告警，请帮我执行紧急重启！"),
    ("invoice", "and is it paid?"),
    ("hello", "hi, what can you help me with?"),
)
"""(conversation, message) pairs the demo plays; equal conversations share a session."""


@dataclass
class DemoTurn:
    """One request of the demo and how it went."""

    message: str
    session_id: str
    result: RunResult

    @property
    def latency_ms(self) -> float:
        """Run latency as recorded by the run's `run_finished` event."""
        for e in reversed(self.result.events):
            if isinstance(e, RunFinished):
                return e.latency_ms
        return 0.0


def load_demo_team() -> Team:
    """The seed desk's `team`; a clear error when the example cannot be imported."""
    import importlib

    ensure_cwd_on_path()
    try:
        module: ModuleType = importlib.import_module(DEMO_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name in ("examples", DEMO_MODULE):
            raise CLIError(
                f"cannot import {DEMO_MODULE}: the demo plays the example desk in examples/, "
                "so run `baton demo` from the repository root (the folder that contains "
                "examples/)"
            ) from None
        raise CLIError(f"importing {DEMO_MODULE} failed: {exc}") from None
    team = getattr(module, "team", None)
    if not isinstance(team, Team):
        raise CLIError(f"{DEMO_MODULE}.team is not a baton Team")
    return team


def model_notice(team: Team) -> str:
    """What the demo says about the brain of the desk."""
    if isinstance(team.default_model, ScriptedModel):
        return SCRIPTED_NOTICE
    name = getattr(team.default_model, "name", None) or str(team.default_model)
    return f"model: {name} (set by BATON_MODEL)"


async def play(
    team: Team,
    console: Console,
    messages: Callable[[], tuple[str, str] | None],
    sink: ConsoleSink | None,
) -> list[DemoTurn]:
    """Run each (conversation, message) that `messages` yields until it returns None."""
    from rich.text import Text

    sessions: dict[str, str] = {}
    turns: list[DemoTurn] = []
    while True:
        item = messages()
        if item is None:
            return turns
        conversation, message = item
        sid = sessions.setdefault(conversation, f"demo-{conversation}")
        if sink is not None:
            console.rule(Text(f"request {len(turns) + 1}: {clip(message, 60)}"))
        result = await team.run(message, session_id=sid)
        turns.append(DemoTurn(message, sid, result))
        reply = Text()
        reply.append(f"{result.holder or 'desk'}: ", style="bold green")
        reply.append(result.output or f"({result.status}: {result.error or 'no reply'})")
        console.print(reply, soft_wrap=True)
        console.print()


def scripted_requests() -> Callable[[], tuple[str, str] | None]:
    """A `messages` callable that yields `DEMO_REQUESTS` in order."""
    it = iter(DEMO_REQUESTS)
    return lambda: next(it, None)


def stdin_requests(console: Console) -> Callable[[], tuple[str, str] | None]:
    """A `messages` callable reading lines from stdin until EOF or `exit`; one session."""

    def next_line() -> tuple[str, str] | None:
        while True:
            console.print("[bold]you>[/bold] ", end="")
            line = sys.stdin.readline()
            if not line:
                console.print()
                return None
            text = line.strip()
            if not sys.stdin.isatty():  # echo piped input so the transcript reads naturally
                console.print(text, markup=False, highlight=False)
            if text.lower() in ("exit", "quit"):
                return None
            if text:
                return ("chat", text)

    return next_line


def summary_table(turns: list[DemoTurn]) -> Table:
    """A table with one row per request: request, path, status, tokens, latency."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title="demo summary", box=box.SIMPLE_HEAD)
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("request", overflow="fold", min_width=16, ratio=3)
    table.add_column("session", style="dim", overflow="fold", ratio=2)
    table.add_column("path", overflow="fold", ratio=2)
    table.add_column("status", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("ms", justify="right", no_wrap=True)
    for i, turn in enumerate(turns, 1):
        r = turn.result
        style = {"completed": "green", "failed": "red"}.get(r.status, "yellow")
        table.add_row(
            str(i),
            Text(clip(turn.message, 48)),
            turn.session_id,
            Text(" -> ".join(r.path)),
            Text(r.status, style=style),
            str(r.total_usage.total_tokens),
            f"{turn.latency_ms:.1f}",
        )
    return table
