"""The context view: what the agent holding the baton sees.

The view is the agent's own instructions, the payload it received (if any), the session's
business slots it accepts, what its context policy adds (`baton.core.policies`), the
conversation with the user since it took the baton, and its own scratch of the current turn.
Other agents' tool calls and raw outputs are never shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from baton.agents import Agent
from baton.core.jsontext import to_line
from baton.core.messages import Message
from baton.core.payload import HandoffPayload, references
from baton.core.policies import ContextPolicy
from baton.runtime.control import RESERVED
from baton.runtime.handles import masked_facts
from baton.runtime.redact import Redactor


def visible_state(agent: Agent, state: dict[str, Any]) -> dict[str, Any]:
    """The slots the agent accepts (`Agent.accepts`; None accepts all); a slot named like a
    kernel control slot (`baton.runtime.control.RESERVED`, left by an older release) never."""
    if agent.accepts is None:
        if RESERVED.isdisjoint(state):
            return state
        return {k: v for k, v in state.items() if k not in RESERVED}
    return {k: v for k, v in state.items() if k in agent.accepts and k not in RESERVED}


def pending_note(agent: Agent, needs: Sequence[dict[str, str]]) -> str | None:
    """What the holder reads about the user's other needs (`control.pending_needs`): another
    agent gets each of them after it answers (its own are its to answer)."""
    others = [n for n in needs if n["route"] != agent.name]
    if not others:
        return None
    lines = [
        "The user also asked for things other agents handle. Answer only your part; once you "
        "have answered, the baton passes on by itself, in this order (do not hand off for them):"
    ]
    lines.extend(f"  {n['route']}: {to_line(n['text'])}" for n in others)
    return "\n".join(lines)


def fixed_instructions(agent: Agent) -> str:
    """What every system prompt of `agent` starts with: its instructions (the same on every
    call; `ModelRequest.fixed_prefix`)."""
    return agent.instructions or f"You are {agent.name}."


def system_prompt(
    agent: Agent,
    incoming: HandoffPayload | None,
    state: dict[str, Any],
    output_note: str | None = None,
    pending: Sequence[dict[str, str]] = (),
    redactor: Redactor | None = None,
    earlier: str | None = None,
    recalled: str | None = None,
    cited_in: list[dict[str, Any]] | None = None,
) -> str:
    """Instructions + rendered payload + known slots + the user's other needs, when some wait
    (+ the JSON shape of a typed answer) + what the team's memory recalled for this turn (quoted
    data, `baton.runtime.recall`). A secret slot is shown as its handle
    (`baton.runtime.handles`), never as its value. `earlier`: what the view says about the
    turns before the loaded window, with the session's notes of them (`baton.runtime.rolling`).
    `cited_in`: the references a pipeline stage was given by the stages before it (quoted)."""
    parts = [fixed_instructions(agent)]
    if earlier is not None:
        parts.append(earlier)
    if incoming is not None:
        if agent.accepts is not None:  # the whitelist applies to the payload's slots too
            incoming = incoming.model_copy(
                update={
                    "state": visible_state(agent, incoming.state),
                    "unverified": visible_state(agent, incoming.unverified),
                }
            )
        parts.append(incoming.render())
    elif cited_in:  # a payload shows its own; a pipeline stage has none
        parts.append("\n".join(references(cited_in)))
    shown = visible_state(agent, state)
    facts = masked_facts(redactor, shown) if shown else None
    if facts and not (incoming is not None and incoming.state == facts):
        parts.append("Known facts: " + to_line(facts))  # unless the payload just listed them
    others = pending_note(agent, pending)
    if others is not None:
        parts.append(others)
    if recalled is not None:
        parts.append(recalled)
    if output_note is not None:
        parts.append(output_note)
    return "\n\n".join(parts)


def _start(history: Sequence[Message], since: str | None) -> int:
    if since is not None:
        for i, m in enumerate(history):
            if m.id == since:
                return i
    return 0


def _said(message: Message) -> bool:
    """A user message or a final reply (not a tool call, tool output or re-ask)."""
    return message.role == "user" or (
        message.role == "assistant" and not message.tool_calls and bool(message.content)
    )


def conversation(history: Sequence[Message], since: str | None) -> list[Message]:
    """User messages and final replies from message `since` on (all when `since` is unknown)."""
    return [m for m in history[_start(history, since) :] if _said(m)]


def earlier(policy: ContextPolicy, history: Sequence[Message], since: str | None) -> list[Message]:
    """What the policy adds before message `since`: nothing, the last n exchanges, or all."""
    if policy.kind not in ("recent", "full") or since is None:
        return []
    before = [m for m in history[: _start(history, since)] if _said(m)]
    if policy.kind == "full" or not before:
        return before
    users = 0
    for i in range(len(before) - 1, -1, -1):
        if before[i].role == "user":
            users += 1
            if users == policy.n:
                return before[i:]
    return before


def build_view(
    agent: Agent,
    system: Message,
    history: Sequence[Message],
    since: str | None,
    scratch: Sequence[Message],
    policy: ContextPolicy | None = None,
) -> list[Message]:
    """The full message list for the agent's next model call (`system` from `system_prompt`)."""
    head = earlier(policy, history, since) if policy is not None else []
    return [system, *head, *conversation(history, since), *scratch]
