"""The recalled block: every memory one quoted line, whatever its text; within its budget."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from baton.memory.records import MemoryRecord, Provenance, Recalled
from baton.memory.render import HEADING, render


def recalled(text: str, i: int = 0) -> Recalled:
    record = MemoryRecord(
        id=f"m{i}",
        text=text,
        kind="fact",
        user_id="u1",
        provenance=Provenance(who="user", session_id="s1"),
        created_at=1_800_000_000.0,
        last_used=1_800_000_000.0,
    )
    return Recalled(record=record, similarity=0.9, score=0.9)


@given(st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=5))
@settings(max_examples=100)
def test_every_memory_is_one_quoted_line_whatever_it_says(texts: list[str]) -> None:
    block = render([recalled(t, i) for i, t in enumerate(texts)], budget_tokens=100_000)
    assert block is not None
    lines = block.split("\n")
    assert lines[0] == HEADING and len(lines) == 1 + len(texts)
    for line, text in zip(lines[1:], texts, strict=True):
        assert line.startswith('  - "')
        quoted = line[4 : line.rindex(" (a fact; remembered from session s1 on ")]
        assert json.loads(quoted) == text  # the whole text, inside its quotes


def test_the_block_keeps_to_its_budget_best_first() -> None:
    found = [recalled(f"memory number {i} " + "word " * 30, i) for i in range(10)]
    block = render(found, budget_tokens=120)
    assert block is not None
    kept = block.split("\n")[1:]
    assert 0 < len(kept) < 10
    assert kept[0].startswith('  - "memory number 0 ')
    assert render(found, budget_tokens=5) is None
