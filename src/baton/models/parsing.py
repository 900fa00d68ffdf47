"""One robust parser for model output: fences, json-repair, text-mode tool calls.

Every provider's output goes through here, so scripted, local and remote models behave alike
(seed 001 §6.1): strip Markdown code fences, try strict JSON, then `json-repair`; what still
fails becomes a `ParseError` whose message the kernel quotes back to the model in one re-ask.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from baton.core.errors import ParseError
from baton.core.messages import ToolCall

_FENCE_RE = re.compile(r"```(?:json|JSON)?\s*([\s\S]*?)```")


def strip_fences(text: str) -> str:
    """The content of the first Markdown code fence, or the text itself, trimmed."""
    m = _FENCE_RE.search(text)
    return (m.group(1) if m else text).strip()


def parse_json_object(raw: str | None) -> dict[str, Any]:
    """Parse a JSON object leniently; raise `ParseError` quoting the strict parser's error."""
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        first_error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        value = _repair(raw, first_error)
    if not isinstance(value, dict):
        raise ParseError(
            f"expected a JSON object with the arguments, got {type(value).__name__}: {raw[:200]!r}"
        )
    return value


def _repair_loads(text: str) -> Any:
    """`json_repair.loads`, imported on the first malformed output: well-formed output (the
    usual case) never needs it, and importing it took 15-25 ms of `import baton`."""
    import json_repair

    return json_repair.loads(text)


def _repair(raw: str, first_error: str) -> Any:
    text = strip_fences(raw)
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidate = text[start : end + 1]
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            pass
    else:
        candidate = text
    repaired = _repair_loads(candidate)
    if isinstance(repaired, dict) and (repaired or candidate.strip() in ("{}", "")):
        return repaired
    raise ParseError(f"arguments are not valid JSON ({first_error}): {raw[:200]!r}")


@dataclass
class TextModeResult:
    """Tool calls and/or answer found in a text-mode model's output."""

    text: str | None
    calls: list[ToolCall]


_NAME_KEYS = ("tool", "name", "function", "tool_name")
_ARGS_KEYS = ("arguments", "args", "parameters", "input")
_ANSWER_KEYS = ("final", "answer", "final_answer", "response", "reply")


def parse_text_mode(text: str | None, tool_names: set[str]) -> TextModeResult:
    """Find tool calls written as JSON in text: `{"tool": "x", "arguments": {...}}` or a list.

    A JSON object with an answer key (`final`, `answer`, ...) is the final answer. Anything that
    is not JSON is plain text. An object naming a tool that does not exist is still returned as
    a call, so the kernel can answer it with an "unknown tool" error instead of ignoring it.
    """
    if not text or ("{" not in text):
        return TextModeResult(text=text, calls=[])
    body = strip_fences(text)
    start = min((i for i in (body.find("{"), body.find("[")) if i != -1), default=-1)
    if start == -1:
        return TextModeResult(text=text, calls=[])
    try:
        value = json.loads(body[start:])
    except json.JSONDecodeError:
        value = _repair_loads(body[start:])
    items = value if isinstance(value, list) else [value]
    calls: list[ToolCall] = []
    answer: str | None = None
    for item in items:
        if not isinstance(item, dict):
            continue
        name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
        if name is not None and (name in tool_names or any(k in item for k in _ARGS_KEYS)):
            args: Any = next((item[k] for k in _ARGS_KEYS if k in item), {})
            args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            calls.append(ToolCall(name=name, arguments=args_text))
            continue
        for k in _ANSWER_KEYS:
            if isinstance(item.get(k), str):
                answer = item[k]
                break
    if not calls and answer is None:
        return TextModeResult(text=text, calls=[])
    return TextModeResult(text=answer, calls=calls)
