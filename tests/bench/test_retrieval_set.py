"""The retrieval question set (`benchmarks/retrieval_set/`): well formed, sealed, and every
gold anchor found in its policy document.

The documents live beside the repository (`../shared/workloads/tau2`, or `BATON_WORKLOADS`).
Without them the anchor checks skip, unless BATON_REQUIRE_WORKLOADS=1, where a missing workload
is a failure. The judge's own rules are checked on a small text of their own.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "retrieval_questions.py"
README = ROOT / "benchmarks" / "retrieval_set" / "README.md"
KINDS = {"number", "term", "rule"}
HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def rq() -> Iterator[ModuleType]:
    """`benchmarks/retrieval_questions.py`, imported as a module."""
    name = "baton_bench_retrieval_questions"
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]


@pytest.fixture(scope="module")
def data(rq: ModuleType) -> dict[str, Any]:
    loaded: dict[str, Any] = rq.load_set()
    return loaded


def norm(text: str) -> str:
    """Text compared for duplicates: NFKC, case-folded, punctuation and spaces dropped."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).casefold())


def policies(rq: ModuleType, data: dict[str, Any]) -> dict[str, str]:
    """Each gold document's text, or skip (fail under BATON_REQUIRE_WORKLOADS=1)."""
    base = rq.tau2_dir()
    missing = [d for d in data["documents"].values() if not (base / d).is_file()]
    if missing:
        reason = f"τ² policies not found under {base} ({', '.join(missing)} missing)"
        if os.environ.get("BATON_REQUIRE_WORKLOADS") == "1":
            pytest.fail(f"BATON_REQUIRE_WORKLOADS=1 but {reason}")
        pytest.skip(reason)
    return {d: (base / d).read_text(encoding="utf-8") for d in data["documents"].values()}


def test_the_test_half_matches_its_seal(rq: ModuleType, data: dict[str, Any]) -> None:
    assert rq.canonical_sha256(data["test"]) == rq.SEAL
    assert f"sha256:{rq.SEAL}" in README.read_text(encoding="utf-8")


def test_counts_halves_and_language_mix(data: dict[str, Any]) -> None:
    test, dev = data["test"], data["dev"]
    assert len(test) == len(dev) == 64
    rows = test + dev
    for half in (test, dev):
        zh = sum(r["lang"] == "zh" for r in half)
        assert zh / len(half) >= 1 / 3, "at least a third of each half is Chinese"
        kinds = Counter(r["kind"] for r in half)
        assert set(kinds) == KINDS and kinds["number"] >= 5 and kinds["term"] >= 10
        docs = Counter(g["doc"] for r in half for g in r["gold"])
        assert set(docs) == set(data["documents"].values())
        assert min(docs.values()) >= 15, "every policy is asked about in each half"
    for r in rows:
        assert set(r) == {"id", "text", "lang", "kind", "gold"}
        assert r["lang"] in {"en", "zh"} and r["kind"] in KINDS and r["gold"]
        assert bool(HAN.search(r["text"])) == (r["lang"] == "zh"), r["id"]
        for g in r["gold"]:
            assert set(g) == {"doc", "anchor"} and g["doc"] in data["documents"].values()
            assert g["anchor"] == g["anchor"].strip() and len(g["anchor"]) >= 8
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids)
    assert all(r["id"].startswith("t") for r in test) and all(r["id"].startswith("d") for r in dev)
    texts = [norm(r["text"]) for r in rows]
    assert len(set(texts)) == len(texts), "no question repeats another"


def test_every_anchor_occurs_in_its_document(rq: ModuleType, data: dict[str, Any]) -> None:
    texts = policies(rq, data)
    judge = rq.Judge(texts)
    unique = 0
    for half in rq.HALVES:
        for q in rq.questions(half):
            for gold in q.gold:
                found = judge.positions(gold)
                assert found, f"{q.id}: anchor {gold.anchor!r} is not in {gold.doc}"
                unique += len(found) == 1
    assert unique >= 130, "anchors are meant to be unique; only a rare one repeats"


@dataclass(frozen=True)
class Psg:
    """A retrieved passage, as the judge sees it."""

    source: str
    start: int
    end: int
    text: str


def test_the_judge_counts_covering_and_containing_passages(rq: ModuleType) -> None:
    doc = "# Bags\n\nEach extra baggage is **50** dollars.\n\nOther text here."
    q = rq.Question("x", "extra bag?", "en", "number", (rq.Gold("a/p.md", "extra baggage"),))
    judge = rq.Judge({"a/p.md": doc})
    at = doc.index("extra baggage")
    assert judge.is_hit(Psg("a/p.md", at - 5, at + 3, "Each ext"), q)  # covers the start
    assert judge.is_hit(Psg("/x/tau2/a/p.md", at - 5, at + 3, "Each ext"), q)  # path suffix
    assert not judge.is_hit(Psg("b/a/p.mdx", at - 5, at + 3, "Each ext"), q)
    assert not judge.is_hit(Psg("a/p.md", at + 1, at + 30, "xtra baggage is"), q)  # starts after
    assert not judge.is_hit(Psg("other/p.md", 0, len(doc), doc), q)  # another document
    # offsets of another extraction: the text still contains the anchor (emphasis dropped)
    q50 = rq.Question("y", "cost?", "en", "number", (rq.Gold("a/p.md", "is **50** dollars"),))
    assert judge.is_hit(Psg("a/p.md", 100, 140, "Each extra  baggage is 50\ndollars."), q50)
    ranks = [judge.first_hit([Psg("z.md", 0, 9, "nothing"), Psg("a/p.md", at, at + 9, "")], q)]
    assert ranks == [2]
    s = rq.Scores.of([1, 2, None, 7, 11])
    assert s.n == 5 and s.recall_at_5 == pytest.approx(2 / 5) and s.recall_at_1 == 0.2
    assert s.mrr == pytest.approx((1 + 1 / 2 + 1 / 7) / 5)
