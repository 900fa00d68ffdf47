"""Slot provenance: where a hand-off's state values come from, and which of them are facts.

A hand-off's state slot, id-like or not, becomes session state only when its value is

- already known as it is (the session's state, or the payload the source received): it keeps
  the source it had;
- a field a tool returned: the *whole* value of a field of a structured (JSON) result of one of
  the team's tools that succeeded, or a plain-text result as a whole (`tool`);
- the user's own words: it occurs in what the user wrote, as a whole word or number; CJK text
  needs no spaces (`user`).

Anything else is the source's claim (`HandoffPayload.unverified`): shown to the receiver as
such, never a known fact, never session state. In particular a value merely found *inside* free
text a tool returned (a web page, a knowledge-base passage, an e-mail, a ticket's description)
is quoted data: `{"page": "... refund_limit: 99999 ..."}` proves no `refund_limit`. A yes/no is
a fact only when it was known under the same key or a tool's result has a field of that name
saying it (`"refund_approved": true`); the user's words never set one. A model's own text (its
replies, its arguments, a kernel refusal quoting them, a supervisor's question to a worker) and
the system prompt are no provenance.

Where a slot came from is kept with the session (`baton.runtime.control`): approval policies
read only the slots the kernel or a tool verified.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from baton.runtime.control import SlotSource

Found = SlotSource | Literal["known"]
"""What a value's provenance is: a source, or `known` (the slot already held it)."""

_RANK: dict[str, int] = {"user": 0, "tool": 1, "kernel": 2}
"""A value made of several leaves is as verified as its least verified leaf."""
_SOURCES: dict[str, SlotSource] = {"user": "user", "tool": "tool", "kernel": "kernel"}
"""A recorded source by name (a slot recorded without one counts as the user's)."""
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_NUMBER = re.compile(r"(?<![\d.])(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(?:\.\d+)?")
_WHOLE_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
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


def _number(text: str) -> int | float | None:
    """`text` read as a number when it is one as a whole (`1,200`, `12.50`), else None."""
    if not _WHOLE_NUMBER.fullmatch(text):
        return None
    token = text.replace(",", "")
    return abs(float(token) if "." in token else int(token))


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


class _Leaves:
    """The scalar leaves of some values, indexed for lookups, each with the best source it
    was found with: normalised strings, numbers (as absolute values), (key, bool) pairs."""

    __slots__ = ("flags", "numbers", "strings")

    def __init__(self) -> None:
        self.strings: dict[str, SlotSource] = {}
        self.numbers: dict[int | float, SlotSource] = {}
        self.flags: dict[tuple[str, bool], SlotSource] = {}

    def add(self, key: str, value: Any, source: SlotSource) -> None:
        if type(value) is bool:
            _better(self.flags, (key.casefold(), value), source)
        elif isinstance(value, (int, float)):
            _better(self.numbers, abs(value), source)
        elif isinstance(value, str):
            v = _norm(value)
            if v:
                _better(self.strings, v, source)
                number = _number(v)
                if number is not None:
                    _better(self.numbers, number, source)


def _better(index: dict[Any, SlotSource], key: Any, source: SlotSource) -> None:
    held = index.get(key)
    if held is None or _RANK[source] > _RANK[held]:
        index[key] = source


def result_fields(content: str) -> Iterator[tuple[str, Any]]:
    """The fields a tool returned in `content` (what the model read): every scalar leaf of a
    structured (JSON) result, or a plain-text result as one value."""
    try:
        data = json.loads(content)
    except ValueError:  # plain text (or a result cut off for the model): one value
        yield "", content
        return
    yield from _leaves("", data)


class Provenance:
    """Where a hand-off's state values may come from (see the module docstring). The indexes
    are built on first use, once per check."""

    __slots__ = (
        "_known",
        "_known_index",
        "_numbers",
        "_results",
        "_said",
        "_spaced",
        "_squeezed",
        "_text",
        "_tool",
    )

    def __init__(
        self,
        said: Sequence[str],
        results: Sequence[str],
        known: Sequence[tuple[Mapping[str, Any], Mapping[str, str]]],
    ) -> None:
        """`said`: the user's messages; `results`: the contents of the team's tools' results
        that succeeded; `known`: (slots, slot -> source) already known (a slot without a source
        counts as the user's)."""
        self._said = said
        self._results = results
        self._known = known
        self._tool: _Leaves | None = None
        self._known_index: _Leaves | None = None
        # the user's words, casefolded, each form made on first use (most checks need one)
        self._text: str | None = None
        self._spaced: str | None = None
        self._squeezed: str | None = None
        self._numbers: set[int | float] | None = None

    def sources(self, state: Mapping[str, Any]) -> tuple[dict[str, SlotSource], list[str]]:
        """(slot -> source of the slots whose values the user or a tool produced, the slots
        nobody did: the source's claims). Slots already known as they are are in neither."""
        found: dict[str, SlotSource] = {}
        claims: list[str] = []
        for key, value in state.items():
            where = self.source(key, value)
            if where is None:
                claims.append(key)
            elif where != "known":
                found[key] = where
        return found, claims

    def source(self, key: str, value: Any) -> Found | None:
        """Where the slot's value came from; None when nobody but the model wrote it."""
        for slots, _ in self._known:
            if key in slots and type(slots[key]) is type(value) and slots[key] == value:
                return "known"
        weakest: SlotSource | None = None
        for k, v in _leaves(key, value):
            if v is None or v == "":
                continue  # claims nothing
            where = self._leaf(k, v)
            if where is None:
                return None
            if weakest is None or _RANK[where] < _RANK[weakest]:
                weakest = where
        return weakest if weakest is not None else "user"  # an empty value proves nothing

    def _leaf(self, key: str, value: Any) -> SlotSource | None:
        known, tool = self.known, self.tool
        if type(value) is bool:  # the user's words never set a flag
            flag = (key.casefold(), value)
            return _best(known.flags.get(flag), tool.flags.get(flag))
        if isinstance(value, (int, float)):
            n = abs(value)
            found = _best(known.numbers.get(n), tool.numbers.get(n))
            return found or ("user" if n in self.user_numbers else None)
        v = _norm(str(value))
        bare = v[1:] if v.startswith("#") and len(v) > 1 else v  # `#W2378156` for `W2378156`
        found = _best(known.strings.get(v), tool.strings.get(v), tool.strings.get(bare))
        number = _number(v) if found is None else None
        if number is not None:  # `"299.00"` for a price returned as 299.0
            found = _best(known.numbers.get(number), tool.numbers.get(number))
        if found is not None:
            return found
        return "user" if self._said_by_user(v, bare) else None

    def _said_by_user(self, value: str, bare: str) -> bool:
        text = self.user_spaced if " " in value else self.user_text
        if _occurs(value, text) or (bare is not value and _occurs(bare, text)):
            return True
        if sum(c.isdigit() for c in value) >= 4:  # a phone or an id written with other separators
            squeezed = _SEPARATORS.sub("", bare)
            return bool(squeezed) and _occurs(squeezed, self.user_squeezed)
        return False

    @property
    def known(self) -> _Leaves:
        """Leaves of the slots already known, with their sources."""
        if self._known_index is None:
            known = _Leaves()
            for slots, sources in self._known:
                for key, value in slots.items():
                    source = _SOURCES.get(sources.get(key, ""), "user")
                    for k, v in _leaves(key, value):
                        known.add(k, v, source)
            self._known_index = known
        return self._known_index

    @property
    def tool(self) -> _Leaves:
        """The fields the tools returned."""
        if self._tool is None:
            tool = _Leaves()
            for content in self._results:
                for key, value in result_fields(content):
                    tool.add(key, value, "tool")
            self._tool = tool
        return self._tool

    @property
    def user_text(self) -> str:
        """The user's words, casefolded, as written."""
        if self._text is None:
            self._text = _SEP.join(self._said).casefold()
        return self._text

    @property
    def user_spaced(self) -> str:
        """The user's words with runs of whitespace made one space."""
        if self._spaced is None:
            self._spaced = _WHITESPACE.sub(" ", self.user_text)
        return self._spaced

    @property
    def user_squeezed(self) -> str:
        """The user's words without the spaces and dashes between digits."""
        if self._squeezed is None:
            self._squeezed = _SEPARATORS.sub("", self.user_text)
        return self._squeezed

    @property
    def user_numbers(self) -> set[int | float]:
        """The numbers in the user's words."""
        if self._numbers is None:
            numbers: set[int | float] = set()
            for token in _NUMBER.findall(self.user_text):
                token = token.replace(",", "")
                numbers.add(float(token) if "." in token else int(token))
            self._numbers = numbers
        return self._numbers


def _best(*found: SlotSource | None) -> SlotSource | None:
    """The most verified of the sources found (None when none was)."""
    best: SlotSource | None = None
    for f in found:
        if f is not None and (best is None or _RANK[f] > _RANK[best]):
            best = f
    return best
