"""Running a spec's cases: each attempt on a fresh team from the factory, in a session of its
own on one store, checked case by case."""

from __future__ import annotations

import inspect
import secrets
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from baton.backends.base import Store
from baton.core.errors import EvalError
from baton.evals.checks import Judge, check_judge, check_sync
from baton.evals.observed import observe
from baton.evals.results import (
    Attempt,
    CaseResult,
    CheckVerdict,
    EvalReport,
    ToolCallSeen,
    summarise,
)
from baton.evals.spec import HUMAN_ROUTE, Case, Spec
from baton.runtime.result import RunResult
from baton.topologies.team import Team


@dataclass(frozen=True)
class TeamSource:
    """Where attempts get their team: `make()` builds one; `fresh` when each call builds a
    new team (the attempt then closes it)."""

    make: Callable[[], Team]
    fresh: bool = True


JudgeFor = Callable[[str | None], Judge | None]
"""The judge for a judge check's `model` (None: the eval's default judge)."""

Progress = Callable[[CaseResult, Attempt], None]
"""Called after every attempt."""


def team_source(obj: object, model: Any = None, *, target: str = "team") -> TeamSource:
    """A factory of fresh teams from what the spec's `team` names: a zero-argument callable
    (one that takes `model` gets `model` when one is chosen) or a `Team`, used as it is (its
    tools' data then carry over from one case to the next)."""
    if isinstance(obj, Team):
        if model is not None:
            raise EvalError(
                f"{target} is a Team built with its own model; to run it on another, name a "
                "factory that takes `model` (def make(model): return Team(..., model=model))"
            )
        return TeamSource(lambda: obj, fresh=False)
    if not callable(obj):
        raise EvalError(f"{target} is a {type(obj).__name__}, not a Team or a factory of one")
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    takes_model = "model" in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
    )
    if model is not None and not takes_model:
        raise EvalError(
            f"{target} takes no `model` argument, so the eval cannot run it on the chosen model"
        )

    def make() -> Team:
        try:
            team = obj(model=model) if model is not None else obj()
        except EvalError:
            raise
        except Exception as exc:
            raise EvalError(
                f"{target} failed to build a team: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(team, Team):
            raise EvalError(f"{target} returned a {type(team).__name__}, not a baton Team")
        return team

    return TeamSource(make)


def check_agents(spec_cases: Sequence[Case], team: Team) -> None:
    """Refuse cases whose route or path names an agent the team does not have."""
    known = {*team.agents, HUMAN_ROUTE}
    for c in spec_cases:
        named = ([c.route] if c.route is not None else []) + (c.path.agents if c.path else [])
        unknown = [a for a in named if a not in known]
        if unknown:
            raise EvalError(
                f"case {c.id!r} names {', '.join(map(repr, unknown))}, which the team does not "
                f"have (agents: {', '.join(sorted(known))})"
            )


@dataclass
class EvalRun:
    """How to run a spec: where, on what, how often."""

    spec: Spec
    teams: TeamSource
    store: Store
    store_url: str
    model_name: str
    repeat: int = 1
    judge_for: JudgeFor | None = None
    spec_path: str = "<spec>"
    command: str = ""
    split: str = "all"

    async def run(self, cases: Sequence[Case], progress: Progress | None = None) -> EvalReport:
        """Every case `repeat` times, sequentially; the report with its figures."""
        if self.repeat < 1:
            raise EvalError("--repeat must be at least 1")
        tag = secrets.token_hex(3)
        t0 = time.perf_counter()
        results: list[CaseResult] = []
        for case in cases:
            result = CaseResult(
                id=case.id,
                split=case.split,
                tags=list(case.tags),
                request=case.messages[0],
                expected_route=case.route,
            )
            results.append(result)
            for k in range(1, self.repeat + 1):
                attempt = await self._attempt(case, k, f"eval-{tag}-{case.id}-{k}")
                result.attempts.append(attempt)
                if progress is not None:
                    progress(result, attempt)
        return EvalReport(
            spec=self.spec_path,
            team=self.spec.team,
            model=self.model_name,
            split=self.split,
            command=self.command,
            date=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            store=self.store_url,
            results=results,
            summary=summarise(results, self.repeat, time.perf_counter() - t0),
        )

    def trace_command(self, session_id: str) -> str:
        """The `baton trace` command line for a session of this eval."""
        return shlex.join(["baton", "trace", session_id, "--store", self.store_url])

    async def _attempt(self, case: Case, k: int, session_id: str) -> Attempt:
        team = self.teams.make()
        runs: list[RunResult] = []
        t = time.perf_counter()
        try:
            async with team.bind(store=self.store, sinks=[]) as bound:
                for message in case.messages:
                    runs.append(await bound.run(message, session_id=session_id))
        except Exception as exc:  # one broken case is a failed attempt, not a broken eval
            return Attempt(
                repeat=k,
                session_id=session_id,
                run_ids=[r.run_id for r in runs],
                trace=self.trace_command(session_id),
                route="(error)",
                status="error",
                latency_s=time.perf_counter() - t,
                error=f"{type(exc).__name__}: {exc}",
            )
        finally:
            if self.teams.fresh:  # a team of its own: close its store
                await team.aclose()
        latency = time.perf_counter() - t
        seen = observe(runs)
        checks: list[CheckVerdict] = check_sync(case, seen)
        if case.answer is not None and case.answer.judge is not None:
            judge = self.judge_for(case.answer.judge.model) if self.judge_for else None
            try:
                verdict = await check_judge(case.answer, case.messages[-1], seen, judge)
            except Exception as exc:  # the judge's failure fails the check, with its reason
                verdict = CheckVerdict(
                    check="answer.judge", passed=False, reason=f"the judge failed: {exc}"
                )
            if verdict is not None:
                checks.append(verdict)
        return Attempt(
            repeat=k,
            session_id=session_id,
            run_ids=[r.run_id for r in runs],
            trace=self.trace_command(session_id),
            route=seen.route,
            path=seen.path,
            status=seen.status,
            output=seen.output,
            calls=[
                ToolCallSeen(tool=c.tool, arguments=c.arguments, ok=c.ok, error=c.error)
                for c in seen.calls
            ],
            checks=checks,
            emitted=seen.emitted,
            invalid=seen.invalid,
            model_calls=seen.model_calls,
            input_tokens=seen.input_tokens,
            output_tokens=seen.output_tokens,
            latency_s=round(latency, 4),
        )
