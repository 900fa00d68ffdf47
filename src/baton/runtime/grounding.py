"""Grounded ids and slot provenance: what a model writes must come from somewhere.

Small models invent plausible order ids. Before a tool runs (or a hand-off carries state), each
argument that looks like an identifier — by its name (`order_id`, `invoice_no`, ...) or its
shape (letters and digits, no spaces, e.g. `ORD-202607-99`) — must occur in the agent's context
view: the user's words, the known facts, the payload or an earlier tool result.

A hand-off's state slot, id-like or not, becomes a known fact only when its value was produced
by the user or a tool, or was already known (`Provenance`): `{"role": "admin"}` that only the
model wrote is the source's claim, not a fact.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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


# ------------------------------------------------------------------ slot provenance
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_NUMBER = re.compile(r"(?<![\d.])(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(?:\.\d+)?")
_WHITESPACE = re.compile(r"\s+")
_SEPARATORS = re.compile(r"(?<=\d)[\s-]+(?=\d)")
"""Spaces and dashes between digits: `138 0013 8000` and `138-0013-8000` read `13800138000`."""
_SEP = "\x00"
"""Between two messages of a provenance text: not whitespace, so no value spans two."""


def _norm(text: str) -> str:
    """Casefolded, runs of whitespace made one space, ends stripped."""
    return " ".join(text.casefold().split())


def _leaves(key: str, value: Any) -> Iterator[tuple[str, Any]]:
    """(nearest key, scalar) for every leaf of `value` (dict values, list items)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(str(k), v)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(key, item)
    else:
        yield key, value


def _occurs(needle: str, text: str) -> bool:
    """`needle` occurs in `text` with ASCII word edges where it starts or ends with a letter
    or a digit (`admin` is not in `administrator`, `ORD-1` not in `ORD-12`); CJK text needs
    no spaces (`W2378156` is in `订单W2378156已发货`)."""
    i = text.find(needle)
    if i < 0:
        return False
    head, tail = needle[0] in _ALNUM, needle[-1] in _ALNUM
    if not (head or tail):
        return True
    size, end = len(needle), len(text)
    while i >= 0:
        j = i + size
        if (not head or i == 0 or text[i - 1] not in _ALNUM) and (
            not tail or j == end or text[j] not in _ALNUM
        ):
            return True
        i = text.find(needle, i + 1)
    return False


class Provenance:
    """Where a hand-off's state values may come from: the user's messages, the results of
    tools that ran, and the values already known (the session's state, the payload the
    source received). The texts are built on first use, once per check, like `Shown`'s.

    A model's own text (its replies, the arguments it wrote, a kernel refusal quoting them)
    and the system prompt are no provenance: a value found only there is a claim.
    """

    __slots__ = (
        "_known",
        "_leafs",
        "_messages",
        "_numbers",
        "_result",
        "_spaced",
        "_squeezed",
        "_text",
        "_tool",
    )

    def __init__(
        self,
        messages: Sequence[Message],
        known: Sequence[Mapping[str, Any]],
        tool_result: Callable[[Message], bool],
    ) -> None:
        """`tool_result(m)`: the tool message `m` is what a tool returned (not a hand-off's
        answer, a built-in's or an error)."""
        self._messages = messages
        self._known = known
        self._result = tool_result
        self._leafs: set[Any] | None = None
        self._text: str | None = None
        self._tool = ""
        self._spaced: str | None = None
        self._squeezed: str | None = None
        self._numbers: set[int | float] | None = None

    def unproven(self, state: Mapping[str, Any]) -> list[str]:
        """The keys of `state` whose values neither the user nor a tool produced (and that
        were not already known)."""
        return [key for key, value in state.items() if not self.proves(key, value)]

    def proves(self, key: str, value: Any) -> bool:
        """The slot was known as it is, or every leaf of `value` is known, said by the user
        or returned by a tool."""
        for known in self._known:
            if key in known and type(known[key]) is type(value) and known[key] == value:
                return True
        return all(self._leaf(k, v) for k, v in _leaves(key, value))

    def _leaf(self, key: str, value: Any) -> bool:
        if value is None:
            return True  # claims nothing
        if type(value) is bool:
            return self._flag(key, value)
        if isinstance(value, (int, float)):
            return abs(value) in self.known_values or abs(value) in self.numbers
        return self._string(str(value))

    def _string(self, value: str) -> bool:
        v = _norm(value)
        if not v or v in self.known_values:
            return True
        text = self.spaced if " " in v else self.text
        if _occurs(v, text) or (v[0] == "#" and len(v) > 1 and _occurs(v[1:], text)):
            return True  # (`#W2378156` when the user wrote `W2378156`)
        if sum(c.isdigit() for c in v) >= 4:  # a phone or an id written with other separators
            squeezed = _SEPARATORS.sub("", v.lstrip("#"))
            return bool(squeezed) and _occurs(squeezed, self.squeezed)
        return False

    def _flag(self, key: str, value: bool) -> bool:
        """A yes/no is a fact when it was known under the same key, or a tool's result states
        it under that key (`"refund_approved": true`). The word `true` alone proves nothing
        (every `{"ok": true}` has it), and the user's words never set one."""
        name = key.casefold()
        if (name, value) in self.known_values:
            return True
        returned, word = self.tool_text, "true" if value else "false"
        if word not in returned or name not in returned:
            return False
        stated = rf"(?<![\w])[\"']?{re.escape(name)}[\"']?\s*[:=]\s*{word}(?![\w])"
        return re.search(stated, returned) is not None

    @property
    def known_values(self) -> set[Any]:
        """Leaves already known: normalised strings, numbers, (key, bool) pairs."""
        if self._leafs is None:
            leafs: set[Any] = set()
            for known in self._known:
                for key, value in known.items():
                    for k, v in _leaves(key, value):
                        if type(v) is bool:
                            leafs.add((k.casefold(), v))
                        elif isinstance(v, (int, float)):
                            leafs.add(abs(v))
                        elif v is not None:
                            leafs.add(_norm(str(v)))
            self._leafs = leafs
        return self._leafs

    @property
    def text(self) -> str:
        """The user's messages, then the tools' results, casefolded."""
        if self._text is None:
            self._text = self._read()
        return self._text

    @property
    def tool_text(self) -> str:
        """The tools' results, casefolded."""
        if self._text is None:
            self._text = self._read()
        return self._tool

    def _read(self) -> str:
        """The full text; sets `_tool` on the way."""
        said: list[str] = []
        returned: list[str] = []
        for m in self._messages:
            if not m.content:
                continue
            if m.role == "user":
                said.append(m.content)
            elif m.role == "tool" and self._result(m):
                returned.append(m.content)
        self._tool = _SEP.join(returned).casefold()
        return _SEP.join(said).casefold() + _SEP + self._tool

    @property
    def spaced(self) -> str:
        """`text` with every run of whitespace made one space (for values with spaces)."""
        if self._spaced is None:
            self._spaced = _WHITESPACE.sub(" ", self.text)
        return self._spaced

    @property
    def squeezed(self) -> str:
        """`text` without spaces and dashes between digits (`_SEPARATORS`)."""
        if self._squeezed is None:
            self._squeezed = _SEPARATORS.sub("", self.text)
        return self._squeezed

    @property
    def numbers(self) -> set[int | float]:
        """Every number written in `text` (`1,200` is 1200; `12.50` is 12.5)."""
        if self._numbers is None:
            found: set[int | float] = set()
            for token in _NUMBER.findall(self.text):
                token = token.replace(",", "")
                found.add(float(token) if "." in token else int(token))
            self._numbers = found
        return self._numbers
