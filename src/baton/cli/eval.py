"""`baton eval SPEC`: run a spec's labelled cases through its team, check them and report.

The spec (docs/eval.md) names the team (`module:attribute`, a Team or a factory of fresh
ones), the model and the cases. Each attempt runs in a session of its own on `--store`, so
`baton trace <session>` shows it afterwards.
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from baton.cli.common import DEFAULT_STORE_URL, CLIError, fail, load_object, open_cli_store
from baton.core.errors import BatonError, EvalError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from baton.evals.checks import Judge
    from baton.evals.results import EvalReport
    from baton.evals.spec import Spec

MODEL_HELP = (
    "scripted (the spec's rule-based `scripted` model), local, local:<name> or openai:<name>; "
    "default: the spec's `model`, else the team's own."
)
"""Help text of `--model`."""


def resolve_eval_model(choice: str | None, spec: Spec, console: Console) -> tuple[Any, str]:
    """(model for the team factory or None, its description) for `--model`."""
    if choice is None:
        return None, "the team's own model"
    if choice == "scripted":
        if spec.scripted is None:
            raise CLIError(
                "this spec names no `scripted` model: add `scripted: module:attribute` (a "
                "function returning the team's rule-based ScriptedModel) or pick another --model"
            )
        make = load_object(spec.scripted)
        if not callable(make):
            raise CLIError(f"scripted {spec.scripted} is not callable")
        return make(), f"scripted ({spec.scripted})"
    if choice == "local" or choice.startswith(("local:", "openai:")):
        from baton.cli.demo import load_model
        from baton.models.registry import resolve_model

        try:
            model = resolve_model(choice)
        except BatonError as exc:
            raise CLIError(str(exc)) from None
        load_model(model, console)
        return model, choice
    raise CLIError(f"unknown model {choice!r}: use scripted, local, local:<name> or openai:<name>")


def _judges(default: str | None, fallback: Any) -> Any:
    """`judge_for(name)`: a judge per model name, built once; `fallback` (the eval's model,
    when it is a language model) when neither the check nor the spec names one."""
    from baton.evals.checks import ModelJudge
    from baton.models.registry import resolve_model

    cache: dict[str, Judge] = {}

    def judge_for(name: str | None) -> Judge | None:
        chosen = name or default
        if chosen is None:
            return ModelJudge(fallback) if fallback is not None else None
        if chosen not in cache:
            cache[chosen] = ModelJudge(resolve_model(chosen))
        return cache[chosen]

    return judge_for


def _results_table(report: EvalReport) -> Table:
    from rich.table import Table
    from rich.text import Text

    from baton.observe.terminal import safe_clip

    table = Table(title=f"baton eval · {report.spec}", show_lines=False)
    for col in ("case", "route", "status", "result", "why", "s"):
        table.add_column(col, overflow="fold")
    for r in report.results:
        for a in r.attempts:
            why = "; ".join(f"{c.check}: {c.reason}" for c in a.checks if not c.passed)
            route = (
                a.route
                if r.expected_route in (None, a.route)
                else f"{a.route} ≠ {r.expected_route}"
            )
            label = r.id if len(r.attempts) == 1 else f"{r.id} #{a.repeat}"
            table.add_row(
                safe_clip(label, 40),
                safe_clip(route, 40),
                Text(a.status),
                Text("pass", style="green") if a.passed else Text("fail", style="bold red"),
                safe_clip(a.error or why, 160),
                f"{a.latency_s:.2f}",
            )
    return table


def summary_lines(report: EvalReport) -> list[str]:
    """The figures as lines of text."""
    s = report.summary

    def pct(part: int, whole: int) -> str:
        return f"{part}/{whole} = {100 * part / whole:.1f} %" if whole else "n/a"

    valid = s.tool_calls_emitted - s.tool_calls_invalid
    return [
        f"route accuracy      {pct(s.routed, s.route_checked)}",
        f"task success        {pct(s.succeeded, s.attempts)}",
        f"tool-call validity  {pct(valid, s.tool_calls_emitted)}",
        f"pass^{s.repeat:<14} {pct(s.pass_k, s.cases)}",
        f"latency p50 / p95   {s.latency_p50_s:.3f} / {s.latency_p95_s:.3f} s",
        f"tokens              {s.input_tokens} in + {s.output_tokens} out, "
        f"{s.model_calls} model calls",
    ]


def eval_command(
    spec_file: Annotated[
        Path, typer.Argument(metavar="SPEC", help="The eval spec (YAML or JSON).")
    ],
    model: Annotated[str | None, typer.Option("--model", "-m", help=MODEL_HELP)] = None,
    split: Annotated[
        str | None,
        typer.Option("--split", help="dev, test or all (default: the spec's `split.default`)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Run only the first N cases.")
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option("--tag", "-t", help="Only cases carrying this tag (repeat: all of them)."),
    ] = None,
    repeat: Annotated[
        int, typer.Option("--repeat", "-k", min=1, help="Run each case k times (pass^k).")
    ] = 1,
    judge_model: Annotated[
        str | None,
        typer.Option("--judge-model", help="Model of the answer judges (default: the spec's)."),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option("--store", help=f"Where the runs are kept (default {DEFAULT_STORE_URL})."),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the JSON report here.")
    ] = None,
    html_path: Annotated[
        Path | None, typer.Option("--html", help="Write the single-file HTML report here.")
    ] = None,
    previous: Annotated[
        Path | None,
        typer.Option("--compare", help="A previous --json report: show what got better or worse."),
    ] = None,
) -> None:
    """Run the cases of SPEC through its team and check each: route, path, tools, state,
    status and answer. Prints a row per case and the figures; exits 1 when --compare finds a
    case that got worse."""
    from rich.console import Console

    from baton.evals.compare import compare
    from baton.evals.report import read_json, write_json
    from baton.evals.runner import EvalRun, check_agents, team_source
    from baton.evals.spec import load_spec

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    url = store or DEFAULT_STORE_URL
    command = _command_line(spec_file, model, split, limit, tag, repeat, store)
    try:
        spec = load_spec(spec_file)
        cases = spec.select(split, tag or (), limit)
        if not cases:
            raise CLIError("no case of the spec matches --split / --tag", code=1)
        before = read_json(previous) if previous is not None else None
        brain, described = resolve_eval_model(model or spec.model, spec, err)
        teams = team_source(load_object(spec.team), brain, target=spec.team)
        first = teams.make()
        check_agents(cases, first)
        if teams.fresh:
            asyncio.run(first.aclose())
        opened = open_cli_store(url)
        language_model = None if (model or spec.model) in (None, "scripted") else brain
        runner = EvalRun(
            spec=spec,
            teams=teams,
            store=opened,
            store_url=url,
            model_name=described,
            repeat=repeat,
            judge_for=_judges(judge_model or spec.judge_model, language_model),
            spec_path=str(spec_file),
            command=command,
            split=split or spec.split.default,
        )
        report = asyncio.run(_run(runner, cases, err))
    except CLIError as exc:
        fail(err, exc)
        raise typer.Exit(exc.code) from None
    except BatonError as exc:  # EvalError (spec, team, cases) and errors building the team
        code = 2 if isinstance(exc, EvalError) else 1
        fail(err, CLIError(str(exc), code=code))
        raise typer.Exit(code) from None

    out.print(_results_table(report))
    for line in summary_lines(report):
        out.print(line, markup=False)
    first_trace = next((a.trace for r in report.results for a in r.attempts), None)
    if first_trace is not None:
        out.print(f"traces: {first_trace} (one session per attempt)", markup=False)
    if json_path is not None:
        out.print(f"wrote {write_json(report, json_path)}", markup=False)
    if html_path is not None:
        from baton.evals.html import write_html

        out.print(f"wrote {write_html(report, html_path)}", markup=False)
    if before is not None:
        diff = compare(before, report)
        out.print(f"compared with {previous}:", markup=False)
        for line in diff.lines():
            out.print("  " + line, markup=False)
        if diff.regressed:
            raise typer.Exit(1)


async def _run(runner: Any, cases: list[Any], console: Console) -> EvalReport:
    """The eval with a progress bar on `console`; the store closed at the end."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    total = len(cases) * runner.repeat
    try:
        with Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=console,
            transient=True,
        ) as bar:
            task = bar.add_task("eval", total=total)

            def advance(result: Any, attempt: Any) -> None:
                bar.update(task, advance=1, description=f"eval {result.id}")

            report: EvalReport = await runner.run(cases, progress=advance)
            return report
    finally:
        await runner.store.close()


def _command_line(
    spec: Path,
    model: str | None,
    split: str | None,
    limit: int | None,
    tags: list[str] | None,
    repeat: int,
    store: str | None,
) -> str:
    args = ["baton", "eval", str(spec)]
    for flag, value in (("--model", model), ("--split", split), ("--store", store)):
        if value is not None:
            args += [flag, value]
    if limit is not None:
        args += ["--limit", str(limit)]
    for t in tags or ():
        args += ["--tag", t]
    if repeat != 1:
        args += ["--repeat", str(repeat)]
    return shlex.join(args)
