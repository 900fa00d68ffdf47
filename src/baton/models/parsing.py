"""One robust parser for model output: fences, json-repair, text-mode tool calls.

Every provider's output goes through here, so scripted, local and remote models behave alike
(seed 001 §6.1): strip Markdown code fences, try strict JSON, then `json-repair`; what still
fails becomes a `ParseError` whose message the kernel quotes back to the model in one re-ask.

A repair may fix syntax, never invent a value: text that was cut off (it ends inside a string,
with brackets still open, or after a `:` or `,`) and a repair that fills in or drops content
(`{"order_id": }` -> `order_id=""`, a word or string that vanished) are `ParseError`s too, so the
model is asked again instead of a tool running with a guessed argument.

JSON nested deeper than `MAX_JSON_DEPTH` levels is a `ParseError` too, found by a cheap scan
before any recursive parser sees the text (`baton.core.nesting`): thousands of `[[[` would
overflow the stack of `json.loads`, `json-repair` and pydantic alike.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from baton.core.errors import ParseError
from baton.core.messages import ToolCall
from baton.core.nesting import MAX_JSON_DEPTH, too_deep

_FENCE_RE = re.compile(r"```(?:json|JSON)?\s*([\s\S]*?)```")


def strip_fences(text: str) -> str:
    """The content of the first Markdown code fence, or the text itself, trimmed."""
    m = _FENCE_RE.search(text)
    return (m.group(1) if m else text).strip()


def parse_json_object(raw: str | None) -> dict[str, Any]:
    """Parse a JSON object leniently; raise `ParseError` quoting the strict parser's error.

    Empty text is an empty object (a call without arguments). Malformed text is repaired only
    when nothing is cut off and the repair keeps every key, word and string of the text."""
    if raw is None or not raw.strip():
        return {}
    if too_deep(raw):
        raise ParseError(
            f"arguments nest objects or lists more than {MAX_JSON_DEPTH} levels deep, the "
            f"limit for tool-call arguments; send them with at most {MAX_JSON_DEPTH} levels: "
            f"{_quote(raw)}"
        )
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        first_error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        value = _repair(raw, first_error)
    if not isinstance(value, dict):
        raise ParseError(
            f"expected a JSON object with the arguments, got {type(value).__name__}: {_quote(raw)}"
        )
    return value


def parse_json_answer(raw: str | None) -> Any:
    """Parse a final answer that must be JSON (an agent's output type) leniently; raise
    `ParseError` saying what is wrong, for the kernel to quote in its re-ask.

    Strict JSON first; then the first code fence's content, and the text from its first `{`
    or `[` to the matching last bracket (prose around the JSON). Malformed JSON is repaired
    only when nothing is cut off and the repair keeps every key, word and string, as for
    tool-call arguments: a value is never guessed."""
    if raw is None or not raw.strip():
        raise ParseError("the answer is empty; reply with the JSON only")
    if too_deep(raw):
        raise ParseError(
            f"the answer nests objects or lists more than {MAX_JSON_DEPTH} levels deep, the "
            f"limit for JSON from a model; reply with at most {MAX_JSON_DEPTH} levels: "
            f"{_quote(raw)}"
        )
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        first_error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    text = strip_fences(raw)
    candidate = _outer_json(text)
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        pass
    cut = scan_json(candidate).cut
    if cut is not None:
        raise ParseError(
            f"the answer is not valid JSON ({first_error}): it is cut off ({cut}), and a "
            f"repair would have to guess the rest: {_quote(raw)}"
        )
    repaired = _repair_loads(candidate)
    if not isinstance(repaired, (dict, list)) or (
        not repaired and candidate.strip() not in ("{}", "[]")
    ):
        raise ParseError(f"the answer is not valid JSON ({first_error}): {_quote(raw)}")
    lost = _lost_content(candidate, repaired)
    if lost is not None:
        raise ParseError(
            f"the answer is not valid JSON ({first_error}) and repairing it would {lost}: "
            f"{_quote(raw)}"
        )
    return repaired


def _outer_json(text: str) -> str:
    """`text` from its first `{` or `[` to the last matching closer (or `text` itself)."""
    starts = [i for i in (text.find("{"), text.find("[")) if i != -1]
    if not starts:
        return text
    start = min(starts)
    end = text.rfind("}" if text[start] == "{" else "]")
    return text[start : end + 1] if end > start else text[start:]


def _repair_loads(text: str) -> Any:
    """`json_repair.loads`, imported on the first malformed output: well-formed output (the
    usual case) never needs it, and importing it took 15-25 ms of `import baton`."""
    import json_repair

    return json_repair.loads(text)


def _repair(raw: str, first_error: str) -> Any:
    text = strip_fences(raw)
    scan = scan_json(text)
    if scan.cut is not None:
        raise ParseError(
            f"arguments are not valid JSON ({first_error}): they are cut off ({scan.cut}), "
            f"and a repair would have to guess the rest: {_quote(raw)}"
        )
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
        lost = _lost_content(candidate, repaired)
        if lost is not None:
            raise ParseError(
                f"arguments are not valid JSON ({first_error}) and repairing them would "
                f"{lost}: {_quote(raw)}"
            )
        return repaired
    raise ParseError(f"arguments are not valid JSON ({first_error}): {_quote(raw)}")


def _quote(raw: str) -> str:
    """The model's text for an error message: short text whole, long text by its two ends
    (a cut-off call is cut at the end)."""
    if len(raw) <= 200:
        return repr(raw)
    return f"{raw[:140]!r} ... {raw[-60:]!r}"


@dataclass
class JsonScan:
    """What a light scan of JSON-like text found (see `scan_json`)."""

    cut: str | None
    """Why the text looks cut off, or None."""
    strings: list[str]
    """The quoted strings inside brackets, unescaped where possible."""
    words: list[str]
    """The bare words inside brackets (unquoted keys and values), keywords left out."""


_KEYWORDS = frozenset({"true", "false", "null", "True", "False", "None"})
_WORD_RE = re.compile(r"(?<![\w.+-])[A-Za-z_][\w-]*")
_OPENERS = {"{": "}", "[": "]"}
_VALUE_START = "{[,:"
"""A single quote opens a string only where a key or value starts (after one of these), so
an apostrophe in a bare word or in prose is not a string."""


def scan_json(text: str) -> JsonScan:
    """Scan JSON-like text (double or single quotes) for brackets, strings and bare words.

    Strings and words count only inside brackets: text around the JSON is prose. The text is
    cut off when it ends inside a string or with brackets open, or after a `:` or `,`."""
    stack: list[str] = []
    strings: list[str] = []
    words: list[str] = []
    quote: str | None = None  # the quote of the string we are in
    begin = 0  # where that string's content began
    bare_from = 0  # where the text outside strings, inside brackets, began
    previous = ""  # the last non-space character outside strings
    i = 0
    while i < len(text):
        ch = text[i]
        if quote is not None:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                strings.append(_unquote(text[begin:i], quote))
                quote, previous, bare_from = None, ch, i + 1
        elif stack and (ch == '"' or (ch == "'" and previous in _VALUE_START)):
            words += _WORD_RE.findall(text[bare_from:i])
            quote, begin = ch, i + 1
        elif ch in _OPENERS:
            if stack:
                words += _WORD_RE.findall(text[bare_from:i])
            stack.append(_OPENERS[ch])
            bare_from = i + 1
        elif stack and ch == stack[-1]:
            words += _WORD_RE.findall(text[bare_from:i])
            stack.pop()
            bare_from = i + 1
        if quote is None and not ch.isspace():
            previous = ch
        i += 1
    return JsonScan(_cut(quote, stack, previous), strings, [w for w in words if w not in _KEYWORDS])


def _cut(quote: str | None, stack: list[str], last: str) -> str | None:
    if quote is not None:
        return "the text ends inside a string"
    if stack:
        closers = " ".join(reversed(stack))
        after = f" after {last!r}" if last in (":", ",") else ""
        return f"the text ends{after} with {len(stack)} bracket(s) still open: {closers} missing"
    if last in (":", ","):
        return f"the text ends after {last!r}"
    return None


def _unquote(body: str, quote: str) -> str:
    """A quoted string's content as the repair would read it (escapes decoded)."""
    if quote == "'":
        body = body.replace("\\'", "'").replace('"', '\\"')
    try:
        value = json.loads(f'"{body}"')
    except json.JSONDecodeError:
        return body
    return value if isinstance(value, str) else body


def _lost_content(candidate: str, repaired: Any) -> str | None:
    """What a repair of `candidate` dropped or invented, as the end of an error sentence, or
    None. Every quoted string and bare word must survive (in a key or a string), and every
    string value must come from the text (an empty one from an empty string in it)."""
    scan = scan_json(candidate)
    kept: set[str] = set()
    _collect(repaired, kept)
    for piece in [*scan.strings, *scan.words]:
        if not any(piece in k for k in kept):
            return f"drop {piece!r}"
    for path, value in _string_values(repaired, ""):
        if value == "" and "" not in scan.strings:
            return f"invent an empty value for {path!r}"
        if value not in scan.strings and value not in candidate:
            return f"invent the value {value!r} for {path!r}"
    return None


def _collect(value: Any, out: set[str]) -> None:
    """Every key and string in `value`."""
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(str(k))
            _collect(v, out)
    elif isinstance(value, list):
        for v in value:
            _collect(v, out)
    elif isinstance(value, str):
        out.add(value)


def _string_values(value: Any, path: str) -> list[tuple[str, str]]:
    """Each string value in `value` with its path (`order_id`, `items[0].sku`)."""
    if isinstance(value, dict):
        return [
            pair
            for k, v in value.items()
            for pair in _string_values(v, f"{path}.{k}" if path else str(k))
        ]
    if isinstance(value, list):
        return [pair for i, v in enumerate(value) for pair in _string_values(v, f"{path}[{i}]")]
    return [(path, value)] if isinstance(value, str) else []


@dataclass
class TextModeResult:
    """Tool calls and/or answer found in a text-mode model's output."""

    text: str | None
    calls: list[ToolCall]


_NAME_KEYS = ("tool", "name", "function", "tool_name")
_ARGS_KEYS = ("arguments", "args", "parameters", "input")
_ANSWER_KEYS = ("final", "answer", "final_answer", "response", "reply")


def parse_text_mode(
    text: str | None, tool_names: set[str], structured: bool = False
) -> TextModeResult:
    """Find tool calls written as JSON in text: `{"tool": "x", "arguments": {...}}` or a list.

    A JSON object with an answer key (`final`, `answer`, ...) is the final answer; a `final`
    holding an object or a list is that JSON, as text. Anything that is not JSON is plain text.
    An object naming a tool that does not exist is still returned as a call, so the kernel can
    answer it with an "unknown tool" error instead of ignoring it. A call in text that was cut
    off keeps that text as its arguments: `parse_json_object` rejects it, and the kernel asks
    again.

    `structured`: the answer is JSON of the agent's output type, which may itself hold keys
    such as `answer` or `name`. Only a `{"final": ...}` envelope is then unwrapped, and only an
    object naming one of `tool_names`, or with `tool` and `arguments` keys, is a call.
    """
    if not text or ("{" not in text):
        return TextModeResult(text=text, calls=[])
    from baton.models.text_calls import find_text_calls  # (it builds on this module)

    written = find_text_calls(text, tool_names, known_only=structured)
    if written is not None:  # tags, several fences or objects: every call, as written
        return TextModeResult(text=None, calls=written.calls)
    body = strip_fences(text)
    start = min((i for i in (body.find("{"), body.find("[")) if i != -1), default=-1)
    if start == -1:
        return TextModeResult(text=text, calls=[])
    if too_deep(body[start:]):  # never parsed here; a call's arguments parser refuses it
        name = _named(body, tool_names)
        if name is None:
            return TextModeResult(text=text, calls=[])
        return TextModeResult(text=None, calls=[ToolCall(name=name, arguments=body[start:])])
    cut: str | None = None
    repaired = False
    try:
        value = json.loads(body[start:])
    except json.JSONDecodeError:
        value, repaired = _repair_loads(body[start:]), True
        if scan_json(body[start:]).cut is not None:
            cut = body[start:]
    items = value if isinstance(value, list) else [value]
    calls: list[ToolCall] = []
    answer: str | None = None
    for item in items:
        if not isinstance(item, dict):
            continue
        name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
        if name is not None and (
            name in tool_names
            or (
                ("tool" in item and "arguments" in item)
                if structured
                else any(k in item for k in _ARGS_KEYS)
            )
        ):
            args: Any = next((item[k] for k in _ARGS_KEYS if k in item), {})
            args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            if cut is not None:  # never run what a repair completed: the parser rejects it
                args_text = cut
            calls.append(ToolCall(name=name, arguments=args_text))
            continue
        final = item.get("final")
        if isinstance(final, (dict, list)) and (not structured or len(item) == 1):
            answer = json.dumps(final, ensure_ascii=False)
            continue
        for k in ("final",) if structured else _ANSWER_KEYS:
            if isinstance(item.get(k), str) and (not structured or len(item) == 1):
                answer = item[k]
                break
    if not calls and answer is None:
        return TextModeResult(text=text, calls=[])
    # a typed answer is taken from a repair only when it kept every value as written;
    # otherwise the text stays whole, and the kernel's answer parser says what is wrong
    if (
        structured
        and not calls
        and repaired
        and (cut is not None or _lost_content(body[start:], value) is not None)
    ):
        return TextModeResult(text=text, calls=[])
    return TextModeResult(text=answer, calls=calls)


_NAMED_RE = re.compile(r'"(?:tool|name|function|tool_name)"\s*:\s*"([^"\\]{1,64})"')


def _named(text: str, tool_names: set[str]) -> str | None:
    """The tool that text too deep to parse calls: the first `"tool": "<name>"` (or `name`,
    ...) naming one of `tool_names`; None when there is none (the text is then an answer)."""
    return next((n for n in _NAMED_RE.findall(text) if n in tool_names), None)
