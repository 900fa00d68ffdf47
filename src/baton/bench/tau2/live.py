"""Run τ² tasks on a real model: the domain team serves a simulated user.

As in τ², the user is a language model given the task's `user_scenario` as its instructions;
here the same model plays both sides. The agent greets, the user answers, and each user
message is one run of the team in one session, until the user writes `###STOP###`, a run
ends escalated (a transfer to a human ends the conversation, as upstream) or failed, or the
turn limit is reached. The verdict is τ²'s reward without the LLM-judged NL assertions: the
end database against the oracle's and, where the task asks, the communicate_info check.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from baton.backends.memory import MemoryStore
from baton.bench.tau2.data import Domain, Task, db_hash
from baton.bench.tau2.grading import DomainSummary, TaskResult, grade
from baton.bench.tau2.teams import build_team
from baton.bench.tau2.toolkit import WRITE
from baton.core.events import GuardTripped
from baton.core.messages import Message
from baton.models.base import Model, ModelRequest
from baton.runtime.guards import Guards
from baton.runtime.result import RunResult

STOP = "###STOP###"
"""What the simulated user writes to end the conversation."""

GREETING = "Hi! How can I help you today?"
"""The agent's opening line, as in τ²."""

LIVE_GUARDS = Guards(model_timeout_s=1800.0)
"""The team's guards in live runs: the defaults with a model timeout of 30 minutes. A τ² agent
reads ~4,000 tokens of policy and tool schemas; the embedded model on a slow 2-core CPU needed
over two minutes for that first read (the default limit), so runs ended escalated on a timeout
before the model chose anything. This harness measures what the model does, not how fast."""

USER_PROMPT = """You are playing a customer who contacts a customer service desk by chat. You \
are the customer, never the agent.

Your situation:
{scenario}

Rules:
- Write only your next message to the agent: short and natural, in the first person.
- Give the details of your situation only as they are needed; never invent other details.
- Follow your instructions above when the agent asks you to confirm or choose something.
- When the agent asks you a question, answer it from your situation; if it is not there, say \
you do not know. A question is never the end of the conversation.
- Only when your goal is met, or the agent says it cannot meet it, or you are transferred to \
a human agent, write {stop} and nothing else."""


def scenario_text(user_scenario: Mapping[str, Any]) -> str:
    """The task's user scenario as plain text for the simulated user's instructions."""
    instructions = user_scenario.get("instructions")
    lines: list[str] = []
    if user_scenario.get("persona"):
        lines.append(f"Persona: {user_scenario['persona']}")
    if isinstance(instructions, str):
        lines.append(instructions)
    elif isinstance(instructions, Mapping):
        for key in ("reason_for_call", "known_info", "unknown_info", "task_instructions"):
            value = instructions.get(key)
            if value and str(value).strip() not in ("", "."):
                lines.append(f"{key.replace('_', ' ').capitalize()}: {str(value).strip()}")
    return "\n".join(lines) or "You need help with an order."


class SimulatedUser:
    """A model playing the task's user; `reply` gives its next message."""

    def __init__(self, model: Model, task: Task) -> None:
        self.model = model
        self.system = Message(
            role="system",
            content=USER_PROMPT.format(scenario=scenario_text(task.user_scenario), stop=STOP),
        )
        # the user model sees the agent as "user" and itself as "assistant"
        self.history: list[Message] = []

    async def reply(self, agent_says: str) -> str:
        """The user's answer to the agent's last message (`STOP` when it has nothing to say)."""
        self.history.append(Message(role="user", content=agent_says or "(no answer)"))
        request = ModelRequest(agent="user", messages=[self.system, *self.history])
        response = await self.model.generate(request)
        text = (response.text or "").strip() or STOP
        self.history.append(Message(role="assistant", content=text))
        return text


async def run_live(
    domain: Domain,
    task: Task,
    model: Model,
    *,
    max_turns: int = 30,
    guards: Guards | None = None,
) -> TaskResult:
    """One task on `model`: a conversation with the simulated user, graded by the oracle.

    `guards`: the team's guards (default `LIVE_GUARDS`). A run that ends on a model timeout is
    listed among the result's problems, so that it does not read as the model's choice.
    """
    t0 = time.perf_counter()
    bench = build_team(domain, model, guards=guards or LIVE_GUARDS, store=MemoryStore())
    writes = {n for n, k in bench.tools.KINDS.items() if k == WRITE}
    user = SimulatedUser(model, task)
    session = f"tau2-live-{domain.name}-{task.id}"
    results: list[RunResult] = []
    problems: list[str] = []
    turns = 0
    try:
        text = await user.reply(GREETING)
        while STOP not in text:
            if turns == max_turns:
                problems.append(f"no {STOP} after {max_turns} user messages")
                break
            turns += 1
            result = await bench.team.run(text, session_id=session)
            results.append(result)
            if result.status in ("escalated", "failed"):
                break
            text = await user.reply(result.output or "")
    except Exception as exc:  # the user model failing ends this task, not the benchmark
        problems.append(f"simulated user failed: {type(exc).__name__}: {exc}")
    problems += [
        e.detail
        for r in results
        for e in r.events
        if isinstance(e, GuardTripped) and e.guard == "model_timeout"
    ]
    return grade(
        domain,
        task,
        walked=task.actions,
        writes=writes,
        results=results,
        end_hash=db_hash(bench.tools.db),
        tickets=len(await bench.team.store.list_human()),
        problems=problems,
        turns=turns,
        seconds=time.perf_counter() - t0,
    )


async def run_live_all(
    domain: Domain,
    tasks: Sequence[Task],
    model: Model,
    *,
    split: str = "base",
    max_turns: int = 30,
) -> DomainSummary:
    """Run `tasks` one after another (one trial each: pass^1 is the mean reward)."""
    t0 = time.perf_counter()
    summary = DomainSummary(domain.name, split)
    for task in tasks:
        summary.results.append(await run_live(domain, task, model, max_turns=max_turns))
    summary.seconds = time.perf_counter() - t0
    return summary
