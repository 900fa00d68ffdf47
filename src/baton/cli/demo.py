"""`baton demo`: the customer-service desk on the embedded model, played live.

The desk (triage, billing, tech support, orders, after-sales and a human queue) lives in the
repository's `src/baton/desk`; the demo plays its six requests in English and Chinese, streams
every hop, tool call, token count and latency, then prints a summary against what a correct
desk does.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from baton.cli.common import CLIError
from baton.core.errors import ModelNotAvailable
from baton.core.events import Event
from baton.observe.console import clip
from baton.runtime.result import RunResult

if TYPE_CHECKING:
    from rich.console import Console
    from rich.status import Status
    from rich.table import Table

DESK_MODULE = "baton.desk"
SCRIPTED = "scripted"
SCRIPTED_NOTICE = (
    "scripted model: a deterministic rule-based desk policy, NOT a language model "
    "(for tests and replays; run without --model scripted to use the embedded model)"
)


@dataclass
class DemoTurn:
    """One request of the demo and how it went."""

    message: str
    session_id: str
    result: RunResult
    seconds: float
    note: str = ""
    expected: Any = None

    @property
    def tools(self) -> list[str]:
        """Tools that ran successfully, in order."""
        return [e.tool for e in self.result.events if e.type == "tool_called" and e.ok]

    @property
    def as_expected(self) -> bool | None:
        """Whether path, tools and status match the expectation (None for free chat)."""
        exp = self.expected
        if exp is None:
            return None
        r = self.result
        return (
            tuple(r.path) == tuple(exp.expect_path)
            and all(t in self.tools for t in exp.expect_tools)
            and r.status == exp.expect_status
        )


def import_desk() -> Any:
    """The `baton.desk` module: the desk the demo plays, shipped with the package."""
    return importlib.import_module(DESK_MODULE)


def resolve_demo_model(name: str | None) -> tuple[Any, str]:
    """(model, notice) for `--model` / BATON_MODEL; the default is the embedded model."""
    choice = name or os.environ.get("BATON_MODEL") or "local"
    if choice == SCRIPTED:
        policy = importlib.import_module(f"{DESK_MODULE}.policy")
        return policy.scripted_desk_model(), SCRIPTED_NOTICE
    if choice == "local" or choice.startswith("local:"):
        from baton.models.local.states import default_states_dir
        from baton.models.registry import resolve_model

        model = resolve_model(choice)
        threads = getattr(model, "n_threads", None)
        saved = default_states_dir()
        if saved is not None and getattr(model, "prompt_states", "") is None:
            # the agents' prompt states, kept for the next run
            model.prompt_states = saved  # type: ignore[attr-defined]
        return model, (
            f"embedded model {model.name} · llama.cpp on this CPU"
            f"{f' · {threads} thread(s)' if threads else ''} · no API key, no server"
        )
    return choice, f"model {choice}"


def load_model(model: Any, console: Console) -> None:
    """Load the embedded model up front, with a spinner; a clear error if it cannot."""
    load = getattr(model, "load", None)
    if load is None:
        return
    with console.status(
        "Loading the embedded model (the first run joins and checks 1.1 GB of weights) ..."
    ):
        try:
            load()
        except ModelNotAvailable as exc:
            raise CLIError(f"the embedded model is not available: {exc}", code=2) from None


class LiveStatus:
    """An event sink that keeps a spinner line saying who holds the baton and what it does."""

    def __init__(self, status: Status) -> None:
        self.status = status

    def emit(self, event: Event) -> None:
        """Update the spinner text."""
        agent = event.agent or "desk"
        if event.type in ("agent_started", "tool_called"):
            self.status.update(f"[bold]{agent}[/bold] holds the baton · thinking ...")
        elif event.type == "handoff":
            self.status.update(f"passing the baton to [bold]{event.payload.target}[/bold] ...")


@dataclass
class Player:
    """Plays requests against a team with a live view."""

    team: Any
    console: Console
    turns: list[DemoTurn] = field(default_factory=list)

    async def play(self, message: str, session: str, note: str = "", expected: Any = None) -> None:
        """Run one request and print the reply."""
        from rich.text import Text

        n = len(self.turns) + 1
        self.console.rule(Text(f"request {n}" + (f" · {note}" if note else "")))
        self.console.print(Text.assemble(("user: ", "bold"), message), soft_wrap=True)
        t = time.perf_counter()
        shown = ""  # the latest reply as streamed so far, shown from its first token
        speaker: str | None = None
        result: RunResult | None = None
        with self.console.status("...") as status:
            live = LiveStatus(status)
            self.team.add_sink(live)
            try:
                async for item in self.team.stream(message, session_id=f"demo-{session}"):
                    if isinstance(item, RunResult):
                        result = item
                    elif item.type == "text_delta":
                        if speaker != item.agent:  # a reply starts: shown as it is written
                            status.stop()
                            self.console.print("\n" if speaker else "", end="")
                            speaker, shown = item.agent, ""
                            self.console.print(
                                Text(f"{item.agent or 'desk'}: ", style="bold green"), end=""
                            )
                        shown += item.text
                        self.console.print(Text(item.text), end="", soft_wrap=True)
            finally:
                self.team.remove_sink(live)
        assert result is not None, "team.stream ends with the run's result"
        turn = DemoTurn(message, f"demo-{session}", result, time.perf_counter() - t, note, expected)
        self.turns.append(turn)
        if shown:
            self.console.print()
        if not shown or shown.strip() != (result.output or "").strip():
            reply = Text()  # nothing streamed, or the run ended on another reply
            reply.append(f"{result.holder or 'desk'}: ", style="bold green")
            reply.append(result.output or f"({result.status}: {result.error or 'no reply'})")
            self.console.print(reply, soft_wrap=True)
        if turn.as_expected is False:
            exp = expected
            self.console.print(
                f"  expected {' -> '.join(exp.expect_path)} using "
                f"{', '.join(exp.expect_tools) or 'no tool'} ({exp.expect_status})",
                style="yellow",
            )


def stdin_lines(console: Console) -> Callable[[], str | None]:
    """Read user lines from stdin until EOF or `exit`."""

    def next_line() -> str | None:
        while True:
            console.print("[bold]you>[/bold] ", end="")
            line = sys.stdin.readline()
            if not line:
                console.print()
                return None
            text = line.strip()
            if not sys.stdin.isatty():
                console.print(text, markup=False, highlight=False)
            if text.lower() in ("exit", "quit"):
                return None
            if text:
                return text

    return next_line


def summary_table(turns: list[DemoTurn]) -> Table:
    """One row per request: what happened, against what a correct desk does."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title="demo summary", box=box.SIMPLE_HEAD)
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("request", overflow="fold", ratio=3)
    table.add_column("path", overflow="fold", ratio=2)
    table.add_column("tools", overflow="fold", ratio=2)
    table.add_column("status", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("evaluated", justify="right", no_wrap=True)
    table.add_column("tok/s", justify="right", no_wrap=True)
    table.add_column("s", justify="right", no_wrap=True)
    table.add_column("ok", justify="center", no_wrap=True)
    for i, turn in enumerate(turns, 1):
        r = turn.result
        usage = r.total_usage
        style = {"completed": "green", "failed": "red", "blocked": "red"}.get(r.status, "yellow")
        verdict = {True: Text("✓", "green"), False: Text("✗", "red"), None: Text("")}
        table.add_row(
            str(i),
            Text(turn.note or clip(turn.message, 40)),
            Text(" -> ".join(r.path)),
            Text(", ".join(turn.tools) or "-"),
            Text(r.status, style=style),
            str(usage.total_tokens),
            str(usage.evaluated_input_tokens),
            f"{usage.output_tokens / turn.seconds:.1f}" if turn.seconds else "-",
            f"{turn.seconds:.1f}",
            verdict[turn.as_expected],
        )
    return table
