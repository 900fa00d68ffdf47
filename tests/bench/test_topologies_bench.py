"""`benchmarks/topologies.py` runs end to end at tiny sizes and stops on a conversation that
went wrong. Only the shape of the results is checked, never the timings."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from baton import Agent, ScriptedModel, Team

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "topologies.py"
ROW_NAMES = {"direct", "tool", "delegate"}


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    """The benchmark script, imported as a module (sys.path left as it was)."""
    name = "baton_bench_topologies"
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path[:] = path
        del sys.modules[name]


async def test_every_row_times_every_conversation_on_memory_store(bench: ModuleType) -> None:
    measured = await bench.measure_calls(5, 2)
    assert set(measured.us) == ROW_NAMES == set(measured.gc_us)
    for name in ROW_NAMES:
        assert len(measured.us[name]) == 5
        assert all(t > 0 for t in measured.us[name])
        assert measured.gc_us[name] >= 0


async def test_sqlite_rows_get_a_database_each(bench: ModuleType, tmp_path: Path) -> None:
    measured = await bench.measure_calls(2, 1, tmp_path)
    assert {len(t) for t in measured.us.values()} == {2}
    assert {p.name for p in tmp_path.glob("*.db")} == {f"{n}.db" for n in ROW_NAMES}


async def test_fanout_gives_one_figure_per_setting_and_round(bench: ModuleType) -> None:
    per_round = await bench.measure_fanout(1, 3, 0.001)
    assert set(per_round) == {"parallel", "sequential"}
    assert all(len(v) == 3 and min(v) > 0 for v in per_round.values())


async def test_a_conversation_that_goes_wrong_stops_the_benchmark(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = Team(
        [Agent(name="lead")], entry="lead", model=ScriptedModel([ScriptedModel.fail("down")])
    )
    with pytest.raises(SystemExit, match="went wrong: failed"):
        bench.check(await failing.run("hi"), "answer", "a failing model")
    # a row whose answer differs from the expected one stops the measurement too
    tool_row = next(r for r in bench.ROWS if r.name == "tool")
    monkeypatch.setattr(bench, "ROWS", [dataclasses.replace(tool_row, output="no such answer")])
    with pytest.raises(SystemExit, match="lead \\+ 1 plain tool call"):
        await bench.measure_calls(2, 1)


def test_main_prints_both_tables(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    tiny = ["--n", "3", "--block", "2", "--no-sqlite", "--latency", "0.001"]
    bench.main([*tiny, "--fanout-n", "1", "--rounds", "2"])
    out = capsys.readouterr().out
    for row in bench.ROWS:
        assert row.label in out
    assert "delegated − tool call" in out and "SQLiteStore" not in out
    assert "max_parallel=4" in out and "max_parallel=1" in out and "speed-up" in out
    assert "target: " in out
