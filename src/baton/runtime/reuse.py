"""Repeated identical calls (seed 003 §6.1): answered from the first result, not run again.

A call of the same tool with the same arguments (compared as canonical JSON) that the same
agent already made, successfully, in the same turn gets that result back with a note naming
the first call. Only a successful result is reused: a failed call may be tried again. A tool
declared `@tool(reuse=False)` runs every time.

A model that repeats a call has not taken its result in (small local models loop on one
search until `max_iterations` trips): the model call right after a reused result is not
offered that tool (`spent`), so it answers from what it has or does something else; the
tool is offered again after that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from baton.core.errors import ParseError
from baton.core.messages import Message, ToolCall
from baton.models.parsing import parse_json_object

_FAILED = '{"ok": false'
"""How every failed call's result begins (`baton.tools.error_content`)."""


NOTE = "[same call as {first}: result reused]"
"""What a reused result starts with (then a line end and the first call's result)."""
_NOTED = re.compile(r"^\[same call as ([^\s:\]]+): result reused\]\n")


def spent(scratch: Sequence[Message]) -> frozenset[str]:
    """The tools whose calls in the turn's latest response (the end of `scratch`) were
    answered from an earlier identical call: not offered to the next model call of the turn.
    A result only counts when the call it names is an earlier one of the turn, so no tool's
    own text can withhold a tool."""
    last = len(scratch)
    while last > 0 and scratch[last - 1].role == "tool":
        last -= 1
    names: set[str] = set()
    for m in scratch[last:]:
        noted = _NOTED.match(m.content or "")
        if noted is None or m.name is None or m.name in names:
            continue
        first = noted.group(1)
        if any(x.role == "tool" and x.tool_call_id == first for x in scratch[:last]):
            names.add(m.name)
    return frozenset(names)


def canonical(args: Any) -> str:
    """One text for equal arguments, whatever their key order."""
    return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


def reusable(
    scratch: Sequence[Message], call: ToolCall, args: dict[str, Any]
) -> tuple[str, str] | None:
    """(the first call's id, its result) of an earlier successful call in `scratch` (one
    turn's) of the same tool with the same arguments, or None."""
    wanted: str | None = None
    candidates: list[str] = []
    for m in scratch:
        if m.role == "assistant" and m.tool_calls:
            for c in m.tool_calls:
                if c.name != call.name or c.id == call.id:
                    continue
                try:
                    earlier = parse_json_object(c.arguments)
                except ParseError:
                    continue
                if wanted is None:
                    wanted = canonical(args)
                if canonical(earlier) == wanted:
                    candidates.append(c.id)
        elif m.role == "tool" and m.tool_call_id in candidates:
            content = m.content or ""
            if not content.startswith(_FAILED):
                return m.tool_call_id, content
    return None
