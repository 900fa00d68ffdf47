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
    """The schema with `additionalProperties: false` on every object, titles dropped (a
    property named `title` stays)."""
    out = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("title"), str):
                node.pop("title")
            if node.get("type") == "object" and "properties" in node:
                node.setdefault("additionalProperties", False)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(out)
    return out


def _hoist_defs(schema: dict[str, Any], prefix: str, into: dict[str, Any]) -> dict[str, Any]:
    """`schema` without its `$defs`: each moves into `into` as `prefix + name`, refs rewritten.

    Pydantic puts a tool's nested models under the tool schema's own `$defs`, but llama.cpp's
    grammar builder resolves `#/$defs/...` against the root document, where one `oneOf` branch
    per tool has no `$defs` of its own: every tool with a nested model argument broke the
    grammar. Hoisting keeps recursive models working too (a ref stays a ref).
    """
    out = dict(schema)
    defs = out.pop("$defs", None) or {}
    names = {name: f"{prefix}{name}" for name in defs}

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = ref[len("#/$defs/") :]
                if target in names:
                    node = {**node, "$ref": f"#/$defs/{names[target]}"}
            return {k: rewrite(v) for k, v in node.items()}
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    for name, body in defs.items():
        into[names[name]] = rewrite(body)
    return {k: rewrite(v) for k, v in out.items()}


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


_JSON_CHAR = r'([^"\\\x7F\x00-\x1F]|\\["\\/bfnrt])'
"""One character of a JSON string, as a `pattern` fragment (llama.cpp's own `char` rule)."""


def starting_with(char_class: str) -> str:
    """A string `pattern` whose first character is in `char_class`, e.g. `[一-鿿]`."""
    return f"^{char_class}{_JSON_CHAR}*$"


def answer_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """An output type's schema as a grammar for the whole reply: closed, so the model writes
    only the fields the type has."""
    return _closed(schema)


def tool_call_schema(
    tools: Sequence[ToolSpec],
    final_answer: bool = True,
    final_pattern: str | None = None,
    final_schema: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`{"oneOf": [{"tool": <name>, "arguments": {...}}, ..., {"final": "..."}]}`.

    `final_pattern` constrains the answer text (e.g. `starting_with(...)` a script); the choice
    between calling a tool and answering is made before it applies, so it never biases that.
    `final_schema` (an agent's output type) makes the answer that JSON instead of a string:
    `{"final": {...}}`.
    """
    branches: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    for spec in tools:
        if spec.name.startswith("transfer_to_"):
            args = handoff_arguments(spec.parameters)
        else:
            args = _hoist_defs(_closed(spec.parameters), f"{spec.name}__", defs)
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
        final: dict[str, Any] = {"type": "string", "minLength": 1}
        if final_schema is not None:
            final = _hoist_defs(_closed(final_schema), "final__", defs)
        elif final_pattern is not None:
            final["pattern"] = final_pattern
        branches.append(
            {
                "type": "object",
                "properties": {"final": final},
                "required": ["final"],
                "additionalProperties": False,
            }
        )
    return {"oneOf": branches, "$defs": defs} if defs else {"oneOf": branches}


def schema_key(schema: dict[str, Any]) -> str:
    """A stable cache key for a schema."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))
