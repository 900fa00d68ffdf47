"""The `Blackboard` capability: shared, versioned board entries written compare-and-set, and
`write_with_retry` over them."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from typing import Any

import pytest

from baton.backends import Blackboard, BoardEntry, Store, write_with_retry
from baton.core.errors import ConfigError, ConflictError, StoreError
from baton.core.ids import new_id
from baton.core.nesting import MAX_JSON_DEPTH
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
)


def board_of(store: Store) -> Blackboard:
    assert isinstance(store, Blackboard), f"{type(store).__name__} lacks the Blackboard capability"
    return store


def name() -> str:
    return new_id("board_")


NESTED: dict[str, Any] = {
    "结论": "市场在过去半年持续增长",
    "来源": [{"标题": "行业报告", "页": 12}, {"标题": "新闻", "页": None}],
    "置信度": 0.85,
    "已审核": False,
    "空": {},
}


@capability(Blackboard)
async def test_an_unknown_board_is_empty(store: Store) -> None:
    bb = board_of(store)
    b = name()
    assert await bb.read_board(b) == {}
    assert await bb.read_entry(b, "plan") is None
    assert await bb.board_changes(b) == []
    await bb.delete_board(b)  # nothing to delete: no error


@capability(Blackboard)
@pytest.mark.parametrize(
    "value",
    [NESTED, "纯文本：第一步，收集资料", ["甲", 1, 2.5, True, None, ["乙"]], 42, None, {}],
    ids=["nested", "text", "list", "number", "null", "empty"],
)
async def test_json_values_round_trip_with_chinese_text(store: Store, value: Any) -> None:
    bb = board_of(store)
    b = name()
    before = time.time()
    entry = await bb.write_entry(b, "发现", value, 0, writer="研究员-1")
    assert (entry.board, entry.key, entry.value, entry.version, entry.seq, entry.writer) == (
        b,
        "发现",
        value,
        1,
        1,
        "研究员-1",
    )
    assert before <= entry.updated_at <= time.time()
    assert await bb.read_entry(b, "发现") == entry
    assert await bb.read_board(b) == {"发现": entry}
    assert await bb.board_changes(b) == [entry]


@capability(Blackboard)
async def test_an_entry_is_frozen_and_json(store: Store) -> None:
    bb = board_of(store)
    entry = await bb.write_entry(name(), "k", NESTED, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.version = 9  # type: ignore[misc]
    data = json.loads(json.dumps(dataclasses.asdict(entry), ensure_ascii=False))
    assert BoardEntry(**data) == entry


@capability(Blackboard)
async def test_write_is_compare_and_set_on_the_entry_version(store: Store) -> None:
    bb = board_of(store)
    b = name()
    first = await bb.write_entry(b, "plan", {"步骤": 1}, 0, writer="planner")
    mine = await bb.read_entry(b, "plan")
    theirs = await bb.read_entry(b, "plan")
    assert mine == theirs == first

    assert mine is not None and theirs is not None
    second = await bb.write_entry(b, "plan", {"步骤": 2}, mine.version, writer="a")
    assert (second.version, second.seq) == (2, 2)
    with pytest.raises(ConflictError) as info:
        await bb.write_entry(b, "plan", {"步骤": "b"}, theirs.version, writer="b")
    message = str(info.value)
    assert f"entry 'plan' of board {b!r}" in message
    assert "expected version 1 but the store holds version 2" in message
    assert "nothing was written" in message and "Read it again (read_entry)" in message
    assert info.value.key == f"{b}/plan"
    assert await bb.read_entry(b, "plan") == second  # the loser wrote nothing

    # 0 means "must not exist yet": a second creation conflicts
    with pytest.raises(ConflictError, match="expected version 0 but the store holds version 2"):
        await bb.write_entry(b, "plan", "again", 0)
    # and an update of an entry never written conflicts too; nothing is written
    with pytest.raises(ConflictError, match="expected version 3 but the store holds no such"):
        await bb.write_entry(b, "missing", "x", 3)
    assert await bb.read_entry(b, "missing") is None
    # refusals take no seq: the next write is the board's third
    third = await bb.write_entry(b, "other", "x", 0)
    assert third.seq == 3


@capability(Blackboard)
async def test_seq_numbers_the_writes_of_each_board(store: Store) -> None:
    bb = board_of(store)
    b, other = name(), name()
    a1 = await bb.write_entry(b, "a", 1, 0)
    b1 = await bb.write_entry(b, "b", 1, 0)
    o1 = await bb.write_entry(other, "a", "其他", 0)
    a2 = await bb.write_entry(b, "a", 2, 1)
    c1 = await bb.write_entry(b, "c", 1, 0)
    assert [e.seq for e in (a1, b1, a2, c1)] == [1, 2, 3, 4]
    assert (o1.seq, o1.version) == (1, 1)  # boards count on their own
    assert (a2.version, c1.version) == (2, 1)

    assert await bb.board_changes(b) == [b1, a2, c1]  # a's first write was overwritten
    assert await bb.board_changes(b, since_seq=2) == [a2, c1]
    assert await bb.board_changes(b, since_seq=3) == [c1]
    assert await bb.board_changes(b, since_seq=4) == []
    assert await bb.board_changes(other) == [o1]
    board = await bb.read_board(b)
    assert list(board) == ["a", "b", "c"] and board["a"] == a2


@capability(Blackboard)
async def test_a_reader_polling_board_changes_misses_nothing(store: Store) -> None:
    bb = board_of(store)
    b = name()
    seen: dict[str, Any] = {}
    since = 0
    for round_ in range(3):
        for key in ("x", "y"):
            current = await bb.read_entry(b, key)
            await bb.write_entry(
                b, key, f"{key}{round_}", 0 if current is None else current.version
            )
        for entry in await bb.board_changes(b, since):
            seen[entry.key] = entry.value
            since = entry.seq
        assert seen == {"x": f"x{round_}", "y": f"y{round_}"}
    assert since == 6


@capability(Blackboard)
async def test_delete_board_drops_its_entries_and_keeps_its_seq(store: Store) -> None:
    bb = board_of(store)
    b, other = name(), name()
    await bb.write_entry(b, "a", 1, 0)
    await bb.write_entry(b, "b", 2, 0)
    kept = await bb.write_entry(other, "a", 1, 0)
    await bb.delete_board(b)
    assert await bb.read_board(b) == {}
    assert await bb.read_entry(b, "a") is None
    assert await bb.board_changes(b) == []
    assert await bb.read_board(other) == {"a": kept}

    again = await bb.write_entry(b, "a", "新的开始", 0)  # a deleted key starts over...
    assert again.version == 1
    assert again.seq == 3  # ...but the board's seq goes on, so a reader at seq 2 sees it
    assert await bb.board_changes(b, since_seq=2) == [again]
    await bb.delete_board(b)
    await bb.delete_board(b)


@capability(Blackboard)
async def test_reads_and_writes_are_copies(store: Store) -> None:
    bb = board_of(store)
    b = name()
    value: dict[str, Any] = {"列表": [1, 2], "子": {"k": "v"}}
    written = await bb.write_entry(b, "k", value, 0)
    value["列表"].append(3)  # the caller's object, changed after the write
    written.value["子"]["k"] = "changed"  # the returned entry's value
    read = await bb.read_entry(b, "k")
    assert read is not None and read.value == {"列表": [1, 2], "子": {"k": "v"}}
    read.value["列表"].clear()
    (await bb.read_board(b))["k"].value["子"].clear()
    (await bb.board_changes(b))[0].value["新"] = 1
    again = await bb.read_entry(b, "k")
    assert again is not None and again.value == {"列表": [1, 2], "子": {"k": "v"}}


@capability(Blackboard)
async def test_board_json_normalises_alike_on_every_backend(store: Store) -> None:
    bb = board_of(store)
    entry = await bb.write_entry(name(), "k", {"t": (1, 2), "n": [1.5, -0.0]}, 0)
    assert entry.value == {"t": [1, 2], "n": [1.5, -0.0]}


@capability(Blackboard)
@pytest.mark.parametrize(
    "value",
    [{1, 2}, math.nan, {"at": object()}, [math.inf], ["半个\ud800代理"]],
    ids=["set", "nan", "obj", "inf", "lone-surrogate"],
)
async def test_a_value_that_is_not_json_is_refused(store: Store, value: Any) -> None:
    bb = board_of(store)
    b = name()
    with pytest.raises(StoreError, match=r"cannot be saved as JSON .*nothing was written") as info:
        await bb.write_entry(b, "k", value, 0)
    assert not isinstance(info.value, ConflictError)
    assert await bb.read_board(b) == {}
    assert (await bb.write_entry(b, "k", "ok", 0)).seq == 1


def nested(levels: int) -> Any:
    value: Any = "底"
    for i in range(levels):
        value = {"层": value} if i % 2 else [value]
    return value


@capability(Blackboard)
@pytest.mark.parametrize("levels", [5_000, MAX_JSON_DEPTH + 1])
async def test_a_value_nested_past_the_limit_is_refused_and_nothing_is_written(
    store: Store, levels: int
) -> None:
    bb = board_of(store)
    b = name()
    await bb.write_entry(b, "k", "before", 0)
    with pytest.raises(StoreError, match=r"more than 64 levels deep .*nothing was written"):
        await bb.write_entry(b, "k", nested(levels), 1)
    with pytest.raises(StoreError, match="more than 64 levels deep"):
        await write_with_retry(bb, b, "k", lambda current: [nested(levels)])
    [entry] = (await bb.read_board(b)).values()
    assert (entry.value, entry.version, entry.seq) == ("before", 1, 1)
    at_limit = await bb.write_entry(b, "k", nested(MAX_JSON_DEPTH), 1)
    assert (await bb.read_entry(b, "k")) == at_limit and at_limit.value == nested(MAX_JSON_DEPTH)


class Meddler:
    """A blackboard whose first `meddle` reads are each followed by another writer's write,
    so that the write after them conflicts."""

    def __init__(self, inner: Blackboard, meddle: int) -> None:
        self.inner = inner
        self.meddle = meddle

    async def read_board(self, board: str) -> dict[str, BoardEntry]:
        return await self.inner.read_board(board)

    async def read_entry(self, board: str, key: str) -> BoardEntry | None:
        entry = await self.inner.read_entry(board, key)
        if self.meddle > 0:
            self.meddle -= 1
            version = 0 if entry is None else entry.version
            await self.inner.write_entry(board, key, "meddled", version, writer="meddler")
        return entry

    async def write_entry(
        self, board: str, key: str, value: Any, expected_version: int, *, writer: str = ""
    ) -> BoardEntry:
        return await self.inner.write_entry(board, key, value, expected_version, writer=writer)

    async def board_changes(self, board: str, since_seq: int = 0) -> list[BoardEntry]:
        return await self.inner.board_changes(board, since_seq)

    async def delete_board(self, board: str) -> None:
        await self.inner.delete_board(board)


class Yielding(Meddler):
    """A blackboard that lets other tasks run between a read and what follows it (a store in
    process memory otherwise never does), so that concurrent writers really interleave."""

    def __init__(self, inner: Blackboard) -> None:
        super().__init__(inner, 0)

    async def read_entry(self, board: str, key: str) -> BoardEntry | None:
        entry = await self.inner.read_entry(board, key)
        await asyncio.sleep(0)
        return entry


def increment(calls: list[Any]) -> Any:
    def update(current: Any) -> Any:
        calls.append(current)
        return {"count": (current or {"count": 0})["count"] + 1}

    return update


@capability(Blackboard)
async def test_write_with_retry_creates_then_updates(store: Store) -> None:
    bb = board_of(store)
    b = name()
    calls: list[Any] = []
    entry, conflicts = await write_with_retry(bb, b, "计数", increment(calls), writer="w")
    assert (entry.value, entry.version, entry.writer, conflicts) == ({"count": 1}, 1, "w", 0)
    entry, conflicts = await write_with_retry(bb, b, "计数", increment(calls))
    assert (entry.value, entry.version, conflicts) == ({"count": 2}, 2, 0)
    assert calls == [None, {"count": 1}]


@capability(Blackboard)
async def test_write_with_retry_rereads_after_each_conflict(store: Store) -> None:
    b = name()
    meddler = Meddler(board_of(store), meddle=2)
    seen: list[Any] = []

    def append(current: Any) -> Any:
        seen.append(current)
        return [*(current if isinstance(current, list) else []), "mine"]

    entry, conflicts = await write_with_retry(meddler, b, "k", append, writer="me", backoff_s=0)
    assert conflicts == 2
    assert seen == [None, "meddled", "meddled"]  # each try saw the fresh value
    assert (entry.value, entry.version, entry.writer) == (["mine"], 3, "me")
    assert [e.writer for e in await meddler.board_changes(b)] == ["me"]


@capability(Blackboard)
async def test_write_with_retry_gives_up_after_its_attempts(store: Store) -> None:
    bb = board_of(store)
    b = name()
    meddler = Meddler(bb, meddle=3)
    calls: list[Any] = []

    def mine(current: Any) -> Any:
        calls.append(current)
        return "mine"

    with pytest.raises(ConflictError) as info:
        await write_with_retry(meddler, b, "k", mine, attempts=3, backoff_s=0.001)
    message = str(info.value)
    assert f"entry 'k' of board {b!r}: all 3 attempts" in message
    assert "nothing was written" in message and "pass more attempts" in message
    assert info.value.key == f"{b}/k"
    assert isinstance(info.value.__cause__, ConflictError)
    assert len(calls) == 3
    stored = await bb.read_entry(b, "k")
    assert stored is not None and (stored.value, stored.writer) == ("meddled", "meddler")

    with pytest.raises(ConfigError, match="at least 1 attempt"):
        await write_with_retry(bb, b, "k", mine, attempts=0)


N_WRITERS, INCREMENTS = 4, 25


@capability(Blackboard)
async def test_concurrent_writers_lose_no_update(store: Store) -> None:
    bb = Yielding(board_of(store))
    b = name()
    calls: list[Any] = []

    async def writer(i: int) -> int:
        met = 0
        for _ in range(INCREMENTS):
            _, conflicts = await write_with_retry(
                bb, b, "计数", increment(calls), writer=f"w{i}", attempts=1000, backoff_s=0.001
            )
            met += conflicts
        return met

    conflicts = await asyncio.gather(*(writer(i) for i in range(N_WRITERS)))
    total = N_WRITERS * INCREMENTS
    entry = await bb.read_entry(b, "计数")
    assert entry is not None
    assert (entry.value, entry.version, entry.seq) == ({"count": total}, total, total)
    assert sum(conflicts) > 0  # the writers did collide...
    assert len(calls) == total + sum(conflicts)  # ...and every conflict was counted once
