"""A supervisor process killed with SIGKILL between two workers: the resumed run never asks
the worker that answered again, and re-runs the interrupted call under the same key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from supervisor_child import build

CHILD = Path(__file__).with_name("supervisor_child.py")


def lines(ledger: Path) -> list[str]:
    return ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []


async def test_sigkill_between_two_workers(tmp_path: Path) -> None:
    db, ledger = tmp_path / "sup.db", tmp_path / "ledger"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHILD.parent), *sys.path])}
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(ledger), "block"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got = lines(ledger)
            if any(x.startswith("quick done") for x in got) and any(
                x.startswith("slow started") for x in got
            ):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        time.sleep(0.5)  # the quick worker's answer is checkpointed as it arrives
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    before = lines(ledger)
    # the quick worker answered; the slow one started and was killed mid-call
    assert sorted(" ".join(x.split()[:2]) for x in before) == [
        "quick done",
        "quick started",
        "slow started",
    ]

    sup = build(str(db), str(ledger), block=False)
    try:
        [cp] = await sup.unfinished()
        assert cp.status == "running"
        time.sleep(1.1)  # the killed process's lease lapses
        result = await sup.resume("S")
        assert result.status == "completed", result.error
        assert result.output == "quick: 5 days | slow: approved"
        after = lines(ledger)[len(before) :]
        slow_key = next(x for x in before if x.startswith("slow started")).split()[-1]
        assert after == [f"slow started {slow_key}", f"slow done {slow_key}"]  # same key
        finished = [e for e in await sup.store.get_events("S") if e.type == "run_finished"]
        assert len(finished) == 1
    finally:
        await sup.aclose()
