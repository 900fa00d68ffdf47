"""τ²-bench (retail and airline) as Baton teams, a gold-action replay and its DB oracle.

- `data`: load a domain of the workload (`load_domain`), one cached read per process.
- `retail`, `airline`: the tools, re-implemented from the workload's prose.
- `teams`: each domain as a team of specialists (`build_team`).
- `oracle`: the gold end state (`gold_outcome`).
- `replay`: walk the gold actions through the team (`replay`).
- `live`: a real model serves a simulated user played by the same model (`run_live`).
- `grading`: the verdict on one conversation (`TaskResult`).
- `bench`: `run_bench`, behind `baton bench tau2`.
"""

from baton.bench.tau2.bench import BenchSummary, arun_bench, run_bench
from baton.bench.tau2.data import DOMAINS, SPLITS, Domain, Task, WorkloadMissing, load_domain
from baton.bench.tau2.grading import DomainSummary, TaskResult
from baton.bench.tau2.live import SimulatedUser, run_live
from baton.bench.tau2.oracle import GoldOutcome, gold_outcome
from baton.bench.tau2.replay import MUTATIONS, Mutation, MutationNotApplicable, Replayer, replay
from baton.bench.tau2.teams import DomainTeam, build_team

__all__ = [
    "DOMAINS",
    "MUTATIONS",
    "SPLITS",
    "BenchSummary",
    "Domain",
    "DomainSummary",
    "DomainTeam",
    "GoldOutcome",
    "Mutation",
    "MutationNotApplicable",
    "Replayer",
    "SimulatedUser",
    "Task",
    "TaskResult",
    "WorkloadMissing",
    "arun_bench",
    "build_team",
    "gold_outcome",
    "load_domain",
    "replay",
    "run_bench",
    "run_live",
]
