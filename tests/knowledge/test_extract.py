"""Extractive compression (`baton.knowledge.extract`): the sentences of retrieved passages
that answer a query, within a token budget, English and Chinese."""

from __future__ import annotations

from baton.knowledge.extract import best_sentences, joined, sentences, terms
from baton.models.base import estimate_tokens

INVOICES = """# Invoices

## POL-AC-001 When an invoice is issued

Invoices are issued within 3 working days after delivery. A pending invoice (status PENDING,
for example INV-88017) is issued automatically once the order is delivered; no action is
needed. Firmware 3.2 is unrelated.

## POL-AC-002 Correcting an invoice

The invoice title can be corrected within 30 days of issue.
"""
REFUNDS_ZH = """# 退款规则

## POL-RF-006 退款到账时间

退款审核通过后，到账时间取决于支付渠道：支付宝和微信支付 1 到 3 个工作日到账；
银行卡 3 到 5 个工作日到账。超过上述时间仍未到账的，请提供订单号。
"""


def test_sentences_split_english_and_chinese_and_keep_offsets() -> None:
    found = sentences(INVOICES)
    texts = [t for _, t in found]
    # a heading is no fact (the citation names the heading path)
    assert not any("POL-AC-001" in t for t in texts)
    # a hard-wrapped sentence reads as one; `3.2` does not end one
    assert (
        "A pending invoice (status PENDING, for example INV-88017) is issued automatically "
        "once the order is delivered;" in texts
    )
    assert "Firmware 3.2 is unrelated." in texts
    for offset, text in found:  # offsets point at the sentence in the passage
        assert INVOICES[offset:].startswith(text[:8])
    zh = [t for _, t in sentences(REFUNDS_ZH)]
    assert "退款审核通过后，到账时间取决于支付渠道：支付宝和微信支付 1 到 3 个工作日到账；" in zh
    assert "超过上述时间仍未到账的，请提供订单号。" in zh


def test_terms_keep_ids_whole_and_pair_chinese_characters() -> None:
    found = terms("Refund for ORD-202608-17 under POL-RF-003? 退款到账")
    assert found["ord-202608-17"] > found["refun"]
    assert "pol-rf-003" in found and "003" not in found and "ord" not in found  # ids whole
    assert {"退款", "款到", "到账"} <= set(found)
    assert "for" not in found and "the" not in terms("the")  # stop words


def test_the_best_sentences_answer_the_query_within_the_budget() -> None:
    per = best_sentences("When is a pending invoice issued?", [INVOICES, REFUNDS_ZH], 40)
    kept = [s for p in per for s in p]
    assert sum(estimate_tokens(s.text) for s in kept) <= 40
    assert per[1] == []  # the Chinese passage shares nothing with the query
    assert any("pending invoice" in s.text for s in per[0])
    assert all(s.overlap > 0 for s in kept)
    # kept in the passage's own order
    assert [s.start for s in per[0]] == sorted(s.start for s in per[0])


def test_a_chinese_query_finds_the_chinese_sentence() -> None:
    per = best_sentences("支付宝退款多久到账", [INVOICES, REFUNDS_ZH], 60)
    assert per[0] == []
    assert "支付宝和微信支付 1 到 3 个工作日到账" in joined(per[1])


def test_an_id_in_the_query_outweighs_common_words() -> None:
    per = best_sentences("invoice INV-88017", [INVOICES], 30)
    assert "INV-88017" in joined(per[0])


def test_with_nothing_in_common_the_best_passage_stands_in_and_a_long_sentence_is_cut() -> None:
    long = "Word " * 400 + "end."
    per = best_sentences("zzz", [long, INVOICES], 20)
    (only,) = per[0]
    assert only.text.endswith("…") and estimate_tokens(only.text) <= 21
    assert per[1] == []


def test_a_heading_that_matches_lends_its_sentences_half_the_credit() -> None:
    text = "An order still PROCESSING is cancelled at once and refunded in full."
    alone = best_sentences("POL-RF-003", [text], 50)
    under = best_sentences("POL-RF-003", [text], 50, headings=["Refund policy POL-RF-003"])
    assert alone[0][0].overlap == 0  # (kept only as the stand-in of the best passage)
    assert under[0][0].overlap == 0.5
