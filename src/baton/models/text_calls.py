"""Tool calls a model wrote as text instead of in the API's tool-call fields.

Small models behind OpenAI-compatible servers (llama.cpp, Ollama, vLLM, LM Studio) often answer
a request that offers tools with the call written out: a fenced JSON block, Qwen's and Hermes'
`<tool_call>{"name": ..., "arguments": ...}</tool_call>`, Llama's
`<function=name>{...}</function>`, a bare `{"tool": ..., "arguments": ...}` object, or several of
them in one reply. Shown to the user as the answer, such a reply does nothing; `find_text_calls`
recognises them so the kernel runs them as calls (a hand-off is its `transfer_to_<agent>` call).

The recogniser is strict where it must be: an object is a call only when it names a tool
(`name`, `tool`, `function`, ...) and carries its arguments under an arguments key
(`arguments`, `args`, `parameters`, `input`): prose, and JSON that is data, stay text. The
arguments are taken exactly as written, never filled in. A call that was cut off keeps its text
as arguments, so the arguments parser rejects it and the kernel asks once more.
"""

from __future__ import annotations

import json
import re
from typing import Any

from baton.core.errors import ParseError
from baton.core.messages import ToolCall
from baton.core.nesting import too_deep
from baton.models.parsing import (
    _ARGS_KEYS,
    _NAME_KEYS,
    TextModeResult,
    parse_json_object,
    scan_json,
)

_FUNCTION_TAG_RE = re.compile(r"<function=([A-Za-z_][\w.-]*)>\s*(.*?)\s*(?:</function>|\Z)", re.S)
_CLOSERS_RE = re.compile(r"</tool_call>|```")
_WRAPPERS_RE = re.compile(r"</?tool_call>|```[A-Za-z]*")
_NAMED_RE = re.compile(
    r"""["'](?:tool|name|function|tool_name)["']\s*:\s*["']([^"'\\]{1,64})["']"""
)
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][\w.-]{0,63}")
_ENVELOPE_KEYS = frozenset({"type", "id", "index"})
"""Keys an OpenAI-style call object may carry beside its name and arguments."""
_DECODER = json.JSONDecoder()


def find_text_calls(
    text: str | None, tool_names: set[str], known_only: bool = False
) -> TextModeResult | None:
    """The tool calls written in `text`, with the prose around them as the text (None when
    there is none), or None when the text holds no call.

    A call names one of `tool_names`; with `known_only` False, an object that holds nothing but
    an identifier-like name and its arguments is a call too (the kernel then answers it as an
    unknown tool, and the model can correct itself). `known_only`: only `tool_names` count (an
    agent whose answer is JSON may answer with such keys)."""
    if not text or "{" not in text or too_deep(text):  # too deep: `parse_text_mode` names it
        return None
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    for m in _FUNCTION_TAG_RE.finditer(text):
        if m.group(1) in tool_names:
            calls.append(ToolCall(name=m.group(1), arguments=m.group(2)))
            spans.append((m.start(), m.end()))
    i = 0
    while True:
        i = _next_json(text, i, spans)
        if i == -1:
            break
        try:
            value, end = _DECODER.raw_decode(text, i)
        except (json.JSONDecodeError, RecursionError):
            cut = _cut_call(text, i, tool_names)
            if cut is not None:
                calls.append(cut)
                spans.append((i, len(text)))
                break
            i += 1
            continue
        found = _as_calls(value, tool_names, known_only)
        if found:
            calls += found
            spans.append((i, end))
        i = end
    if not calls:
        return None
    return TextModeResult(text=_prose(text, spans), calls=calls)


def _next_json(text: str, start: int, spans: list[tuple[int, int]]) -> int:
    """The next `{` or `[` at or after `start` outside the spans already taken, or -1."""
    while True:
        found = [p for p in (text.find("{", start), text.find("[", start)) if p != -1]
        if not found:
            return -1
        at = min(found)
        inside = next((e for s, e in spans if s <= at < e), None)
        if inside is None:
            return at
        start = inside


def _as_calls(value: Any, tool_names: set[str], known_only: bool) -> list[ToolCall]:
    """The calls a decoded JSON value is: one object, or a list made only of calls."""
    items = value if isinstance(value, list) else [value]
    calls = [_as_call(item, tool_names, known_only) for item in items]
    if not items or any(c is None for c in calls):
        return []
    return [c for c in calls if c is not None]


def _as_call(item: Any, tool_names: set[str], known_only: bool) -> ToolCall | None:
    """The call an object is, or None when it is not one."""
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):  # OpenAI's own shape, written out as text
        item = item["function"]
    name_key = next((k for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
    args_key = next((k for k in _ARGS_KEYS if k in item), None)
    if name_key is None or args_key is None:
        return None
    name, args = item[name_key], item[args_key]
    if name not in tool_names:
        bare = set(item) - {name_key, args_key} <= _ENVELOPE_KEYS
        if known_only or not bare or not _IDENTIFIER_RE.fullmatch(name):
            return None
    if args is None:
        args = {}
    arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return ToolCall(name=name, arguments=arguments)


def _cut_call(text: str, start: int, tool_names: set[str]) -> ToolCall | None:
    """A call that was cut off (or is not valid JSON) at `start`, its text kept as arguments
    for the parser to reject, when it names one of `tool_names`; else None."""
    closer = _CLOSERS_RE.search(text, start)
    body = text[start : closer.start() if closer else len(text)].strip()
    if scan_json(body).cut is None and closer is None:
        return None
    name = next((n for n in _NAMED_RE.findall(body) if n in tool_names), None)
    if name is None:
        return None
    if scan_json(body).cut is None:  # malformed, not cut: a repair that loses nothing counts
        try:
            repaired = _as_call(parse_json_object(body), tool_names, True)
        except ParseError:
            repaired = None
        if repaired is not None:
            return repaired
    return ToolCall(name=name, arguments=body)


def _prose(text: str, spans: list[tuple[int, int]]) -> str | None:
    """`text` without the calls and the tags or fences that wrapped them."""
    kept, at = [], 0
    for s, e in sorted(spans):
        kept.append(text[at:s])
        at = max(at, e)
    kept.append(text[at:])
    prose = _WRAPPERS_RE.sub("", "".join(kept)).strip()
    return prose or None
