"""Repeated identical calls (seed 003 §6.1): answered from the first result, not run again.

A call of the same tool with the same arguments (compared as canonical JSON) that the same
agent already made, successfully, in the same turn gets that result back with a note naming
the first call. Only a successful result is reused: a failed call may be tried again. A tool
declared `@tool(reuse=False)` runs every time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from baton.core.errors import ParseError
from baton.core.messages import Message, ToolCall
from baton.models.parsing import parse_json_object

_FAILED = '{"ok": false'
"""How every failed call's result begins (`baton.tools.error_content`)."""


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
