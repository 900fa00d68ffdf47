"""The `remember` tool an agent gets when its team has a memory.

A call only notes what to remember: the memory keeps it after the run completes
(`baton.memory.hooks.after_run` reads the accepted calls back from the run's `tool_called`
events, which a supervisor's worker sub-runs share), so a run that fails, is blocked or
cancelled leaves nothing behind, and a resumed run needs no state of its own for it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, ValidationError

from baton.core.messages import ToolSpec
from baton.memory.records import Kind
from baton.runtime.blueprint import Blueprint
from baton.runtime.calls import called
from baton.runtime.kernel import Call
from baton.runtime.kernel import Kind as CallKind
from baton.runtime.plan import CallEntry, Extra
from baton.tools import error_content

if TYPE_CHECKING:
    from baton.runtime.calls import Handled
    from baton.runtime.kernel import Kernel

REMEMBER = "remember"
"""The tool's name, and its call kind."""


class RememberArgs(BaseModel):
    """What the model passes to `remember`."""

    text: str = Field(
        min_length=1, max_length=1000, description="What to remember, in one sentence."
    )
    kind: Kind = Field(
        default="fact",
        description=(
            "fact: something about the user; preference: what the user prefers; lesson: "
            "something you learned about doing your work"
        ),
    )


def remember_spec() -> ToolSpec:
    """The tool the model sees."""
    return ToolSpec(
        name=REMEMBER,
        description=(
            "Remember something for later conversations with this user: a fact the user "
            "gave, a preference, or a lesson about your work. Never secrets (passwords, keys, "
            "card numbers). Kept once the conversation completes."
        ),
        parameters=RememberArgs.model_json_schema(),
    )


def invalid(args: object) -> str | None:
    """Why `args` are not a `remember` call's arguments; None when they are."""
    try:
        RememberArgs.model_validate(args)
    except ValidationError as exc:
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
    return None


async def handle_remember(kernel: Kernel, call: Call) -> Handled:
    """Answer a `remember` call: noted (kept after the run), or why not."""
    started = time.perf_counter()
    args = call.pending.args or {}
    error = invalid(args)
    if error is not None:
        error = f"invalid arguments: {error}"
    elif call.run.user_id is None:
        error = (
            "not remembered: this conversation has no user id, and nothing is kept about "
            "anonymous users"
        )
    content = (
        json.dumps({"ok": True, "note": "noted: it is remembered once this conversation completes"})
        if error is None
        else error_content(error)
    )
    call.turn.tools_called += 1
    called(
        kernel,
        call.run,
        call.turn,
        call.pending,
        arguments=args,
        ok=error is None,
        error=error,
        latency_ms=(time.perf_counter() - started) * 1000,
        result_chars=len(content),
    )
    return content, None


def remember_blueprint(agents: Sequence[str]) -> Blueprint:
    """`remember` for each of `agents`, and its call kind."""
    if not agents:
        return Blueprint()
    extra = Extra(REMEMBER, CallEntry(REMEMBER), remember_spec(), what="the memory's remember tool")
    return Blueprint(
        entries={a: (extra,) for a in agents}, kinds={REMEMBER: CallKind(handle_remember)}
    )
