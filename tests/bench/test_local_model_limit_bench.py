"""`benchmarks/local_model_limit.py` at a tiny size: llama.cpp's prefill and decode rates of the
plumbing model, one row per thread count, the engine's marked."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from local_model_kit import require_local_model

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "local_model_limit.py"

pytestmark = pytest.mark.local_model


def test_the_rates_of_llama_cpp_alone_are_printed_per_thread_count() -> None:
    require_local_model("smollm2-135m")
    args = ["--model", "smollm2-135m", "--rounds", "1", "--threads", "1", "2"]
    args += ["--prompt-tokens", "64", "--decode-tokens", "8"]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    rows = re.findall(r"^\s+(\d) +([\d.]+) +([\d.]+)(.*)$", out, re.M)
    assert [r[0] for r in rows] == ["1", "2"]
    assert all(float(r[1]) > 0 and float(r[2]) > 0 for r in rows)
    assert sum("(the engine's)" in r[3] for r in rows) == 1
