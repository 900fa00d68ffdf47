"""`Memory` on its own: scope, time to live, decay, forget (audited), a reopened folder."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from baton.backends.sqlite import SQLiteStore
from baton.memory import Memory, MemoryStoreError, Provenance
from baton.routing.encoders import Encoder

DAY = 86400.0
ROOT = Path(__file__).resolve().parents[2]


async def test_a_memory_expires_after_its_time_to_live(
    tmp_path: Path, encoder: Encoder, clock: Any
) -> None:
    async with Memory(tmp_path / "m", encoder=encoder, clock=clock) as memory:
        await memory.remember("The user is travelling to Lisbon in May", user_id="u1", ttl_s=3600)
        await memory.remember("The user lives in Porto", user_id="u1")
        found = await memory.search("Lisbon trip", user_id="u1")
        assert found[0].record.text == "The user is travelling to Lisbon in May"
        clock.now += 3601
        texts = [r.record.text for r in await memory.search("Lisbon trip", user_id="u1")]
        assert "The user is travelling to Lisbon in May" not in texts
        assert await memory.purge_expired() == 1
        assert await memory.count("u1") == 1


async def test_older_unused_memories_rank_lower_and_a_recall_makes_one_fresh(
    tmp_path: Path, encoder: Encoder, clock: Any
) -> None:
    async with Memory(tmp_path / "m", encoder=encoder, clock=clock, half_life_s=30 * DAY) as memory:
        old = await memory.remember("The user prefers tea in the morning", user_id="u1")
        clock.now += 90 * DAY  # three half-lives idle: weighed by 1/8
        new = await memory.remember("The user prefers coffee in the morning", user_id="u1")
        found = await memory.search("does the user prefer tea in the morning?", user_id="u1")
        assert [r.record.id for r in found] == [new.id, old.id]
        assert found[1].similarity > found[0].similarity  # the old one is the closer text
        assert found[1].score < found[0].score  # ... and ranks lower for its age
        # that search used both: they are equally fresh now, and similarity decides again
        assert found[1].record.uses == 0
        again = await memory.search("does the user prefer tea in the morning?", user_id="u1")
        assert [r.record.id for r in again] == [old.id, new.id]
        assert again[0].record.uses == 1 and again[0].record.last_used == clock.now


async def test_one_users_memories_never_reach_another_users_search(
    tmp_path: Path, encoder: Encoder
) -> None:
    async with Memory(tmp_path / "m", encoder=encoder) as memory:
        await memory.remember("The user's account number ends in 4411", user_id="alice")
        await memory.remember("The user's account number ends in 9020", user_id="bob")
        await memory.remember("Refunds over 500 need a manager", agent="billing", kind="lesson")
        alice = [r.record.text for r in await memory.search("account number", user_id="alice")]
        assert alice == ["The user's account number ends in 4411"]
        bob = await memory.search("a refund to my account number", user_id="bob", agent="billing")
        assert {r.record.text for r in bob} == {
            "The user's account number ends in 9020",
            "Refunds over 500 need a manager",
        }
        # no user id: no user's memories, only the agent's own for every user
        nobody = await memory.search("a refund to my account number", user_id=None, agent="billing")
        assert [r.record.text for r in nobody] == ["Refunds over 500 need a manager"]
        assert await memory.search("account number", user_id=None) == []


async def test_forget_deletes_everything_about_a_user_and_the_audit_chain_records_it(
    tmp_path: Path, encoder: Encoder
) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path / 'baton.db'}")
    try:
        async with Memory(tmp_path / "m", encoder=encoder, audit=store) as memory:
            for text in ("The user has two cats", "The user is vegetarian"):
                await memory.remember(text, user_id="alice")
            await memory.remember(
                "Ask for the order id first", user_id="alice", agent="desk", kind="lesson"
            )
            await memory.remember("The user has a dog", user_id="bob")
            assert await memory.forget("alice", by="dpo@example.com") == 3
            assert await memory.count("alice") == 0
            assert await memory.count("bob") == 1
            assert await memory.search("cats", user_id="alice") == []
            assert await memory.forget("alice") == 0
        events = await store.get_events(session_id="baton-memory")
        assert [(e.type, e.user_id, e.deleted, e.by) for e in events] == [  # type: ignore[union-attr]
            ("memory_forgotten", "alice", 3, "dpo@example.com"),
            ("memory_forgotten", "alice", 0, None),
        ]
        records = await store.audit_records(session_id="baton-memory")
        assert [r.type for r in records] == ["memory_forgotten", "memory_forgotten"]
        assert (await store.verify_audit()).ok
    finally:
        await store.close()


async def test_what_is_stored_is_redacted_first(tmp_path: Path, encoder: Encoder) -> None:
    async with Memory(tmp_path / "m", encoder=encoder) as memory:
        kept = await memory.remember(
            "The user's password is Tr0ub4dor-Horse-99",
            user_id="u1",
            provenance=Provenance(who="user"),
        )
    assert "Tr0ub4dor" not in kept.text and "[REDACTED:password]" in kept.text
    assert _folder_holds(tmp_path / "m", b"REDACTED:password")  # the folder holds the text...
    assert not _folder_holds(tmp_path / "m", b"Tr0ub4dor")  # ... and never the secret


async def test_a_folder_reopened_in_a_new_process_recalls_what_was_kept(
    tmp_path: Path, encoder: Encoder
) -> None:
    folder = tmp_path / "m"
    script = textwrap.dedent(
        f"""
        import asyncio
        from baton.memory import Memory

        async def main():
            async with Memory({str(folder)!r}) as memory:
                await memory.remember("The user's favourite colour is teal", user_id="u1")

        asyncio.run(main())
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)
    async with Memory(folder, encoder=encoder) as memory:
        found = await memory.search("what colour does the user like?", user_id="u1")
        assert [r.record.text for r in found] == ["The user's favourite colour is teal"]
        assert found[0].record.provenance.who == "user"


async def test_a_folder_another_memory_holds_is_a_clear_error(
    tmp_path: Path, encoder: Encoder
) -> None:
    async with Memory(tmp_path / "m", encoder=encoder) as first:
        await first.count()
        second = Memory(tmp_path / "m", encoder=encoder)
        with pytest.raises(MemoryStoreError, match="one process at a time"):
            await second.count()


def _folder_holds(folder: Path, needle: bytes) -> bool:
    return any(needle in p.read_bytes() for p in folder.rglob("*") if p.is_file())


async def test_chinese_text_and_lone_surrogates_are_kept_and_found(
    tmp_path: Path, encoder: Encoder
) -> None:
    async with Memory(tmp_path / "m", encoder=encoder) as memory:
        await memory.remember("用户喜欢靠窗的座位", user_id="u1", kind="preference")
        broken = await memory.remember("The user wrote \ud800 by mistake", user_id="u1")
        assert "\ufffd" in broken.text
        found = await memory.search("用户喜欢什么座位？", user_id="u1", k=1)
        assert [r.record.text for r in found] == ["用户喜欢靠窗的座位"]
        assert await memory.search("\udfff" * 10, user_id="u1") is not None


class _Tiny:
    """A real encoder of another width (character counts), to reopen a folder with."""

    name = "tiny-8"
    dim = 8

    def encode(self, texts: Any) -> Any:
        import numpy as np

        rows = np.array([[t.count(c) + 1 for c in "aeiou tns"[:8]] for t in texts], "float32")
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


async def test_a_folder_opened_with_an_encoder_of_another_width_is_refused_by_name(
    tmp_path: Path, encoder: Encoder
) -> None:
    async with Memory(tmp_path / "m", encoder=encoder) as memory:
        await memory.remember("The user lives in Porto", user_id="u1")
    async with Memory(tmp_path / "m", encoder=_Tiny()) as memory:
        with pytest.raises(MemoryStoreError, match=r"512-dimensional vectors.*tiny-8 makes 8"):
            await memory.count()


@pytest.mark.filterwarnings("ignore:Failed to obtain server version")
async def test_an_unreachable_server_is_a_clear_error(encoder: Encoder) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with Memory(url=f"http://127.0.0.1:{port}", encoder=encoder) as memory:
        with pytest.raises(MemoryStoreError, match="Qdrant server is running and reachable"):
            await memory.count()
