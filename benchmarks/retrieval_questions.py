"""The retrieval question set (`benchmarks/retrieval_set/questions.json`): loading, locating
each gold anchor in its document, judging hits, and recall@k / MRR.

A question's gold passages are (document, verbatim anchor) pairs, so the labels do not depend
on how a knowledge base chunks the text: a retrieved passage is a hit when it comes from the
gold document and its `[start, end)` covers the first character of an occurrence of the
anchor, or its text contains the anchor (whitespace normalised).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
SET = ROOT / "benchmarks" / "retrieval_set" / "questions.json"
SEAL = "bea8b36cdd8a9af80f3fbe742a6073d5a319cfb19aad710b83b757793e342b42"
"""sha256 of the sealed test half (compact, key-sorted UTF-8 JSON); see the set's README."""
HALVES = ("dev", "test")
MRR_DEPTH = 10
"""MRR counts a first hit down to this rank; deeper is 0."""

_SPACE = re.compile(r"\s+")
_MARKUP = re.compile(r"[*`]")


def workloads_dir() -> Path:
    """The shared workload folder: `BATON_WORKLOADS`, else `<repo>/../shared/workloads`."""
    env = os.environ.get("BATON_WORKLOADS")
    return Path(env).expanduser() if env else ROOT.parent / "shared" / "workloads"


def tau2_dir() -> Path:
    """The τ² workload folder that holds the policies."""
    return workloads_dir() / "tau2"


def canonical_sha256(rows: Sequence[Mapping[str, Any]]) -> str:
    """The seal of a half: sha256 of its rows as compact, key-sorted UTF-8 JSON."""
    blob = json.dumps(list(rows), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def squash(text: str) -> str:
    """Text for containment checks: Markdown emphasis and code marks dropped (an extractor
    may strip them), every run of whitespace made one space."""
    return _SPACE.sub(" ", _MARKUP.sub("", text)).strip()


@dataclass(frozen=True)
class Gold:
    """One gold passage: a document (relative to the tau2 folder) and a verbatim anchor."""

    doc: str
    anchor: str


@dataclass(frozen=True)
class Question:
    """One labelled question."""

    id: str
    text: str
    lang: str
    kind: str
    gold: tuple[Gold, ...]


def load_set(path: Path = SET) -> dict[str, Any]:
    """The raw question set (header, `test` and `dev`)."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def questions(half: str, path: Path = SET) -> list[Question]:
    """The questions of one half (`dev` or `test`)."""
    if half not in HALVES:
        raise ValueError(f"unknown half {half!r}: expected one of {', '.join(HALVES)}")
    return [
        Question(
            id=row["id"],
            text=row["text"],
            lang=row["lang"],
            kind=row["kind"],
            gold=tuple(Gold(g["doc"], g["anchor"]) for g in row["gold"]),
        )
        for row in load_set(path)[half]
    ]


def documents(path: Path = SET) -> list[str]:
    """The gold documents, relative to the tau2 folder."""
    return list(load_set(path)["documents"].values())


class Hit(Protocol):
    """What a judge needs of a retrieved passage (`baton.knowledge.Passage` fits)."""

    @property
    def source(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def text(self) -> str: ...


@dataclass
class Judge:
    """Decides whether a retrieved passage answers a question.

    `texts` maps each document (relative to the tau2 folder) to its text; a passage's source
    is matched to a document by path suffix, so sources ingested as absolute paths or under a
    prefix match too."""

    texts: Mapping[str, str]
    _spans: dict[Gold, list[int]] = field(default_factory=dict)

    def positions(self, gold: Gold) -> list[int]:
        """Where the anchor starts in its document (every occurrence)."""
        if gold not in self._spans:
            text = self.texts[gold.doc]
            found, at = [], text.find(gold.anchor)
            while at >= 0:
                found.append(at)
                at = text.find(gold.anchor, at + 1)
            self._spans[gold] = found
        return self._spans[gold]

    def is_hit(self, passage: Hit, question: Question) -> bool:
        """True when `passage` covers or contains one of the question's gold anchors."""
        source = passage.source.replace(os.sep, "/")
        for gold in question.gold:
            if not (source == gold.doc or source.endswith("/" + gold.doc)):
                continue
            if any(passage.start <= at < passage.end for at in self.positions(gold)):
                return True
            if squash(gold.anchor) in squash(passage.text):
                return True
        return False

    def first_hit(self, ranked: Sequence[Hit], question: Question) -> int | None:
        """The 1-based rank of the first hit, or None."""
        for rank, passage in enumerate(ranked, 1):
            if self.is_hit(passage, question):
                return rank
        return None


@dataclass(frozen=True)
class Scores:
    """Recall@k and MRR over a list of first-hit ranks."""

    n: int
    recall_at_5: float
    recall_at_1: float
    mrr: float

    @classmethod
    def of(cls, ranks: Iterable[int | None]) -> Scores:
        """Scores of first-hit ranks (None: no hit in the results)."""
        ranks = list(ranks)
        n = len(ranks)
        if n == 0:
            return cls(0, 0.0, 0.0, 0.0)
        r5 = sum(1 for r in ranks if r is not None and r <= 5) / n
        r1 = sum(1 for r in ranks if r == 1) / n
        mrr = sum(1 / r for r in ranks if r is not None and r <= MRR_DEPTH) / n
        return cls(n, r5, r1, mrr)
