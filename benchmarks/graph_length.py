"""Does a long graph run cost more per super-step than a short one?

    python benchmarks/graph_length.py [--steps 10 1000] [--stores memory sqlite] [--rounds 3]

A one-node counting loop (`count` -> `count` until n reaches the step count) is run to its
end with each store, checkpointed and snapshotted at every boundary (one write) as any Baton
graph run is. Printed per store and length: µs per super-step (the median of
`--rounds` rounds; in a round each length runs as many super-steps, e.g. 100 runs of 10
against one of 1,000), the largest checkpoint's bytes (measured in a run of its own, as the
store was handed it; in memory the live state is kept, not copied), and the median of
the rounds' ratios of the longest run's cost per step to the shortest's (1.0: the cost per
step does not grow with the run's length).
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


async def one_run(
    store_name: str, steps: int, folder: Path, i: int, measure: bool = False
) -> tuple[float, int]:
    """Seconds for one run of `steps` super-steps; with `measure` (an untimed run), the
    largest checkpoint's bytes, as the store was handed it (0 when not measured)."""
    g = Graph(Count).add_node("count", count)
    g.add_edge(START, "count").add_conditional_edges(
        "count", lambda s, steps=steps: END if s.n >= steps else "count"
    )
    store = store_named(store_name, folder)
    app = g.compile(store=store, max_steps=steps + 1)
    largest = 0
    if measure:
        put, fenced = store.put_checkpoint, store.put_checkpoint_fenced

        def seen(checkpoint: Any) -> None:
            nonlocal largest
            largest = max(largest, len(checkpoint.state_json().encode("utf-8")))

        async def kept(checkpoint: Any) -> None:
            seen(checkpoint)
            await put(checkpoint)

        async def kept_fenced(checkpoint: Any, fence: Any, snapshots: Any = ()) -> bool:
            seen(checkpoint)
            return bool(await fenced(checkpoint, fence, snapshots))

        store.put_checkpoint, store.put_checkpoint_fenced = kept, kept_fenced
    t0 = time.perf_counter()
    result = await app.invoke({"n": 0}, thread_id=f"t{steps}-{i}")
    seconds = time.perf_counter() - t0
    assert result.status == "completed" and result.final.n == steps, result.error
    await store.close()
    return seconds, largest


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:  # warm-up: imports, first compile
        await one_run("memory", 5, Path(tmp), -1)
    short, long = min(args.steps), max(args.steps)
    for store_name in args.stores:
        per_step: dict[int, list[float]] = {n: [] for n in args.steps}
        sizes: dict[int, int] = {}
        ratios = []
        for i in range(args.rounds):
            # each length runs as many super-steps in a round (100 runs of 10 against one of
            # 1,000), the lengths alternating which goes first: a drift of the machine's
            # speed during a round shows in both
            order = args.steps if i % 2 == 0 else list(reversed(args.steps))
            for steps in order:
                runs = max(1, long // steps)
                seconds = 0.0
                for j in range(runs):
                    with tempfile.TemporaryDirectory() as tmp:
                        took, _ = await one_run(store_name, steps, Path(tmp), i * runs + j)
                    seconds += took
                per_step[steps].append(seconds / (runs * steps) * 1e6)
            ratios.append(per_step[long][-1] / per_step[short][-1])
        for steps in args.steps:
            with tempfile.TemporaryDirectory() as tmp:
                _, sizes[steps] = await one_run(store_name, steps, Path(tmp), -2, measure=True)
            rows.append(
                {
                    "store": store_name,
                    "steps": steps,
                    "us_per_step": statistics.median(per_step[steps]),
                    "bytes": sizes[steps],
                }
            )
        rows.append(
            {
                "store": store_name,
                "ratio": statistics.median(ratios),
                "range": (min(ratios), max(ratios)),
                "of": (long, short),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[10, 1000])
    ap.add_argument("--stores", nargs="+", default=["memory", "sqlite"])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rows = asyncio.run(run(args))
    print("| store | super-steps | µs per super-step | largest checkpoint bytes |")
    print("|---|---|---|---|")
    for r in rows:
        if "ratio" not in r:
            print(f"| {r['store']} | {r['steps']} | {r['us_per_step']:.0f} | {r['bytes']:,} |")
    for r in rows:
        if "ratio" in r:
            long, short = r["of"]
            ratio, (low, high) = r["ratio"], r["range"]
            print(
                f"{r['store']}: cost per step at {long} steps / at {short} steps = {ratio:.2f} "
                f"(median of the rounds' ratios; {low:.2f}-{high:.2f})"
            )


if __name__ == "__main__":
    main()
