"""Text-mode tool calling: render a tool catalogue and tool history as plain chat text.

Used by providers whose server or model has no native tool calling (OpenAI-compatible servers in
`tool_mode="text"`, the embedded local model). The model answers with one JSON object, which the
kernel's shared parser (`baton.models.parsing.parse_text_mode`) turns back into tool calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from baton.core.messages import Message, ToolCall, ToolSpec
from baton.core.nesting import too_deep


def tool_catalogue(tools: Sequence[ToolSpec], output_schema: dict[str, Any] | None = None) -> str:
    """The text-mode instructions: the tools, their schemas and the reply protocol (with an
    output schema, the answer is that JSON inside the `final` envelope)."""
    lines = ["You can call these tools:"]
    for spec in tools:
        desc = " ".join(spec.description.split())
        params = json.dumps(spec.parameters, ensure_ascii=False, separators=(",", ":"))
        lines.append(f"- {spec.name}: {desc}" if desc else f"- {spec.name}")
        lines.append(f"  parameters (JSON schema): {params}")
    answer = '{"final": "<answer>"}' if output_schema is None else '{"final": <answer JSON>}'
    lines += [
        "",
        "Reply with exactly one JSON object and nothing else.",
        'To call a tool: {"tool": "<name>", "arguments": {...}}',
        f"To answer the user: {answer}",
        "After a tool call you will receive its result, then reply again the same way.",
    ]
    if output_schema is not None:
        schema = json.dumps(output_schema, ensure_ascii=False, separators=(",", ":"))
        lines.append(f"The answer JSON must follow this schema: {schema}")
    return "\n".join(lines)


def _call_json(call: ToolCall) -> str:
    """A tool call as the JSON object a text-mode model would have written."""
    if not too_deep(call.arguments):  # text the parser refused as too deep is never read
        try:
            args = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            pass
        else:
            return json.dumps({"tool": call.name, "arguments": args}, ensure_ascii=False)
    name = json.dumps(call.name, ensure_ascii=False)
    return f'{{"tool": {name}, "arguments": {call.arguments}}}'  # as the model wrote it


def render_text_mode(
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    output_schema: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Chat messages without any tool fields, for servers that have no tool calling.

    The catalogue joins the system message; assistant tool calls become the JSON the model
    would have written; tool results become user messages (`Tool <name> returned: ...`).
    Consecutive messages of the same role are merged, since some chat templates require
    user and assistant turns to alternate.
    """
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []

    def add(role: str, content: str) -> None:
        if out and out[-1]["role"] == role and role != "system":
            out[-1]["content"] = f"{out[-1]['content']}\n\n{content}"
        else:
            out.append({"role": role, "content": content})

    catalogue = tool_catalogue(tools, output_schema) if tools else None
    if catalogue and (not messages or messages[0].role != "system"):
        out.append({"role": "system", "content": catalogue})
        catalogue = None
    for m in messages:
        if m.role == "system":
            content = m.content or ""
            if catalogue:
                content = f"{content}\n\n{catalogue}" if content else catalogue
                catalogue = None
            add("system", content)
        elif m.role == "tool":
            name = m.name or names.get(m.tool_call_id or "", "tool")
            add("user", f"Tool {name} returned: {m.content or ''}")
        elif m.role == "assistant" and m.tool_calls:
            for c in m.tool_calls:
                names[c.id] = c.name
            calls = [_call_json(c) for c in m.tool_calls]
            written = calls[0] if len(calls) == 1 else "[" + ", ".join(calls) + "]"
            add("assistant", f"{m.content}\n{written}" if m.content else written)
        else:
            add(m.role, m.content or "")
    return out


_MAX_DEPTH = 4
"""How deep `json_shape` follows nested objects (a recursive model ends in `{...}`)."""


def json_shape(schema: dict[str, Any]) -> str:
    """A compact picture of the JSON a schema describes: `{"city": string, "days"?: [integer]}`
    (`?`: optional)."""
    return _shape(schema, schema.get("$defs", {}), 0)


def _shape(node: Any, defs: dict[str, Any], depth: int) -> str:
    if not isinstance(node, dict):
        return "any"
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        if depth >= _MAX_DEPTH:
            return "{...}"
        return _shape(defs.get(ref[len("#/$defs/") :]), defs, depth + 1)
    if "const" in node:
        return json.dumps(node["const"], ensure_ascii=False)
    if "enum" in node:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in node["enum"])
    for key in ("anyOf", "oneOf"):
        if key in node:
            return " | ".join(_shape(v, defs, depth) for v in node[key])
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        props = node.get("properties") or {}
        if not props:
            extra = node.get("additionalProperties")
            value = _shape(extra, defs, depth + 1) if isinstance(extra, dict) else "any"
            return f"{{string: {value}}}"
        if depth >= _MAX_DEPTH:
            return "{...}"
        required = set(node.get("required", ()))
        fields = [
            f"{json.dumps(k, ensure_ascii=False)}{'' if k in required else '?'}: "
            f"{_shape(v, defs, depth + 1)}"
            for k, v in props.items()
        ]
        return "{" + ", ".join(fields) + "}"
    if kind == "array":
        if "prefixItems" in node:
            return "[" + ", ".join(_shape(v, defs, depth + 1) for v in node["prefixItems"]) + "]"
        return f"[{_shape(node.get('items'), defs, depth + 1)}, ...]"
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    return str(kind) if kind else "any"
