"""Instructions per conversation: the kernel-overhead conversation counted by callgrind.

    python benchmarks/instructions.py [--n 300] [--src PATH] [--baseline-src PATH] [--freeze]

Wall-clock figures on a shared VM move by 10-30 % between runs; the number of instructions
the interpreter executes does not (valgrind's callgrind counts them, whatever else the machine
does). Each side runs the conversation of `overhead.py` (3 model calls, 1 hand-off, 1 tool
call, `MemoryStore`) 30 times, then 30 + `--n` times, each in a fresh process under callgrind;
the difference over `--n` is the cost of one conversation, start-up excluded, the garbage
collector included. `--freeze` moves everything alive before the conversations out of the
collector's sight (`gc.freeze()`), so the figure leaves out what a bigger module heap costs
each collection. Needs `valgrind` on the PATH; takes about a minute per process.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

WORKER = r"""
import asyncio, gc, sys
sys.path.insert(0, sys.argv[1])
from baton import Agent, ScriptedModel, Team, tool

INVOICE = {"order_id": "ORD-202607-99", "status": "ISSUED", "amount": 299.0}


@tool
async def query_invoice(order_id: str) -> dict:
    '''Look up the e-invoice of an order.'''
    return INVOICE


S = ScriptedModel
HANDOFF = S.call("transfer_to_billing", reason="invoice question",
                 objective="Send the invoice of the order", state={"order_id": "ORD-202607-99"})
QUERY = S.call("query_invoice", order_id="ORD-202607-99")
ANSWER = S.say("Your invoice for ORD-202607-99 is issued: 299.00 CNY.")


def policy(request):
    if request.agent == "triage":
        return HANDOFF
    return ANSWER if request.messages[-1].role == "tool" else QUERY


team = Team(
    [Agent(name="triage", instructions="Route the user.", handoffs=["billing"]),
     Agent(name="billing", instructions="Billing.", tools=[query_invoice])],
    entry="triage", model=S(policy, record=False),
)


async def go(n):
    for _ in range(n):
        r = await team.run("please check the invoice for order ORD-202607-99")
        assert r.status == "completed", r.error


if sys.argv[3] == "freeze":
    gc.collect()
    gc.freeze()
asyncio.run(go(30 + int(sys.argv[2])))
"""


def instructions(src: Path, n: int, freeze: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-c",
                WORKER,
                str(src),
                str(n),
                "freeze" if freeze else "-",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"callgrind failed for {src}:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_conversation(src: Path, n: int, freeze: bool) -> float:
    return (instructions(src, n, freeze) - instructions(src, 0, freeze)) / n


def _src(path: Path) -> Path:
    return path / "src" if (path / "src" / "baton").is_dir() else path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="conversations counted")
    ap.add_argument("--src", type=Path, default=SRC, help="the checkout measured (or its src/)")
    ap.add_argument("--baseline-src", type=Path, help="another checkout (or its src/)")
    ap.add_argument("--freeze", action="store_true", help="gc.freeze() before the runs")
    args = ap.parse_args()
    print(f"command: {shlex.join(sys.argv)}")
    src = _src(args.src)
    mine = per_conversation(src, args.n, args.freeze)
    print(f"{src}: {mine / 1e6:.3f} M instructions per conversation")
    if args.baseline_src is not None:
        base = _src(args.baseline_src)
        theirs = per_conversation(base, args.n, args.freeze)
        print(f"baseline {base}: {theirs / 1e6:.3f} M instructions per conversation")
        print(f"ratio: {mine / theirs:.3f}x")


if __name__ == "__main__":
    main()
