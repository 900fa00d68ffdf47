"""Grounded ids: an id a model writes must come from somewhere.

Small models invent plausible order ids. Before a tool runs (or a hand-off carries state), each
argument that looks like an identifier — by its name (`order_id`, `invoice_no`, ...) or its
shape (letters and digits, no spaces, e.g. `ORD-202607-99`) — must occur in the agent's context
view: the user's words, the known facts, the payload or an earlier tool result.

Whether a hand-off's state slot is a fact at all is `baton.runtime.provenance`'s question.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from baton.core.messages import Message

_ID_KEY = re.compile(r"(?:^|_)(?:id|ids|no|number|code|sku)$", re.IGNORECASE)
_ID_SHAPE = re.compile(r"^(?=[^\s]*\d)(?=[^\s]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9_.:#/-]{3,63}$")


def _id_string(key: str, value: str) -> str | None:
    """`value`, stripped, when it reads as an id under `key`; else None."""
    v = value.strip()
    return v if v and (_ID_KEY.search(key) or _ID_SHAPE.match(v)) and len(v) <= 64 else None


def _id_values(key: str, value: Any) -> Iterator[str]:
    if isinstance(value, str):
        v = _id_string(key, value)
        if v:
            yield v
    elif isinstance(value, int) and not isinstance(value, bool) and _ID_KEY.search(key):
        yield str(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _id_values(key, item)


def context_text(messages: Iterable[Message]) -> str:
    """Everything the agent was shown, casefolded, for membership checks."""
    return "\n".join(m.content or "" for m in messages).casefold()


def ungrounded(args: Mapping[str, Any], shown: str) -> list[tuple[str, str]]:
    """(key, value) pairs of id-like arguments that do not occur in `shown` (casefolded)."""
    bad: list[tuple[str, str]] = []
    for key, value in args.items():
        if type(value) is str:  # the usual case, without `_id_values`'s generator
            v = _id_string(key, value)
            if v and v.casefold() not in shown:
                bad.append((key, v))
            continue
        for v in _id_values(key, value):
            if v.casefold() not in shown:
                bad.append((key, v))
    return bad


def id_like(key: str, value: Any) -> bool:
    """True when `value` reads as an identifier under `key` (what a tool records by default)."""
    if isinstance(value, str):
        return _id_string(key, value) is not None
    return isinstance(value, int) and not isinstance(value, bool) and bool(_ID_KEY.search(key))
