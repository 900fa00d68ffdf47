"""JSON text for prompts and fingerprints, from encoders built once.

`json.dumps(value, ensure_ascii=False, ...)` builds a new `JSONEncoder` on every call, which
costs about as much as encoding a small dict; the kernel renders a few per model call. These
encoders keep no state between calls, so one of each serves every caller and thread.
"""

from __future__ import annotations

import json
from typing import Any

_TEXT = json.JSONEncoder(ensure_ascii=False, default=str)
_CANONICAL = json.JSONEncoder(ensure_ascii=False, default=str, sort_keys=True)


def to_text(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, default=str)`: Chinese stays readable."""
    return _TEXT.encode(value)


def to_canonical(value: Any) -> str:
    """`to_text` with sorted keys: equal values give equal text (for fingerprints)."""
    return _CANONICAL.encode(value)
