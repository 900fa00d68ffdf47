"""The `baton` command line: `baton run`, `resume`, `approvals`, `tickets`, `trace`, `graph`,
`audit`, `demo` and more."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Annotated

import typer

from baton.cli.a2a_serve import a2a_app
from baton.cli.approvals import approvals_app
from baton.cli.audit import audit_app
from baton.cli.bench_routing import bench_routing
from baton.cli.checkpoints import checkpoints_app
from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail, load_team
from baton.cli.dlq import dlq_app
from baton.cli.driver import run_and_report
from baton.cli.eval import eval_command
from baton.cli.graph import graph as graph_command
from baton.cli.kb import kb_app
from baton.cli.local_model import install_local_model_command
from baton.cli.mcp_serve import mcp_app
from baton.cli.metrics import metrics as metrics_command
from baton.cli.notify import notify_app
from baton.cli.output import LivePrinter
from baton.cli.replay import replay_command
from baton.cli.resume import resume as resume_command
from baton.cli.serve import serve as serve_command
from baton.cli.store import store_app
from baton.cli.tau2 import bench_tau2
from baton.cli.tickets import tickets_app
from baton.cli.trace import trace as trace_command
from baton.cli.worker import submit as submit_command
from baton.cli.worker import worker as worker_command
from baton.core.errors import BatonError
from baton.observe.console import ConsoleSink
from baton.runtime.result import RunResult
from baton.topologies.team import Team

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(
    name="baton",
    help="Multi-agent LLM teams that pass the baton through typed hand-offs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
"""The typer application behind the `baton` console script."""

STORE_HELP = (
    "Store URL: sqlite:///path.db, memory://, postgresql://user@host:5432/db or "
    f"redis://host:6379/0 (default {DEFAULT_STORE_URL})."
)
"""Help text of the `--store` option."""


def _consoles() -> tuple[Console, Console]:
    from rich.console import Console

    return Console(highlight=False), Console(stderr=True, highlight=False)


def _version(value: bool) -> None:
    if value:
        from baton._version import DISTRIBUTION, UNKNOWN, installed_version

        found = installed_version()
        if found is None:  # a source tree on the path, never installed: no metadata to read
            typer.echo(f"baton {UNKNOWN} (the {DISTRIBUTION} distribution is not installed)")
        else:
            typer.echo(f"baton {found}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """Multi-agent LLM teams that pass the baton through typed hand-offs."""


# ---------------------------------------------------------------------------------- run
async def _streamed(
    team: Team, printer: LivePrinter, message: str, session: str | None, user: str | None
) -> RunResult:
    """Run `message` through `team.stream`, printing events and the reply as they come."""
    result: RunResult | None = None
    try:
        async for item in team.stream(message, session_id=session, user_id=user):
            if isinstance(item, RunResult):
                result = item
            else:
                printer.feed(item)
    finally:
        printer.end_line()
    assert result is not None  # a stream always ends with its result
    return result


@app.command()
def run(
    target: Annotated[
        str,
        typer.Argument(help="The team as MODULE:ATTRIBUTE, e.g. examples.customer_service:team."),
    ],
    message: Annotated[str, typer.Argument(help="The user message.")],
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", help="Session id; reuse it to continue a conversation."),
    ] = None,
    user: Annotated[str | None, typer.Option("--user", "-u", help="End-user id.")] = None,
    store: Annotated[str | None, typer.Option("--store", help=STORE_HELP)] = None,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Do not stream the events and the reply live."),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Stream more detail (routes, replies).")
    ] = False,
) -> None:
    """Run one message through a team, streaming the reply; print the path and the status.

    A run that pauses for approval prints the card and the `baton approvals` commands that
    decide it.
    """
    out, err = _consoles()
    url = store or DEFAULT_STORE_URL
    printer = LivePrinter(out, quiet=quiet, verbose=verbose)
    run_and_report(
        out, err, target, url, lambda team: _streamed(team, printer, message, session, user)
    )


app.command("resume")(resume_command)
app.command("worker")(worker_command)
app.command("submit")(submit_command)
app.command("serve")(serve_command)
app.add_typer(dlq_app, name="dlq")
app.add_typer(approvals_app, name="approvals")
app.add_typer(tickets_app, name="tickets")
app.add_typer(notify_app, name="notify")
app.add_typer(checkpoints_app, name="checkpoints")
app.add_typer(store_app, name="store")
app.add_typer(mcp_app, name="mcp")
app.add_typer(a2a_app, name="a2a")
app.add_typer(kb_app, name="kb")


# -------------------------------------------------------------------------------- trace
app.command("trace")(trace_command)
app.command("eval")(eval_command)
app.command("replay")(replay_command)
app.command("graph")(graph_command)
app.add_typer(audit_app, name="audit")


# --------------------------------------------------------------------------------- demo
@app.command()
def demo(
    interactive: Annotated[
        bool,
        typer.Option("--interactive", "-i", help="Chat with the desk (stdin) until EOF or exit."),
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="local (default), local:<name>, openai:<name>, or scripted (tests only). "
            "Also read from BATON_MODEL.",
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Stream more detail (routes, replies).")
    ] = False,
) -> None:
    """Play the customer-service desk live on the embedded model, then a summary table."""
    from rich.panel import Panel

    from baton.cli.demo import (
        Player,
        import_desk,
        load_model,
        resolve_demo_model,
        stdin_lines,
        summary_table,
    )

    out, err = _consoles()
    try:
        desk_module = import_desk()
        brain, notice = resolve_demo_model(model)
        out.print(Panel(notice, title="baton demo · customer-service desk", border_style="cyan"))
        load_model(brain, out)
        desk = desk_module.build_desk(model=brain, store="memory://")
    except (CLIError, BatonError) as exc:
        error = exc if isinstance(exc, CLIError) else CLIError(str(exc))
        fail(err, error)
        raise typer.Exit(error.code) from None
    sink = ConsoleSink(out, verbose=verbose)
    desk.team.add_sink(sink)
    player = Player(desk.team, out)

    async def scripted() -> None:
        for req in desk_module.DEMO:
            await player.play(req.text, req.session, req.note, req)

    async def chat() -> None:
        read = stdin_lines(out)
        while (line := read()) is not None:
            await player.play(line, "chat")

    if interactive:
        out.print("Type a message; `exit` or end of input (Ctrl-D) quits.", style="dim")
    t0 = time.perf_counter()
    try:
        asyncio.run(chat() if interactive else scripted())
    except BatonError as exc:
        fail(err, CLIError(f"the demo failed: {exc}", code=1))
        raise typer.Exit(1) from None
    turns = player.turns
    if not turns:
        return
    out.print(summary_table(turns))
    checked = [t for t in turns if t.as_expected is not None]
    tickets = asyncio.run(desk.team.store.list_human())
    line = f"{len(turns)} requests in {time.perf_counter() - t0:.0f} s"
    if checked:
        line += f" · {sum(bool(t.as_expected) for t in checked)}/{len(checked)} as expected"
    out.print(line + f" · human queue: {len(tickets)} ticket(s)", style="bold")
    if any(t.result.status == "failed" for t in turns):
        raise typer.Exit(1)


# ------------------------------------------------------------------------------ routing
@app.command()
def route(
    target: Annotated[str, typer.Argument(help="The team as MODULE:ATTRIBUTE.")],
    text: Annotated[str, typer.Argument(help="The request to route.")],
) -> None:
    """Show each routing tier's verdict and the final decision for TEXT."""
    from baton.cli.routing import print_decision, router_of

    out, err = _consoles()
    try:
        router = router_of(load_team(target))
        decision = asyncio.run(router.route(text))
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    except BatonError as exc:
        fail(err, CLIError(str(exc)))
        raise typer.Exit(2) from None
    print_decision(out, text, decision)


app.command("metrics")(metrics_command)

bench_app = typer.Typer(help="Benchmarks that ship with Baton.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


bench_app.command("routing")(bench_routing)
bench_app.command("tau2")(bench_tau2)

app.command("install-local-model")(install_local_model_command)


def main() -> None:
    """Entry point of the `baton` console script."""
    app()


if __name__ == "__main__":
    main()
