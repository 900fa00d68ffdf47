"""Baton side: reuses `build_team` from benchmarks/overhead.py (MemoryStore)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/ (overhead.py adds src/ itself)

from common import USER, RunOne, main  # noqa: E402
from overhead import build_team  # noqa: E402


def make_run(latency_s: float) -> RunOne:
    team = build_team(None, latency_s)

    async def run() -> None:
        r = await team.run(USER)
        if r.status != "completed" or r.path != ["triage", "billing"]:
            raise SystemExit(f"baton conversation went wrong: {r.status} {r.path} {r.error}")

    return run


if __name__ == "__main__":
    main("Baton", make_run, "import baton", import_path=str(HERE.parents[1] / "src"))
