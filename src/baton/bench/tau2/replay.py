"""Replay a task's gold actions through a domain team and grade the end state with the oracle.

The replay is a conversation in one session. The simulated user asks for one gold action per
message and states the values it needs (ids included), as a τ² user does: order ids and
emails they know, item and payment ids the agent read out to them earlier. One action per
message mirrors τ²'s rules (one tool call at a time, a confirmation turn before each write),
so each run needs at most one hand-off and the kernel's default guards stay on, grounding of
ids included. The agent side is a scripted policy (`ReplayPolicy`): the agent holding the
baton calls the tool if it owns it, else hands off to the owner with the ids in `state`; the
result, error or not, goes back to the model, which reports and waits for the next message.
A gold `transfer_to_human_agents` becomes Baton's `transfer_to_human` escalation. A closing
message carries the task's `communicate_info`.

Mutations (`Mutation`) edit the walked actions (never the oracle's) to prove the comparison
notices a dropped, repeated, reordered or corrupted write.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from baton.backends.memory import MemoryStore
from baton.bench.tau2.data import Action, Domain, Task, db_hash
from baton.bench.tau2.grading import DomainSummary, TaskResult, grade
from baton.bench.tau2.oracle import gold_outcome
from baton.bench.tau2.teams import DomainTeam, build_team
from baton.bench.tau2.toolkit import TRANSFER, WRITE
from baton.handoff import handoff_tool_name
from baton.models.base import ModelRequest
from baton.models.scripted import ScriptedModel, Step
from baton.runtime.guards import Guards
from baton.runtime.result import RunResult

MutationKind = Literal["drop", "duplicate", "reorder", "corrupt"]
MUTATIONS: tuple[MutationKind, ...] = ("drop", "duplicate", "reorder", "corrupt")
"""The edits a replay can make to the gold actions it walks."""

CLOSING_MESSAGE = "That's everything, thank you."
"""The simulated user's last message (the agent answers with the task's communicate_info)."""


class MutationNotApplicable(ValueError):
    """The task has no write call the mutation could edit."""


def corrupt_value(value: Any) -> Any:
    """A plausible but wrong version of an argument value (another id, another number)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        if value and value[-1].isdigit():
            return value[:-1] + str((int(value[-1]) + 1) % 10)
        return value + "x"
    if isinstance(value, list):
        return [corrupt_value(value[0]), *value[1:]] if value else ["x"]
    if isinstance(value, dict) and value:
        key = next(iter(value))
        return {**value, key: corrupt_value(value[key])}
    return "x"


@dataclass(frozen=True)
class Mutation:
    """An edit of one successful gold write before the replay walks the actions.

    `write` picks the write among those that succeed in the oracle (0: the first, -1: the
    last). `drop` removes it, `duplicate` repeats it at once, `reorder` swaps it with another
    write (one on the same record if there is one, else the nearest), `corrupt` changes one
    argument (`argument`, default the first) with `corrupt_value`.
    """

    kind: MutationKind
    write: int = 0
    argument: str | None = None

    def __str__(self) -> str:
        arg = f":{self.argument}" if self.argument else ""
        return f"{self.kind}[{self.write}]{arg}"

    def apply(
        self, actions: Sequence[Action], writes: Sequence[int], failed: Sequence[int]
    ) -> list[Action]:
        """The mutated action list; `writes` are the indexes of write calls, `failed` those
        that raise in the oracle."""
        targets = [i for i in writes if i not in failed]
        if not -len(targets) <= self.write < len(targets):
            raise MutationNotApplicable(
                f"{self}: the task has {len(targets)} successful write call(s)"
            )
        i = targets[self.write]
        out = list(actions)
        if self.kind == "drop":
            del out[i]
        elif self.kind == "duplicate":
            out.insert(i + 1, out[i])
        elif self.kind == "reorder":
            others = [j for j in writes if j != i]
            if not others:
                raise MutationNotApplicable(f"{self}: the task has a single write call")
            # prefer a write on the same record (writes on different records commute), the
            # nearest one, later before earlier
            ids = _ids(out[i])
            others.sort(key=lambda j: (not (_ids(out[j]) & ids), abs(j - i), j < i))
            j = others[0]
            out[i], out[j] = out[j], out[i]
        elif self.kind == "corrupt":
            args = dict(out[i].arguments)
            key = self.argument or next(iter(args), None)
            if key is None or key not in args:
                raise MutationNotApplicable(f"{self}: {out[i].name} has no argument {key!r}")
            args[key] = corrupt_value(args[key])
            out[i] = replace(out[i], arguments=args)
        else:
            raise ValueError(f"unknown mutation {self.kind!r}: use one of {', '.join(MUTATIONS)}")
        return out


def _ids(action: Action) -> set[str]:
    """The record ids an action names (values of `*_id` arguments)."""
    return {str(v) for k, v in action.arguments.items() if k.endswith("_id") and v}


# ---------------------------------------------------------------------------- the walk
@dataclass(frozen=True)
class Turn:
    """One user message of a replay and what the agent side does with it."""

    message: str
    action: Action | None
    """The gold action to perform; None for the closing turn."""
    reply: str = ""
    """The closing turn's answer."""


def user_message(action: Action) -> str:
    """What the simulated user says to ask for `action`: the request and its values."""
    if action.name == TRANSFER:
        summary = str(action.arguments.get("summary", "")).strip()
        return f"I want to speak to a human agent. {summary}".strip()
    what = action.name.replace("_", " ")
    if not action.arguments:
        return f"Next, please {what}."
    return f"Next, please {what}. Details: {json.dumps(action.arguments, ensure_ascii=False)}"


def closing_reply(communicate_info: Sequence[str]) -> str:
    """The agent's last answer: everything the task says the user must be told."""
    if not communicate_info:
        return "You're welcome. Have a nice day."
    return "You're welcome. To sum up: " + "; ".join(communicate_info) + "."


def plan_turns(task: Task, actions: Sequence[Action]) -> list[Turn]:
    """The user turns of a replay: one per action, the closing one before trailing transfers
    (a transfer to a human ends the conversation, as upstream)."""
    turns = [Turn(user_message(a), a) for a in actions]
    end = len(actions)
    while end > 0 and actions[end - 1].name == TRANSFER:
        end -= 1
    closing = Turn(CLOSING_MESSAGE, None, closing_reply(task.communicate_info))
    return [*turns[:end], closing, *turns[end:]]


def handoff_state(action: Action) -> dict[str, Any]:
    """The ids an action needs, for the hand-off's `state` (scalars only)."""
    return {
        k: v
        for k, v in action.arguments.items()
        if isinstance(v, str) and (k.endswith("_id") or k == "email")
    }


def _failed(content: str | None) -> str | None:
    """The error of a failed tool result (the kernel's `{"ok": false, ...}`), else None."""
    if not content or not content.startswith("{"):
        return None
    try:
        data = json.loads(content)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("ok") is False:
        return str(data.get("error", "failed"))
    return None


class ReplayPolicy:
    """The scripted model of a replay: walks the current `Turn` through the team.

    Use one per team, as `ScriptedModel(policy)`; call `start(turn)` before each user message.
    Anything unexpected (a refused hand-off, a missing owner) is recorded in `problems` and
    answered with an apology, so the run ends instead of looping.
    """

    def __init__(self, owners: Mapping[str, str]) -> None:
        self.owners = dict(owners)
        self.turn: Turn | None = None
        self.step = ""
        self.called = False
        self.problems: list[str] = []

    def reset(self) -> None:
        """Forget the previous task."""
        self.turn, self.called, self.problems = None, False, []

    def start(self, turn: Turn, step: str = "") -> None:
        """The next user message is `turn`; `step` (e.g. '3/7') makes each hand-off distinct."""
        self.turn, self.step, self.called = turn, step, False

    def _problem(self, agent: str, what: str) -> Step:
        self.problems.append(f"{self.step} {agent}: {what}".strip())
        return ScriptedModel.say("Sorry, I could not do that.")

    def __call__(self, request: ModelRequest) -> Step:
        """The next step for the agent holding the baton."""
        turn = self.turn
        if turn is None:
            return self._problem(request.agent, "no turn was started")
        if turn.action is None:
            return ScriptedModel.say(turn.reply)
        action = turn.action
        last = request.messages[-1] if request.messages else None
        if self.called:
            if last is not None and last.role == "tool" and last.name == action.name:
                error = _failed(last.content)
                what = action.name.replace("_", " ")
                return ScriptedModel.say(
                    f"I could not {what}: {error}" if error else f"Done: {what}."
                )
            return self._problem(request.agent, f"asked again after calling {action.name}")
        if last is not None and last.role == "tool":  # our hand-off came back refused
            return self._problem(request.agent, f"{last.name} returned {last.content}")
        names = {s.name for s in request.tools}
        if action.name == TRANSFER:
            self.called = True
            summary = str(action.arguments.get("summary", "")).strip()
            return ScriptedModel.call(
                handoff_tool_name("human"),
                reason=summary or "the user asked for a human agent",
                objective="Take over the user's request; the desk cannot handle it.",
            )
        if action.name in names:
            self.called = True
            return ScriptedModel.call(action.name, **action.arguments)
        owner = self.owners.get(action.name)
        if owner is None or handoff_tool_name(owner) not in names:
            return self._problem(request.agent, f"no specialist to hand {action.name} to")
        return ScriptedModel.call(
            handoff_tool_name(owner),
            reason=f"{action.name} belongs to {owner}",
            objective=f"Step {self.step}: {action.name.replace('_', ' ')} for the user.",
            state=handoff_state(action),
        )


# ---------------------------------------------------------------------------- the harness
class Replayer:
    """Replays tasks of one domain, one after another, on one team.

    The team and its tools are built once (their schemas are the costly part); each task gets
    a fresh database copy, a fresh in-memory store and a new session.
    """

    def __init__(self, domain: Domain, guards: Guards | None = None) -> None:
        self.domain = domain
        self.policy = ReplayPolicy({})
        self.bench: DomainTeam = build_team(
            domain,
            ScriptedModel(self.policy, name="replay", record=False),
            guards=guards or Guards(),
            db={},
        )
        self.policy.owners = dict(self.bench.owners)
        self.writes = {n for n, k in self.bench.tools.KINDS.items() if k == WRITE}

    async def run(self, task: Task, mutation: Mutation | None = None) -> TaskResult:
        """Replay one task (optionally mutated) and grade it against the gold outcome."""
        t0 = time.perf_counter()
        gold = gold_outcome(self.domain, task)
        actions = list(task.actions)
        if mutation is not None:
            writes = [i for i, a in enumerate(actions) if a.name in self.writes]
            actions = mutation.apply(actions, writes, gold.failed)
        tools = self.bench.tools
        tools.db = self.domain.fresh_db()
        store = MemoryStore()
        team = self.bench.team.bind(store=store)  # each task on a store of its own
        self.policy.reset()
        session = f"tau2-{self.domain.name}-{task.id}"
        results: list[RunResult] = []
        turns = plan_turns(task, actions)
        for n, turn in enumerate(turns, 1):
            self.policy.start(turn, f"{n}/{len(turns)}")
            results.append(await team.run(turn.message, session_id=session))
        end_hash = db_hash(tools.db)
        tools.db = {}
        return grade(
            self.domain,
            task,
            walked=actions,
            writes=self.writes,
            results=results,
            end_hash=end_hash,
            tickets=len(await store.list_human()),
            problems=self.policy.problems,
            turns=len(turns),
            seconds=time.perf_counter() - t0,
            mutation=str(mutation) if mutation is not None else None,
        )

    async def run_all(
        self, tasks: Sequence[Task], mutation: Mutation | None = None, split: str = "base"
    ) -> DomainSummary:
        """Replay `tasks` in order."""
        t0 = time.perf_counter()
        summary = DomainSummary(self.domain.name, split)
        for task in tasks:
            summary.results.append(await self.run(task, mutation))
        summary.seconds = time.perf_counter() - t0
        return summary


async def areplay(
    domain: Domain,
    split: str = "base",
    *,
    tasks: Sequence[Task] | None = None,
    mutation: Mutation | None = None,
    guards: Guards | None = None,
) -> DomainSummary:
    """Replay a split (or the given tasks) of a domain; see `replay` for the sync form."""
    chosen = list(tasks) if tasks is not None else domain.split(split)
    return await Replayer(domain, guards).run_all(chosen, mutation, split)


def replay(
    domain: Domain,
    split: str = "base",
    *,
    tasks: Sequence[Task] | None = None,
    mutation: Mutation | None = None,
    guards: Guards | None = None,
) -> DomainSummary:
    """Replay a split (or the given tasks) of a domain and grade every task."""
    return asyncio.run(areplay(domain, split, tasks=tasks, mutation=mutation, guards=guards))
