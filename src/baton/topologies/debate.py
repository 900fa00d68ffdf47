"""`Debate`: several agents answer, critique each other for some rounds, a judge decides
(seed 003 §3.2).

Round one asks every debater the user's question, in parallel; each later round shows each
debater its own last answer and the others' and asks for a revised one. The debate stops
after `rounds`, as soon as every debater gives the same answer (convergence), or once the run
has used `max_tokens`. A `judge` agent then reads the question and the final answers and
gives the run's answer; without one, the answer most debaters gave wins (ties go to the first
debater's). The order is the debate's, not a model's: the lead is a conductor
(`baton.runtime.conduct`), and every debater runs as a bounded sub-run with its own view.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from baton.agents import Agent
from baton.core.errors import ConfigError
from baton.runtime.blueprint import Blueprint
from baton.runtime.conduct import Conducted, answered, call
from baton.runtime.delegation import Ask, ask_tool_name
from baton.runtime.kernel import Kernel
from baton.runtime.model_call import Reply
from baton.runtime.outcomes import Failed
from baton.runtime.state import RunState, TurnState
from baton.topologies.mermaid import Flowchart
from baton.topologies.supervisor import delegation
from baton.topologies.team import Team


class Debate(Team):
    """Debaters answer and critique each other; a judge (or the majority) decides.

    `Debate([agent, ...], judge=None, rounds=2, max_tokens=None, model=..., **team)`.
    """

    def __init__(
        self,
        debaters: Sequence[Agent],
        *,
        judge: Agent | None = None,
        rounds: int = 2,
        max_tokens: int | None = None,
        name: str = "debate",
        **team: Any,
    ) -> None:
        if len(debaters) < 2:
            raise ConfigError("a Debate needs at least two debaters")
        if rounds < 1:
            raise ConfigError("rounds must be at least 1")
        for a in [*debaters, *([judge] if judge is not None else [])]:
            if a.handoffs:
                raise ConfigError(f"{a.name!r} has handoffs; debaters and judges answer only")
        everyone = [*debaters, *([judge] if judge is not None else [])]
        lead = Agent(
            name=name,
            description="Runs the debate's rounds and asks the judge.",
        )
        names = [d.name for d in debaters]
        judged = judge.name if judge is not None else None
        asks = len(debaters) * rounds + (1 if judge is not None else 0)
        blueprint = delegation(name, everyone, len(debaters), Ask(max_delegations=asks), "debate")
        conductor = _Conductor(names, judged, rounds, max_tokens)
        blueprint |= Blueprint(conductors={name: Conducted(conductor, rounds + 2)})
        super().__init__([lead, *everyone], entry=name, blueprint=blueprint, **team)
        self.debaters = names
        self.judge = judged
        self.rounds = rounds
        self.max_tokens = max_tokens

    def to_mermaid(self) -> str:
        """The debaters, their rounds, and who decides."""
        chart = Flowchart()
        chart.node("user", "circle")
        chart.node("debate", "stadium", note=f"conductor, up to {self.rounds} rounds")
        chart.edge("user", "debate")
        for d in self.debaters:
            chart.node(d)
            chart.edge("debate", d, "answer, critique", dotted=True)
        decider = self.judge or "majority vote"
        chart.node(decider, "round")
        chart.edge("debate", decider, "final answers")
        return chart.text()


def normalise(text: str) -> str:
    """An answer as compared for convergence and votes: case, spacing, final punctuation."""
    return re.sub(r"\s+", " ", text).strip().rstrip(".!。！").casefold()


@dataclass(frozen=True, slots=True)
class _Conductor:
    debaters: list[str]
    judge: str | None
    rounds: int
    max_tokens: int | None

    async def __call__(self, kernel: Kernel, run: RunState, turn: TurnState) -> Reply | Failed:
        latest: dict[str, str] = {}
        heard: Counter[str] = Counter()
        verdict: str | None = None
        for done in answered(turn):
            if self.judge is not None and done.name == ask_tool_name(self.judge):
                if done.failed:
                    return Failed(f"the judge {self.judge} could not decide: {done.answer}")
                verdict = done.answer
                continue
            for d in self.debaters:
                if done.name == ask_tool_name(d):
                    heard[d] += 1
                    if not done.failed:
                        latest[d] = done.answer
        if verdict is not None:
            return verdict, []
        rounds_done = min(heard[d] for d in self.debaters)
        if rounds_done < self.rounds and not self._settled(run, latest, rounds_done):
            return None, [self._ask(run.message, d, latest) for d in self.debaters]
        if not latest:
            return Failed("no debater gave an answer")
        if self.judge is not None:
            return None, [call(ask_tool_name(self.judge), question=_judging(run.message, latest))]
        return _majority(self.debaters, latest), []

    def _settled(self, run: RunState, latest: dict[str, str], rounds_done: int) -> bool:
        if rounds_done == 0:
            return False
        if len(latest) == len(self.debaters) and len({normalise(a) for a in latest.values()}) == 1:
            return True  # converged: every debater gives the same answer
        spent = sum(u.total_tokens for u in run.usage.values())
        return self.max_tokens is not None and spent >= self.max_tokens

    def _ask(self, question: str, debater: str, latest: dict[str, str]) -> Any:
        if not latest:
            return call(ask_tool_name(debater), question=question)
        others = "\n".join(
            f"- {name}: {answer}" for name, answer in latest.items() if name != debater
        )
        own = latest.get(debater, "(you gave no answer)")
        return call(
            ask_tool_name(debater),
            question=question,
            context=(
                f"Your previous answer: {own}\nThe other answers:\n{others}\n"
                "Point out what is wrong in the other answers, if anything, then give your "
                "revised answer on the last line."
            ),
        )


def _judging(question: str, latest: dict[str, str]) -> str:
    answers = "\n".join(f"- {name}: {answer}" for name, answer in latest.items())
    return (
        f"Question: {question}\nThe debaters' final answers:\n{answers}\n"
        "Decide which answer is right (or combine them) and give the final answer."
    )


def _majority(debaters: list[str], latest: dict[str, str]) -> str:
    """The answer most debaters gave (ties: the earliest debater's)."""
    votes = Counter(normalise(a) for a in latest.values())
    best = max(votes.values())
    for d in debaters:
        if d in latest and votes[normalise(latest[d])] == best:
            return latest[d]
    raise AssertionError("unreachable: latest is not empty")
