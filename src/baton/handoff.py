"""Hand-off tools: one `transfer_to_<agent>` tool per permitted target (seed 000 §3.1)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from baton.agents import Agent
from baton.core.messages import ToolSpec
from baton.core.payload import HandoffArgs

HANDOFF_PREFIX = "transfer_to_"


def handoff_tool_name(target: str) -> str:
    """The tool name a model calls to pass the baton to `target`."""
    return HANDOFF_PREFIX + target


def handoff_target(tool_name: str) -> str | None:
    """The target named by a `transfer_to_<target>` tool name, or None for ordinary tools."""
    if tool_name.startswith(HANDOFF_PREFIX):
        return tool_name[len(HANDOFF_PREFIX) :]
    return None


@lru_cache(maxsize=1)
def handoff_parameters() -> dict[str, Any]:
    """JSON schema of the hand-off arguments (the same for every target)."""
    schema = HandoffArgs.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


HUMAN_DESCRIPTION = (
    "Hand the conversation to a human colleague, with everything so far. Use it when the user "
    "asks for a person, or when no specialist can handle the request (legal matters, "
    "complaints about staff, anything outside the desk's remit)."
)


def human_spec() -> ToolSpec:
    """The `transfer_to_human` tool: escalate to the human queue (`handoffs=["human"]`)."""
    return ToolSpec(
        name=handoff_tool_name("human"),
        description=HUMAN_DESCRIPTION,
        parameters=handoff_parameters(),
    )


def handoff_spec(target: Agent) -> ToolSpec:
    """The tool a model sees for handing the baton to `target`."""
    parts = [f"Hand the baton to {target.name}."]
    if target.description:
        parts.append(f"It handles: {target.description}")
    if target.not_for:
        parts.append(f"Not for: {target.not_for}")
    parts.append(
        "Call it when the request belongs there; put ids and facts the user gave into `state`."
    )
    return ToolSpec(
        name=handoff_tool_name(target.name),
        description=" ".join(parts),
        parameters=handoff_parameters(),
    )


TRANSFER_BACK = "transfer_back"
"""Built-in hand-off to whoever handed the baton over (`Agent(transfer_back=True)`)."""


def transfer_back_spec() -> ToolSpec:
    """The `transfer_back` tool: return the baton to the agent that handed it over."""
    return ToolSpec(
        name=TRANSFER_BACK,
        description=(
            "Hand the baton back to the agent that handed it to you, when your part is done "
            "or the request is not yours. Say in `completed_steps` what you did."
        ),
        parameters=handoff_parameters(),
    )


FETCH_HISTORY = "fetch_history"
"""Built-in tool: earlier turns of the conversation from the store, on demand."""


def fetch_history_spec() -> ToolSpec:
    """The `fetch_history(ref=None, query=None, limit=5)` tool offered to receivers (and to
    the holder in a session with turns before the loaded window, `baton.runtime.rolling`)."""
    return ToolSpec(
        name=FETCH_HISTORY,
        description=(
            "Read earlier turns of this conversation (what the user and the desk said before "
            "you held the baton, or before the turns you are shown). `query` keeps only turns "
            "about it (searching the whole conversation); `limit` caps how many come back; "
            "`ref` (optional) is the hand-off's history reference."
        ),
        parameters={
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "The hand-off's history reference."},
                "query": {"type": "string", "description": "Words the turns should contain."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
            },
            "required": [],
            "additionalProperties": False,
        },
    )
