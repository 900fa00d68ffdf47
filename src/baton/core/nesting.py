"""How deep JSON may nest: one limit, checked on the text before anything recursive reads it.

`json.loads`, `json-repair`, pydantic and every helper that walks a value recurse once per
level of objects and arrays, so text nested a few thousand levels deep (`[[[[...]]]]`, easy
for a model or a caller to send) overflows Python's stack with a `RecursionError` that would
fail the whole run. Text from a model (tool-call arguments, a typed answer) and values written
to a blackboard are therefore refused past `MAX_JSON_DEPTH` levels with an error that says so.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_JSON_DEPTH = 64
"""The deepest nesting of objects and arrays accepted in JSON from a model (tool-call
arguments, a typed answer) and in a blackboard value: `{"a": {"b": 1}}` is 2 levels deep."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
"""A double-quoted JSON string (escapes included), whose brackets are text, not nesting."""
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when objects and arrays in `text` nest more than `limit` levels deep.

    Brackets inside double-quoted strings do not count. Text with at most `limit` opening
    brackets cannot be deeper, which two `str.count` calls tell: the usual case costs no
    scan. Otherwise the strings and everything but brackets are dropped (in C, by `re`) and
    the brackets left are counted, stopping at the first level past the limit. Closing
    brackets never take the depth below zero, so stray ones cannot hide what follows."""
    if text.count("{") + text.count("[") <= limit:
        return False
    depth = 0
    for ch in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        if ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif depth:
            depth -= 1
    return False


def value_too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when a JSON-like value nests more than `limit` levels deep: so deep that even
    writing it as JSON overflows the stack, or deeper than `limit` in that JSON. A value that
    is not JSON at all is not judged here (whoever writes it says so)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except RecursionError:
        return True
    except (TypeError, ValueError):
        return False
    return too_deep(text, limit)
