"""Measure the LLM judge where it acts, and keep it only where it helps.

    report = router.fit(labelled)          # measures the judge when the router has one
    report["llm"].enabled, report["llm"].threshold, report["llm"].summary()

The judge is asked only about the queries the tiers before it abstain on (the band). Without
it those fall back, i.e. come out `unknown`, which is right for unknown queries and wrong for
in-scope ones. `measure_judge` finds the band of the labelled queries honestly: the semantic
tier is refitted without each of `folds` deterministic folds of them (unknown ones held out by
topic, as in its own fit) and judges the held-out part, so a query is in the band when a tier
that never saw it abstains. Then it asks the judge about at most `max_calls` band queries
(a seeded sample when the band is larger), and compares on those queries three choices:
abstaining (the judge off), the judge acting on every route it names, and the judge acting
only above a confidence threshold (its accuracy cross-validated: the threshold is fitted on
the other folds of the answers). The best estimate wins, ties going to the simpler choice; so
the judge stays on only when it beats abstaining, with the threshold fitted on every answer
when thresholding is what wins; otherwise it is turned off (it abstains without a model
call) and the reason is logged. With fewer than `min_band` band queries nothing is measured
and the judge is left as it was, with a warning.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from baton.routing.base import UNKNOWN, Labelled, TierVerdict

if TYPE_CHECKING:
    from baton.routing.judge import JudgeAnswer, LLMJudge
    from baton.routing.router import Router

log = logging.getLogger(__name__)

MAX_CALLS = 40
"""Default cap on judge calls while fitting (about 4 s each with the embedded model on CPU)."""
MIN_BAND = 8
"""Band queries needed before the judge is measured at all."""
FOLDS = 5


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
        lines = [f"llm: judge {state}{threshold}: {self.reason}"]
        if self.measured:
            lines.append(
                f"  band: {self.n_band} of {self.n_labelled} labelled queries, {self.n_judged} "
                f"judged ({self.calls} calls); answers {self.answers}"
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
) -> JudgeFit:
    """Measure `judge` (one of `router`'s tiers, after the others were fitted) on the band of
    `labelled`; with `apply`, turn it on (with the fitted threshold) or off accordingly."""
    if max_calls < 1:
        raise ValueError("max_calls must be at least 1 (fit with judge=False to skip the judge)")
    band, verdicts = await _band(router, judge, labelled, folds, seed)
    n = len(labelled)
    if len(band) < min_band:
        reason = f"{len(band)} labelled queries in the band (need {min_band}): not measured, " + (
            "left on" if judge.enabled else "left off"
        )
        warning = (
            "the judge could not be measured: too few labelled queries that the tiers before "
            f"it abstain on ({len(band)} < {min_band}); add labelled queries like the ones "
            "it will see, or fit with judge=False"
        )
        log.warning("llm judge fit: %s", warning)
        return JudgeFit(
            judge.enabled, judge.threshold, reason, False, n, len(band), warnings=(warning,)
        )
    chosen = band
    if len(band) > max_calls:
        chosen = sorted(random.Random(seed).sample(band, max_calls))
    answers = [await _ask(judge, labelled[i].text, verdicts[i]) for i in chosen]
    gold = [labelled[i].label for i in chosen]
    routed = [a.route if a.route not in (None, UNKNOWN) else None for a in answers]
    conf = [a.confidence if a.confidence is not None else 0.0 for a in answers]
    abstain = sum(g is None for g in gold) / len(gold)
    every = accuracy_at(routed, conf, gold, -math.inf)
    cv = _cross_validated(routed, conf, gold, folds, seed)
    fitted, _ = best_threshold(routed, conf, gold)
    lowest = min((c for r, c in zip(routed, conf, strict=True) if r is not None), default=None)
    filters = fitted is not None and lowest is not None and fitted > lowest
    # off, on for every answer, on above the fitted threshold: the best estimate wins, ties
    # going to the simpler choice (a threshold that filters nothing is no choice of its own)
    on = max(every, cv) if filters else every
    helps = on > abstain
    threshold = fitted if helps and filters and cv > every else None
    counts = {
        "route": sum(r is not None for r in routed),
        "unknown": sum(a.route == UNKNOWN for a in answers),
        "invalid": sum(a.route is None for a in answers),
    }
    how = (
        f"acting on every answer {every:.3f}"
        + (f", above a fitted confidence threshold {cv:.3f} (cross-validated)" if filters else "")
        + f", abstaining {abstain:.3f}, over {len(chosen)} judged queries"
    )
    if helps:
        reason = f"beats abstaining on the band: {how}"
        log.info("llm judge fit: on, %s", reason)
    else:
        reason = f"does not beat abstaining on the band: {how}"
        log.warning("llm judge fit: turned off, it %s", reason)
    result = JudgeFit(
        enabled=helps,
        threshold=threshold,
        reason=reason,
        measured=True,
        n_labelled=n,
        n_band=len(band),
        n_judged=len(chosen),
        calls=sum(a.calls for a in answers),
        abstain_accuracy=abstain,
        every_accuracy=every,
        threshold_accuracy=cv if filters else None,
        judge_accuracy=on,
        answers=counts,
    )
    if apply:
        judge.enabled = helps
        judge.threshold = threshold
        judge.reason = reason
    return result


async def _ask(judge: LLMJudge, text: str, previous: Sequence[TierVerdict]) -> JudgeAnswer:
    """The judge's answer; a failing model counts as no valid answer, as in `Router.route`."""
    from baton.routing.judge import JudgeAnswer

    try:
        return await judge.ask(text, None, previous)
    except Exception as exc:
        return JudgeAnswer(None, None, [], f"{type(exc).__name__}: {exc}", 0.0)


def accuracy_at(
    routed: Sequence[str | None], conf: Sequence[float], gold: Sequence[str | None], t: float
) -> float:
    """Accuracy when a named route acts at confidence >= t and everything else is unknown."""
    right = 0
    for r, c, g in zip(routed, conf, gold, strict=True):
        answer = r if r is not None and c >= t else None
        right += answer == g
    return right / len(gold) if gold else 0.0


def best_threshold(
    routed: Sequence[str | None], conf: Sequence[float], gold: Sequence[str | None]
) -> tuple[float | None, float]:
    """(threshold, accuracy) that maximises accuracy; ties go to the higher threshold. None:
    acting on no route is best (the judge should defer on everything)."""
    best: tuple[float | None, float] = (None, sum(g is None for g in gold) / max(len(gold), 1))
    for t in sorted({c for r, c in zip(routed, conf, strict=True) if r is not None}, reverse=True):
        accuracy = accuracy_at(routed, conf, gold, t)
        if accuracy > best[1]:
            best = (t, accuracy)
    return best


def _cross_validated(
    routed: Sequence[str | None],
    conf: Sequence[float],
    gold: Sequence[str | None],
    folds: int,
    seed: int,
) -> float:
    """Accuracy of the judge with a threshold fitted on the other folds, over every answer."""
    order = list(range(len(gold)))
    random.Random(seed).shuffle(order)
    k = max(2, min(folds, len(gold)))
    right = 0
    for f in range(k):
        held = set(order[f::k])
        train = [i for i in range(len(gold)) if i not in held]
        t, _ = best_threshold(
            [routed[i] for i in train], [conf[i] for i in train], [gold[i] for i in train]
        )
        for i in held:
            answer = routed[i] if t is not None and routed[i] is not None and conf[i] >= t else None
            right += answer == gold[i]
    return right / len(gold) if gold else 0.0


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
            part = copy.copy(tier)
            try:
                part.fit(train)
                chosen = part
            except ValueError:  # e.g. the training part has nothing to fit on
                chosen = tier
            for i, verdict in zip(held, chosen.judge_many([texts[i] for i in held]), strict=True):
                out[int(i)] = verdict
    finally:
        quiet.setLevel(level)
    return out
