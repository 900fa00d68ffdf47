"""The results of an eval as data: each check's verdict, each attempt, each case, the run.

They are pydantic models so a report round-trips through JSON (`report.py`) unchanged.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CheckVerdict(_Data):
    """One check of a case on one attempt: which, whether it passed, and why."""

    check: str
    """`route`, `path`, `tools[0]`, `state`, `status`, `answer.contains`, `answer.judge`, ..."""
    passed: bool
    reason: str
    """What was expected and what the run showed."""


class ToolCallSeen(_Data):
    """A tool call the run made."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    ok: bool
    error: str | None = None


class Attempt(_Data):
    """One run of a case (with `--repeat k`, a case has k attempts)."""

    repeat: int
    session_id: str
    run_ids: list[str] = Field(default_factory=list)
    trace: str
    """The command that shows this attempt's hop-by-hop trace."""
    route: str
    path: list[str] = Field(default_factory=list)
    status: str
    output: str = ""
    calls: list[ToolCallSeen] = Field(default_factory=list)
    checks: list[CheckVerdict] = Field(default_factory=list)
    emitted: int = 0
    invalid: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    """Why the attempt could not run (an exception outside the run's own outcome)."""

    @property
    def passed(self) -> bool:
        """Every check passed and the attempt ran."""
        return self.error is None and all(c.passed for c in self.checks)

    @property
    def tokens(self) -> int:
        """Input and output tokens of every model call."""
        return self.input_tokens + self.output_tokens


class CaseResult(_Data):
    """A case and its attempts."""

    id: str
    split: str
    tags: list[str] = Field(default_factory=list)
    request: str
    """The (first) user message."""
    expected_route: str | None = None
    attempts: list[Attempt] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        """pass^k: every attempt passed."""
        return bool(self.attempts) and all(a.passed for a in self.attempts)

    @property
    def pass_rate(self) -> float:
        """Share of the attempts that passed."""
        return sum(a.passed for a in self.attempts) / len(self.attempts) if self.attempts else 0.0


class Summary(_Data):
    """The run's figures. Ratios are over attempts, except pass^k (over cases)."""

    cases: int
    attempts: int
    repeat: int
    routed: int
    """Attempts whose route was the expected one (of `route_checked`)."""
    route_checked: int
    succeeded: int
    """Attempts whose every check passed."""
    pass_k: int
    """Cases whose every attempt passed."""
    tool_calls_emitted: int
    tool_calls_invalid: int
    model_calls: int
    input_tokens: int
    output_tokens: int
    latency_p50_s: float
    latency_p95_s: float
    wall_s: float

    @property
    def route_accuracy(self) -> float | None:
        """Routed attempts over those with an expected route."""
        return self.routed / self.route_checked if self.route_checked else None

    @property
    def task_success(self) -> float | None:
        """Attempts whose every check passed, over all attempts."""
        return self.succeeded / self.attempts if self.attempts else None

    @property
    def tool_call_validity(self) -> float | None:
        """Valid tool and hand-off calls over those the model emitted."""
        e = self.tool_calls_emitted
        return (e - self.tool_calls_invalid) / e if e else None

    @property
    def pass_k_rate(self) -> float | None:
        """Cases whose every attempt passed, over all cases."""
        return self.pass_k / self.cases if self.cases else None

    def metrics(self) -> dict[str, float | None]:
        """The headline ratios and figures by name (what `--compare` diffs)."""
        return {
            "route_accuracy": self.route_accuracy,
            "task_success": self.task_success,
            "tool_call_validity": self.tool_call_validity,
            "pass_k": self.pass_k_rate,
            "latency_p50_s": self.latency_p50_s,
            "latency_p95_s": self.latency_p95_s,
            "tokens": float(self.input_tokens + self.output_tokens),
        }


class EvalReport(_Data):
    """A whole eval: how it was run, its cases and its figures (`--json` writes it)."""

    spec: str
    team: str
    model: str
    split: str
    command: str
    date: str
    store: str
    results: list[CaseResult] = Field(default_factory=list)
    summary: Summary

    def confusion(self) -> dict[str, dict[str, int]]:
        """expected route -> actual route -> attempts (cases with an expected route)."""
        out: dict[str, dict[str, int]] = {}
        for r in self.results:
            if r.expected_route is None:
                continue
            row = out.setdefault(r.expected_route, {})
            for a in r.attempts:
                row[a.route] = row.get(a.route, 0) + 1
        return out


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), linear between closest ranks; 0.0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarise(results: list[CaseResult], repeat: int, wall_s: float) -> Summary:
    """The figures of `results`."""
    attempts = [a for r in results for a in r.attempts]
    checked = [(r, a) for r in results for a in r.attempts if r.expected_route is not None]
    latencies = [a.latency_s for a in attempts]
    return Summary(
        cases=len(results),
        attempts=len(attempts),
        repeat=repeat,
        routed=sum(a.route == r.expected_route for r, a in checked),
        route_checked=len(checked),
        succeeded=sum(a.passed for a in attempts),
        pass_k=sum(r.passed for r in results),
        tool_calls_emitted=sum(a.emitted for a in attempts),
        tool_calls_invalid=sum(a.invalid for a in attempts),
        model_calls=sum(a.model_calls for a in attempts),
        input_tokens=sum(a.input_tokens for a in attempts),
        output_tokens=sum(a.output_tokens for a in attempts),
        latency_p50_s=round(percentile(latencies, 50), 4),
        latency_p95_s=round(percentile(latencies, 95), 4),
        wall_s=round(wall_s, 3),
    )
