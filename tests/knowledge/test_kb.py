"""`KnowledgeBase` on qdrant-client's real local engine with the embedded encoder."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from tests.knowledge.pdfs import blank_pdf, text_pdf

from baton.knowledge import Citation, KnowledgeBase, KnowledgeBaseError
from baton.routing.encoders import Encoder

REFUNDS = """# Refund policy

Refunds go back to the original payment method within five business days.

## Exceptions

Gift cards and opened software cannot be refunded.

## Manual refunds

Order ORD-202607-99 was refunded by hand after a duplicate charge.
"""

DISTRACTORS = "\n\n".join(
    f"Order ORD-2026{m:02d}-{n:02d} shipped from warehouse {n} on time."
    for m in (5, 6, 7)
    for n in range(90, 99)
)

CHINESE = """# 退款政策

退款将退回原支付方式，处理时间为五个工作日。礼品卡不予退款。

# 物流

订单通常在三到七天内送达。偏远地区可能需要更长时间。
"""


def corpus(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    (docs / "refunds.md").write_text(REFUNDS, encoding="utf-8")
    (docs / "orders.txt").write_text(DISTRACTORS, encoding="utf-8")
    (docs / "zh.md").write_text(CHINESE, encoding="utf-8")
    (docs / "shipping.html").write_text(
        "<h1>Shipping</h1><p>We ship worldwide from our Rotterdam hub.</p>"
        "<h2>Servers</h2><p>Tracking runs on srv-bj-001; srv-sh-002 is the standby.</p>",
        encoding="utf-8",
    )
    text_pdf(docs / "warranty.pdf", ["Warranty", "Laptops carry a two year warranty."])
    return docs


@pytest.fixture
async def kb(tmp_path: Path, encoder: Encoder) -> KnowledgeBase:
    kb = KnowledgeBase("policies", path=tmp_path / "kb", encoder=encoder)
    report = await kb.ingest(corpus(tmp_path))
    assert (report.added, report.chunks, report.skipped) == (5, report.chunks, [])
    yield kb  # type: ignore[misc]
    await kb.close()


async def test_every_format_is_ingested_and_found(kb: KnowledgeBase) -> None:
    stats = await kb.stats()
    assert stats["files"] == 5 and stats["chunks"] >= 7
    found = {
        q: (await kb.search(q, k=1))[0].source
        for q in ("two year warranty for laptops", "ship worldwide", "gift cards refund")
    }
    assert found["two year warranty for laptops"].endswith("warranty.pdf")
    assert found["ship worldwide"].endswith("shipping.html")
    assert found["gift cards refund"].endswith("refunds.md")


async def test_ids_are_found_lexically_among_distractors(kb: KnowledgeBase) -> None:
    for mode in ("lexical", "hybrid"):
        top = (await kb.search("ORD-202607-99", k=3, mode=mode))[0]  # type: ignore[arg-type]
        assert "ORD-202607-99" in top.text, mode
        assert top.heading == ["Refund policy", "Manual refunds"]
    top = (await kb.search("which host is srv-bj-001", k=1, mode="lexical"))[0]
    assert top.heading == ["Shipping", "Servers"]


async def test_chinese_search(kb: KnowledgeBase) -> None:
    for mode in ("vector", "lexical", "hybrid"):
        top = (await kb.search("礼品卡可以退款吗", k=1, mode=mode))[0]  # type: ignore[arg-type]
        assert top.heading == ["退款政策"], mode
        assert top.text == (await _text(kb, top.source))[top.start : top.end]


async def _text(kb: KnowledgeBase, source: str) -> str:
    return Path(source).read_text(encoding="utf-8")


async def test_hybrid_fuses_both_lists(kb: KnowledgeBase) -> None:
    query = "refunds of orders shipped from the Rotterdam warehouse"  # no ids: two lists
    vector = [p.id for p in await kb.search(query, k=10, mode="vector")]
    lexical = [p.id for p in await kb.search(query, k=10, mode="lexical")]
    hybrid = await kb.search(query, k=10, mode="hybrid")
    assert set(p.id for p in hybrid) <= set(vector) | set(lexical)
    best = hybrid[0]
    # reciprocal rank fusion: the score is the sum of 1/(60+rank) over the lists
    lists = (vector, lexical)
    expected = sum(1 / (60 + ids.index(best.id) + 1) for ids in lists if best.id in ids)
    assert best.score == pytest.approx(expected)
    assert best.id in vector and best.id in lexical  # found by both, it leads
    assert all(a.score >= b.score for a, b in itertools.pairwise(hybrid))


async def test_filters(kb: KnowledgeBase) -> None:
    refunds = next(p.source for p in await kb.search("gift cards", k=1))
    for mode in ("vector", "lexical", "hybrid"):
        hits = await kb.search("order", k=10, mode=mode, where={"source": refunds})  # type: ignore[arg-type]
        assert hits and {p.source for p in hits} == {refunds}, mode
        hits = await kb.search("refund", k=10, mode=mode, where={"heading": "Exceptions"})  # type: ignore[arg-type]
        assert hits and all("Exceptions" in p.heading for p in hits), mode
    assert await kb.search("refund", where={"source": "nowhere.md"}) == []
    both = await kb.search("refund", k=20, where={"source": [Path(refunds), "nowhere.md"]})
    assert both and {p.source for p in both} == {refunds}
    with pytest.raises(ValueError, match="cannot filter on 'author'"):
        await kb.search("refund", where={"author": "x"})


async def test_citations_verify(kb: KnowledgeBase) -> None:
    hit = (await kb.search("gift cards", k=1))[0]
    cite = hit.citation
    assert cite.heading == "Refund policy > Exceptions" and cite.chunk_id == hit.id
    assert await kb.verify(cite)
    assert not await kb.verify(cite.model_copy(update={"sha256": "0" * 64}))
    assert not await kb.verify(cite.model_copy(update={"start": cite.start + 1}))
    assert not await kb.verify(cite.model_copy(update={"kb": "other"}))
    assert not await kb.verify(Citation(**{**cite.model_dump(), "chunk_id": "not-a-uuid"}))


async def test_reingest_replaces_changed_and_drops_deleted_files(
    tmp_path: Path, kb: KnowledgeBase
) -> None:
    docs = tmp_path / "docs"
    old = (await kb.search("gift cards", k=1))[0]
    (docs / "refunds.md").write_text(REFUNDS.replace("Gift cards", "Vouchers"), encoding="utf-8")
    (docs / "orders.txt").unlink()
    report = await kb.ingest(docs)
    assert (report.replaced, report.removed, report.unchanged) == (1, 1, 3)
    assert not await kb.verify(old.citation)  # the stale chunk is gone
    texts = [p.text for p in await kb.search("refunded", k=50, mode="lexical")]
    assert not any("Gift cards" in t for t in texts)
    assert any("Vouchers" in t for t in texts)
    assert not any("ORD-202605-91" in p.text for p in await kb.search("ORD-202605-91", k=9))
    stats = await kb.stats()
    assert stats["files"] == 4
    assert await kb.remove(old.source) > 0
    assert (await kb.stats())["files"] == 3
    assert await kb.search("vouchers", k=5, where={"source": old.source}) == []


async def test_new_chunking_settings_chunk_every_file_again(
    tmp_path: Path, encoder: Encoder
) -> None:
    docs = corpus(tmp_path)
    async with KnowledgeBase("c", path=tmp_path / "kb", encoder=encoder) as kb:
        await kb.ingest(docs)
        assert (await kb.ingest(docs)).unchanged == 5
        wide = (await kb.stats())["chunks"]
    narrow = KnowledgeBase(
        "c", path=tmp_path / "kb", encoder=encoder, chunk_tokens=8, overlap_tokens=2
    )
    async with narrow:
        report = await narrow.ingest(docs)
        stats = await narrow.stats()
    assert (report.replaced, report.unchanged) == (5, 0)
    assert stats["chunks"] == stats["points"] > wide  # old chunks replaced, not kept beside


async def test_bad_input_is_skipped_and_nothing_half_ingested(
    tmp_path: Path, encoder: Encoder
) -> None:
    docs = tmp_path / "bad"
    docs.mkdir()
    (docs / "empty.md").write_bytes(b"")
    (docs / "binary.md").write_bytes(b"\x00\x01\x02 PNG data \x00")
    blank_pdf(docs / "scan.pdf")
    with (docs / "huge.txt").open("wb") as f:
        f.truncate(50 * 1024 * 1024)
    (docs / "good.md").write_text("# Good\n\nThis one is fine.", encoding="utf-8")
    async with KnowledgeBase("bad", path=tmp_path / "kb", encoder=encoder) as kb:
        report = await kb.ingest(docs)
        reasons = dict(report.skipped)
        assert report.added == 1 and len(reasons) == 4
        assert "is empty" in reasons[(docs / "empty.md").as_posix()]
        assert "not text" in reasons[(docs / "binary.md").as_posix()]
        assert "without a text layer" in reasons[(docs / "scan.pdf").as_posix()]
        assert "over the 20 MB limit" in reasons[(docs / "huge.txt").as_posix()]
        stats = await kb.stats()
        assert (stats["files"], stats["chunks"]) == (1, 1)


async def test_surrogates_and_a_huge_query(tmp_path: Path, encoder: Encoder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    async with KnowledgeBase("odd", path=tmp_path / "kb", encoder=encoder) as kb:
        (docs / "a.md").write_text(
            "# Odd\n\nBroken \ud800 text about refunds.", "utf-8", "surrogatepass"
        )
        report = await kb.ingest(docs)
        assert report.added == 1 and not report.skipped
        hit = (await kb.search("refunds \udc00", k=1))[0]
        assert "\ufffd" in hit.text and await kb.verify(hit.citation)
        huge = "refunds " + "x" * 100_000
        assert (await kb.search(huge, k=1))[0].id == hit.id  # cut for the encoder, answered
        assert await kb.search("   ") == []


async def test_interrupted_ingestion_resumes(tmp_path: Path, encoder: Encoder) -> None:
    docs = corpus(tmp_path)
    kb = KnowledgeBase("resume", path=tmp_path / "kb", encoder=encoder)

    def stop_after_two(source: str, chunks: int) -> None:
        done.append(source)
        if len(done) == 2:
            raise KeyboardInterrupt  # as if the process were stopped here

    done: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        await kb.ingest(docs, on_file=stop_after_two)
    assert (await kb.stats())["files"] == 2  # committed files are kept and searchable
    report = await kb.ingest(docs)
    assert (report.added, report.unchanged) == (3, 2)
    full = KnowledgeBase("full", path=tmp_path / "full", encoder=encoder)
    await full.ingest(docs)
    assert (await kb.stats())["chunks"] == (await full.stats())["chunks"]
    await kb.close()
    await full.close()


async def test_a_second_client_of_one_folder_gets_a_clear_error(
    tmp_path: Path, kb: KnowledgeBase, encoder: Encoder
) -> None:
    other = KnowledgeBase("policies", path=kb.path, encoder=encoder, lock_timeout_s=0.3)
    with pytest.raises(KnowledgeBaseError, match=r"in use by another KnowledgeBase") as caught:
        await other.search("refund")
    assert str(kb.path) in str(caught.value)
    await kb.close()  # the folder is free again
    assert await other.search("refund")
    await other.close()


def test_sync_faces(tmp_path: Path, encoder: Encoder) -> None:
    with KnowledgeBase("sync", path=tmp_path / "kb", encoder=encoder) as kb:
        report = kb.ingest_sync(corpus(tmp_path))
        assert report.added == 5
        hit = kb.search_sync("ORD-202607-99", 1)[0]
        assert kb.verify_sync(hit.citation)
        assert kb.stats_sync()["files"] == 5


async def test_a_single_file_keeps_the_name_it_was_given(tmp_path: Path, encoder: Encoder) -> None:
    docs = corpus(tmp_path)
    async with KnowledgeBase("one", path=tmp_path / "kb", encoder=encoder) as kb:
        report = await kb.ingest(docs / "refunds.md")
        assert report.added == 1
        hits = await kb.search("gift cards", k=3)
        assert {p.source for p in hits} == {(docs / "refunds.md").as_posix()}
        report = await kb.ingest(docs)  # the folder: the file is known, the rest is new
        assert (report.added, report.unchanged) == (4, 1)
