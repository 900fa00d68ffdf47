"""Constrained decoding for tool calls: one `oneOf` branch per tool plus a final answer.

With a single flat schema a 1.5B model invented order ids and mixed tools' arguments; one
object schema per tool (its own arguments, `additionalProperties: false`) stopped that. Every
reply is then valid JSON that names a real tool with arguments of the right shape.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from baton.core.messages import ToolSpec

_LONG_TEXT = 160
"""Cap on free-text fields of hand-offs (reason, objective) so small models stay brief."""


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with `additionalProperties: false` on every object, titles dropped."""
    out = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("title", None)
            if node.get("type") == "object" and "properties" in node:
                node.setdefault("additionalProperties", False)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(out)
    return out


def handoff_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """The lean hand-off arguments a small model writes: reason, objective and state slots."""
    props = schema.get("properties", {})
    lean = {k: props[k] for k in ("reason", "objective", "state") if k in props}
    for k in ("reason", "objective"):
        if k in lean:
            lean[k] = {"type": "string", "minLength": 1, "maxLength": _LONG_TEXT}
    if "state" in lean:
        lean["state"] = {
            "type": "object",
            "additionalProperties": {"type": ["string", "number", "boolean"]},
        }
    return {
        "type": "object",
        "properties": lean,
        "required": [k for k in ("reason", "objective") if k in lean],
        "additionalProperties": False,
    }


def tool_call_schema(tools: Sequence[ToolSpec], final_answer: bool = True) -> dict[str, Any]:
    """`{"oneOf": [{"tool": <name>, "arguments": {...}}, ..., {"final": "..."}]}`."""
    branches: list[dict[str, Any]] = []
    for spec in tools:
        if spec.name.startswith("transfer_to_"):
            args = handoff_arguments(spec.parameters)
        else:
            args = _closed(spec.parameters)
            args.setdefault("type", "object")
            args.setdefault("properties", {})
        branches.append(
            {
                "type": "object",
                "properties": {"tool": {"const": spec.name}, "arguments": args},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
        )
    if final_answer:
        branches.append(
            {
                "type": "object",
                "properties": {"final": {"type": "string", "minLength": 1}},
                "required": ["final"],
                "additionalProperties": False,
            }
        )
    return {"oneOf": branches}


def schema_key(schema: dict[str, Any]) -> str:
    """A stable cache key for a schema."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))
