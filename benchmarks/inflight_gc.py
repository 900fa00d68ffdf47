"""Conversations in flight and the garbage collector: where the 5,000-concurrent figure goes.

    python benchmarks/inflight_gc.py [--concurrent 5000] [--latency 0.1]
        [--gc default|off|tuned] [--rounds 3] [--src PATH]

Runs `--concurrent` kernel-overhead conversations at once (3 model calls, 1 hand-off, 1 tool
call, `--latency` seconds per model call, results dropped as in `benchmarks/peers/`) and prints
conversations/s, CPU per conversation, the collector's share by generation and every full
collection (its length and the tracked objects it scanned), then the tracked objects one
conversation keeps alive at its second model call, by type.

`--gc off` disables the collector (a ceiling, not a setting to run with); `--gc tuned` calls
`gc.freeze()` and `gc.set_threshold(20_000, 10, 10)` first, as a server might at start-up.
`--src PATH` imports Baton from another checkout's `src/` (an A/B against an older commit,
e.g. from `git worktree add /tmp/before <commit>`).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import sys
import time
from pathlib import Path
from typing import Any

USER = "please check the invoice for order ORD-202607-99"


class GCLog:
    """Time in the collector by generation, and each full collection (`gc.callbacks`)."""

    def __init__(self) -> None:
        self.by_gen = [0.0, 0.0, 0.0]
        self.full: list[tuple[float, int]] = []
        self._t = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t = time.perf_counter()
            return
        dt = time.perf_counter() - self._t
        gen = info["generation"]
        self.by_gen[gen] += dt
        if gen == 2:
            self.full.append((dt, len(gc.get_objects(2))))


async def one_round(concurrent: int, latency: float) -> None:
    from overhead import build_team

    team = build_team(None, latency)

    async def one() -> None:
        await team.run(USER)

    await asyncio.gather(*(one() for _ in range(50)))  # warm-up
    gc.collect()
    log = GCLog()
    gc.callbacks.append(log)
    t, c = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(concurrent)))
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    gc.callbacks.remove(log)
    per = [f"{s / concurrent * 1e6:.0f}" for s in log.by_gen]
    print(
        f"{concurrent / wall:8,.0f} conv/s  CPU {cpu / concurrent * 1e6:4.0f} µs per conversation"
        f"  collector by generation {'/'.join(per)} µs"
    )
    for dt, objects in log.full:
        print(f"          full collection {dt * 1000:6.1f} ms, {objects:,} tracked objects")


async def alive_per_conversation(latency: float, n: int = 1000) -> None:
    """Tracked objects per conversation while all `n` wait in their second model call."""
    from overhead import build_team

    team = build_team(None, latency)
    await asyncio.gather(*(team.run(USER) for _ in range(20)))
    gc.collect()
    before = {id(o) for o in gc.get_objects()}

    async def probe() -> None:
        await asyncio.sleep(latency * 1.5)
        gc.collect()
        new = [o for o in gc.get_objects() if id(o) not in before]
        kinds = collections.Counter(type(o).__name__ for o in new)
        print(f"tracked objects per conversation in flight: {len(new) / n:.1f}")
        print("  " + ", ".join(f"{k} {v / n:.1f}" for k, v in kinds.most_common(12)))

    async def one() -> None:
        await team.run(USER)

    await asyncio.gather(probe(), *(one() for _ in range(n)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrent", type=int, default=5000)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--gc", choices=["default", "off", "tuned"], default="default")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--src", help="import Baton from this src/ directory")
    args = ap.parse_args()
    here = Path(__file__).resolve().parent
    src = Path(args.src).resolve() if args.src else here.parent / "src"
    sys.path.insert(0, str(src))
    sys.path.insert(1, str(here))
    import baton

    print(f"# python {' '.join(sys.argv)}")
    print(f"# Python {sys.version.split()[0]}, baton from {Path(baton.__file__).parent}")
    if args.gc == "off":
        gc.disable()
    elif args.gc == "tuned":
        gc.freeze()
        gc.set_threshold(20_000, 10, 10)
    for _ in range(args.rounds):
        asyncio.run(one_round(args.concurrent, args.latency))
    if args.gc == "default":
        asyncio.run(alive_per_conversation(args.latency))


if __name__ == "__main__":
    main()
