"""The semantic tier: nearest example utterances under a sentence encoder, with fitted thresholds.

How a query is judged:

1. It is encoded once; one matrix product scores it against every example utterance.
2. A route scores its best-matching example. (`best_of=2`, the mean of its best two, helps
   when no unknown examples are given; with them, cross-validation on the CLINC150
   calibration splits found no gain, so the default stays 1: see `benchmarks/routing.py --cv`.)
3. It is confident in the top route when that score reaches the route's threshold, beats the
   runner-up by the margin, and (after `fit` with unknown examples) beats the query's
   `reject_k` nearest known unknown examples, on average, by the reject gap. Otherwise it
   abstains with the ranked candidates, for the LLM judge. Below the floor (a score that
   almost no in-scope example falls under) it answers `UNKNOWN` confidently.

Why an average of the k nearest known unknowns and not the nearest one: known unknowns come in
topics, and a query from a topic that is in the set is caught either way, but a new topic
(most unknown traffic) sits near no single example. The average over k is a smoother
estimate of how crowded the query's neighbourhood of unknowns is, and carries over to new
topics: in cross-validation on CLINC150 calibration data with whole unknown topics held out,
k = 5 beat k = 1 on all three specs and k = 10 tied it (`benchmarks/routing.py --cv`).

Two heads decide after `fit`. The one above, "nearest", needs no more than the routes'
utterances and says why it abstains. The "linear" head (`baton.routing.linear`) is a logistic
regression over the vectors, trained on the utterances and the labelled fitting examples, with
an unknown class for the known unknowns; it is confident when its most probable class is
probable enough (a threshold fitted on out-of-fold probabilities). With `head="auto"` (the
default) `fit` cross-validates the candidates on its labelled examples, holding unknown ones
out by topic (`baton.routing.folds`): the plain nearest head, the nearest head with the
labelled in-scope queries learned as examples, and the linear head; the plain head stays
unless another is clearly better. On CLINC150 the linear head wins where the labelled examples
include neighbouring intents (intents16: 0.941 on test, Chinese probes of intents16-zhex
0.976), and learned examples win on domains10 (0.815), whose unknown traffic is of new topics.

What a route is scored against: its example utterances and its description (so a route with
a description alone routes), while its `not_for` counts against it (`baton.routing.prototypes`).

Thresholds always come from data. `fit` searches the margin, the reject gap and a global
threshold that maximise accuracy on labelled examples (correct routes for in-scope ones,
rejections for unknown ones), then fits each route's threshold on the examples it wins and
shrinks it toward the global one in proportion to how few there are (`baton.routing.rule`).
No labelled example is scored against a copy of itself (`baton.routing.duplicates`): a fit on
the routes' own examples would otherwise see every one score 1.0 and reject every new query.
With `learn_examples=True` the in-scope fitting examples that copy no route example also become
examples of their routes (each scored without itself while fitting). `fit` reports its
cross-validated accuracy and what makes it less trustworthy (`FitReport.cv`, `.warnings`).

Review: a route accepted with a score under `review_below`, or a lead over the runner-up under
`review_margin`, is proposed instead of decided (the verdict's `proposal`), so an LLM judge
behind the tier reviews it; the route stands when the judge defers. `review_margin="fit"` lets
`fit` set the margin from held-out decisions (the band where they were wrong);
`Router.fit` sets both where it measures the judge (`baton.routing.judge_fit`).

Before any `fit`, a provisional threshold per route comes from the route's own utterances
(leave-one-out: the median score an utterance gets from its siblings), which is conservative:
it routes only queries as close to a route as its typical example is to the others.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from baton.routing.base import UNKNOWN, Labelled, Route, TierVerdict
from baton.routing.duplicates import duplicates
from baton.routing.encoders import CachedEncoder, Encoder, default_encoder
from baton.routing.linear import LinearHead, fit_linear
from baton.routing.prototypes import (
    DEFAULT_DESCRIPTION_BIAS,
    description_bias,
    negative_texts,
    penalise,
    positive_texts,
)
from baton.routing.rule import NO_UNKNOWN_KEEP, Rule, fit_rule
from baton.routing.selection import (
    CV_FOLDS,
    FitPredict,
    accept_threshold,
    choose,
    cross_validate,
    out_of_fold_accuracy,
)

if TYPE_CHECKING:
    import os

    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float32]

NEG = -1e9
"""The score of a missing example slot (never wins, never NaN)."""
OWN_EXAMPLES_SHARE = 0.5
"""`fit` warns when at least this share of its in-scope examples copy the routes' examples."""
REVIEW_SHARE = 0.25
"""A fitted review margin (`Semantic(review_margin="fit")`) is at most this quantile of the
leads the held-out accepted routes had over their runner-up: the judge reviews at most about
this share of the routes the tier accepts (each review is a model call)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FitReport:
    """What `Semantic.fit` chose, and its accuracy on the examples it was fitted on."""

    threshold: float
    """The global threshold that per-route thresholds are shrunk toward."""
    thresholds: dict[str, float]
    margin: float
    reject_gap: float | None
    """How far the top route must beat the nearest known unknown example; None: not used."""
    floor: float | None
    accuracy: float
    """In-sample accuracy on the fitting examples (optimistic; evaluate on held-out data)."""
    n_in: int
    n_unknown: int
    reject_examples: int
    per_route: dict[str, int] = field(default_factory=dict)
    """How many fitting examples each route's own threshold was fitted on."""
    reject_k: int = 1
    """How many nearest known unknown examples the reject gap is measured against."""
    learned_examples: int = 0
    """In-scope fitting examples added to their routes' examples (`learn_examples=True`)."""
    head: str = "nearest"
    """Which head decides: "nearest" (best example + thresholds) or "linear"."""
    cv_accuracy: dict[str, float] = field(default_factory=dict)
    """Cross-validated accuracy of each head compared (empty when none was compared)."""
    accept: float | None = None
    """The linear head's probability threshold; None when the nearest head decides."""
    cv: float | None = None
    """Cross-validated accuracy of what was chosen: from the heads' comparison when one was run
    (`cv_accuracy`), else over 5 deterministic folds of the labelled examples (unknown ones
    held out by topic, each scored without its copies); None with under two in-scope ones."""
    warnings: tuple[str, ...] = ()
    """What makes this fit less trustworthy (also logged): copies of the routes' own examples
    among the labelled ones, no unknown examples, routes without a labelled example."""
    copies: int = 0
    """In-scope labelled examples that copy one of the routes' example utterances (same text
    once normalised, or cosine >= `duplicates.DUPLICATE_SIMILARITY`); scored without it."""
    sources: dict[str, str] = field(default_factory=dict)
    """Per route, where its threshold came from, in words."""
    description_bias: float | None = None
    """What description and `not_for` scores are raised by (see `baton.routing.prototypes`);
    None when no route has a description or `not_for`."""
    review_margin: float | None = None
    """The lead over the runner-up under which an accepted route is proposed for review, fitted
    on held-out decisions (see `Semantic(review_margin="fit")`); None: the held-out accepted
    routes were never wrong within the band `REVIEW_SHARE` allows, or too few to tell."""

    def summary(self) -> str:
        """A few human-readable lines: head, thresholds and their sources, accuracy, warnings."""
        cv = f"{self.cv:.3f}" if self.cv is not None else "n/a (too few examples)"
        lines = [
            f"semantic: {self.head} head; cross-validated accuracy {cv}; "
            f"in-sample {self.accuracy:.3f} ({self.n_in} in-scope, {self.n_unknown} unknown)",
            f"  margin {self.margin:.3f}; pooled threshold {self.threshold:.3f}"
            + (f"; floor {self.floor:.3f}" if self.floor is not None else "")
            + (f"; linear head acts at p >= {self.accept:.3f}" if self.accept is not None else ""),
        ]
        if self.review_margin is not None:
            lines.append(
                f"  routes accepted with a lead under {self.review_margin:.3f} over the runner-up "
                "are proposed for review (held-out ones were wrong there)"
            )
        for name, value in self.thresholds.items():
            source = self.sources.get(name, "")
            lines.append(f"  {name}: {value:.3f}" + (f" ({source})" if source else ""))
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


HEADS = ("auto", "nearest", "linear")


@dataclass
class _Nearest:
    """The nearest-example head fitted on some labelled vectors."""

    index: _Index
    rule: Rule
    reject: Any  # (m, dim) known unknown vectors, or None when the reject gap is unused
    reject_k: int
    matrix: Any  # the fitting examples' route scores (leave-one-out)
    near: Any  # their mean similarity to their nearest known unknowns, or None
    learned: int
    learned_rows: Any  # (learned,) which fitting examples were learned, in fitting order
    landed: Any  # (index rows,) where row k of [routes' rows, learned rows] sits, or None
    reject_rows: Any  # (m,) which fitting examples make the reject set


@dataclass
class _Index:
    """Route example vectors laid out for one-product scoring."""

    names: list[str]
    vectors: Any  # (n, dim) float32, rows grouped by route
    slots: Any  # (routes, widest) int: row of each example, n for an empty slot
    counts: Any  # (routes,) int
    fingerprint: str
    bias: Any = None  # (n,) float32 added to each row's similarity (descriptions), or None
    described: Any = None  # (n,) bool: the row is a description, not an example
    negatives: _Index | None = None  # the routes' `not_for` texts, laid out the same way


def _make_index(
    names: list[str],
    vectors: Any,
    owner: Any,
    fingerprint: str,
    bias: Any = None,
    described: Any = None,
    negatives: _Index | None = None,
) -> _Index:
    """Lay out example vectors (rows of `vectors`, `owner[i]` = route position) by route."""
    import numpy as np

    order = np.argsort(owner, kind="stable")  # group rows by route, keeping their order
    vectors, owner = vectors[order], owner[order]
    counts = np.bincount(owner, minlength=len(names)).astype(np.int64)
    widest = int(counts.max()) if len(counts) else 0
    slots = np.full((len(names), widest), len(vectors), dtype=np.int64)
    start = 0
    for i, n in enumerate(counts):
        slots[i, :n] = np.arange(start, start + n)
        start += int(n)
    if described is None:
        described = np.zeros(len(vectors), dtype=bool)
    if bias is not None:
        bias = np.asarray(bias, dtype=np.float32)[order]
        if not bias.any():
            bias = None
    return _Index(names, vectors, slots, counts, fingerprint, bias, described[order], negatives)


def _masked_mean_of_top(sims: Any, k: int) -> Any:
    """Per row, the mean of the `k` largest values that are not -inf (-inf when none is)."""
    import numpy as np

    if sims.shape[1] == 0:
        return np.full(sims.shape[0], -np.inf)
    k = min(k, sims.shape[1])
    top = -np.sort(-sims, axis=1)[:, :k]
    finite = np.isfinite(top)
    used = finite.sum(axis=1)
    total = np.where(finite, top, 0.0).sum(axis=1)
    return np.where(used > 0, total / np.maximum(used, 1), -np.inf)


def _mean_of_top(sims: Any, k: int) -> Any:
    """Per row, the mean of the `k` largest values (the row maximum when k is 1)."""
    import numpy as np

    if k <= 1:
        return sims.max(axis=1)
    width = sims.shape[1]
    return np.partition(sims, width - k, axis=1)[:, width - k :].mean(axis=1)


class Semantic:
    """Routes by similarity to each route's example utterances; abstains when unsure."""

    name = "semantic"

    def __init__(
        self,
        encoder: Encoder | None = None,
        thresholds: float | Mapping[str, float] | None = None,
        margin: float | None = None,
        top_k: int = 3,
        *,
        floor: float | None = None,
        best_of: int = 1,
        prior: float = 10.0,
        reject_k: int = 5,
        head: str = "auto",
        linear_c: float = 10.0,
        cache: bool | str | os.PathLike[str] = True,
        review_below: float | None = None,
        review_margin: float | Literal["fit"] | None = None,
    ) -> None:
        """Set up the tier; nothing is encoded before `bind`.

        `thresholds`/`margin`/`floor` given here are used until `fit` replaces them.
        `best_of`: a route scores the mean of its best `best_of` examples (1: the best one).
        `prior`: how many examples' weight the global threshold has when a route's own is
        fitted (more: per-route thresholds stay closer to the global one).
        `reject_k`: after `fit` with unknown examples, the reject gap is measured against the
        mean similarity of the query's `reject_k` nearest known unknowns (1: the nearest).
        `head`: who decides after `fit`: "nearest" (a route scores its best example, with
        thresholds), "linear" (logistic regression over the vectors, with an unknown class
        when `fit` has unknown examples), or "auto" (the default: `fit` cross-validates both on
        its labelled examples and keeps the linear head only when it is clearly better).
        `linear_c`: the linear head's inverse L2 strength (as scikit-learn's `C`).
        `cache`: True for the shared disk cache, False for memory only, or a file path.
        `review_below`: a route accepted with a score under this is proposed, not decided:
        the tier abstains with it as `proposal`, so a judge behind it reviews it (the route
        stands when the judge defers). `Router.fit` sets it when the judge measured better
        there than the tier; None (default): every accepted route is decided here.
        `review_margin`: likewise for a route accepted with a lead over the runner-up (the
        second candidate's score, or probability with the linear head) under this: unsure
        between two routes, it is proposed for review. "fit": `fit` sets it from held-out
        decisions (`FitReport.review_margin`): up to the largest lead a wrong held-out route
        had, at most the `REVIEW_SHARE` quantile of the accepted ones' leads. `Router.fit`
        replaces it with what it measured when it measures the judge. With `top_k=1` there is
        no runner-up and no route is reviewed by margin.
        """
        if encoder is None:
            encoder = default_encoder()
        if isinstance(encoder, CachedEncoder):
            self.examples_encoder = encoder
            self.encoder: Encoder = encoder.inner
        else:
            self.encoder = encoder
            self.examples_encoder = CachedEncoder(encoder, path=cache)
        if top_k < 1 or best_of < 1 or reject_k < 1:
            raise ValueError("top_k, best_of and reject_k must be at least 1")
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, not {head!r}")
        if linear_c <= 0:
            raise ValueError("linear_c must be positive")
        self.head = head
        self.linear_c = linear_c
        if isinstance(review_margin, str) and review_margin != "fit":
            raise ValueError(
                f"review_margin must be a number, 'fit' or None, not {review_margin!r}"
            )
        self.review_below = review_below
        self.fit_review_margin = review_margin == "fit"
        """Whether `fit` sets `review_margin` from held-out decisions."""
        self.review_margin: float | None = None if review_margin == "fit" else review_margin
        """The lead over the runner-up under which an accepted route is proposed for review."""
        self.top_k = top_k
        self.best_of = best_of
        self.prior = prior
        self.reject_k = reject_k
        self._given_thresholds = thresholds
        self._given_margin = margin
        self._given_floor = floor
        self._routes: tuple[Route, ...] = ()
        self._index: _Index | None = None  # what queries are scored against
        self._bound: _Index | None = None  # the routes' own utterances (`_index` adds learned)
        self._bound_texts: list[str] = []  # the text of each row of `_bound`, in row order
        self._description_bias: float | None = None
        self._provisional: dict[str, float] = {}
        self._provisional_margin = 0.0
        self._fit: FitReport | None = None
        self._reject: Any = None  # (m, dim) vectors of known unknown examples, or None
        self._linear: LinearHead | None = None  # set by `fit` when the linear head decides

    # -- binding ----------------------------------------------------------------------------

    @property
    def routes(self) -> tuple[Route, ...]:
        """The routes bound last."""
        return self._routes

    def bind(self, routes: Sequence[Route]) -> None:
        """Encode every route's utterances, description and `not_for` (cached by content).

        A route is scored when it has example utterances or a description: the description is
        one more example of it (so a route with a description alone routes), and `not_for`
        counts against it (see `baton.routing.prototypes`). Rebinding the same routes keeps
        what `fit` learned; changed routes drop the examples `fit` added
        (`learn_examples=True`), since they were fitted to the old routes.
        """
        import numpy as np

        names = [r.name for r in routes]
        if len(set(names)) != len(names):
            raise ValueError(f"route names must be unique: {names}")
        self._routes = tuple(routes)
        scored = [r for r in routes if positive_texts(r)]
        fingerprint = self._fingerprint(scored)
        if self._bound is not None and self._bound.fingerprint == fingerprint:
            return  # same encoder, same texts: nothing to redo
        per_route = [positive_texts(r) for r in scored]
        texts = [t for ts in per_route for t in ts]
        vectors = self.examples_encoder.encode(texts)
        owner = np.repeat(np.arange(len(scored)), [len(ts) for ts in per_route])
        described = np.array(
            [bool(r.description.strip()) and j == len(ts) - 1
             for r, ts in zip(scored, per_route, strict=True) for j in range(len(ts))],
            dtype=bool,
        )  # fmt: skip
        negative = [negative_texts(r) for r in scored]
        has_text = described.any() or any(negative)
        bias = description_bias(vectors, owner, described) if has_text else None
        if has_text and bias is None:
            bias = DEFAULT_DESCRIPTION_BIAS
        self._description_bias = bias
        negatives = None
        route_names = [r.name for r in scored]
        if any(negative):
            neg_texts = [t for ts in negative for t in ts]
            neg_owner = np.repeat(np.arange(len(scored)), [len(ts) for ts in negative])
            negatives = _make_index(
                route_names,
                self.examples_encoder.encode(neg_texts),
                neg_owner,
                fingerprint,
                bias=np.full(len(neg_texts), bias or 0.0),
            )
        self._bound = _make_index(
            route_names,
            vectors,
            owner,
            fingerprint,
            bias=np.where(described, bias or 0.0, 0.0),
            described=described,
            negatives=negatives,
        )
        self._bound_texts = texts  # rows stay in this order: `owner` is already grouped
        self._index = self._bound
        self._linear = None  # its classes were the old routes: the nearest head decides
        self._provisional, self._provisional_margin = self._leave_one_out()

    def _fingerprint(self, routes: Sequence[Route]) -> str:
        payload = json.dumps(
            [
                self.encoder.name,
                self.best_of,
                [[r.name, positive_texts(r), negative_texts(r)] for r in routes],
            ],
            ensure_ascii=False,
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def _require_index(self) -> _Index:
        if self._index is None:
            raise RuntimeError("Semantic tier used before bind(routes)")
        return self._index

    # -- scoring ----------------------------------------------------------------------------

    @staticmethod
    def _similarities(queries: Any, index: _Index) -> Any:
        """(queries, rows) similarities to an index's rows, description rows raised."""
        sims = queries @ index.vectors.T
        if index.bias is not None:
            sims = sims + index.bias
        return sims

    def _route_scores(self, sims: Any, queries: Any, index: _Index) -> Any:
        """(queries, rows) similarities -> (queries, routes) scores, after `not_for`."""
        scores = self._aggregate(sims, index)
        negatives = index.negatives
        if negatives is None:
            return scores
        import numpy as np

        against = self._similarities(queries, negatives)
        padded = np.concatenate([against, np.full((len(against), 1), NEG, against.dtype)], 1)
        return penalise(scores, padded[:, negatives.slots].max(axis=2))

    def _aggregate(self, sims: Any, index: _Index) -> Any:
        """(queries, examples) similarities -> (queries, routes) route scores."""
        import numpy as np

        padded = np.concatenate([sims, np.full((sims.shape[0], 1), NEG, sims.dtype)], axis=1)
        per_slot = padded[:, index.slots]  # (queries, routes, widest)
        widest = per_slot.shape[2]
        if self.best_of == 1 or widest == 1:
            return per_slot.max(axis=2)
        k = min(self.best_of, widest)
        best = np.partition(per_slot, widest - k, axis=2)[:, :, widest - k :]
        real = best > NEG / 2  # empty slots (and left-out examples) are not averaged in
        used = np.maximum(real.sum(axis=2), 1)
        return np.where(real, best, 0.0).sum(axis=2) / used

    def _score_matrix(self, queries: Any) -> Any:
        index = self._require_index()
        return self._route_scores(self._similarities(queries, index), queries, index)

    def scores(self, text: str) -> list[tuple[str, float]]:
        """Every scored route with its score for `text`, best first (changes nothing)."""
        index = self._require_index()
        if not index.names:
            return []
        row = self._score_matrix(self.encoder.encode([text]))[0]
        return sorted(
            ((n, float(s)) for n, s in zip(index.names, row, strict=True)),
            key=lambda p: p[1],
            reverse=True,
        )

    # -- thresholds -------------------------------------------------------------------------

    def _leave_one_out(self) -> tuple[dict[str, float], float]:
        """Provisional thresholds from the utterances alone: median sibling score per route."""
        import numpy as np

        index = self._require_index()
        n = len(index.vectors)
        own_scores: list[Any] = []
        margins: list[Any] = []
        owner = np.repeat(np.arange(len(index.names)), index.counts)
        for lo in range(0, n, 1024):  # chunks keep the (chunk, n) product small
            rows = np.arange(lo, min(lo + 1024, n))
            queries = index.vectors[rows]
            sims = self._similarities(queries, index)
            sims[np.arange(len(rows)), rows] = NEG  # an utterance may not vote for itself
            agg = self._route_scores(sims, queries, index)
            own = agg[np.arange(len(rows)), owner[rows]]
            agg[np.arange(len(rows)), owner[rows]] = NEG
            own_scores.append(own)
            margins.append(own - agg.max(axis=1) if agg.shape[1] > 1 else own * 0 + np.inf)
        own_all = np.concatenate(own_scores) if own_scores else np.zeros(0)
        margin_all = np.concatenate(margins) if margins else np.zeros(0)
        # a route with one utterance has no sibling: its score is NEG and is left out; a
        # description is no query: what it scores is left out too
        solo = index.counts[owner] < 2 if n else np.zeros(0, dtype=bool)
        valid = ~solo & ~index.described
        result: dict[str, float] = {}
        for i, name in enumerate(index.names):
            mine = own_all[(owner == i) & valid]
            if len(mine):
                result[name] = float(np.median(mine))
        if result:
            fallback = float(np.median(list(result.values())))
            result = {name: result.get(name, fallback) for name in index.names}
        else:  # no route has two utterances: nothing to learn from, never confident
            result = {name: float("inf") for name in index.names}
        finite = margin_all[valid & np.isfinite(margin_all)]
        margin = max(0.0, float(np.quantile(finite, 0.25))) if len(finite) else 0.0
        return result, margin

    @property
    def thresholds(self) -> dict[str, float]:
        """The threshold each scored route uses now (fitted, given, or provisional)."""
        index = self._require_index()
        out: dict[str, float] = {}
        given = self._given_thresholds
        for name in index.names:
            if self._fit is not None:
                out[name] = self._fit.thresholds.get(name, self._fit.threshold)
            elif isinstance(given, (int, float)):
                out[name] = float(given)
            elif isinstance(given, Mapping) and name in given:
                out[name] = float(given[name])
            else:
                out[name] = self._provisional[name]
        return out

    @property
    def margin(self) -> float:
        """How far the top route must beat the runner-up to be confident."""
        if self._fit is not None:
            return self._fit.margin
        if self._given_margin is not None:
            return self._given_margin
        return self._provisional_margin

    @property
    def floor(self) -> float | None:
        """Below this top score the answer is `UNKNOWN`; None: never."""
        if self._fit is not None:
            return self._fit.floor
        return self._given_floor

    @property
    def fitted(self) -> FitReport | None:
        """The last `fit` result, or None."""
        return self._fit

    # -- deciding ---------------------------------------------------------------------------

    def judge(self, text: str) -> TierVerdict:
        """The verdict for one query (synchronous; `decide` wraps it)."""
        return self.judge_many([text])[0]

    def judge_many(self, texts: Sequence[str]) -> list[TierVerdict]:
        """Verdicts for many queries, encoded in one batch."""
        start = time.perf_counter()
        index = self._require_index()
        if not texts:
            return []
        if not index.names:
            return [TierVerdict(self.name, None, detail="no route has utterances") for _ in texts]
        queries = self.encoder.encode(list(texts))
        if self._linear is not None:
            verdicts = self._judge_linear(self._linear, queries, index)
        else:
            verdicts = self._judge_nearest(queries, index)
        each_ms = (time.perf_counter() - start) * 1000 / len(texts)
        for verdict in verdicts:
            verdict.latency_ms = each_ms  # a batch shares its cost evenly
            self._propose_for_review(verdict)
        return verdicts

    def _propose_for_review(self, verdict: TierVerdict) -> None:
        """Turn an accepted route scored under `review_below`, or ahead of the runner-up by
        less than `review_margin`, into a proposal."""
        if verdict.target in (None, UNKNOWN) or verdict.score is None:
            return
        why = []
        level, margin = self.review_below, self.review_margin
        if level is not None and verdict.score < level:
            why.append(f"under the review level {level:.3f}")
        lead = lead_of(verdict.candidates)
        if margin is not None and lead < margin:
            why.append(f"lead {lead:.3f} under the review margin {margin:.3f}")
        if why:
            verdict.proposal, verdict.target = verdict.target, None
            verdict.detail += f"; {' and '.join(why)}: proposed for review"

    def _judge_linear(self, head: LinearHead, queries: Any, index: _Index) -> list[TierVerdict]:
        """Verdicts of the linear head: the most probable class, when probable enough."""
        import numpy as np

        accept = self._fit.accept if self._fit is not None and self._fit.accept else 0.0
        proba = head.proba(queries)
        routes = len(index.names)
        verdicts = []
        for row in proba:
            order = np.argsort(-row[:routes], kind="stable")
            candidates = [(index.names[j], float(row[j])) for j in order[: self.top_k]]
            best = int(np.argmax(row))
            p = float(row[best])
            if head.unknown and best == routes:
                target: str | None = UNKNOWN if p >= accept else None
                detail = f"unknown, p {p:.3f}" + ("" if p >= accept else f" < {accept:.3f}")
                top = float(row[order[0]])
            elif p >= accept:
                target, top = index.names[best], p
                detail = f"p {p:.3f} (linear head)"
            else:
                target, top = None, p
                detail = f"p {p:.3f} < {accept:.3f} (linear head)"
            verdicts.append(TierVerdict(self.name, target, top, candidates, detail))
        return verdicts

    def _judge_nearest(self, queries: Any, index: _Index) -> list[TierVerdict]:
        """Verdicts of the nearest-example head: best example, thresholds, margin, reject gap."""
        import numpy as np

        matrix = self._score_matrix(queries)
        reject = None
        if self._reject is not None and self._fit is not None and self._fit.reject_gap is not None:
            reject = _mean_of_top(queries @ self._reject.T, self._fit.reject_k)
        thresholds = self.thresholds
        margin, floor = self.margin, self.floor
        verdicts = []
        for qi, row in enumerate(matrix):
            order = np.argsort(-row, kind="stable")
            top = float(row[order[0]])
            gap_to_next = top - float(row[order[1]]) if len(order) > 1 else float("inf")
            best = index.names[order[0]]
            candidates = [(index.names[j], float(row[j])) for j in order[: self.top_k]]
            reasons = []
            if top < thresholds[best]:
                reasons.append(f"score {top:.3f} < threshold {thresholds[best]:.3f}")
            if gap_to_next < margin:
                reasons.append(f"margin {gap_to_next:.3f} < {margin:.3f}")
            if reject is not None and self._fit is not None and self._fit.reject_gap is not None:
                lead = top - float(reject[qi])
                if lead < self._fit.reject_gap:
                    reasons.append(f"close to known unknowns (lead {lead:.3f})")
            if floor is not None and top < floor:
                target: str | None = UNKNOWN
                detail = f"score {top:.3f} below floor {floor:.3f}"
            elif reasons:
                target, detail = None, "; ".join(reasons)
            else:
                target, detail = best, f"score {top:.3f}, margin {gap_to_next:.3f}"
            verdicts.append(TierVerdict(self.name, target, top, candidates, detail))
        return verdicts

    async def decide(
        self,
        text: str,
        history: Sequence[Any] | None = None,
        context: dict[str, Any] | None = None,
        previous: Sequence[TierVerdict] = (),
    ) -> TierVerdict:
        """The `Tier` entry point: judges `text` alone (a query costs ~2 ms of CPU)."""
        return self.judge(text)

    # -- fitting ----------------------------------------------------------------------------

    def fit(
        self,
        labelled: Sequence[Labelled],
        *,
        reject_examples: bool = True,
        balanced: bool = True,
        learn_examples: bool | None = None,
        floor_loss: float = 0.01,
        head: str | None = None,
    ) -> FitReport:
        """Fit thresholds, margin, reject gap and floor on labelled in-scope and unknown examples,
        and choose who decides.

        Maximises accuracy over `labelled`: an in-scope example counts when routed to its
        label, an unknown one (`label=None`) when not routed. `balanced` (default): the
        in-scope and unknown halves weigh the same whatever their counts, since a labelled
        set's mix is rarely the traffic's (False: weigh by count). `reject_examples`: keep the
        unknown examples' vectors and also require a query to beat its `reject_k` nearest of
        them by a gap (the search keeps this off when it does not help). `learn_examples`:
        True makes the in-scope examples examples of their routes from now on (until routes
        change), each scored without itself here so the thresholds see what a new query would;
        the thresholds then follow the fitting examples' language, so queries in a language
        they lack are routed less often (see docs/benchmarks.md). None (default): decided by
        cross-validation. `floor_loss`: the share of in-scope examples allowed under the floor
        (0 turns the floor off). `head`: overrides the tier's `head` for this fit.

        The choice: the candidates (the plain nearest head; with learned examples unless
        `learn_examples` is given; the linear head unless `head="nearest"`) are
        cross-validated on `labelled` (5 folds, unknown examples held out by topic, 2 repeats;
        needs 10 in-scope and 10 unknown examples, else the plain nearest head decides). A
        candidate must beat the plain nearest head by `selection.LEAD` to be considered; the most
        accurate of those wins. `head="linear"` forces the linear head. The nearest head's
        thresholds are fitted either way: they give the floor and the verdicts' scores.

        No labelled example is scored against a copy of itself, in the fit or in the
        cross-validation: one of the routes' examples or another labelled example with the same
        normalised text or a cosine of at least `duplicates.DUPLICATE_SIMILARITY` (so fitting
        on the routes' own examples cannot teach thresholds of 1.0). The report carries the
        cross-validated accuracy of what was chosen (`cv`), where each route's threshold came
        from (`sources`) and warnings (also logged): most in-scope examples copy the routes'
        examples, no unknown examples, routes without a labelled in-scope example.
        """
        import numpy as np

        bound = self._bound
        if bound is None:
            raise RuntimeError("Semantic tier used before bind(routes)")
        if not bound.names:
            raise ValueError("bind routes with utterances or a description before fit")
        position = {n: i for i, n in enumerate(bound.names)}
        unknown_labels = sorted({x.label for x in labelled if x.label is not None} - set(position))
        if unknown_labels:
            raise ValueError(f"labels that are no scored route: {unknown_labels}")
        if not labelled:
            raise ValueError("fit needs labelled examples")

        texts = [x.text for x in labelled]
        vectors = self.examples_encoder.encode(texts)
        gold = np.array([position[x.label] if x.label is not None else -1 for x in labelled])
        is_unknown = gold < 0
        if balanced and is_unknown.any() and (~is_unknown).any():
            weight = np.where(is_unknown, 0.5 / is_unknown.sum(), 0.5 / (~is_unknown).sum())
        else:
            weight = np.ones(len(gold))
        # leave-one-out by copy: no labelled example is scored against a copy of itself, be it
        # one of the routes' examples or another labelled example (itself included)
        dup_bound = duplicates(texts, vectors, self._bound_texts, bound.vectors)
        dup_self = duplicates(texts, vectors, texts, vectors)
        np.fill_diagonal(dup_self, True)

        chosen = head or self.head
        if chosen not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, not {chosen!r}")
        # the nearest head's variants to compare: with and without the in-scope fitting
        # examples learned as route examples, unless the caller decided
        if learn_examples is not None:
            learn = [learn_examples]
        else:
            learn = [False] if chosen == "linear" else [False, True]
        candidates = {
            ("nearest+learned" if one else "nearest"): {
                "learn_examples": one,
                "reject_examples": reject_examples,
            }
            for one in learn
        }
        every = np.arange(len(gold))

        def nearest_on(options: dict[str, bool]) -> FitPredict:
            def fit(train: Any) -> Any:
                part = (vectors[train], gold[train], weight[train])
                copies = (dup_bound[train], dup_self[np.ix_(train, train)])
                fitted = self._fit_nearest(bound, *part, *copies, **options)

                def predict(held: Any) -> Any:
                    copies = (dup_bound[held], dup_self[np.ix_(held, train)])
                    return self._predict_nearest(fitted, vectors[held], *copies)

                return predict

            return fit

        def linear_on(train: Any) -> LinearHead:
            held = np.setdiff1d(every, train)  # the routes' examples they copy are left out
            drop = dup_bound[held].any(axis=0)
            return self._fit_linear(bound, vectors[train], gold[train], drop)

        cv: dict[str, float] = {}
        oof = None
        if len(candidates) > 1 or chosen != "nearest":
            cv, oof = cross_validate(
                vectors,
                gold,
                weight,
                len(bound.names),
                {name: nearest_on(options) for name, options in candidates.items()},
                None if chosen == "nearest" else linear_on,
            )
        names = [*candidates, "linear"] if chosen == "auto" else list(candidates)
        winner = "linear" if chosen == "linear" else choose(cv, names)
        best = winner if winner in candidates else next(iter(candidates))
        nearest = self._fit_nearest(
            bound, vectors, gold, weight, dup_bound, dup_self, **candidates[best]
        )
        accept: float | None = None
        linear: LinearHead | None = None
        if winner == "linear":
            linear = self._fit_linear(bound, vectors, gold)
            accept = accept_threshold(oof, gold, weight, len(bound.names))
        rule, matrix, near = nearest.rule, nearest.matrix, nearest.near
        self._index = nearest.index
        self._linear = linear
        if winner in cv:
            cv_chosen: float | None = cv[winner]
        else:  # no comparison was run: cross-validate what was chosen on its own
            cv_chosen = out_of_fold_accuracy(vectors, gold, weight, nearest_on(candidates[best]))

        names = nearest.index.names
        thresholds = {n: float(t) for n, t in zip(names, rule.thresholds, strict=True)}
        per_route = {n: int(w) for n, w in zip(names, rule.wins, strict=True)}
        if linear is not None:
            proba = linear.proba(vectors)  # in-sample: optimistic, as the report says
            pred = proba.argmax(axis=1)
            routed = (pred < len(bound.names)) & (proba.max(axis=1) >= (accept or 0.0))
            correct = np.where(routed, pred == gold, is_unknown)
        else:
            accepted = rule.apply(matrix, near) >= 0
            correct = np.where(accepted, matrix.argmax(axis=1) == gold, is_unknown)
        accuracy = float((weight * correct).sum() / weight.sum())

        floor = None
        in_scope_top = matrix.max(axis=1)[~is_unknown]
        in_scope_top = in_scope_top[in_scope_top > NEG / 2]  # left with no example to match
        if floor_loss > 0 and len(in_scope_top):
            floor = min(float(np.quantile(in_scope_top, floor_loss)), min(thresholds.values()))

        copies = int((dup_bound[~is_unknown] & ~bound.described).any(axis=1).sum())
        in_scope = np.bincount(gold[~is_unknown], minlength=len(names))
        sources = {
            n: (
                "pooled (no labelled example ranks it first)"
                if per_route[n] == 0
                else f"{per_route[n]} labelled examples rank it first ({int(in_scope[i])} "
                "labelled for it), shrunk toward the pooled threshold"
            )
            for i, n in enumerate(names)
        }
        warnings = self._fit_warnings(
            copies, int((~is_unknown).sum()), int(is_unknown.sum()), per_route, gold, names
        )
        for warning in warnings:
            log.warning("semantic tier fit: %s", warning)

        review = None
        if self.fit_review_margin:
            pred, lead = self._held_out_leads(
                bound, vectors, gold, weight, dup_bound, dup_self, candidates[best],
                accept if linear is not None else None,
            )  # fmt: skip
            review = review_margin_of(pred, gold, lead)
            self.review_margin = review

        use_reject = nearest.reject is not None
        self._reject = nearest.reject
        self._fit = FitReport(
            threshold=float(rule.threshold),
            thresholds=thresholds,
            margin=rule.margin,
            reject_gap=float(rule.reject_gap) if use_reject else None,
            floor=floor,
            accuracy=accuracy,
            n_in=int((~is_unknown).sum()),
            n_unknown=int(is_unknown.sum()),
            reject_examples=len(nearest.reject) if use_reject else 0,
            per_route=per_route,
            reject_k=nearest.reject_k if use_reject else 1,
            learned_examples=nearest.learned,
            head="linear" if linear is not None else "nearest",
            cv_accuracy=cv,
            accept=accept,
            cv=cv_chosen,
            warnings=tuple(warnings),
            copies=copies,
            sources=sources,
            description_bias=self._description_bias,
            review_margin=review,
        )
        return self._fit

    @staticmethod
    def _fit_warnings(
        copies: int,
        n_in: int,
        n_unknown: int,
        per_route: Mapping[str, int],
        gold: Any,
        names: Sequence[str],
    ) -> list[str]:
        """What makes a fit less trustworthy, in words."""
        warnings = []
        if n_in and copies >= OWN_EXAMPLES_SHARE * n_in:
            warnings.append(
                f"{copies} of {n_in} labelled in-scope examples copy the routes' own example "
                "utterances; each was scored without its copy (leave-one-out), but thresholds "
                "fitted on a route's own examples are a guess: label real queries the examples "
                "do not contain"
            )
        if not n_unknown:
            warnings.append(
                "no unknown examples (label=None): the thresholds cannot learn what to reject, "
                f"so each keeps {NO_UNKNOWN_KEEP:.0%} of its route's labelled examples; add "
                "out-of-scope queries"
            )
        labelled = {names[g] for g in gold if g >= 0}
        missing = [n for n in names if n not in labelled]
        if missing:
            warnings.append(
                "routes without a labelled in-scope example take (nearly) the pooled "
                "threshold: " + ", ".join(missing)
            )
        return warnings

    def _fit_nearest(
        self,
        bound: _Index,
        vectors: Any,
        gold: Any,
        weight: Any,
        dup_bound: Any,
        dup_self: Any,
        *,
        learn_examples: bool,
        reject_examples: bool,
    ) -> _Nearest:
        """Fit the nearest-example head's rule on labelled vectors (see `fit`).

        `dup_bound`: (examples, routes' rows) and `dup_self`: (examples, examples) say which
        pairs are copies (itself included); an example is never scored against a copy.
        """
        import numpy as np

        is_unknown = gold < 0
        # the examples queries are scored against: the routes' own, plus (when learning) the
        # in-scope fitting examples that copy none of them, after them until regrouped by route
        learned = (
            np.flatnonzero(~is_unknown & ~dup_bound.any(axis=1))
            if learn_examples
            else np.zeros(0, dtype=np.int64)
        )
        landed = None
        if len(learned):
            owner = np.concatenate(
                [np.repeat(np.arange(len(bound.names)), bound.counts), gold[learned]]
            )
            index = _make_index(
                bound.names,
                np.concatenate([bound.vectors, vectors[learned]]),
                owner,
                bound.fingerprint,
                bias=np.concatenate([_bias_of(bound), np.zeros(len(learned), np.float32)]),
                described=np.concatenate([bound.described, np.zeros(len(learned), bool)]),
                negatives=bound.negatives,
            )
            # rows are regrouped by route: where each row landed
            landed = np.empty(len(owner), dtype=np.int64)
            landed[np.argsort(owner, kind="stable")] = np.arange(len(owner))
        else:
            index = bound

        sims = self._similarities(vectors, index)
        sims[_columns(dup_bound, dup_self[:, learned], landed)] = NEG  # leave-one-out
        matrix = self._route_scores(sims, vectors, index)

        reject_rows = np.flatnonzero(is_unknown)
        reject = vectors[reject_rows] if reject_examples and len(reject_rows) else None
        reject_k = 1
        near = None
        if reject is not None and len(reject) > 1:
            sims_unknown = vectors @ reject.T
            # an unknown example may not reject itself (or a copy of itself)
            sims_unknown[dup_self[:, reject_rows]] = -np.inf
            reject_k = min(self.reject_k, len(reject) - 1)  # one is always left out here
            near = _masked_mean_of_top(sims_unknown, reject_k)
        else:
            reject = None

        rule = fit_rule(matrix, gold, near, weight, self.prior)
        if reject is not None and not np.isfinite(rule.reject_gap):
            reject = None  # the search found the reject set no help
        return _Nearest(
            index, rule, reject, reject_k, matrix, near, len(learned), learned, landed, reject_rows
        )

    def _predict_nearest(
        self, fitted: _Nearest, queries: Any, dup_bound: Any = None, dup_fit: Any = None
    ) -> Any:
        """Per query, the nearest head's route column, or -1 (abstain).

        `dup_bound` (queries, routes' rows) and `dup_fit` (queries, fitting examples): which
        examples each query copies, left out of its scores (None: none).
        """
        return fitted.rule.apply(*self._nearest_scores(fitted, queries, dup_bound, dup_fit))

    def _nearest_scores(
        self, fitted: _Nearest, queries: Any, dup_bound: Any = None, dup_fit: Any = None
    ) -> tuple[Any, Any]:
        """(queries, routes) scores under a fitted nearest head, and each query's mean
        similarity to its nearest known unknowns (None without a reject set); copies left out
        as in `_predict_nearest`."""
        import numpy as np

        sims = self._similarities(queries, fitted.index)
        if dup_bound is not None and dup_fit is not None:
            sims[_columns(dup_bound, dup_fit[:, fitted.learned_rows], fitted.landed)] = NEG
        matrix = self._route_scores(sims, queries, fitted.index)
        near = None
        if fitted.reject is not None:
            against = queries @ fitted.reject.T
            if dup_fit is not None:
                against[dup_fit[:, fitted.reject_rows]] = -np.inf
            near = _masked_mean_of_top(against, fitted.reject_k)
        return matrix, near

    def _held_out_leads(
        self,
        bound: _Index,
        vectors: Any,
        gold: Any,
        weight: Any,
        dup_bound: Any,
        dup_self: Any,
        options: dict[str, bool],
        accept: float | None,
    ) -> tuple[Any, Any]:
        """Per labelled example, the route column the head accepts for it when fitted without
        its fold (-1: none) and the lead of its top route over the runner-up.

        `accept`: the linear head's probability threshold (None: the nearest head, fitted with
        `options`). Folds as in `selection.out_of_fold_accuracy` (unknown ones by topic); no
        example is scored against a copy of itself.
        """
        import numpy as np

        from baton.routing.folds import topic_folds
        from baton.routing.rule import ranked

        routes = len(bound.names)
        pred = np.full(len(gold), -1)
        lead = np.full(len(gold), np.inf)
        every = np.arange(len(gold))
        for held in topic_folds(vectors, gold < 0, min(CV_FOLDS, len(gold)), 0):
            train = np.setdiff1d(every, held)
            if len(held) == 0 or not (gold[train] >= 0).any():
                continue
            if accept is None:
                part = (vectors[train], gold[train], weight[train])
                copies = (dup_bound[train], dup_self[np.ix_(train, train)])
                fitted = self._fit_nearest(bound, *part, *copies, **options)
                copied = (dup_bound[held], dup_self[np.ix_(held, train)])
                scores, near = self._nearest_scores(fitted, vectors[held], *copied)
                pred[held] = fitted.rule.apply(scores, near)
            else:
                try:
                    head = self._fit_linear(
                        bound, vectors[train], gold[train], dup_bound[held].any(axis=0)
                    )
                except ValueError:  # this fold's training part has one class: nothing to learn
                    continue
                proba = head.proba(vectors[held])
                best = proba.argmax(axis=1)
                routed = (best < routes) & (proba.max(axis=1) >= accept)
                pred[held] = np.where(routed, best, -1)
                scores = proba[:, :routes]
            lead[held] = ranked(scores)[2]
        return pred, lead

    def _fit_linear(
        self, bound: _Index, vectors: Any, gold: Any, drop: Any | None = None
    ) -> LinearHead:
        """The linear head on the routes' examples plus the labelled vectors.

        `drop`: (routes' rows,) bool, rows left out (copies of held-out examples).
        """
        import numpy as np

        routes = len(bound.names)
        unknown = bool((gold < 0).any())
        owner = np.repeat(np.arange(routes), bound.counts)
        keep = ~drop if drop is not None else np.ones(len(owner), dtype=bool)
        x = np.concatenate([bound.vectors[keep], vectors])
        y = np.concatenate([owner[keep], np.where(gold < 0, routes, gold)])
        classes = routes + 1 if unknown else routes
        if classes < 2:
            raise ValueError("the linear head needs two routes, or unknown examples")
        return fit_linear(x, y, classes, c=self.linear_c, unknown=unknown)


def _bias_of(index: _Index) -> Any:
    """(rows,) float32 bias of an index's rows (zeros when it has none)."""
    import numpy as np

    if index.bias is None:
        return np.zeros(len(index.vectors), np.float32)
    return index.bias


def _columns(dup_bound: Any, dup_learned: Any, landed: Any) -> Any:
    """(queries, index rows) bool mask from copies of the routes' rows and of learned rows.

    `landed`: where row k of [routes' rows, learned rows] sits in the index (None: in order).
    """
    import numpy as np

    mask = np.concatenate([dup_bound, dup_learned], axis=1)
    if landed is None:
        return mask
    out = np.empty_like(mask)
    out[:, landed] = mask
    return out


def lead_of(candidates: Sequence[tuple[str, float]]) -> float:
    """How far the first candidate's score is ahead of the second's (inf with one)."""
    if len(candidates) < 2:
        return float("inf")
    return candidates[0][1] - candidates[1][1]


def review_margin_of(pred: Any, gold: Any, lead: Any, share: float = REVIEW_SHARE) -> float | None:
    """The review margin fitted on held-out decisions: `pred` (route column, or -1 when not
    accepted), `gold` (-1 for unknown) and `lead` over the runner-up, per labelled example.

    It reaches just past the largest lead of a wrong accepted route (a wrong route or an
    accepted unknown), and no further than the `share` quantile of the accepted routes' leads;
    None when no wrong accepted route has a lead under that quantile (nothing to review).
    """
    import numpy as np

    accepted = (pred >= 0) & np.isfinite(lead)
    wrong = accepted & (pred != gold)
    if not wrong.any():
        return None
    cap = float(np.quantile(lead[accepted], share))
    within = lead[wrong][lead[wrong] < cap]
    if not len(within):
        return None
    worst = float(within.max())
    above = lead[accepted & (lead > worst)]
    edge = (worst + float(above.min())) / 2 if len(above) else worst + 1e-6
    return min(edge, cap)
