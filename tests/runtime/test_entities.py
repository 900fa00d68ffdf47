"""Entity extraction for the entity guard: English, Chinese and mixed text; what state lacks."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baton.core.messages import Message
from baton.runtime.entities import (
    DEFAULT_EXTRACTORS,
    ORDER_IDS,
    Entity,
    Extractor,
    RegexExtractor,
    extract,
    missing_entities,
)
from baton.runtime.grounding import context_text, ungrounded


def found(text: str) -> list[tuple[str, str]]:
    return [(e.kind, e.value) for e in extract(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Hi, my order ORD-202607-99 hasn't arrived; call me on 138 0013 8000.",
            [("order", "ORD-202607-99"), ("phone", "138 0013 8000")],
        ),
        ("Order ID: W2378156, please", [("order", "W2378156")]),
        ("order number is 12345.", [("order", "12345")]),
        ("where is order #W2378156 and #12345?", [("order", "#W2378156"), ("order", "#12345")]),
        ("W2378156", [("order", "W2378156")]),
        ("I want to order 300 shirts", []),
        ("please restart server 12 and prod-db-03", [("server", "12"), ("server", "prod-db-03")]),
        (
            "web-03 and srv-01 are down, also web01",
            [("server", "web-03"), ("server", "srv-01"), ("server", "web01")],
        ),
        ("instance i-0abc1234def567890 is stuck", [("server", "i-0abc1234def567890")]),
        ("upgrade to node 18 and web3", []),
        ("mail me at li.lei+test@example.co.uk.", [("email", "li.lei+test@example.co.uk")]),
        ("13800138000@163.com", [("email", "13800138000@163.com")]),
        (
            "+1 415 555 2671 or (415) 555-2671 or +44 20 7946 0958",
            [
                ("phone", "+1 415 555 2671"),
                ("phone", "(415) 555-2671"),
                ("phone", "+44 20 7946 0958"),
            ],
        ),
        (
            "I paid $12.50 and EUR 20, then 5 dollars",
            [("amount", "$12.50"), ("amount", "EUR 20"), ("amount", "5 dollars")],
        ),
    ],
)
def test_english(text: str, expected: list[tuple[str, str]]) -> None:
    assert found(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我的订单号是W2378156，请帮我查一下", [("order", "W2378156")]),
        ("订单12345已经发货了吗？", [("order", "12345")]),
        ("订单号：ORD-202607-99。", [("order", "ORD-202607-99")]),
        ("单号 88886666 的快递到哪了", [("order", "88886666")]),
        ("服务器 web-02 挂了，srv-01 也有问题", [("server", "web-02"), ("server", "srv-01")]),
        ("请重启服务器12", [("server", "12")]),
        ("主机编号：7", [("server", "7")]),
        ("我的邮箱是zhang@qq.com谢谢", [("email", "zhang@qq.com")]),
        (
            "电话13800138000，或者+86 139-1234-5678",
            [("phone", "13800138000"), ("phone", "+86 139-1234-5678")],
        ),
        ("座机010-12345678", [("phone", "010-12345678")]),
        (
            "退款300元，另付¥1,200和50块，共人民币1550元",
            [
                ("amount", "300元"),
                ("amount", "¥1,200"),
                ("amount", "50块"),
                ("amount", "人民币1550元"),
            ],
        ),
    ],
)
def test_chinese(text: str, expected: list[tuple[str, str]]) -> None:
    assert found(text) == expected


def test_mixed_scripts_have_no_word_edge_trouble() -> None:
    # `\b` finds no edge between 号 and W: both count as word characters in Python
    text = "订单W2378156已发货，服务器web-02重启了，邮箱a@b.cn电话13800138000金额$9.99谢谢"
    assert found(text) == [
        ("order", "W2378156"),
        ("server", "web-02"),
        ("email", "a@b.cn"),
        ("phone", "13800138000"),
        ("amount", "$9.99"),
    ]


CJK = st.sampled_from(list("的订单号请帮我查一下服务器挂了谢谢，。？！ "))
PLAIN = st.sampled_from(list("的请帮我查一下挂了谢谢，。？！ "))  # no keywords (订单, 服务器)
order_ids = st.one_of(
    st.from_regex(r"ORD-[0-9]{6}-[0-9]{2}", fullmatch=True),
    st.from_regex(r"#W[0-9]{7}", fullmatch=True),
    st.from_regex(r"[A-Z][0-9]{7}", fullmatch=True),
)
phones = st.from_regex(r"1[3-9][0-9]{9}", fullmatch=True)
emails = st.from_regex(r"[a-z][a-z0-9.]{0,8}[a-z0-9]@[a-z]{2,8}\.(com|cn|org)", fullmatch=True)
servers = st.from_regex(r"(srv|web|db|app)-[0-9]{2}", fullmatch=True)


@given(st.text(CJK, max_size=8), order_ids, st.text(CJK, max_size=8))
def test_order_ids_amid_chinese(before: str, order: str, after: str) -> None:
    assert ("order", order) in found(before + order + after)


@given(
    st.text(PLAIN, max_size=8),
    phones,
    st.text(PLAIN, min_size=1, max_size=8),
    emails,
    st.text(PLAIN, max_size=8),
)
def test_phones_and_emails_amid_chinese(a: str, phone: str, b: str, email: str, c: str) -> None:
    assert found(a + phone + b + email + c) == [("phone", phone), ("email", email)]


@given(
    st.text(PLAIN, max_size=8),
    st.sampled_from(["", "服务器", "主机 "]),
    servers,
    st.text(PLAIN, max_size=8),
)
def test_server_ids_amid_chinese(before: str, word: str, server: str, after: str) -> None:
    assert found(before + word + server + after) == [("server", server)]


# -- missing_entities ------------------------------------------------------------------------------


def test_an_order_id_said_three_turns_earlier_is_missing_from_state() -> None:
    said = [
        "Hi, I need the e-invoice for order ORD-202607-99",
        "It was for the blue jacket",
        "yes, the company name is ACME",
        "can you hurry please",
    ]
    assert missing_entities(said, {"company": "ACME"}) == {"order_id": "ORD-202607-99"}


def test_the_most_recent_mention_wins() -> None:
    said = ["order ORD-1 please", "sorry, I meant ORD-2", "my phone: 13800138000"]
    assert missing_entities(said, {}) == {"order_id": "ORD-2", "phone": "13800138000"}


def test_entities_the_state_holds_are_not_missing() -> None:
    said = ["order #12345, phone 138 0013 8000, mail Li@Example.com, server web-02"]
    state = {
        "ticket": {"ref": "12345"},  # held under another key, without the '#'
        "contact": ["13800138000"],  # held without the spaces
        "note": "user li@example.com asked",  # inside a longer value, other case
        "server_id": "web-01",  # slot set already: a new mention does not overwrite it
    }
    assert missing_entities(said, state) == {}


def test_a_value_inside_a_longer_id_is_still_missing() -> None:
    assert missing_entities(["order 12345"], {"ref": "ORD-123456"}) == {"order_id": "12345"}


def test_an_older_mention_does_not_come_back_when_the_latest_is_known() -> None:
    said = ["order ORD-1", "no wait, ORD-2"]
    assert missing_entities(said, {"previous_order": "ORD-2"}) == {}


def test_empty_slot_values_count_as_unset() -> None:
    assert missing_entities(["订单号 W2378156"], {"order_id": ""}) == {"order_id": "W2378156"}


@given(st.lists(st.tuples(st.text(CJK, max_size=6), order_ids, phones), min_size=1, max_size=4))
def test_merged_values_pass_the_grounded_id_check(turns: list[tuple[str, str, str]]) -> None:
    """What the guard merges is what the user wrote, so `grounding` finds it in the view."""
    said = [f"{pad}订单{order}，电话{phone}" for pad, order, phone in turns]
    added = missing_entities(said, {})
    assert added == {"order_id": turns[-1][1], "phone": turns[-1][2]}
    shown = context_text([Message(role="user", content=text) for text in said])
    assert ungrounded(added, shown) == []


# -- pluggable extractors ------------------------------------------------------------------------


class TicketExtractor:
    """A hand-written extractor: anything with `name` and `extract` plugs in."""

    name = "ticket"

    def extract(self, text: str) -> list[Entity]:
        start = text.find("TKT")
        if start < 0:
            return []
        return [Entity("ticket", text[start : start + 7], "ticket_id", start, start + 7)]


def test_custom_extractors_plug_in() -> None:
    ticket = TicketExtractor()
    assert isinstance(ticket, Extractor)
    renamed = dataclasses.replace(ORDER_IDS, slot="order_no")
    said = ["about TKT-123 and order ORD-9"]
    assert missing_entities(said, {}, [ticket, renamed]) == {
        "ticket_id": "TKT-123",
        "order_no": "ORD-9",
    }
    assert missing_entities(said, {}, [ticket]) == {"ticket_id": "TKT-123"}


def test_regex_extractors_validate_and_narrow() -> None:
    skus = RegexExtractor(
        name="sku",
        slot="sku",
        patterns=(r"(?i:sku)\s*(?P<v>[A-Z0-9-]+)",),
        check=lambda v: "-" in v,
    )
    assert [(e.kind, e.value, e.slot) for e in skus.extract("SKU AB-12 and sku X9")] == [
        ("sku", "AB-12", "sku")
    ]


def test_earlier_extractors_win_overlaps() -> None:
    assert found("13800138000@163.com") == [("email", "13800138000@163.com")]
    phones_first = [DEFAULT_EXTRACTORS[3], DEFAULT_EXTRACTORS[0]]
    assert [e.kind for e in extract("13800138000@163.com", phones_first)] == ["phone"]


def test_default_patterns_compile_on_first_use_and_a_callers_at_construction() -> None:
    fresh = dataclasses.replace(ORDER_IDS)  # built after import: compiled at once
    assert fresh._compiled is not None
    for extractor in DEFAULT_EXTRACTORS:
        assert isinstance(extractor, RegexExtractor)
        assert extractor._compile()  # every default pattern is a valid regular expression
    with pytest.raises(re.error):
        RegexExtractor(name="bad", slot="bad", patterns=(r"(unclosed",))


@pytest.mark.parametrize("text", ["echo 10dab70cad52c47a", "key 9f20eur55", "3f0cad", "a 20EUR5"])
def test_a_number_glued_to_letters_or_digits_is_no_amount(text: str) -> None:
    # a hex key holding "0cad" is not 0 Canadian dollars
    assert found(text) == []


@given(st.uuids())
def test_hex_keys_hold_no_entities_of_money(key: object) -> None:
    assert [e for e in extract(f"echo {key.hex}") if e.kind == "amount"] == []  # type: ignore[attr-defined]
