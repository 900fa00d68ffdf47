"""Checkpoint size: bytes a persistent store keeps per saved run state, by steps in the run.

    python benchmarks/checkpoint_size.py [--steps 10,100,1000] [--baseline-src PATH]

One agent on a SQLite store calls a lookup tool once per model call, `steps` times, then
answers; the store records the size of every checkpoint it is given. The figures: the largest
checkpoint (the last one before the run commits), that size per step, the run's committed
record (its messages and events as stored) and the ratio of the two. A checkpoint that keeps
each thing once grows linearly: bytes per step stay flat as the run grows. `--baseline-src
PATH` measures another checkout's `src/` too, in its own process, for a before/after.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

WORKER = r"""
import asyncio, json, sys, tempfile
from pathlib import Path
from baton import Agent, ScriptedModel, Team, tool
from baton.backends.sqlite import SQLiteStore

STEPS = [int(n) for n in sys.argv[1].split(",")]


class Measured(SQLiteStore):
    sizes: list

    async def put_checkpoint(self, cp):
        self.sizes.append(len(cp.state_json().encode()))
        return await super().put_checkpoint(cp)


@tool
async def lookup(order_id: str) -> dict:
    '''Look an order up.

    Args:
        order_id: The order's id.
    '''
    return {"order_id": order_id, "status": "shipped", "amount": 299.0,
            "items": [{"sku": "W2378156", "qty": 2}, {"sku": "K1120034", "qty": 1}]}


async def one(steps: int, tmp: Path) -> dict:
    def script(request):
        done = sum(1 for m in request.messages if m.role == "tool")
        if done < steps:
            return ScriptedModel.call("lookup", order_id="ORD-7")
        return ScriptedModel.say("All looked up.")

    store = Measured(f"sqlite:///{tmp / f'{steps}.db'}")
    store.sizes = []
    agent = Agent(name="clerk", instructions="You look orders up.", tools=[lookup],
                  max_iterations=steps + 2)
    team = Team([agent], entry="clerk", model=ScriptedModel(script), store=store)
    result = await team.run("look up ORD-7, again and again", session_id="s")
    assert result.status == "completed", result.error
    record = sum(len(m.model_dump_json().encode()) for m in await store.get_messages("s"))
    record += sum(len(e.model_dump_json().encode()) for e in await store.get_events("s"))
    await store.close()
    largest = max(store.sizes)
    return {"checkpoints": len(store.sizes), "largest": largest, "per_step": largest / steps,
            "record": record, "ratio": largest / record}


async def main():
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps({n: await one(n, Path(tmp)) for n in STEPS}))

asyncio.run(main())
"""


def measure(src: Path, steps: str) -> dict[str, dict[str, float]]:
    done = subprocess.run(
        [sys.executable, "-c", WORKER, steps],
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"measuring {src} failed:\n{done.stderr[-2000:]}")
    out: dict[str, dict[str, float]] = json.loads(done.stdout.splitlines()[-1])
    return out


def table(title: str, rows: dict[str, dict[str, float]]) -> None:
    print(f"\n{title}")
    head = ("steps", 6), ("checkpoints", 11), ("largest B", 10), ("B/step", 7), ("record B", 9)
    print(" ".join(f"{name:>{width}}" for name, width in head), f"{'ratio':>6}")
    for steps, r in rows.items():
        print(
            f"{steps:>6} {int(r['checkpoints']):>11} {int(r['largest']):>10} "
            f"{r['per_step']:>7.0f} {int(r['record']):>9} {r['ratio']:>6.2f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", default="10,100,1000", help="comma-separated step counts")
    ap.add_argument("--baseline-src", type=Path, help="another checkout's src/ (or its root)")
    args = ap.parse_args()
    print(f"command: {shlex.join(sys.argv)}")
    table("this checkout", measure(SRC, args.steps))
    if args.baseline_src is not None:
        base = args.baseline_src
        base = base / "src" if (base / "src" / "baton").is_dir() else base
        table(f"baseline {base}", measure(base, args.steps))


if __name__ == "__main__":
    main()
