"""The request behind the `summary` context policy: a short hand-over note written by a model."""

from __future__ import annotations

from collections.abc import Sequence

from baton.core.messages import Message
from baton.models.base import ModelRequest

SUMMARY_AGENT = "summariser"
"""`ModelRequest.agent` of summary requests (scripted models can answer them by this name)."""

INSTRUCTIONS = (
    "You write hand-over notes between colleagues at a service desk. Summarise the conversation "
    "below for the colleague who takes it over: what the user wants, every id, amount and fact "
    "the user gave, what was already done or found, and what is still open. At most 80 words, "
    "plain sentences, in the language the user writes."
)
_PER_MESSAGE = 600
_BUDGET = 6000
"""Characters of transcript sent at most (the most recent ones)."""


def transcript(history: Sequence[Message]) -> str:
    """The conversation as labelled lines, tool results clipped, newest kept within budget."""
    lines: list[str] = []
    for m in history:
        text = (m.content or "").strip()
        if m.role == "user" and text:
            lines.append(f"User: {text[:_PER_MESSAGE]}")
        elif m.role == "assistant":
            if m.tool_calls:
                calls = ", ".join(f"{c.name}({c.arguments[:200]})" for c in m.tool_calls)
                lines.append(f"{m.agent or 'agent'} called: {calls}")
            elif text:
                lines.append(f"{m.agent or 'agent'}: {text[:_PER_MESSAGE]}")
        elif m.role == "tool" and text:
            lines.append(f"Result of {m.name}: {text[:_PER_MESSAGE]}")
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line) + 1
        if size > _BUDGET:
            break
        kept.append(line)
    return "\n".join(reversed(kept))


def summary_request(history: Sequence[Message]) -> ModelRequest:
    """A tool-less request asking for the hand-over summary of `history`."""
    return ModelRequest(
        agent=SUMMARY_AGENT,
        messages=[
            Message(role="system", content=INSTRUCTIONS),
            Message(role="user", content=transcript(history)),
        ],
    )
