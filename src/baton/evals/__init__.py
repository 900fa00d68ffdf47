"""`baton eval`: labelled cases in a spec file, run through a team and checked (route, path,
tools, state, status, answer), with JSON and HTML reports and pass^k (docs/eval.md)."""

from baton.evals.compare import Comparison, compare
from baton.evals.results import Attempt, CaseResult, CheckVerdict, EvalReport, Summary
from baton.evals.runner import EvalRun, TeamSource, check_agents, team_source
from baton.evals.spec import Case, Spec, load_spec, parse_spec

__all__ = [
    "Attempt",
    "Case",
    "CaseResult",
    "CheckVerdict",
    "Comparison",
    "EvalReport",
    "EvalRun",
    "Spec",
    "Summary",
    "TeamSource",
    "check_agents",
    "compare",
    "load_spec",
    "parse_spec",
    "team_source",
]
