"""Where a detector found a secret, and how overlapping finds become one replacement."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple


class Hit(NamedTuple):
    """A secret a detector found: the span to replace and the name its placeholder shows."""

    start: int
    """Where the secret starts in the text."""
    stop: int
    """Where it ends (exclusive)."""
    label: str
    """The `{name}` of its placeholder (`password`, `card`, `api_key`, ...)."""
    at: int
    """Where the detector's match starts (a key word before the secret included): of
    overlapping hits, the one whose match starts first names the replacement."""
    rank: int = 0
    """The detector's rank, breaking ties of `at` (the built-in order)."""


def replace_hits(text: str, hits: Iterable[Hit], placeholder: Callable[[str], str]) -> str:
    """`text` with each secret replaced by `placeholder(label)`.

    Detectors disagree on where a secret ends (`password: ghp_...` is a phrase and a token):
    overlapping hits are replaced as one, their union, so the longest reading of the secret
    goes, and the one whose match starts first names it.
    """
    merged: list[Hit] = []
    for h in sorted(hits):
        if merged and h.start < merged[-1].stop:
            last = merged[-1]
            first = last if (last.at, last.rank) <= (h.at, h.rank) else h
            merged[-1] = Hit(last.start, max(last.stop, h.stop), first.label, first.at, first.rank)
        else:
            merged.append(h)
    if not merged:
        return text
    out: list[str] = []
    pos = 0
    for h in merged:
        out.append(text[pos : h.start])
        out.append(placeholder(h.label))
        pos = h.stop
    out.append(text[pos:])
    return "".join(out)
