"""`benchmarks/graph_length.py` at a tiny size prints a row per store and length, each
checkpoint size measured as the store was handed it, and the ratio line per store."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "graph_length.py"


def test_a_tiny_run_prints_every_row_and_the_ratio() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--steps", "3", "30", "--rounds", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    rows = re.findall(r"^\| (memory|sqlite) \| (\d+) \| (\d+) \| ([\d,]+) \|$", out, re.M)
    assert [(r[0], r[1]) for r in rows] == [
        ("memory", "3"),
        ("memory", "30"),
        ("sqlite", "3"),
        ("sqlite", "30"),
    ]
    assert all(int(r[2]) > 0 and int(r[3].replace(",", "")) > 1000 for r in rows)
    for store in ("memory", "sqlite"):
        assert re.search(rf"^{store}: cost per step at 30 steps / at 3 steps = [\d.]+ ", out, re.M)
