"""Near-duplicate texts: what a labelled example may not be scored against while fitting.

A labelled example that is also one of its route's example utterances (or a copy of it with
other case, spacing or punctuation, or a near-copy under the encoder) matches that utterance
with a score of about 1.0. Fitting thresholds on such scores teaches the tier that in-scope
queries score 1.0, so it then rejects every real query. `Semantic.fit` therefore scores each
labelled example without its duplicates (leave-one-out by text and by near-duplicate).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

DUPLICATE_SIMILARITY = 0.98
"""Cosine at or above which two texts count as one. The embedded encoder is sensitive to case
and punctuation (`where is my invoice` against `Where is my invoice?`: 0.89; against
`WHERE IS MY INVOICE`: 0.45; `我要退款` against `我要退款！`: 0.90), which is why texts are also
compared once normalised; the cosine catches near-copies that normalising misses, and stays
above light rewordings (`where is my invoice please`: 0.94)."""


def normalise(text: str) -> str:
    """The text compared for equality: NFKC, case-folded, letters and digits only.

    Full-width and half-width forms fold together (NFKC), so `退款！` and `退款!` are equal.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if ch.isalnum())


def duplicates(
    texts: Sequence[str],
    vectors: Any,
    other_texts: Sequence[str],
    other_vectors: Any,
    similarity: float = DUPLICATE_SIMILARITY,
) -> Any:
    """(len(texts), len(other_texts)) bool: True where a pair is one text.

    A pair is one text when the normalised texts are equal (and not empty) or the cosine of
    their unit vectors reaches `similarity`.
    """
    import numpy as np

    if len(texts) == 0 or len(other_texts) == 0:
        return np.zeros((len(texts), len(other_texts)), dtype=bool)
    close = np.zeros((len(texts), len(other_texts)), dtype=bool)
    for lo in range(0, len(texts), 1024):  # chunks keep the float product small
        close[lo : lo + 1024] = np.asarray(vectors[lo : lo + 1024] @ other_vectors.T) >= similarity
    where: dict[str, list[int]] = {}
    for j, text in enumerate(other_texts):
        key = normalise(text)
        if key:
            where.setdefault(key, []).append(j)
    for i, text in enumerate(texts):
        for j in where.get(normalise(text), ()):
            close[i, j] = True
    return close
