"""Text that can always be stored: lone surrogates become U+FFFD where text enters a run.

A model or a tool can produce a string holding half of a UTF-16 surrogate pair (`"\\ud800"`,
e.g. from a JSON escape). Python keeps it, but it cannot be encoded as UTF-8, so a store that
writes JSON would fail on it, and fail again on every resume of that run. The kernel cleans
what enters a run (the user's message, the model's text and arguments, tool results).
"""

from __future__ import annotations

import unicodedata
from typing import Any


def clean_text(text: str) -> str:
    """`text`, with each lone surrogate replaced by U+FFFD (a valid pair is joined)."""
    if text.isascii():  # the usual case, checked in C
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def blank(text: str) -> bool:
    """Nothing a person could read: only white space, control and format (invisible, such as
    zero-width) characters; `"\\x00\\x07"` and `"\\u200b"` are blank."""
    return all(c.isspace() or unicodedata.category(c) in ("Cc", "Cf") for c in text)


def clean_value(value: Any) -> Any:
    """`value` with every string in it (keys too, in dicts and lists) passed through
    `clean_text`; the same object when nothing needed cleaning."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        out = {clean_value(k): clean_value(v) for k, v in value.items()}
        return value if _same(out, value) else out
    if isinstance(value, list):
        items = [clean_value(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def _same(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    # two keys can clean to one, so the lengths are compared first
    return len(a) == len(b) and all(
        ka is kb and va is vb for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=False)
    )
