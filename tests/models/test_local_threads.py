"""The embedded engine's thread count follows the cores free when it first loads: the usable
cores less what other programs keep busy, 1 to MAX_THREADS, measured once per process."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from baton.models.local import engine
from baton.models.local.engine import MAX_THREADS, default_threads


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    default_threads.cache_clear()
    yield
    default_threads.cache_clear()


def machine(monkeypatch: pytest.MonkeyPatch, cores: int, busy_cores: float | None) -> None:
    """`cores` usable cores, of which `busy_cores` are kept busy (None: no /proc/stat)."""
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    if busy_cores is None:
        monkeypatch.setattr(engine, "_cpu_times", lambda: None)
        return
    readings = iter([(1000.0, 5000.0), (1000.0 + busy_cores * 10, 5000.0 + cores * 10)])
    monkeypatch.setattr(engine, "_cpu_times", lambda: next(readings))


@pytest.mark.parametrize(
    ("cores", "busy", "threads"),
    [(2, 0.0, 2), (2, 0.3, 2), (2, 0.8, 1), (2, 2.0, 1), (4, 1.0, 3), (32, 0.0, MAX_THREADS)],
)
def test_the_threads_are_the_free_cores(
    monkeypatch: pytest.MonkeyPatch, cores: int, busy: float, threads: int
) -> None:
    machine(monkeypatch, cores, busy)
    assert default_threads(window_s=0) == threads


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (4, 3), (16, MAX_THREADS)])
def test_without_proc_stat_all_cores_but_one(
    monkeypatch: pytest.MonkeyPatch, cores: int, threads: int
) -> None:
    machine(monkeypatch, cores, None)
    assert default_threads(window_s=0) == threads


def test_it_is_measured_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    machine(monkeypatch, 2, 0.0)
    first = default_threads()
    machine(monkeypatch, 2, 2.0)  # busy now: the engine already loaded keeps its threads
    assert default_threads() == first == 2


def test_proc_stat_is_read_where_there_is_one() -> None:
    times = engine._cpu_times()
    if not os.path.exists("/proc/stat"):
        assert times is None
        return
    assert times is not None and 0 <= times[0] <= times[1]
