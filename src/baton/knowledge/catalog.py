"""The in-process search structures of a knowledge base: chunk order, filters, vectors.

Why a matrix of our own: qdrant-client's local mode searches in Python, ~140 ms per query at
100k points and about a second with a payload filter (measured on a 2-core CPU), far from
the 50 ms target. So in local mode Qdrant stays the store of record (vectors and payloads
persist there) and the knowledge base searches a float32 numpy matrix of the same vectors,
loaded from Qdrant when it opens and kept in step on every change; filters are numpy masks.
A Qdrant server searches with its own index (`KnowledgeBase(url=...)`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

FILTER_KEYS = ("source", "heading")
"""Metadata a search may filter on: the file, and a heading anywhere in the heading path."""


def check_where(where: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """`where` as lists of accepted values per key; ValueError for an unknown key."""
    out: dict[str, list[str]] = {}
    for key, value in (where or {}).items():
        if key not in FILTER_KEYS:
            raise ValueError(
                f"cannot filter on {key!r}: a search filters on {', '.join(FILTER_KEYS)}"
            )
        given = [value] if isinstance(value, (str, PurePath)) else list(value)
        values = [v.as_posix() if isinstance(v, PurePath) else v for v in given]
        if not all(isinstance(v, str) for v in values):
            raise ValueError(f"filter {key!r} takes a string (or path) or a list of them")
        out[key] = values
    return out


class Catalog:
    """Every indexed chunk in one order (rows of the vector matrix and of the lexical
    index), with row lists per source and per heading for filters."""

    def __init__(self, rows: Sequence[tuple[str, str, Sequence[str]]]) -> None:
        self.ids = [r[0] for r in rows]
        self.row = {pid: i for i, pid in enumerate(self.ids)}
        self.by_source: dict[str, list[int]] = {}
        self.by_heading: dict[str, list[int]] = {}
        for i, (_, source, heading) in enumerate(rows):
            self.by_source.setdefault(source, []).append(i)
            for h in set(heading):
                self.by_heading.setdefault(h, []).append(i)

    def __len__(self) -> int:
        return len(self.ids)

    def mask(self, where: Mapping[str, list[str]]) -> npt.NDArray[np.bool_] | None:
        """Rows that pass `where` (every key must match); None for no filter."""
        import numpy as np

        if not where:
            return None
        out = np.ones(len(self.ids), dtype=bool)
        for key, values in where.items():
            table = self.by_source if key == "source" else self.by_heading
            keep = np.zeros(len(self.ids), dtype=bool)
            for v in values:
                keep[table.get(v, [])] = True
            out &= keep
        return out


def top(
    scores: npt.NDArray[np.float32], k: int, mask: npt.NDArray[np.bool_] | None, floor: float
) -> list[tuple[int, float]]:
    """The `k` best (row, score) pairs, best first, among rows in `mask` scoring above
    `floor`."""
    import numpy as np

    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    n = len(scores)
    if n == 0 or k <= 0:
        return []
    best = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    best = best[np.argsort(-scores[best], kind="stable")]
    return [(int(i), float(scores[i])) for i in best if scores[i] > floor]
