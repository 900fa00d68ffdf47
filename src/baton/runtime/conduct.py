"""Conductors: a holder whose next step is decided in code, not by a model.

A pipeline runs its stages in order, a debate runs rounds: the order is the topology's, not
a model's choice. Such a topology declares its lead agent a conductor in its blueprint
(`Conducted(conductor, rounds=...)`): the agent has no model and its own round budget, and
in the turn loop the kernel asks the conductor, where it would ask a model, for the next
step — calls to make (the stages' or workers' `ask_*` tools, plain tools) or the answer.
Everything after that is the kernel's as usual: the calls are classified, run (in parallel
where their kind allows), recorded, checkpointed and resumed. A conductor derives its decision
from the turn's scratch alone (the calls made and their results), so a resumed run decides
exactly as the interrupted one would. Traces, the console and the dashboard show its turns as
a conductor's (`AgentStarted.conductor`), never as a model's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from baton.core.errors import ConfigError
from baton.core.messages import ToolCall
from baton.runtime.model_call import Parsed, Reply
from baton.runtime.outcomes import Failed, ToHuman, Tripped
from baton.runtime.state import RunState, TurnState

if TYPE_CHECKING:
    from baton.runtime.kernel import Kernel


class Conductor(Protocol):
    """Decides the lead's next step from the run and its turn so far."""

    async def __call__(
        self, kernel: Kernel, run: RunState, turn: TurnState
    ) -> Reply | Failed | ToHuman | Tripped:
        """Calls to make next (with text, or None), the answer (text and no calls), why the
        run fails, why it goes to the human queue, or a guard it tripped (recorded with
        `kernel.trip`; the run escalates). It may record events (`kernel.emit`) and use the
        store (`kernel.cfg.store`)."""
        ...


@dataclass(frozen=True, slots=True)
class Conducted:
    """How a blueprint declares a conductor agent: what decides its steps, and how many
    decisions it may make. Its compiled plan has no model, so nothing can ask one."""

    decide: Conductor
    """The conductor: asked for the next step wherever the kernel would ask a model."""
    rounds: int
    """Decisions it may make in one turn (calls to make, or the answer); asked once more, it
    trips the `max_rounds` guard and the run escalates."""
    settles: bool = False
    """Its decision follows from the run's state alone, at once (no model, no side effect,
    no wait: a graph's next super-step). The kernel then saves the answer of its last open
    call with the checkpoint of its next decision instead of in a write of its own: one
    durable write per round. A crash between the two runs that call again."""

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ConfigError(f"a conductor needs a round budget of at least 1, got {self.rounds}")


@dataclass(frozen=True, slots=True)
class Done:
    """One answered call of the turn: what was called, with what, and what came back."""

    call_id: str
    name: str
    args: dict[str, Any]
    content: str

    @property
    def failed(self) -> bool:
        """The call's result is an error (`{"ok": false, ...}`)."""
        return self.content.startswith('{"ok": false')

    @property
    def answer(self) -> str:
        """The text a worker answered (`{"worker": ..., "answer": ...}`), a tool's result as
        it came back, or the error message of a failed call."""
        try:
            data = json.loads(self.content)
        except ValueError:
            return self.content
        if isinstance(data, dict):
            if "answer" in data and "worker" in data:
                answer = data["answer"]  # data from a worker with an `output_type`: as JSON
                return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            if data.get("ok") is False:
                return str(data.get("error", ""))
        return self.content


def answered(turn: TurnState) -> Iterator[Done]:
    """The turn's answered calls, in the order their results came back."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for m in turn.scratch:
        if m.role == "assistant":
            for c in m.tool_calls or ():
                try:
                    args = json.loads(c.arguments)
                except ValueError:
                    args = {}
                calls[c.id] = (c.name, args if isinstance(args, dict) else {})
        elif m.role == "tool" and m.tool_call_id in calls:
            name, args = calls[m.tool_call_id]
            yield Done(m.tool_call_id, name, args, m.content or "")


def call(name: str, **args: Any) -> Parsed:
    """A call the conductor makes (as a model's parsed tool call)."""
    return Parsed(ToolCall(name=name, arguments=json.dumps(args, ensure_ascii=False)), args)
