"""Ranked lists of chunk ids and their fusion: BM25 hits, and reciprocal rank fusion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from baton.knowledge.catalog import Catalog, top
from baton.knowledge.lexical import LexicalIndex

RRF_K = 60
"""The constant of reciprocal rank fusion: score = sum over lists of 1 / (RRF_K + rank)."""


def lexical_hits(
    catalog: Catalog,
    lexical: LexicalIndex,
    text: str,
    k: int,
    where: Mapping[str, list[str]],
    codes: bool = False,
) -> list[tuple[str, float]]:
    """BM25 hits (id, score) for `text`, or (`codes`) for its ids and codes alone. Fused as a
    list of its own, the exact-id list lets a chunk that holds `ORD-202607-99` verbatim
    outrank one that is merely similar in meaning and full of neighbouring ids."""
    scores = lexical.code_scores(text) if codes else lexical.scores(text)
    if scores is None:
        return []
    hits = top(scores, k, catalog.mask(where), 0.0)
    return [(catalog.ids[i], s) for i, s in hits]


def fuse(lists: Sequence[Sequence[tuple[str, float]]]) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: each list adds 1 / (RRF_K + rank) to its items' scores."""
    scores: dict[str, float] = {}
    for hits in lists:
        for rank, (pid, _) in enumerate(hits, 1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
