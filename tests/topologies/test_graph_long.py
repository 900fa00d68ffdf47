"""A long graph run on a persistent store: its checkpoints hold what it did since its last
commit (it commits as it goes, `COMMIT_EVERY`), not all it did, every super-step is
snapshotted once, and a run stopped half way resumes to the same end with nothing doubled."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import baton.runtime.at_rest
from baton import END, START, Graph
from baton.runtime.runner import COMMIT_EVERY
from baton.topologies.graph_steps import PATH_KEPT

STEPS = 300


class Count(BaseModel):
    n: int = 0


def build(db: Path, gate: asyncio.Event | None = None, stop_at: int = 0) -> Any:
    async def count(state: Count) -> dict[str, Any]:
        if gate is not None and state.n == stop_at:
            await gate.wait()  # the process dies here
        return {"n": state.n + 1}

    g = Graph(Count).add_node("count", count)
    g.add_edge(START, "count").add_conditional_edges(
        "count", lambda s: END if s.n >= STEPS else "count"
    )
    return g.compile(store=f"sqlite:///{db}", max_steps=STEPS + 5, keep_last=None)


async def test_a_long_runs_checkpoints_stay_small_and_its_record_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    masked = 0
    mask = baton.runtime.at_rest.masked_message

    def counted(*args: Any) -> Any:
        nonlocal masked
        masked += 1
        return mask(*args)

    monkeypatch.setattr(baton.runtime.at_rest, "masked_message", counted)
    graph = build(tmp_path / "g.db")
    store = graph.store
    sizes: list[int] = []
    scratch: list[list[Any]] = []
    fenced = store.put_checkpoint_fenced

    async def measured(checkpoint: Any, fence: Any, snapshots: Any = ()) -> bool:
        text = checkpoint.state_json()
        sizes.append(len(text))
        turn = json.loads(text)["turn"]
        scratch.append(turn["scratch"] if turn else [])
        return bool(await fenced(checkpoint, fence, snapshots))

    store.put_checkpoint_fenced = measured
    result = await graph.invoke({}, thread_id="T")
    assert result.status == "completed", result.error
    assert result.final.n == STEPS
    # at most COMMIT_EVERY records and the turn (one span of the run's messages); without
    # the commits as it goes the last would hold all 600 messages and events (~300 KB here)
    assert max(sizes) < 4 * max(sizes[: COMMIT_EVERY // 8]) < 100_000
    # the graph's turn names its hundreds of messages as one span of the run's, not by id
    assert len(scratch[-1]) == 1 and scratch[-1][0]["span"][1] > STEPS
    history = await graph.history("T")
    assert [h.step for h in history] == list(range(STEPS, -1, -1))  # each boundary once
    messages = await store.get_messages("T")
    assert len({m.id for m in messages}) == len(messages) >= 2 * STEPS
    # each message is masked once for the checkpoints and once for the transcript, and the
    # turn's view (2 messages) once a checkpoint or commit: a commit as it goes does not mask
    # the run's earlier messages again (that was 4,000 masks here)
    assert masked <= 2 * len(messages) + 2 * len(sizes) + 50
    # a snapshot names the latest PATH_KEPT super-steps, not all of them: its size does not
    # grow with the run
    assert history[-1].path == [] and history[-11].path == [["count"]] * 10
    assert history[0].path == [["count"]] * PATH_KEPT and history[0].step > PATH_KEPT
    assert (await store.verify_audit()).ok
    await graph.aclose()


@pytest.mark.usefixtures("dies_when_cancelled")
async def test_a_long_run_stopped_half_way_resumes_to_the_same_end(tmp_path: Path) -> None:
    gate = asyncio.Event()
    graph = build(tmp_path / "g.db", gate, stop_at=STEPS // 2 + 7)
    task = asyncio.ensure_future(graph.invoke({}, thread_id="T"))
    for _ in range(1000):
        cp = await graph.store.get_checkpoint("T")
        if cp is not None and cp.seq >= STEPS // 2:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    task.cancel()  # as a process killed there: its lease lapses, its checkpoint stays
    with pytest.raises(asyncio.CancelledError):
        await task
    committed = len(await graph.store.get_messages("T"))
    assert committed > 0  # a part was committed before the stop
    again = build(tmp_path / "g.db")
    result = await again.resume("T")
    assert result.status == "completed", result.error
    assert result.final.n == STEPS
    messages = await again.store.get_messages("T")
    assert len({m.id for m in messages}) == len(messages)  # nothing committed twice
    history = await again.history("T")
    assert sorted(h.step for h in history) == list(range(STEPS + 1))
    assert (await again.store.verify_audit()).ok
    await graph.aclose()
    await again.aclose()
