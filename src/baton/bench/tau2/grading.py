"""Grade a τ² conversation: end state against the oracle, info told, writes, escalations.

Shared by the replay (gold actions walked by a scripted policy) and the live mode (a real
model answering a simulated user): both hand over the runs of one session and the hash of the
database they left.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from baton.bench.tau2.data import Action, Domain, Task
from baton.bench.tau2.oracle import gold_outcome
from baton.core.events import GuardTripped, HandoffRefused, ToolCalled
from baton.runtime.result import RunResult


@dataclass(frozen=True)
class TaskResult:
    """How one task ended, against the oracle."""

    domain: str
    task_id: str
    actions: int
    """Gold actions walked (after any mutation); for a live run, the gold's count."""
    writes: int
    """Write calls among them."""
    db_match: bool
    """The end database equals the oracle's (same hash)."""
    db_changed: bool
    """The end database differs from the initial one."""
    writes_match: bool
    """The write calls made (name, arguments, success), in order, are the gold's: stricter than
    the database, it also sees a repeated once-only write or two commuting writes swapped."""
    escalations: int
    """Runs that ended `escalated`."""
    tickets: int
    """Cards left in the human queue."""
    communicated: bool
    """Every communicate_info string appeared in a reply to the user."""
    missing_info: tuple[str, ...]
    reward: bool
    """τ²'s reward: the database check and, where the task's reward_basis lists it, the
    communicate check (NL assertions need an LLM judge and are left out)."""
    errors: int
    """Tool calls that came back as errors (refusals included)."""
    gold_errors: int
    """Gold actions that raise in the oracle (a replay should see the same number)."""
    calls: int
    """Tool calls executed (hand-offs not counted)."""
    guard_trips: int
    handoffs_refused: int
    problems: tuple[str, ...]
    """Anything the harness did not expect, and runs that failed."""
    status: str
    """Status of the last run."""
    turns: int
    """User messages."""
    seconds: float
    mutation: str | None = None

    @property
    def escalated(self) -> bool:
        """At least one run ended escalated."""
        return self.escalations > 0

    @property
    def passed(self) -> bool:
        """A replay's verdict: the oracle's database, the gold's writes, info told, and a clean
        walk (no guard trips, refused hand-offs or surprises)."""
        return (
            self.db_match
            and self.writes_match
            and self.communicated
            and not self.problems
            and self.guard_trips == 0
            and self.handoffs_refused == 0
        )


@dataclass
class DomainSummary:
    """The results of one domain."""

    domain: str
    split: str
    results: list[TaskResult] = field(default_factory=list)
    seconds: float = 0.0

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
        """Tasks that passed every replay check."""
        return sum(r.passed for r in self.results)

    @property
    def rewarded(self) -> int:
        """Tasks with τ²'s reward."""
        return sum(r.reward for r in self.results)

    @property
    def escalated(self) -> int:
        """Tasks with at least one escalation."""
        return sum(r.escalated for r in self.results)

    @property
    def errors(self) -> int:
        """Tool errors over all tasks."""
        return sum(r.errors for r in self.results)

    def by_id(self) -> dict[str, TaskResult]:
        """Results keyed by task id."""
        return {r.task_id: r for r in self.results}


def canonical(arguments: Mapping[str, Any]) -> str:
    """Arguments as sorted JSON, for comparing calls."""
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def missing_info(info: Sequence[str], replies: Sequence[str]) -> tuple[str, ...]:
    """The communicate_info strings missing from the replies (case and commas ignored)."""
    text = "\n".join(replies).casefold().replace(",", "")
    return tuple(s for s in info if s.casefold().replace(",", "") not in text)


def reward(task: Task, db_match: bool, communicated: bool) -> bool:
    """τ²'s reward for the checks a harness can make without an LLM judge."""
    basis = task.reward_basis or ("DB", "COMMUNICATE")
    return (db_match or "DB" not in basis) and (communicated or "COMMUNICATE" not in basis)


def grade(
    domain: Domain,
    task: Task,
    *,
    walked: Sequence[Action],
    writes: Collection[str],
    results: Sequence[RunResult],
    end_hash: str,
    tickets: int,
    problems: Sequence[str],
    turns: int,
    seconds: float,
    mutation: str | None = None,
) -> TaskResult:
    """The verdict on one conversation (`results`: its runs, in order)."""
    gold = gold_outcome(domain, task)
    events = [e for r in results for e in r.events]
    tool_events = [e for e in events if isinstance(e, ToolCalled)]
    missing = missing_info(task.communicate_info, [r.output or "" for r in results])
    gold_log = [
        (a.name, canonical(a.arguments), i not in gold.failed)
        for i, a in enumerate(task.actions)
        if a.name in writes
    ]
    run_log = [(e.tool, canonical(e.arguments), e.ok) for e in tool_events if e.tool in writes]
    db_match = end_hash == gold.hash
    return TaskResult(
        domain=domain.name,
        task_id=task.id,
        actions=len(walked),
        writes=sum(a.name in writes for a in walked),
        db_match=db_match,
        db_changed=end_hash != domain.initial_hash,
        writes_match=run_log == gold_log,
        escalations=sum(r.status == "escalated" for r in results),
        tickets=tickets,
        communicated=not missing,
        missing_info=missing,
        reward=reward(task, db_match, not missing),
        errors=sum(not e.ok for e in tool_events),
        gold_errors=len(gold.failed),
        calls=len(tool_events),
        guard_trips=sum(isinstance(e, GuardTripped) for e in events),
        handoffs_refused=sum(isinstance(e, HandoffRefused) for e in events),
        problems=(
            *problems,
            *(f"run failed: {r.error}" for r in results if r.status == "failed"),
        ),
        status=results[-1].status if results else "completed",
        turns=turns,
        seconds=seconds,
        mutation=mutation,
    )
