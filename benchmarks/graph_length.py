"""Does a long graph run cost more per super-step than a short one?

    python benchmarks/graph_length.py [--steps 10 1000] [--stores memory sqlite] [--rounds 3]

A one-node counting loop (`count` -> `count` until n reaches the step count) is run to its
end with each store, checkpointed and snapshotted at every boundary (one write) as any Baton
graph run is. Printed per store and length: µs per super-step (the median of
`--rounds` runs), the checkpoint bytes written at the last boundary, and the ratio of the
longest run's cost per step to the shortest's (1.0: the cost per step does not grow with the
run's length).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pydantic import BaseModel

from baton import END, START, Graph


class Count(BaseModel):
    n: int = 0


def count(state: Count) -> dict[str, Any]:
    return {"n": state.n + 1}


def store_named(name: str, folder: Path) -> Any:
    from baton.backends.memory import MemoryStore
    from baton.backends.sqlite import SQLiteStore

    if name == "memory":
        return MemoryStore()
    return SQLiteStore(f"sqlite:///{folder / 'graph.db'}")


async def one_run(store_name: str, steps: int, folder: Path, i: int) -> tuple[float, int]:
    """Seconds for one run of `steps` super-steps, and the last checkpoint's bytes."""
    g = Graph(Count).add_node("count", count)
    g.add_edge(START, "count").add_conditional_edges(
        "count", lambda s, steps=steps: END if s.n >= steps else "count"
    )
    store = store_named(store_name, folder)
    app = g.compile(store=store, max_steps=steps + 1)
    last: list[Any] = []
    put, fenced = store.put_checkpoint, store.put_checkpoint_fenced

    async def kept(checkpoint: Any) -> None:
        last[:] = [checkpoint]
        await put(checkpoint)

    async def kept_fenced(checkpoint: Any, fence: Any, snapshots: Any = ()) -> bool:
        last[:] = [checkpoint]
        return bool(await fenced(checkpoint, fence, snapshots))

    store.put_checkpoint, store.put_checkpoint_fenced = kept, kept_fenced
    t0 = time.perf_counter()
    result = await app.invoke({"n": 0}, thread_id=f"t{steps}-{i}")
    seconds = time.perf_counter() - t0
    assert result.status == "completed" and result.final.n == steps, result.error
    await store.close()
    size = len(last[0].state.to_json().encode("utf-8")) if last else 0
    return seconds, size


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:  # warm-up: imports, first compile
        await one_run("memory", 5, Path(tmp), -1)
    for store_name in args.stores:
        per_step: dict[int, float] = {}
        for steps in args.steps:
            times, size = [], 0
            for i in range(args.rounds):
                with tempfile.TemporaryDirectory() as tmp:
                    seconds, size = await one_run(store_name, steps, Path(tmp), i)
                times.append(seconds)
            per_step[steps] = statistics.median(times) / steps * 1e6
            rows.append(
                {"store": store_name, "steps": steps, "us_per_step": per_step[steps], "bytes": size}
            )
        short, long = min(args.steps), max(args.steps)
        rows.append(
            {"store": store_name, "ratio": per_step[long] / per_step[short], "of": (long, short)}
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[10, 1000])
    ap.add_argument("--stores", nargs="+", default=["memory", "sqlite"])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rows = asyncio.run(run(args))
    print("| store | super-steps | µs per super-step | last checkpoint bytes |")
    print("|---|---|---|---|")
    for r in rows:
        if "ratio" not in r:
            print(f"| {r['store']} | {r['steps']} | {r['us_per_step']:.0f} | {r['bytes']:,} |")
    for r in rows:
        if "ratio" in r:
            long, short = r["of"]
            ratio = r["ratio"]
            print(f"{r['store']}: cost per step at {long} steps / at {short} steps = {ratio:.2f}")


if __name__ == "__main__":
    main()
