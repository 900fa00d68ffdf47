"""Checkpoint size: bytes a persistent store keeps per saved run state, by steps in the run.

    python benchmarks/checkpoint_size.py [--steps 10,100,1000] [--cycles 1,10,50]
                                         [--baseline-src PATH]

One agent on a SQLite store calls a lookup tool once per model call, `steps` times, then
answers; the store records the size of every checkpoint it is given. The figures: the largest
checkpoint (the last one before the run commits), that size per step, the run's committed
record (its messages and events as stored) and the ratio of the two. A checkpoint that keeps
each thing once grows linearly: bytes per step stay flat as the run grows.

Then a run paused and resumed `cycles` times: the agent looks an order up and pays (a call that
needs a person's sign-off), again and again, and each pause is approved. Printed: the first and
the last pause's checkpoint, their growth per cycle, all checkpoint bytes written, and the
committed record. A checkpoint that names what the run committed stays about as large at the
last pause as at the first; one that repeats it grows by the whole record each cycle, so the
bytes written grow quadratically. `--baseline-src PATH` measures another checkout's `src/`
too, in its own process, for a before/after.
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


CYCLES = [int(n) for n in sys.argv[2].split(",") if n]


class Measured(SQLiteStore):
    sizes: list
    paused: list

    async def put_checkpoint(self, cp):
        self.sizes.append(len(cp.state_json().encode()))
        return await super().put_checkpoint(cp)

    async def put_checkpoint_fenced(self, cp, fence, snapshots=()):  # a running step's save
        self.sizes.append(len(cp.state_json().encode()))
        return await super().put_checkpoint_fenced(cp, fence, snapshots)

    async def commit_run(self, session, messages, events, *, run_id=None, checkpoint=None):
        if checkpoint is not None:
            size = len(checkpoint.state_json().encode())
            self.sizes.append(size)
            if checkpoint.status == "awaiting_approval":
                self.paused.append(size)
        return await super().commit_run(
            session, messages, events, run_id=run_id, checkpoint=checkpoint
        )


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
    store.sizes, store.paused = [], []
    agent = Agent(name="clerk", instructions="You look orders up.", tools=[lookup],
                  max_iterations=steps + 2)
    team = Team([agent], entry="clerk", model=ScriptedModel(script), store=store)
    result = await team.run("look up ORD-7, again and again", session_id="s")
    assert result.status == "completed", result.error
    record = await record_of(store, "s")
    await store.close()
    largest = max(store.sizes)
    return {"checkpoints": len(store.sizes), "largest": largest, "per_step": largest / steps,
            "record": record, "ratio": largest / record}


@tool(requires_approval=True)
async def pay(amount: int, to: str) -> dict:
    '''Pay someone.

    Args:
        amount: Amount in cents.
        to: Who gets it.
    '''
    return {"paid": amount, "to": to}


async def record_of(store, session):
    record = sum(len(m.model_dump_json().encode()) for m in await store.get_messages(session))
    return record + sum(len(e.model_dump_json().encode()) for e in await store.get_events(session))


async def cycled(cycles: int, tmp: Path) -> dict:
    def script(request):
        done = sum(1 for m in request.messages if m.role == "tool")
        if done >= 2 * cycles:
            return ScriptedModel.say("All paid.")
        if done % 2 == 0:
            return ScriptedModel.call("lookup", order_id=f"ORD-{done}")
        return ScriptedModel.call("pay", amount=done, to="bob")

    store = Measured(f"sqlite:///{tmp / f'c{cycles}.db'}")
    store.sizes, store.paused = [], []
    agent = Agent(name="clerk", instructions="You pay for orders.", tools=[lookup, pay],
                  max_iterations=4 * cycles + 2)
    team = Team([agent], entry="clerk", model=ScriptedModel(script), store=store)
    result = await team.run("look up and pay the orders", session_id="s")
    while result.approval is not None:
        result = await team.approve("s", result.approval.id, by="bench")
    assert result.status == "completed", result.error
    record = await record_of(store, "s")
    await store.close()
    first, last = store.paused[0], store.paused[-1]
    return {"first": first, "last": last, "growth": (last - first) / max(cycles - 1, 1),
            "written": sum(store.sizes), "record": record}


async def main():
    with tempfile.TemporaryDirectory() as tmp:
        steps = {n: await one(n, Path(tmp)) for n in STEPS}
        cycles = {n: await cycled(n, Path(tmp)) for n in CYCLES}
        print(json.dumps({"steps": steps, "cycles": cycles}))

asyncio.run(main())
"""


Rows = dict[str, dict[str, float]]


def measure(src: Path, steps: str, cycles: str) -> dict[str, Rows]:
    done = subprocess.run(
        [sys.executable, "-c", WORKER, steps, cycles],
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"measuring {src} failed:\n{done.stderr[-2000:]}")
    out: dict[str, Rows] = json.loads(done.stdout.splitlines()[-1])
    return out


def tables(title: str, found: dict[str, Rows]) -> None:
    table(title, found["steps"])
    cycled(found["cycles"])


def cycled(rows: Rows) -> None:
    if not rows:
        return
    print("\npaused for approval and resumed, again and again")
    head = ("cycles", 6), ("first pause B", 13), ("last pause B", 12), ("B/cycle", 8)
    print(
        " ".join(f"{name:>{width}}" for name, width in head), f"{'written B':>11} {'record B':>9}"
    )
    for cycles, r in rows.items():
        print(
            f"{cycles:>6} {int(r['first']):>13} {int(r['last']):>12} {r['growth']:>8.0f} "
            f"{int(r['written']):>11} {int(r['record']):>9}"
        )


def table(title: str, rows: Rows) -> None:
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
    ap.add_argument(
        "--cycles", default="1,10,50", help="comma-separated approve/resume cycles ('' for none)"
    )
    ap.add_argument("--baseline-src", type=Path, help="another checkout's src/ (or its root)")
    args = ap.parse_args()
    print(f"command: {shlex.join(sys.argv)}")
    tables("this checkout", measure(SRC, args.steps, args.cycles))
    if args.baseline_src is not None:
        base = args.baseline_src
        base = base / "src" if (base / "src" / "baton").is_dir() else base
        tables(f"baseline {base}", measure(base, args.steps, args.cycles))


if __name__ == "__main__":
    main()
