"""`too_deep`: the cheap depth check that runs before any recursive JSON parser."""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from baton.core.nesting import MAX_JSON_DEPTH, too_deep, value_too_deep

_text = st.text(st.characters(codec="utf-8") | st.sampled_from("[]{}\"\\'\u200b\ufeff"), max_size=8)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=40,
)


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(_json, st.integers(min_value=0, max_value=6))
def test_the_depth_of_any_json_text_is_judged_exactly(value: Any, limit: int) -> None:
    """Brackets inside strings (escaped quotes and zero-width characters too) never count."""
    text = json.dumps(value, ensure_ascii=False)
    assert too_deep(text, limit) == (depth(value) > limit)


def test_the_limit_is_inclusive_and_strings_full_of_brackets_are_text() -> None:
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert not too_deep(at_limit)
    assert too_deep("[" + at_limit + "]")
    assert not too_deep(json.dumps({"code": "[[[[{{{{" * 1000}))
    assert not too_deep(json.dumps([{"a": [1]}] * 5000))  # wide, not deep


def test_stray_closers_cannot_hide_the_nesting_that_follows() -> None:
    assert too_deep("]" * 5000 + "[" * 100)
    assert too_deep('"unterminated ' + "{" * 100)


def test_a_hundred_thousand_levels_are_refused_quickly() -> None:
    started = time.perf_counter()
    for text in ('{"a":' * 100_000 + "1" + "}" * 100_000, "[" * 100_000 + "]" * 100_000):
        assert too_deep(text)
    assert time.perf_counter() - started < 1.0


def test_a_value_is_judged_by_its_json_even_past_the_encoders_stack() -> None:
    value: Any = 1
    for _ in range(MAX_JSON_DEPTH):
        value = {"a": value}
    assert not value_too_deep(value)
    assert value_too_deep([value])
    for _ in range(5_000):
        value = [value]
    assert value_too_deep(value)  # json.dumps itself overflows: still a clear True
    circular: list[Any] = []
    circular.append(circular)
    assert not value_too_deep(circular) and not value_too_deep({1, 2})  # not JSON: not judged
