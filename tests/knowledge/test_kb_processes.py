"""A knowledge base across processes and damage: restart, two writers, a broken folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.knowledge.test_kb import corpus

from baton.knowledge import KnowledgeBase, KnowledgeBaseError
from baton.routing.encoders import Encoder

ROOT = Path(__file__).resolve().parents[2]

INGEST = """
import json, sys
from baton.knowledge import KnowledgeBase
kb = KnowledgeBase("shared", path=sys.argv[1], lock_timeout_s=60)
report = kb.ingest_sync(sys.argv[2])
kb.close_sync()
print(json.dumps(report.model_dump()))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


def _ingest(folder: Path, docs: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", INGEST, str(folder), str(docs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def _report(proc: subprocess.Popen[str]) -> dict[str, int]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


async def test_an_index_written_by_one_process_is_searched_by_another(
    tmp_path: Path, encoder: Encoder
) -> None:
    docs = corpus(tmp_path)
    assert _report(_ingest(tmp_path / "kb", docs))["added"] == 5
    async with KnowledgeBase("shared", path=tmp_path / "kb", encoder=encoder) as kb:
        top = (await kb.search("ORD-202607-99", k=1))[0]
        assert "ORD-202607-99" in top.text and await kb.verify(top.citation)
        assert (await kb.stats())["files"] == 5


async def test_two_processes_ingesting_one_folder(tmp_path: Path, encoder: Encoder) -> None:
    docs = corpus(tmp_path)
    first, second = _ingest(tmp_path / "kb", docs), _ingest(tmp_path / "kb", docs)
    reports = [_report(first), _report(second)]
    # one waited for the other's lock, then found every file unchanged
    assert sorted((r["added"], r["unchanged"]) for r in reports) == [(0, 5), (5, 0)]
    async with KnowledgeBase("shared", path=tmp_path / "kb", encoder=encoder) as kb:
        stats = await kb.stats()
    async with KnowledgeBase("alone", path=tmp_path / "alone", encoder=encoder) as alone:
        await alone.ingest(docs)
        expected = (await alone.stats())["chunks"]
    assert stats["chunks"] == stats["points"] == expected  # nothing lost, nothing twice


SLOW_INGEST = """
import asyncio, sys
from baton.knowledge import KnowledgeBase

def done(source, chunks):
    print(source, flush=True)

async def main():
    kb = KnowledgeBase("shared", path=sys.argv[1], batch=4)
    await kb.ingest(sys.argv[2], progress=False, on_file=done)
    await kb.close()

asyncio.run(main())
"""


def _many_files(root: Path, n: int) -> Path:
    docs = root / "many"
    docs.mkdir()
    for i in range(n):
        paragraphs = [
            f"## Rule R-{i:03d}-{j}\n\nOrder ORD-2026{i:02d}-{j:02d} is refunded within {j + 2} "
            f"days when the item is returned unused; rule {i}.{j} also covers exchanges."
            for j in range(12)
        ]
        (docs / f"policy-{i:03d}.md").write_text(
            f"# Policy {i}\n\n" + "\n\n".join(paragraphs), encoding="utf-8"
        )
    return docs


async def test_kill_9_mid_ingestion_loses_nothing_and_duplicates_nothing(
    tmp_path: Path, encoder: Encoder
) -> None:
    docs = _many_files(tmp_path, 24)
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_INGEST, str(tmp_path / "kb"), str(docs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    finished = [proc.stdout.readline() for _ in range(3)]  # three files committed
    proc.send_signal(signal.SIGKILL)  # mid-file: its chunks may be pending in the manifest
    proc.wait(timeout=30)
    assert all(line.strip() for line in finished), proc.stderr.read() if proc.stderr else ""

    async with KnowledgeBase("shared", path=tmp_path / "kb", encoder=encoder) as kb:
        before = await kb.stats()
        assert 3 <= before["files"] < 24  # what was committed is there, and no more
        report = await kb.ingest(docs, progress=False)
        after = await kb.stats()
        hit = (await kb.search("ORD-202623-11", k=1))[0]
    async with KnowledgeBase("alone", path=tmp_path / "alone", encoder=encoder) as alone:
        await alone.ingest(docs, progress=False)
        expected = await alone.stats()
    assert report.added + report.unchanged == 24 and report.unchanged == before["files"]
    assert after["files"] == 24
    assert after["chunks"] == after["points"] == expected["chunks"]  # none lost, none twice
    assert "ORD-202623-11" in hit.text


def _storage(folder: Path) -> Path:
    found = list(folder.glob("collection/*/storage.sqlite"))
    assert found, list(folder.rglob("*"))
    return found[0]


@pytest.mark.parametrize("damage", ["manifest", "storage", "collection", "derived"])
async def test_a_damaged_folder_gives_a_clear_error_and_rebuilds(
    tmp_path: Path, encoder: Encoder, damage: str
) -> None:
    docs = corpus(tmp_path)
    folder = tmp_path / "kb"
    async with KnowledgeBase("broken", path=folder, encoder=encoder) as kb:
        await kb.ingest(docs)
    if damage == "manifest":
        (folder / "manifest.sqlite3").unlink()
    elif damage == "storage":
        _storage(folder).write_bytes(b"garbage" * 1000)
    elif damage == "collection":
        import shutil

        shutil.rmtree(_storage(folder).parent)
    else:  # the lexical index and the vectors' copy are derived data: rebuilt, no error
        for f in [*(folder / "lexical").iterdir(), folder / "vectors.npy"]:
            f.write_bytes(b"garbage")
    kb = KnowledgeBase("broken", path=folder, encoder=encoder)
    if damage == "derived":
        assert "ORD-202607-99" in (await kb.search("ORD-202607-99", k=1, mode="lexical"))[0].text
        assert (await kb.search("gift cards", k=1, mode="vector"))[0].source.endswith("refunds.md")
        await kb.close()
        return
    with pytest.raises(KnowledgeBaseError) as caught:
        await kb.search("refund")
    message = str(caught.value)
    assert str(folder) in message and "--rebuild" in message and "delete the folder" in message
    report = await kb.ingest(docs, rebuild=True)
    assert report.added == 5
    assert (await kb.search("gift cards", k=1))[0].source.endswith("refunds.md")
    await kb.close()


async def test_a_missing_folder_says_how_to_create_it(tmp_path: Path, encoder: Encoder) -> None:
    kb = KnowledgeBase("nowhere", path=tmp_path / "none", encoder=encoder)
    with pytest.raises(
        KnowledgeBaseError, match=r"no knowledge base 'nowhere' at .*baton kb ingest"
    ):
        await kb.search("x")
    assert not (tmp_path / "none").exists()


async def test_a_folder_held_by_another_qdrant_client_gives_a_clear_error(
    tmp_path: Path, encoder: Encoder
) -> None:
    from qdrant_client import AsyncQdrantClient

    folder = tmp_path / "kb"
    async with KnowledgeBase("held", path=folder, encoder=encoder) as kb:
        await kb.ingest(corpus(tmp_path))
    other = AsyncQdrantClient(path=str(folder))  # not a knowledge base: it skips our lock
    try:
        kb = KnowledgeBase("held", path=folder, encoder=encoder)
        with pytest.raises(KnowledgeBaseError, match="is open in another client") as caught:
            await kb.search("refund")
        assert str(folder) in str(caught.value)
    finally:
        await other.close()
    assert await kb.search("refund")  # the failed open released the folder's lock
    await kb.close()


HOLD = """
import sys
from baton.knowledge import KnowledgeBase
kb = KnowledgeBase("shared", path=sys.argv[1])
kb.ingest_sync(sys.argv[2])
print("open", flush=True)
sys.stdin.read()  # hold the folder until the test closes stdin
kb.close_sync()
"""


async def test_a_folder_in_use_by_another_process_is_a_clear_error_after_the_wait(
    tmp_path: Path, encoder: Encoder
) -> None:
    docs = corpus(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "kb"), str(docs)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        kb = KnowledgeBase("shared", path=tmp_path / "kb", encoder=encoder, lock_timeout_s=0.5)
        with pytest.raises(KnowledgeBaseError, match="in use by another process") as caught:
            await kb.ingest(docs)
        assert str(tmp_path / "kb") in str(caught.value)
    finally:
        holder.communicate("", timeout=60)
    report = await kb.ingest(docs)  # free again: everything was ingested once, by the holder
    assert (report.added, report.unchanged) == (0, 5)
    await kb.close()
