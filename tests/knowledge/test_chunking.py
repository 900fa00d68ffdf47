"""Chunking by structure: headings, paragraphs, sentences, budgets, CJK, offsets."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from baton.knowledge.chunking import chunk_text, count_tokens
from baton.knowledge.documents import _markdown_headings

DOC = """# Refunds

Refunds go to the original payment method. They take five business days.

## Gift cards

Gift cards cannot be refunded.

# 退款政策

退款将退回原支付方式。处理时间为五个工作日！如有疑问，请联系客服；我们会尽快回复。
"""


def test_chunks_follow_headings_and_keep_offsets() -> None:
    chunks = chunk_text(DOC, _markdown_headings(DOC), budget=300, overlap=40)
    assert [c.heading for c in chunks] == [
        ("Refunds",),
        ("Refunds", "Gift cards"),
        ("退款政策",),
    ]
    for c in chunks:
        assert DOC[c.start : c.end] == c.text
    assert chunks[2].text.startswith("# 退款政策")


def test_a_heading_with_nothing_under_it_is_no_chunk_of_its_own() -> None:
    doc = "# Policies\n\n## Refunds\n\n### Cards\n\nCards are refunded in 5 days.\n"
    chunks = chunk_text(doc, _markdown_headings(doc))
    assert [(c.heading, c.text) for c in chunks] == [
        (("Policies", "Refunds", "Cards"), "### Cards\n\nCards are refunded in 5 days.")
    ]
    only = "# Contents\n\n## Refunds\n"  # headings alone are kept: the file can be found
    assert [c.text for c in chunk_text(only, _markdown_headings(only))] == [
        "# Contents",
        "## Refunds",
    ]


def test_chinese_is_chunked_without_spaces() -> None:
    text = "退款将退回原支付方式。" * 60  # 660 CJK characters, not one space
    chunks = chunk_text(text, budget=100, overlap=20)
    assert len(chunks) >= 7
    assert all(count_tokens(c.text) <= 100 for c in chunks)
    assert all(c.text.endswith("。") for c in chunks)  # cut at sentence ends
    # consecutive chunks overlap by whole sentences
    assert chunks[1].start < chunks[0].end
    assert count_tokens("退款将退回原支付方式。") == 11


def test_an_unbroken_run_is_cut_to_the_budget() -> None:
    text = "长" * 1000 + "\n\n" + "x" * 5000
    chunks = chunk_text(text, budget=50, overlap=10)
    assert all(c.tokens <= 50 and count_tokens(c.text) <= 50 for c in chunks)
    assert chunks[-1].end == len(text)


ALPHABET = st.sampled_from([*"ab cd.。！？；\n\n中文字# -ORD-2026", "\t", "\u3000", "x" * 3])


@settings(max_examples=150, deadline=None)
@given(
    text=st.lists(ALPHABET, max_size=400).map("".join),
    budget=st.integers(min_value=1, max_value=60),
    overlap_share=st.floats(min_value=0, max_value=0.9),
)
def test_chunking_properties(text: str, budget: int, overlap_share: float) -> None:
    overlap = min(budget - 1, int(budget * overlap_share))
    headings = _markdown_headings(text)
    chunks = chunk_text(text, headings, budget=budget, overlap=overlap)
    covered = [False] * len(text)
    for c in chunks:
        assert text[c.start : c.end] == c.text  # offsets point at the text
        assert c.text == c.text.strip() and c.text  # no chunk is or ends in white space
        assert count_tokens(c.text) <= budget  # the budget holds
        for i in range(c.start, c.end):
            covered[i] = True
    titles = [range(h.start, h.end) for h in headings]  # an empty section's heading may go
    for i, ch in enumerate(text):
        if not ch.isspace():
            assert covered[i] or any(i in r for r in titles), f"character {i} ({ch!r}) is lost"
    assert [c.index for c in chunks] == list(range(len(chunks)))
