"""The lexical tokenizer keeps ids whole and in parts, and splits CJK text."""

from __future__ import annotations

from baton.knowledge.lexical import tokenize


def test_ids_are_kept_whole_and_split() -> None:
    tokens = tokenize("Order ORD-202607-99 on srv-bj-001.")
    assert "ord-202607-99" in tokens and "srv-bj-001" in tokens
    assert {"ord", "202607", "99", "srv", "bj", "001", "order", "on"} <= set(tokens)


def test_cjk_becomes_characters_and_bigrams() -> None:
    assert tokenize("退款政策") == ["退", "款", "政", "策", "退款", "款政", "政策"]
    assert tokenize("退款 refund") == ["退", "款", "退款", "refund"]
