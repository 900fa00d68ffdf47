"""`benchmarks/remote_calls.py` runs end to end at a tiny size: every row times every
conversation, and a conversation that went wrong stops it. Timings are never checked."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the benchmark needs the `mcp` extra")
pytest.importorskip("a2a", reason="the benchmark needs the `a2a` extra")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "remote_calls.py"


def test_every_row_times_every_conversation() -> None:
    name = "baton_bench_remote_calls"
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        import asyncio

        with module.http_demo() as url, module.a2a_served() as a2a_url:
            rows = asyncio.run(module.measure(3, url, a2a_url))
    finally:
        sys.path[:] = path
        del sys.modules[name]
    assert set(rows) == {
        "native tool",
        "mcp stdio",
        "mcp stdio, SDK call only",
        "mcp http",
        "mcp http, SDK call only",
        "local hand-off",
        "a2a hand-off",
        "a2a hand-off, SDK call only",
    }
    assert all(len(us) == 3 and min(us) > 0 for us in rows.values())
