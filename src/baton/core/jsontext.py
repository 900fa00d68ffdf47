"""JSON text for prompts, tool results and fingerprints, from encoders built once.

`json.dumps(value, ensure_ascii=False, ...)` builds a new `JSONEncoder` on every call, and
`JSONEncoder.encode` builds a new C encoder (with a fresh circular-reference table) on every
call too: for the small dicts the kernel renders several times per run, that setup costs about
as much as the encoding. `encoder` builds the C encoder once, without the circular-reference
table; a circular value then overflows the stack instead, and is encoded again by the standard
encoder, which raises its usual `ValueError`. The output is the standard encoder's, byte for
byte. The encoders keep no state between calls, so one of each serves every caller and thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
"""The C encoder's constructor (None without the `_json` accelerator)."""


def encoder(
    default: Callable[[Any], Any] | None = None, *, sort_keys: bool = False
) -> Callable[[Any], str]:
    """`json.dumps(value, ensure_ascii=False, default=default, sort_keys=sort_keys)` as a
    function of `value` alone (separators, NaN handling and errors as `json.dumps`)."""
    slow = json.JSONEncoder(ensure_ascii=False, default=default, sort_keys=sort_keys)
    if _c_make_encoder is None:  # pragma: no cover - CPython always has `_json`
        return slow.encode
    try:  # the arguments `JSONEncoder.iterencode` passes; a private API, so checked once
        fast = _c_make_encoder(
            None,  # no circular-reference table: see the module docstring
            slow.default,
            json.encoder.encode_basestring,
            None,
            ": ",
            ", ",
            sort_keys,
            False,
            True,
        )
        if "".join(fast({"k": [1, "中"]}, 0)) != slow.encode({"k": [1, "中"]}):
            return slow.encode  # pragma: no cover - a Python whose C encoder differs
    except TypeError:  # pragma: no cover - a Python whose C encoder takes other arguments
        return slow.encode

    def encode(value: Any) -> str:
        try:
            return "".join(fast(value, 0))
        except RecursionError:  # circular (or very deep): the standard encoder's error
            return slow.encode(value)

    return encode


to_text = encoder(str)
"""`json.dumps(value, ensure_ascii=False, default=str)`: Chinese stays readable."""

to_canonical = encoder(str, sort_keys=True)
"""`to_text` with sorted keys: equal values give equal text (for fingerprints)."""

_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}
"""Line breaks `json.dumps` leaves as they are (it escapes only U+0000 to U+001F), while
`str.splitlines` and many tokenizers break lines on them."""


def to_line(value: Any) -> str:
    """`to_text(value)` that is always one line: strings quoted and escaped, every line break
    escaped, Chinese kept readable (for values a prompt quotes on a line of their own)."""
    out = to_text(value)
    return out if out.isascii() else out.translate(_LINE_BREAKS)


def copy_json(value: Any) -> Any:
    """A copy of JSON data (dicts, lists, scalars) that shares no dict or list with `value`:
    `copy.deepcopy` for the small control records a run copies at every checkpoint, without
    its memo table and per-type dispatch (several times slower on such data)."""
    if type(value) is dict:
        return {k: copy_json(v) for k, v in value.items()}
    if type(value) is list:
        return [copy_json(v) for v in value]
    return value
