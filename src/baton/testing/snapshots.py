"""The `Snapshots` capability: a graph thread's checkpoint per super-step, for time travel."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import pytest

from baton.backends import Snapshot, Snapshots, Store
from baton.core.errors import ConfigError, StoreError
from baton.core.ids import new_id
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
)


def snaps_of(store: Store) -> Snapshots:
    assert isinstance(store, Snapshots), f"{type(store).__name__} lacks the Snapshots capability"
    return store


def thread() -> str:
    return new_id("s_")


STATE: dict[str, Any] = {
    "state": {"摘要": "用户想退订会员", "订单": [{"编号": "ORD-1", "金额": 99.5}], "已确认": False},
    "next": ["审核员"],
    "空": {},
}


def snap(
    tid: str, step: int, parent: str | None = None, data: Any = None, run: str = "r1"
) -> Snapshot:
    return Snapshot(
        tid, f"{run}:{step}", run, step, parent, {"step": step} if data is None else data
    )


async def save_chain(ss: Snapshots, tid: str, steps: int, keep_last: int | None = None) -> None:
    parent = None
    for step in range(1, steps + 1):
        saved = await ss.put_snapshot(snap(tid, step, parent), keep_last=keep_last)
        parent = saved.id


@capability(Snapshots)
async def test_an_unknown_thread_has_no_snapshots(store: Store) -> None:
    ss = snaps_of(store)
    tid = thread()
    assert await ss.get_snapshot(tid, "r1:1") is None
    assert await ss.list_snapshots(tid) == []
    await ss.delete_snapshots(tid)  # nothing to delete: no error


@capability(Snapshots)
async def test_a_snapshot_round_trips_with_chinese_data(store: Store) -> None:
    ss = snaps_of(store)
    tid = thread()
    before = time.time()
    given = Snapshot(tid, "运行-1:1", "运行-1", 1, None, STATE)
    saved = await ss.put_snapshot(given)
    assert saved == dataclasses.replace(given, seq=1)
    assert before <= saved.created_at <= time.time()
    assert await ss.get_snapshot(tid, "运行-1:1") == saved
    assert await ss.list_snapshots(tid) == [saved]
    with pytest.raises(dataclasses.FrozenInstanceError):
        saved.seq = 9  # type: ignore[misc]


@capability(Snapshots)
@pytest.mark.parametrize("data", ["纯文本", ["甲", 1, 2.5, True, None], 42, None, {}])
async def test_any_json_value_is_snapshot_data(store: Store, data: Any) -> None:
    ss = snaps_of(store)
    tid = thread()
    saved = await ss.put_snapshot(Snapshot(tid, "a", "r1", 0, None, data))
    assert saved.data == data
    got = await ss.get_snapshot(tid, "a")
    assert got is not None and got.data == data


@capability(Snapshots)
async def test_seq_numbers_first_saves_and_a_resave_keeps_its_seq(store: Store) -> None:
    ss = snaps_of(store)
    tid = thread()
    first = await ss.put_snapshot(snap(tid, 1))
    second = await ss.put_snapshot(snap(tid, 2, first.id))
    assert (first.seq, second.seq) == (1, 2)
    # a resumed run saves step 1 again: replaced in place, still seq 1
    again = await ss.put_snapshot(snap(tid, 1, data={"step": 1, "重做": True}))
    assert again.seq == 1 and again.data == {"step": 1, "重做": True}
    assert await ss.get_snapshot(tid, first.id) == again
    assert [s.id for s in await ss.list_snapshots(tid)] == [second.id, first.id]
    third = await ss.put_snapshot(snap(tid, 3, second.id))
    assert third.seq == 3


@capability(Snapshots)
async def test_listing_is_newest_first_with_a_limit(store: Store) -> None:
    ss = snaps_of(store)
    tid = thread()
    await save_chain(ss, tid, 5)
    listed = await ss.list_snapshots(tid)
    assert [s.seq for s in listed] == [5, 4, 3, 2, 1]
    assert [s.parent_id for s in listed] == ["r1:4", "r1:3", "r1:2", "r1:1", None]
    assert await ss.list_snapshots(tid, limit=2) == listed[:2]
    assert await ss.list_snapshots(tid, limit=10) == listed
    assert await ss.list_snapshots(tid, limit=0) == []
    assert await ss.list_snapshots(tid, limit=-1) == []


@capability(Snapshots)
async def test_keep_last_keeps_the_newest_across_branches(store: Store) -> None:
    ss = snaps_of(store)
    tid = thread()
    await save_chain(ss, tid, 10, keep_last=3)
    assert [s.id for s in await ss.list_snapshots(tid)] == ["r1:10", "r1:9", "r1:8"]
    assert await ss.get_snapshot(tid, "r1:1") is None

    # fork from r1:8 (an older one): the branch's first snapshot names it; retention goes by
    # seq, whatever the branch
    fork = await ss.put_snapshot(snap(tid, 9, "r1:8", run="r2"), keep_last=3)
    assert (fork.seq, fork.parent_id) == (11, "r1:8")
    assert [s.id for s in await ss.list_snapshots(tid)] == ["r2:9", "r1:10", "r1:9"]
    # a re-save of a kept snapshot keeps its seq and drops nothing more
    await ss.put_snapshot(snap(tid, 9, "r1:8", run="r2"), keep_last=3)
    assert [s.seq for s in await ss.list_snapshots(tid)] == [11, 10, 9]
    await ss.put_snapshot(snap(tid, 10, "r2:9", run="r2"), keep_last=1)
    assert [s.id for s in await ss.list_snapshots(tid)] == ["r2:10"]


@capability(Snapshots)
async def test_without_keep_last_every_snapshot_is_kept(store: Store) -> None:
    ss = snaps_of(store)
    tid = thread()
    await save_chain(ss, tid, 10, keep_last=None)
    assert len(await ss.list_snapshots(tid)) == 10
    await ss.put_snapshot(snap(tid, 11, "r1:10"), keep_last=10)
    assert [s.seq for s in await ss.list_snapshots(tid)] == list(range(11, 1, -1))


@capability(Snapshots)
@pytest.mark.parametrize("keep_last", [0, -1])
async def test_keep_last_below_one_is_refused_and_writes_nothing(
    store: Store, keep_last: int
) -> None:
    ss = snaps_of(store)
    tid = thread()
    with pytest.raises(ConfigError, match="keep at least 1 snapshot"):
        await ss.put_snapshot(snap(tid, 1), keep_last=keep_last)
    assert await ss.list_snapshots(tid) == []


@capability(Snapshots)
async def test_other_threads_are_untouched_by_retention_and_delete(store: Store) -> None:
    ss = snaps_of(store)
    tid, other = thread(), thread()
    await save_chain(ss, other, 4)
    kept = await ss.list_snapshots(other)
    await save_chain(ss, tid, 6, keep_last=2)
    assert await ss.list_snapshots(other) == kept
    await ss.delete_snapshots(tid)
    assert await ss.list_snapshots(tid) == []
    assert await ss.get_snapshot(tid, "r1:6") is None
    assert await ss.list_snapshots(other) == kept
    # a deleted thread starts over
    assert (await ss.put_snapshot(snap(tid, 1))).seq == 1
    await ss.delete_snapshots(tid)
    await ss.delete_snapshots(tid)


@capability(Snapshots)
async def test_snapshots_handed_out_are_copies(store: Store) -> None:
    ss = snaps_of(store)
    tid = thread()
    data: dict[str, Any] = {"列表": [1, 2], "子": {"k": "v"}}
    saved = await ss.put_snapshot(snap(tid, 1, data=data))
    data["列表"].append(3)  # the caller's object, changed after the save
    saved.data["子"]["k"] = "changed"  # the returned snapshot's data
    got = await ss.get_snapshot(tid, "r1:1")
    assert got is not None and got.data == {"列表": [1, 2], "子": {"k": "v"}}
    got.data["列表"].clear()
    (await ss.list_snapshots(tid))[0].data["新"] = 1
    again = await ss.get_snapshot(tid, "r1:1")
    assert again is not None and again.data == {"列表": [1, 2], "子": {"k": "v"}}


@capability(Snapshots)
async def test_snapshot_json_normalises_alike_on_every_backend(store: Store) -> None:
    ss = snaps_of(store)
    tid = thread()
    saved = await ss.put_snapshot(snap(tid, 1, data={"t": (1, 2), "n": [1.5, -0.0], 3: "k"}))
    assert saved.data == {"t": [1, 2], "n": [1.5, -0.0], "3": "k"}
    assert await ss.get_snapshot(tid, "r1:1") == saved


@capability(Snapshots)
@pytest.mark.parametrize(
    "data", [{1, 2}, math.nan, {"at": object()}, [math.inf]], ids=["set", "nan", "obj", "inf"]
)
async def test_data_that_is_not_json_is_refused(store: Store, data: Any) -> None:
    ss = snaps_of(store)
    tid = thread()
    with pytest.raises(StoreError, match=r"cannot be saved as JSON .*nothing was written"):
        await ss.put_snapshot(snap(tid, 1, data=data))
    assert await ss.list_snapshots(tid) == []
    assert (await ss.put_snapshot(snap(tid, 1))).seq == 1


@capability(Snapshots)
@pytest.mark.parametrize("where", ["data", "id"])
async def test_a_lone_surrogate_is_refused_alike(store: Store, where: str) -> None:
    ss = snaps_of(store)
    tid = thread()
    bad = "坏\ud800文本"
    given = (
        snap(tid, 1, data={"text": bad})
        if where == "data"
        else Snapshot(tid, bad, "r1", 1, None, {})
    )
    with pytest.raises(StoreError, match=f"its {where} holds text that is not valid Unicode"):
        await ss.put_snapshot(given)
    assert await ss.list_snapshots(tid) == []
