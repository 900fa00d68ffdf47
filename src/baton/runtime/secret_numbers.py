"""Payment card numbers and Chinese resident ID numbers in free text.

Hand-written: detect-secrets looks for key and token shapes in code; it has no rule for a card
number or an ID number typed in a sentence, and only their check digits (Luhn, ISO 7064
MOD 11-2) tell them from an order number or a timestamp of the same length.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import date

from baton.runtime.secret_hits import Hit

__all__ = ["NUMBER", "cn_id_ok", "find_numbers", "luhn_ok", "number_label"]

A = r"(?<![A-Za-z0-9０-９])"  # ASCII edges: `\b` also counts CJK characters as word characters
Z = r"(?![A-Za-z0-9０-９])"
D = "[0-9０-９]"  # ASCII and full-width digits (Chinese input methods type both)
NUMBER = (
    # 13-19 digits, single spaces or dashes allowed between them, not part of a longer run nor
    # of an id (`ORD-4111...`); the last may be an X (Chinese ID check digit). `number_label`
    # decides what it is, if anything.
    rf"{A}(?<!{D}[ -])(?<![A-Za-z][-_]){D}(?:[ -]?{D}){{11,17}}[ -]?(?:{D}|[Xx]){Z}"
    rf"(?![ -]{D})"
)
"""The candidates: runs of 13-19 digits (spaces or dashes between them allowed)."""

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_PROVINCES = frozenset(
    (11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46, 50)
) | frozenset((51, 52, 53, 54, 61, 62, 63, 64, 65, 71, 81, 82, 83))
_NUMBER_RX = re.compile(NUMBER)


def luhn_ok(digits: Sequence[int]) -> bool:
    """True when the digits pass the Luhn (mod 10) check of payment card numbers."""
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def cn_id_ok(text: str) -> bool:
    """True for a valid Chinese resident ID number: 17 digits and a check digit (0-9 or X).

    The province code must exist, the birth date (digits 7-14) must be a real date between 1900
    and today, and the last character must be the ISO 7064 MOD 11-2 check digit.
    """
    if len(text) != 18 or not text[:17].isdigit():
        return False
    d = [int(c) for c in text[:17]]
    if d[0] * 10 + d[1] not in _ID_PROVINCES:
        return False
    year = d[6] * 1000 + d[7] * 100 + d[8] * 10 + d[9]
    try:
        born = date(year, d[10] * 10 + d[11], d[12] * 10 + d[13])
    except ValueError:
        return False
    if year < 1900 or born > date.today():
        return False
    return (
        text[17].upper()
        == "10X98765432"[sum(w * x for w, x in zip(_ID_WEIGHTS, d, strict=True)) % 11]
    )


def number_label(raw: str, card: bool, id_card: bool) -> str | None:
    """`id_card`, `card` or None for a 13-19 digit candidate."""
    compact = raw.replace(" ", "").replace("-", "")
    if id_card and len(compact) == 18 and cn_id_ok(compact):
        return "id_card"
    if card and compact.isdigit():
        digits = [int(c) for c in compact]
        # Payment cards start with 2-6 (the major industry identifier); 1, 7, 8, 9 and 0 are
        # airlines, petroleum, telecoms and national schemes, and epoch timestamps start with 1.
        if 2 <= digits[0] <= 6 and luhn_ok(digits):
            return "card"
    return None


def find_numbers(text: str, card: bool, id_card: bool, rank: int) -> Iterator[Hit]:
    """The card numbers (`card`) and ID numbers (`id_card`) in `text`."""
    for m in _NUMBER_RX.finditer(text):
        label = number_label(m.group(), card, id_card)
        if label is not None:
            yield Hit(m.start(), m.end(), label, m.start(), rank)
