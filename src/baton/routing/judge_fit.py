"""Measure the LLM judge where it acts, and keep it only where it helps.

    report = router.fit(labelled)          # measures the judge when the router has one
    report["llm"].enabled, report["llm"].threshold, report["llm"].summary()

The judge is asked about two kinds of query. The band: the tiers before it abstain; without
the judge those fall back, i.e. come out `unknown`, which is right for unknown queries and
wrong for in-scope ones. The review pool: the semantic tier accepted a route, but with a low
score or a small lead over the runner-up; without the judge that route stands. `measure_judge`
finds both honestly: the semantic tier is refitted without each of `folds` deterministic folds
of the labelled queries (unknown ones held out by topic, as in its own fit) and judges the
held-out part, so a query is in the band when a tier that never saw it abstains, and in the
pool when such a tier accepts it with a score under the highest review level tried, or a lead
under the highest review margin tried (`REVIEW_QUANTILES` of the accepted scores and leads).

Then it asks the judge about at most `max_calls` of those queries (a seeded sample when there
are more) and compares, on them: the router without the judge (off), the judge acting on every
band answer (nothing fitted), and the judge behind a fitted gate (a review level and a
confidence threshold, `baton.routing.judge_gate`; its accuracy cross-validated: the gate is
fitted on the other folds of the answers). The best estimate wins, ties going to the simpler
choice; so the judge stays on only when it beats going without it, with the gate fitted on
every answer when the gate is what wins (the semantic tier then proposes, instead of
deciding, the routes it accepts under the review level or margin: `Semantic.review_below`,
`Semantic.review_margin`); otherwise it
is turned off (it abstains without a model call) and the reason is logged. With fewer than
`min_band` queries in the band and pool together nothing is measured and the judge is left as
it was, with a warning.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from baton.routing.base import UNKNOWN, Labelled, TierVerdict
from baton.routing.judge_gate import (
    DEFER,
    EVERY,
    Judged,
    accuracy,
    baseline_accuracy,
    best_gate,
    cross_validated,
)

if TYPE_CHECKING:
    from baton.routing.judge import JudgeAnswer, LLMJudge
    from baton.routing.router import Router
    from baton.routing.semantic import Semantic

log = logging.getLogger(__name__)

MAX_CALLS = 40
"""Default cap on judge calls while fitting (about 4 s each with the embedded model on CPU)."""
MIN_BAND = 8
"""Band queries needed before the judge is measured at all."""
FOLDS = 5
REVIEW_QUANTILES = (0.25, 0.5)
"""Review levels and margins tried: these quantiles of the scores the semantic tier accepts
with, and of the leads its accepted routes have over the runner-up (held out). Accepted
queries under the highest of either are asked about too."""


@dataclass(frozen=True)
class JudgeFit:
    """What `Router.fit` measured of the judge on the band, and what it chose."""

    enabled: bool
    """Whether the judge acts after this fit."""
    threshold: float | None
    """The confidence below which it defers (None: it acts on every route it names)."""
    reason: str
    """Why it is on or off, in words (also logged)."""
    measured: bool
    """False when the band was too small to measure (the judge was left as it was)."""
    n_labelled: int = 0
    n_band: int = 0
    """Labelled queries every tier before the judge abstained on (held-out, fold by fold)."""
    n_judged: int = 0
    """Of those, the ones the judge was asked about (at most the call cap)."""
    calls: int = 0
    """Model calls made while fitting (re-asks included)."""
    abstain_accuracy: float | None = None
    """Accuracy on the judged band queries without the judge (only unknown ones are right)."""
    every_accuracy: float | None = None
    """Accuracy on them with the judge acting on every route it names (nothing is fitted, so
    this is a fair estimate)."""
    threshold_accuracy: float | None = None
    """Cross-validated accuracy on them with the judge acting above a confidence threshold
    fitted on the other folds."""
    judge_accuracy: float | None = None
    """The better of the two: what the judge is estimated at when on."""
    answers: dict[str, int] | None = None
    """How the judge answered: `route`, `unknown`, `invalid`."""
    warnings: tuple[str, ...] = ()
    n_review: int = 0
    """Labelled queries in the review pool: accepted by the semantic tier (held out) with a
    score under the highest review level tried."""
    review_below: float | None = None
    """The review level chosen: the semantic tier proposes (for the judge to review) the
    routes it accepts with a score under it. None: no review by score."""
    review_margin: float | None = None
    """The review margin chosen: the semantic tier proposes the routes it accepts with a lead
    over the runner-up under it. None: no review by margin."""
    review_threshold: float | None = None
    """The confidence the judge needs, besides `threshold`, to overturn a reviewed route (None:
    `threshold` alone, or no review)."""

    @property
    def gain(self) -> float | None:
        """Cross-validated accuracy the judge adds on the band (None when not measured)."""
        if self.judge_accuracy is None or self.abstain_accuracy is None:
            return None
        return self.judge_accuracy - self.abstain_accuracy

    def summary(self) -> str:
        """A few human-readable lines."""
        state = "on" if self.enabled else "off"
        threshold = ""
        if self.enabled and self.threshold is not None:
            threshold = f", acts at confidence >= {self.threshold:.2f}"
        if self.enabled and self.review_below is not None:
            threshold += f", reviews semantic routes scored < {self.review_below:.3f}"
        if self.enabled and self.review_margin is not None:
            threshold += f", reviews semantic routes leading by < {self.review_margin:.3f}"
        if self.enabled and self.review_threshold is not None:
            threshold += f", overturns one at confidence >= {self.review_threshold:.2f}"
        lines = [f"llm: judge {state}{threshold}: {self.reason}"]
        if self.measured:
            lines.append(
                f"  band: {self.n_band} of {self.n_labelled} labelled queries, review pool "
                f"{self.n_review}, {self.n_judged} judged ({self.calls} calls); answers "
                f"{self.answers}"
            )
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def fit_judges(
    router: Router, labelled: Sequence[Labelled], *, max_calls: int = MAX_CALLS
) -> dict[str, JudgeFit]:
    """Measure every `LLMJudge` of `router` (see `measure_judge`), by tier name; from sync code
    (inside a running event loop the measurement runs on a worker thread)."""
    from baton.routing.judge import LLMJudge

    judges = [tier for tier in router.tiers if isinstance(tier, LLMJudge)]
    if not judges:
        return {}

    async def measure() -> dict[str, JudgeFit]:
        return {
            j.name: await measure_judge(router, j, labelled, max_calls=max_calls) for j in judges
        }

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(measure())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, measure()).result()


async def measure_judge(
    router: Router,
    judge: LLMJudge,
    labelled: Sequence[Labelled],
    *,
    max_calls: int = MAX_CALLS,
    min_band: int = MIN_BAND,
    folds: int = FOLDS,
    seed: int = 0,
    apply: bool = True,
    review: bool = True,
) -> JudgeFit:
    """Measure `judge` (one of `router`'s tiers, after the others were fitted) on the band of
    `labelled` and, with `review`, on the review pool (held-out queries the semantic tier
    accepted with a low score or a small lead); with `apply`, turn it on (with the fitted gate:
    threshold, review level and margin) or off accordingly."""
    if max_calls < 1:
        raise ValueError("max_calls must be at least 1 (fit with judge=False to skip the judge)")
    band, verdicts = await _band(router, judge, labelled, folds, seed)
    semantic = _semantic_before(router, judge)
    pool, levels, margins = (
        _review_pool(verdicts) if review and semantic is not None else ([], [], [])
    )
    n = len(labelled)
    if len(band) + len(pool) < min_band:
        reason = (
            f"{len(band) + len(pool)} labelled queries in the band and review pool (need "
            f"{min_band}): not measured, " + ("left on" if judge.enabled else "left off")
        )
        warning = (
            "the judge could not be measured: too few labelled queries that the tiers before "
            f"it abstain on or are unsure of ({len(band) + len(pool)} < {min_band}); add "
            "labelled queries like the ones it will see, or fit with judge=False"
        )
        log.warning("llm judge fit: %s", warning)
        return JudgeFit(
            judge.enabled, judge.threshold, reason, False, n, len(band), warnings=(warning,)
        )
    chosen = sorted(band + pool)
    if len(chosen) > max_calls:
        chosen = sorted(random.Random(seed).sample(chosen, max_calls))
    answers = [await _ask(judge, labelled[i].text, verdicts[i]) for i in chosen]
    items = [_judged(labelled[i], verdicts[i][-1], a) for i, a in zip(chosen, answers, strict=True)]
    off = baseline_accuracy(items)
    every = accuracy(items, EVERY)
    cv = cross_validated(items, levels, folds, seed, margins)
    fitted, _ = best_gate(items, levels, margins)
    # off, on for every band answer, on with a fitted gate: the best estimate wins, ties going
    # to the simpler choice (a gate that changes nothing is no choice of its own)
    gated = fitted not in (EVERY, DEFER)
    on = max(every, cv) if gated else every
    helps = on > off
    gate = fitted if helps and gated and cv > every else EVERY
    threshold = gate.threshold if gate.filters else None
    reviewing = gate.level is not None or gate.margin is not None
    review_threshold = gate.review_threshold if reviewing and gate.review_filters else None
    counts = {
        "route": sum(a.route not in (None, UNKNOWN) for a in answers),
        "unknown": sum(a.route == UNKNOWN for a in answers),
        "invalid": sum(a.route is None for a in answers),
    }
    judged_pool = sum(x.score is not None for x in items)
    how = (
        f"acting on every band answer {every:.3f}"
        + (f", with a fitted gate {cv:.3f} (cross-validated)" if gated else "")
        + f", without it {off:.3f}, over {len(items)} judged queries"
        + (f" ({judged_pool} from the review pool)" if judged_pool else "")
    )
    if helps:
        reason = f"beats going without it: {how}"
        log.info("llm judge fit: on, %s", reason)
    else:
        reason = f"does not beat going without it: {how}"
        log.warning("llm judge fit: turned off, it %s", reason)
    result = JudgeFit(
        enabled=helps,
        threshold=threshold,
        reason=reason,
        measured=True,
        n_labelled=n,
        n_band=len(band),
        n_judged=len(items),
        calls=sum(a.calls for a in answers),
        abstain_accuracy=off,
        every_accuracy=every,
        threshold_accuracy=cv if gated else None,
        judge_accuracy=on,
        answers=counts,
        n_review=len(pool),
        review_below=gate.level if helps else None,
        review_margin=gate.margin if helps else None,
        review_threshold=review_threshold if helps else None,
    )
    if apply:
        judge.enabled = helps
        judge.threshold = threshold
        judge.reason = reason
        if semantic is not None and review:
            semantic.review_below = result.review_below
            semantic.review_margin = result.review_margin
            judge.review_threshold = result.review_threshold
    return result


def _semantic_before(router: Router, judge: LLMJudge) -> Semantic | None:
    """The last `Semantic` tier before `judge` (the one whose routes it may review)."""
    from baton.routing.semantic import Semantic

    before = router.tiers[: router.tiers.index(judge)]
    return next((t for t in reversed(before) if isinstance(t, Semantic)), None)


def _review_pool(
    verdicts: Sequence[Sequence[TierVerdict]],
) -> tuple[list[int], list[float], list[float]]:
    """(queries the semantic tier accepted, held out, with a score under the highest review
    level tried or a lead over the runner-up under the highest review margin tried; the
    levels tried; the margins tried: `REVIEW_QUANTILES` of the accepted scores and leads)."""
    from baton.routing.semantic import Semantic, lead_of

    accepted = [
        (i, float(v[-1].score), lead_of(v[-1].candidates))
        for i, v in enumerate(verdicts)
        if v
        and v[-1].tier == Semantic.name
        and v[-1].target not in (None, UNKNOWN)
        and v[-1].score is not None
    ]
    if not accepted:
        return [], [], []

    def tried(values: list[float]) -> list[float]:
        ordered = sorted(v for v in values if v != float("inf"))
        if not ordered:
            return []
        return sorted({ordered[int(q * (len(ordered) - 1))] for q in REVIEW_QUANTILES})

    levels = tried([score for _, score, _ in accepted])
    margins = tried([lead for _, _, lead in accepted])
    top_level = levels[-1] if levels else -float("inf")
    top_margin = margins[-1] if margins else -float("inf")
    pool = [i for i, score, lead in accepted if score < top_level or lead < top_margin]
    return pool, levels, margins


def _judged(item: Labelled, verdict: TierVerdict, answer: JudgeAnswer) -> Judged:
    """The judge's answer on one labelled query, beside what the router says without it."""
    from baton.routing.semantic import Semantic, lead_of

    pooled = verdict.tier == Semantic.name and verdict.target not in (None, UNKNOWN)
    return Judged(
        gold=item.label,
        baseline=verdict.target if pooled else None,
        score=verdict.score if pooled else None,
        route=answer.route,
        confidence=answer.confidence if answer.confidence is not None else 0.0,
        lead=lead_of(verdict.candidates) if pooled else None,
    )


async def _ask(judge: LLMJudge, text: str, previous: Sequence[TierVerdict]) -> JudgeAnswer:
    """The judge's answer; a failing model counts as no valid answer, as in `Router.route`."""
    from baton.routing.judge import JudgeAnswer

    try:
        return await judge.ask(text, None, previous)
    except Exception as exc:
        return JudgeAnswer(None, None, [], f"{type(exc).__name__}: {exc}", 0.0)


async def _band(
    router: Router, judge: LLMJudge, labelled: Sequence[Labelled], folds: int, seed: int
) -> tuple[list[int], list[list[TierVerdict]]]:
    """The labelled queries every tier before the judge abstains on, with those verdicts.

    The semantic tier is refitted without each fold and judges it (held-out verdicts); other
    tiers before the judge (rules) decide as they are.
    """
    from baton.routing.semantic import Semantic

    position = router.tiers.index(judge)
    before = router.tiers[:position]
    texts = [x.text for x in labelled]
    held_out: dict[int, dict[int, TierVerdict]] = {}
    for t, tier in enumerate(before):
        if isinstance(tier, Semantic):
            held_out[t] = _held_out_semantic(tier, labelled, folds, seed)
    verdicts: list[list[TierVerdict]] = [[] for _ in texts]
    band = []
    for i, text in enumerate(texts):
        for t, tier in enumerate(before):
            if t in held_out:
                verdict = held_out[t][i]
            else:
                try:
                    verdict = await tier.decide(text, None, None, verdicts[i])
                except Exception as exc:  # a failing tier abstains, as in `Router.route`
                    verdict = TierVerdict(tier.name, None, detail=f"{type(exc).__name__}: {exc}")
            verdicts[i].append(verdict)
            if verdict.target is not None:
                break
        else:
            band.append(i)
    return band, verdicts


def _held_out_semantic(
    tier: Any, labelled: Sequence[Labelled], folds: int, seed: int
) -> dict[int, TierVerdict]:
    """Each labelled query's verdict from a copy of `tier` fitted without its fold."""
    import numpy as np

    from baton.routing.folds import topic_folds

    texts = [x.text for x in labelled]
    vectors = tier.examples_encoder.encode(texts)
    # the copies decide every route they accept (no review), with the fitted tier's head, so
    # their scores are on the scale a review level applies to
    plain = copy.copy(tier)
    plain.review_below = None
    plain.review_margin = None
    plain.fit_review_margin = False
    head = "linear" if getattr(tier, "_linear", None) is not None else "nearest"
    is_unknown = np.array([x.label is None for x in labelled])
    out: dict[int, TierVerdict] = {}
    quiet = logging.getLogger("baton.routing.semantic")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # each fold's fit repeats the full fit's warnings
    try:
        for held in topic_folds(vectors, is_unknown, max(2, min(folds, len(texts))), seed):
            if len(held) == 0:
                continue
            out_of_fold = set(held.tolist())
            train = [labelled[i] for i in range(len(texts)) if i not in out_of_fold]
            part = copy.copy(plain)
            try:
                part.fit(train, head=head)
                chosen = part
            except ValueError:  # e.g. the training part has nothing to fit on
                chosen = plain
            for i, verdict in zip(held, chosen.judge_many([texts[i] for i in held]), strict=True):
                out[int(i)] = verdict
    finally:
        quiet.setLevel(level)
    return out
