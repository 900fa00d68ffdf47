"""Extractive compression: the sentences of retrieved passages that answer a query.

A passage is split into sentences (English `.`, `!`, `?` and Chinese `。！？；` end one; so
does a line break, which ends a heading or a list item). Each sentence scores by how much of
the query it covers — words stemmed crudely (`invoices` and `invoiced` meet at `invoi`), ids
and numbers (`ORD-202608-17`, `POL-RF-003`, `48`) whole and weighted more, Chinese by
character pairs (no spaces needed) — plus a bonus for its passage's rank. The best sentences
are kept within a token budget and put back in their passage's order: each passage with a
kept sentence is one fact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from baton.models.base import estimate_tokens

_SENTENCE = re.compile(r"(?:[^\n.!?。！？；;]|[.!?](?=\S))*(?:[.!?]+(?=\s|$)|[。！？；;]|\n|$)")
"""A sentence: up to an end mark (English ones only before a space, so `3.2` and `e.g.x` stay
whole) or a line break."""
_WORD = re.compile(r"[a-z0-9]+(?:[-_./][a-z0-9]+)*")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "my",
        "me",
        "of",
        "on",
        "or",
        "our",
        "the",
        "this",
        "that",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "we",
        "us",
    ]
)
_ID_WEIGHT = 3.0
"""An id or a number in the query counts as much as three words."""
RANK_BONUS = 0.5
"""What the top passage's rank adds to its sentences' score (0.25 the second's, ...)."""
HEADING_SHARE = 0.5
"""What a query term counts when only the sentence's heading holds it."""


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence of a passage, where it is, and its score for the query."""

    passage: int
    """The passage's rank (0: the best hit)."""
    start: int
    """Its offset in the passage's text."""
    text: str
    score: float
    overlap: float


_BLOCK = re.compile(r"[\n#>|*-]|\d+[.)]\s")
"""How a line that starts a block of its own begins: a blank line, a heading, a quote, a table
row, a list item."""


def _unwrapped(text: str) -> str:
    """`text` with the hard wraps inside its paragraphs made spaces (same length, so offsets
    hold): a line break stays where a heading ends or a block starts."""
    chars = list(text)
    line_start = 0
    for i, ch in enumerate(text):
        if ch != "\n":
            continue
        line = text[line_start:i].strip()
        if line and not line.startswith("#") and not _BLOCK.match(text, i + 1):
            chars[i] = " "
        line_start = i + 1
    return "".join(chars)


def sentences(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) of every non-blank sentence of `text`, stripped; a paragraph's
    hard-wrapped lines read as one."""
    out: list[tuple[int, str]] = []
    for m in _SENTENCE.finditer(_unwrapped(text)):
        raw = m.group(0)
        if raw.lstrip().startswith("#"):  # a heading: the citation names the heading path
            continue
        body = raw.strip().lstrip("#>-*• ").strip()
        if body:
            out.append((m.start() + raw.index(body[0]), body))
    return out


def terms(text: str) -> dict[str, float]:
    """The query terms of `text` with their weights: stemmed words, whole ids and numbers,
    Chinese character pairs (and lone characters)."""
    low = text.casefold()
    found: dict[str, float] = {}
    for w in _WORD.findall(low):
        if w in _STOP:
            continue
        if any(c.isdigit() for c in w):  # an id or a number: whole (`ORD-1` is not `ORD-2`)
            found[w] = _ID_WEIGHT
        elif len(w) > 1:
            found[w[:5]] = 1.0
    for run in _CJK.findall(low):
        if len(run) == 1:
            found.setdefault(run, 1.0)
        for i in range(len(run) - 1):
            found[run[i : i + 2]] = 1.0
    return found


def score(
    query: dict[str, float], sentence: str, rank: int, heading: dict[str, float] | None = None
) -> tuple[float, float]:
    """(score, overlap) of `sentence` from the passage ranked `rank` under `heading`'s terms:
    the weighted share of the query's terms it holds (those only its heading holds count
    `HEADING_SHARE`: a section titled `POL-RF-003 Orders in transit` speaks of them), plus
    the rank bonus."""
    if not query:
        return RANK_BONUS / (rank + 1), 0.0
    have = terms(sentence)
    around = heading or {}
    held = 0.0
    for t, w in query.items():
        if t in have:
            held += w
        elif t in around:
            held += w * HEADING_SHARE
    overlap = held / sum(query.values())
    return overlap + RANK_BONUS / (rank + 1), overlap


def best_sentences(
    query: str,
    texts: Sequence[str],
    budget_tokens: int,
    headings: Sequence[str] | None = None,
) -> list[list[Sentence]]:
    """Per passage (in rank order), the sentences kept for `query` within `budget_tokens`, in
    the passage's order (`headings`: each passage's heading path, as context). Sentences that
    share nothing with the query are left out, unless no sentence shares anything: then the
    best passage's first sentences stand in (a match by meaning alone)."""
    wanted = terms(query)
    scored: list[Sentence] = []
    for rank, text in enumerate(texts):
        around = terms(headings[rank]) if headings else None
        for start, body in sentences(text):
            points, overlap = score(wanted, body, rank, around)
            scored.append(Sentence(rank, start, body, points, overlap))
    relevant = [s for s in scored if s.overlap > 0]
    if not relevant:
        relevant = [s for s in scored if s.passage == 0]
    relevant.sort(key=lambda s: (-s.score, s.passage, s.start))
    kept: list[Sentence] = []
    used = 0
    for s in relevant:
        cost = estimate_tokens(s.text)
        if used + cost > budget_tokens:
            if kept:
                continue  # a shorter one further down may still fit
            s = _cut(s, budget_tokens)  # the best sentence alone is over the budget
            cost = estimate_tokens(s.text)
        kept.append(s)
        used += cost
    per: list[list[Sentence]] = [[] for _ in texts]
    for s in sorted(kept, key=lambda s: (s.passage, s.start)):
        per[s.passage].append(s)
    return per


def _cut(s: Sentence, budget_tokens: int) -> Sentence:
    """`s` cut to about `budget_tokens`, marked with an ellipsis."""
    text = s.text
    while estimate_tokens(text) > budget_tokens and len(text) > 1:
        text = text[: max(1, len(text) * 3 // 4)]
    return Sentence(s.passage, s.start, text.rstrip() + "…", s.score, s.overlap)


def joined(parts: Sequence[Sentence]) -> str:
    """Sentences of one passage as one text: a space between English ones, none after a
    Chinese end mark."""
    out = ""
    for p in parts:
        if out and not out.endswith(("。", "！", "？", "；")):
            out += " "
        out += p.text
    return out
