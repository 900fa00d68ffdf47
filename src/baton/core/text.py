"""Text that can always be stored: lone surrogates become U+FFFD where text enters a run.

A model or a tool can produce a string holding half of a UTF-16 surrogate pair (`"\\ud800"`,
e.g. from a JSON escape). Python keeps it, but it cannot be encoded as UTF-8, so a store that
writes JSON would fail on it, and fail again on every resume of that run. The kernel cleans
what enters a run (the user's message, the model's text and arguments, tool results).
"""

from __future__ import annotations

import re
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


BLANK_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x0020), (0x007F, 0x00A0), (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x1680, 0x1680),
    (0x180E, 0x180E), (0x2000, 0x200F), (0x2028, 0x202F), (0x205F, 0x2064), (0x2066, 0x206F),
    (0x3000, 0x3000), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)  # fmt: skip
"""The code points a person cannot read: white space, control (Cc) and format (Cf, such as
zero-width) characters, as Unicode 14 lists them. Written out, not read from `unicodedata`, so
that every Python version and the API server's published schema draw the same line."""

VISIBLE_PATTERN = "[^{}]".format(
    "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in BLANK_RANGES)
)
"""A regular expression that finds one readable character (the schema of a user message)."""

_VISIBLE = re.compile(VISIBLE_PATTERN)


def blank(text: str) -> bool:
    """Nothing a person could read: only white space, control and format (invisible)
    characters (`BLANK_RANGES`); `"\\x00\\x07"` and `"\\u200b"` are blank."""
    return _VISIBLE.search(text) is None


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
