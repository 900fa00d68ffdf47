"""`run_bench`: the τ² benchmark entry point behind `baton bench tau2`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from baton.bench.tau2.data import DOMAINS, SPLITS, Domain, Task, load_domain
from baton.bench.tau2.grading import DomainSummary, TaskResult
from baton.bench.tau2.live import run_live_all
from baton.bench.tau2.replay import areplay
from baton.models.base import Model
from baton.models.registry import resolve_model


@dataclass
class BenchSummary:
    """Per-domain summaries and totals over all of them."""

    split: str
    model: str | None = None
    """None for the gold-action replay, else the model that served the simulated users."""
    domains: list[DomainSummary] = field(default_factory=list)

    @property
    def results(self) -> list[TaskResult]:
        """Every task result, domain by domain."""
        return [r for d in self.domains for r in d.results]

    @property
    def total(self) -> int:
        """Tasks run."""
        return len(self.results)

    @property
    def db_matches(self) -> int:
        """Tasks whose end state equals the oracle's."""
        return sum(r.db_match for r in self.results)

    @property
    def passed(self) -> int:
        """Replay: tasks that passed every check. Live: tasks with τ²'s reward."""
        return sum(r.reward if self.model else r.passed for r in self.results)

    @property
    def pass_1(self) -> float:
        """pass^1: the mean reward over the tasks (one trial each)."""
        return sum(r.reward for r in self.results) / self.total if self.total else 0.0

    @property
    def seconds(self) -> float:
        """Wall time of all tasks."""
        return sum(d.seconds for d in self.domains)

    @property
    def ok(self) -> bool:
        """Every task passed (the replay's acceptance; a live run is a measurement)."""
        return self.passed == self.total


def _tasks(domain: Domain, split: str, limit: int | None) -> list[Task]:
    tasks = domain.split(split)
    return tasks[:limit] if limit else tasks


async def arun_bench(
    data: str | Path | None = None,
    domain: str | None = None,
    split: str = "base",
    model: str | Model | None = None,
    *,
    limit: int | None = None,
    max_turns: int = 30,
) -> BenchSummary:
    """`run_bench` for callers inside an event loop."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
    names = DOMAINS if domain is None else (domain,)
    domains = [load_domain(name, data) for name in names]  # missing data fails up front
    if model is None:
        return BenchSummary(
            split,
            None,
            [await areplay(d, tasks=_tasks(d, split, limit), split=split) for d in domains],
        )
    brain = resolve_model(model)
    summaries = [
        await run_live_all(d, _tasks(d, split, limit), brain, split=split, max_turns=max_turns)
        for d in domains
    ]
    return BenchSummary(split, brain.name, summaries)


def run_bench(
    data: str | Path | None = None,
    domain: str | None = None,
    split: str = "base",
    model: str | Model | None = None,
    *,
    limit: int | None = None,
    max_turns: int = 30,
) -> BenchSummary:
    """Run the τ² tasks of `domain` (None: retail and airline) in `split` through Baton teams
    and grade each end state against the oracle.

    Without `model`, the gold actions are replayed by a scripted policy (the acceptance run).
    With one (`local`, `openai:<name>` or a `Model`), that model runs the team and also plays
    the simulated user of each task; the summary's `pass_1` is the mean reward. `data` is the
    workload folder (default `<repo>/../shared/workloads/tau2`); `limit` keeps the first N
    tasks of each domain.
    """
    return asyncio.run(arun_bench(data, domain, split, model, limit=limit, max_turns=max_turns))
