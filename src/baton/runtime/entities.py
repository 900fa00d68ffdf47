"""Entity extraction for the entity guard: ids and facts the user gave that `state` lacks.

Before a hand-off leaves, the kernel looks for order ids, server ids, emails, phone numbers and
amounts in what the user said (seed 004 §5: "the new agent asks again for what the user already
said") and merges those missing from the payload's state. Extractors are pluggable: anything
with a `name` and an `extract(text) -> list[Entity]` method.

Patterns use ASCII edges (`(?<![A-Za-z0-9])`) rather than `\\b`: Python counts CJK characters
as word characters, so `\\b` finds no edge in `订单号W2378156已发货`. Values are kept exactly as
written, so a merged value also passes the grounded-id check (`baton.runtime.grounding`), which
looks for it in what the agent was shown; slot names end in `_id` where they name an id, so that
check treats them as ids.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "AMOUNTS",
    "DEFAULT_EXTRACTORS",
    "EMAILS",
    "ORDER_IDS",
    "PHONES",
    "SERVER_IDS",
    "Entity",
    "EntityMemo",
    "Extractor",
    "RegexExtractor",
    "extract",
    "missing_entities",
]

_A = r"(?<![A-Za-z0-9])"
_Z = r"(?![A-Za-z0-9])"
# an id token: ASCII letters/digits with inner dashes, at least one digit
_ID = r"(?=[A-Za-z0-9#-]*\d)#?[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_IS = r"\s*(?:(?ai:is)\s+|[是为]\s*|[:：]\s*)?"  # "is", "是", ":" (a "#" stays in the id)


@dataclass(frozen=True, slots=True)
class Entity:
    """One entity found in a text."""

    kind: str
    """What it is: order, server, email, phone, amount, ..."""
    value: str
    """The entity exactly as written (`ORD-202607-99`, `138 0013 8000`, `¥300`)."""
    slot: str
    """The state slot it fills (order_id, server_id, email, phone, amount, ...)."""
    start: int = field(default=-1, compare=False)
    """Offset of `value` in the text (-1: unknown)."""
    end: int = field(default=-1, compare=False)
    """Offset just past `value` (-1: unknown)."""


@runtime_checkable
class Extractor(Protocol):
    """Finds entities of one kind in a text."""

    @property
    def name(self) -> str:
        """The extractor's name (unique among the extractors used together)."""
        ...

    def extract(self, text: str) -> list[Entity]:
        """The entities in `text`, in order of appearance."""
        ...


_COMPILE_AT_INIT = False
"""False while this module builds its default extractors (their patterns are checked by the
tests), True afterwards."""


@dataclass(frozen=True)
class RegexExtractor:
    """An `Extractor` from regular expressions: each match (its `v` group when it has one) is
    an entity; `check` can veto a value. Overlapping matches keep the first pattern's.

    `dataclasses.replace(ORDER_IDS, slot="order_no")` renames the slot a default fills; `hint`
    and `words` describe the patterns, so pass them again (or None and ()) with new patterns.
    """

    name: str
    """Extractor name, also the entities' `kind`."""
    slot: str
    """Slot the entities fill."""
    patterns: Sequence[str]
    """Regular expressions, tried in order; a group named `v` narrows the value."""
    check: Callable[[str], bool] | None = None
    """Extra validation of a value (e.g. a digit count); None accepts all."""
    hint: str | None = None
    """A regex every text holding an entity matches (`\\d`, `@`), tried first so that the
    patterns skip most texts at the cost of one quick scan; None tries the patterns always."""
    words: tuple[str, ...] = ()
    """Lower-case strings of which every text holding an entity contains one (`server`,
    `$`), looked for in `text.lower()` before anything else; cheaper than a case-insensitive
    `hint`. Empty checks nothing."""
    _compiled: tuple[re.Pattern[str], ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """The patterns compiled, on first use for the defaults (compiling their long patterns at
    import took 10-20 ms of `import baton`)."""
    _hint: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple(self.patterns))
        if _COMPILE_AT_INIT:  # an extractor of the caller's: a bad pattern fails here, now
            self._compile()

    def _compile(self) -> tuple[re.Pattern[str], ...]:
        compiled = tuple(re.compile(p) for p in self.patterns)  # raises on a bad pattern
        object.__setattr__(self, "_hint", re.compile(self.hint) if self.hint else None)
        object.__setattr__(self, "_compiled", compiled)
        return compiled

    def extract(self, text: str) -> list[Entity]:
        """The entities in `text`, in order of appearance."""
        found: list[Entity] = []
        if self.words and not _contains_any(text.lower(), self.words):
            return found
        compiled = self._compiled
        if compiled is None:
            compiled = self._compile()
        if self._hint is not None and self._hint.search(text) is None:
            return found
        for rx in compiled:
            # Most patterns find nothing in most texts, and `search` says so for less than half
            # of what setting up `finditer` costs; `finditer` then yields the same matches.
            if rx.search(text) is None:
                continue
            group = "v" if "v" in rx.groupindex else 0
            for m in rx.finditer(text):
                start, end = m.span(group)
                if start < 0 or _overlaps(start, end, found):
                    continue
                value = m.group(group)
                if self.check is None or self.check(value):
                    found.append(Entity(self.name, value, self.slot, start, end))
        if len(found) > 1:
            found.sort(key=_start)
        return found


def _contains_any(text: str, words: tuple[str, ...]) -> bool:
    # a plain loop: `any(...)` would allocate a generator on every call
    for w in words:  # noqa: SIM110
        if w in text:
            return True
    return False


def _start(entity: Entity) -> int:
    return entity.start


def _overlaps(start: int, end: int, taken: Iterable[Entity]) -> bool:
    # a plain loop: `any(...)` would allocate a generator on every call
    for e in taken:  # noqa: SIM110
        if start < e.end and e.start < end:
            return True
    return False


def _digit_count(low: int, high: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        return low <= sum(c.isdigit() for c in value) <= high

    return check


# Every pattern starts with a literal or one character class, never with a look-behind: `re`
# then jumps to the next place a match can start instead of trying every position (about 4x
# faster). Edges are checked by a look-behind placed after the first characters.


def _edged(words: Iterable[str], before: str = "A-Za-z0-9") -> str:
    """Literal `words`, each not preceded by a character of the class `[before]`."""
    ordered = sorted(set(words), key=len, reverse=True)
    return "(?:" + "|".join(f"{re.escape(w)}(?<![{before}]{re.escape(w)})" for w in ordered) + ")"


def _cased(*words: str) -> list[str]:
    """`words` as written in lower case, Title case and UPPER case."""
    return [v for w in words for v in (w, w.capitalize(), w.upper())]


ORDER_IDS = RegexExtractor(
    name="order",
    slot="order_id",
    patterns=(
        # "order 12345", "order number is W2378156"
        _edged(_cased("order"), "A-Za-z")
        + r"(?:\s*(?ai:id|number|num|no\.?))?"
        + _IS
        + rf"(?P<v>(?=[A-Za-z0-9#-]{{4}}){_ID}){_Z}",
        # "订单号：ORD-1", "订单12345", "单号 12345"
        r"(?:订单(?:号码|编号|号)?|单号)" + _IS + rf"(?P<v>(?=[A-Za-z0-9#-]{{4}}){_ID}){_Z}",
        # ORD-202607-99, PO-7781, SO_12
        _edged(["ORD", "Ord", "ord", "PO", "SO"]) + r"[-_]?\d[A-Za-z0-9]*(?:-[A-Za-z0-9]+)*" + _Z,
        # "#12345", "#W2378156" (τ²-bench retail)
        r"#(?<![A-Za-z0-9#]#)[A-Za-z]?\d{4,}" + _Z,
        # W2378156: one capital letter and seven digits
        r"[A-Z](?<![A-Za-z0-9][A-Z])\d{7}" + _Z,
    ),
    hint=r"\d",
)
"""Order ids: `ORD-202607-99`, `#12345`, `#W2378156`, `W2378156`, `订单号 12345`."""

_HOST_WORDS = ("srv", "server", "host", "web", "db", "app", "node", "vm")
# fmt: off
_HOST_WORDS_DASHED = (  # only with a dash before the number: api-2, not api2
    "api", "worker", "cache", "redis", "mysql", "pg", "lb", "gw", "proxy", "edge", "kafka", "mq",
    "k8s",
)
# fmt: on
_HOST_TAIL = (
    r"(?:[-_]\d{1,4}|\d{2,4})"  # web-03, web01
    r"(?:-[A-Za-z0-9]+)*" + _Z + r"(?!-)"  # web-03-east
)
_SERVER_WORDS = ("server", "host", "instance", "machine")
_SERVER_WORDS_ZH = ("服务器", "主机", "机器", "实例", "节点")
SERVER_IDS = RegexExtractor(
    name="server",
    slot="server_id",
    patterns=(
        # "server 12", "host: web-02.prod"
        _edged(_cased(*_SERVER_WORDS), "A-Za-z")
        + r"(?:\s*(?ai:id|name|no\.?))?"
        + _IS
        + r"(?P<v>(?=[A-Za-z0-9._-]*\d)[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
        + _Z,
        # "服务器 web-02", "主机编号 7"
        f"(?:{'|'.join(_SERVER_WORDS_ZH)})(?:编号|名称|名|号|ID|id)?"
        + _IS
        + r"(?P<v>(?=[A-Za-z0-9._-]*\d)[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
        + _Z,
        # prod-db-2, eu-west-web-01: up to three name parts before the host word
        r"[A-Za-z](?<![A-Za-z0-9-][A-Za-z])[A-Za-z0-9]*-(?:[A-Za-z][A-Za-z0-9]*-){0,2}"
        + f"(?:(?ai:{'|'.join(_HOST_WORDS)}){_HOST_TAIL}"
        + f"|(?ai:{'|'.join(_HOST_WORDS_DASHED)})[-_]\\d{{1,4}}(?:-[A-Za-z0-9]+)*{_Z}(?!-))",
        # srv-01, web-03, web01, api-2
        _edged(_cased(*_HOST_WORDS), "A-Za-z0-9-") + _HOST_TAIL,
        _edged(_cased(*_HOST_WORDS_DASHED), "A-Za-z0-9-")
        + r"[-_]\d{1,4}(?:-[A-Za-z0-9]+)*"
        + _Z
        + r"(?!-)",
        # i-0abc1234def567890 (EC2)
        r"i-(?<![A-Za-z0-9]i-)[0-9a-f]{8,17}" + _Z,
    ),
    hint=r"\d",
    # each pattern above holds one of these (ASCII ones in some letter case)
    words=(*_SERVER_WORDS, *_SERVER_WORDS_ZH, *_HOST_WORDS, *_HOST_WORDS_DASHED, "i-"),
)
"""Server ids: `srv-01`, `web-03`, `prod-db-2`, `server 12`, `服务器 web-02`, `i-0abc1234`."""

_EMAIL_CHAR = "[A-Za-z0-9._%+-]"
EMAILS = RegexExtractor(
    name="email",
    slot="email",
    patterns=(
        rf"{_EMAIL_CHAR}(?<!{_EMAIL_CHAR}{_EMAIL_CHAR}){_EMAIL_CHAR}*"
        r"@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![A-Za-z0-9-])",
    ),
    hint="@",
)
"""Email addresses (ASCII; `邮箱是a@b.com谢谢` finds `a@b.com`)."""

PHONES = RegexExtractor(
    name="phone",
    slot="phone",
    patterns=(
        # Chinese mobiles: +86 138-0013-8000, 0086 13800138000, 13800138000, 138 0013 8000
        _edged(["+86", "0086"], "A-Za-z0-9+") + r"[ -]?1[3-9]\d(?:[ -]?\d{4}){2}(?!\d)",
        r"1(?<![A-Za-z0-9+]1)[3-9]\d(?:[ -]?\d{4}){2}(?!\d)",
        # international, E.164-ish: +1 415 555 2671, +44 20 7946 0958
        r"\+(?<![A-Za-z0-9+]\+)[1-9]\d{0,2}(?:[ .-]?\(?\d{1,4}\)?){1,5}(?![\d-])",
        # North America with separators: (415) 555-2671, 415-555-2671
        r"\((?<![A-Za-z0-9+-]\()[2-9]\d{2}\)\s?\d{3}[ .-]\d{4}(?![\d-])",
        r"[2-9](?<![A-Za-z0-9+-][2-9])\d{2}[ .-]\d{3}[ .-]\d{4}(?![\d-])",
        # Chinese landlines: 010-12345678
        r"0(?<![A-Za-z0-9+-]0)\d{2,3}-\d{7,8}(?![\d-])",
    ),
    check=_digit_count(7, 15),
    hint=r"\d",
)
"""Phone numbers: Chinese mobiles (with or without +86), E.164, North American, CN landlines."""

_NUM_TAIL = r"(?:\d{0,2}(?:,\d{3})+|\d*)(?:\.\d+)?"
_NUM = r"\d" + _NUM_TAIL  # 5, 12.50, 1,200, 1200.5
_CODES = ("USD", "EUR", "GBP", "CNY", "RMB", "JPY", "HKD", "CAD", "AUD", "CHF", "SGD")
_END = r"(?![\d.,]*\d)"
AMOUNTS = RegexExtractor(
    name="amount",
    slot="amount",
    patterns=(
        # US$ 5, HK$20, $12.50, ¥300, ￥1,200, €20, £5
        _edged(["US$", "HK$", "A$", "C$"]) + rf"\s?{_NUM}{_END}",
        rf"[$¥￥€£](?<![A-Za-z0-9$][$¥￥€£])\s?{_NUM}{_END}",
        # EUR 20, RMB300, 人民币300元
        rf"(?:{_edged(_cased(*_CODES))}|人民币)\s?{_NUM}(?:\s?元)?{_END}",
        # 300元, 300 块, 12.5 美元, 20 EUR, 5 dollars
        # (not glued to ASCII letters or digits: "3f0cad7" inside a hex id is no amount)
        rf"\d(?<![\dA-Za-z.,]\d){_NUM_TAIL}\s?(?:元|块钱|块|美元|欧元|英镑|日元|港币|人民币"
        rf"|(?ai:{'|'.join(_CODES)}|dollars?|euros?|yuan|bucks?)(?![A-Za-z0-9]))",
    ),
    hint=r"\d",
    # each pattern above holds one of these: a currency sign, 元 / 块 / 镑 / 币 (美元, 块钱, 英镑,
    # 人民币, ...), or a code or currency word in some letter case ("eur" also finds "euro")
    words=(
        *"$¥￥€£元块镑币",
        *(code.lower() for code in _CODES),
        "dollar",
        "yuan",
        "buck",
    ),
)
"""Money amounts with a currency: `$12.50`, `¥300`, `300元`, `300 块`, `EUR 20`, `5 dollars`."""

DEFAULT_EXTRACTORS: tuple[Extractor, ...] = (EMAILS, ORDER_IDS, SERVER_IDS, PHONES, AMOUNTS)
"""The default extractors, by priority: where two find overlapping text, the first wins."""

_COMPILE_AT_INIT = True


def extract(text: str, extractors: Sequence[Extractor] | None = None) -> list[Entity]:
    """All entities in `text`, in order of appearance; overlapping finds keep the one of the
    earlier extractor (an email's digits are not also a phone number)."""
    return _merge(ex.extract(text) for ex in _or_default(extractors))


def _or_default(extractors: Sequence[Extractor] | None) -> Sequence[Extractor]:
    return DEFAULT_EXTRACTORS if extractors is None else extractors


def _merge(finds: Iterable[Sequence[Entity]]) -> list[Entity]:
    """Each extractor's finds, in priority order, merged as `extract` does."""
    kept: list[Entity] = []
    for found in finds:
        for e in found:
            if e.start < 0 or not _overlaps(e.start, e.end, kept):
                kept.append(e)
    if len(kept) > 1:
        kept.sort(key=_start)
    return kept


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _leaves(v)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


_SEPARATORS = re.compile(r"[\s().-]")


def _forms(value: str) -> set[str]:
    """`value` casefolded, also without a leading `#` and without separators."""
    v = value.casefold().strip()
    return {f for f in (v, v.lstrip("#"), _SEPARATORS.sub("", v)) if f}


_ALNUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")


def _occurs(needle: str, hay: str) -> bool:
    """`needle` in `hay` as a whole token: no ASCII letter or digit right before or after."""
    start = hay.find(needle)
    while start >= 0:
        end = start + len(needle)
        if (start == 0 or hay[start - 1] not in _ALNUM) and (
            end == len(hay) or hay[end] not in _ALNUM
        ):
            return True
        start = hay.find(needle, start + 1)
    return False


def _known(value: str, haystack: Sequence[str]) -> bool:
    """True when `value` (in any of its forms) is in one of the state's values as a whole token."""
    return any(_occurs(form, leaf) for form in _forms(value) for leaf in haystack)


def _is_set(value: Any) -> bool:
    return value is not None and value != "" and value != [] and value != {}


_Finds = list[Any]
"""One list per text: the text, then what each extractor found (None: not run yet). Nothing
found is kept as the shared `()`, so a remembered message is one object for the garbage
collector to track, not one per extractor."""


class EntityMemo:
    """What each extractor found in recent messages, kept by message id.

    At every hand-off the entity guard reads everything the user said in the session; with a
    memo a long conversation does not scan its earlier messages again at each hand-off. It holds
    at most `max_texts` messages (the oldest are dropped) and checks that a key still has the
    same text before using what it found.
    """

    __slots__ = ("_extractors", "_finds", "max_texts")

    def __init__(self, max_texts: int = 1024) -> None:
        self.max_texts = max_texts
        """How many messages are kept at most."""
        self._finds: dict[Hashable, _Finds] = {}
        self._extractors: tuple[Extractor, ...] = ()

    def use(self, extractors: Sequence[Extractor]) -> None:
        """Keep finds of `extractors` from now on (forgetting those of other extractors)."""
        exs = tuple(extractors)
        if exs != self._extractors:
            self._finds.clear()
            self._extractors = exs

    def finds(self, key: Hashable, text: str) -> _Finds:
        """What is kept for `key`: `text`, then each extractor's finds (None: not run yet)."""
        kept = self._finds.get(key)
        if kept is not None and kept[0] == text:
            return kept
        finds: _Finds = [text, *([None] * len(self._extractors))]
        if len(self._finds) >= self.max_texts:
            # a run in another thread may change the memo meanwhile: then one entry more
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                del self._finds[next(iter(self._finds))]
        self._finds[key] = finds
        return finds


def _closed(ex: Extractor, state: Mapping[str, Any]) -> bool:
    """True when every entity `ex` can find fills a slot `state` already has (a
    `RegexExtractor` fills one slot; other extractors may fill any)."""
    return type(ex) is RegexExtractor and _is_set(state.get(ex.slot))


def _run(finds: _Finds, index: int, ex: Extractor) -> Sequence[Entity]:
    """What extractor `index` finds in the text of `finds`, extracted on first use."""
    found = finds[index + 1]
    if found is None:
        found = finds[index + 1] = ex.extract(finds[0]) or ()
    return found  # type: ignore[no-any-return]


def missing_entities(
    texts: Iterable[str] | Mapping[Hashable, str],
    state: Mapping[str, Any],
    extractors: Sequence[Extractor] | None = None,
    memo: EntityMemo | None = None,
) -> dict[str, str]:
    """Slot -> value for entities in `texts` that `state` does not hold yet.

    `texts` is the conversation in order (usually what the user said), or a mapping of message
    id -> text in that order, which lets a `memo` keep what was found in each message. For each
    slot the most recent mention wins; it is returned unless the slot is already set in `state`
    or its value already appears among the state's values (under any key, as `#12345` or
    `12345`, with or without separators). `extractors` defaults to `DEFAULT_EXTRACTORS`.
    """
    exs = _or_default(extractors)
    # An extractor whose slot is already set finds nothing that could be returned; it matters
    # only where one of its finds overlaps another extractor's, which it then hides. So it runs
    # only on texts in which some other extractor found something: the result is the same as
    # extracting everything, at a fraction of the cost on the usual hand-off, where the id the
    # user gave is already in the state.
    closed = [_closed(ex, state) for ex in exs]
    if memo is not None:
        memo.use(exs)
    keyed = texts.items() if isinstance(texts, Mapping) else ((None, t) for t in texts)
    latest: dict[str, str] = {}
    for key, text in keyed:
        if not text:
            continue
        if memo is not None and key is not None:
            finds = memo.finds(key, text)
        else:
            finds = [text, *([None] * len(exs))]
        hits = False
        for i, ex in enumerate(exs):
            if not closed[i] and _run(finds, i, ex):
                hits = True
        if not hits:
            continue
        for e in _merge(_run(finds, i, ex) for i, ex in enumerate(exs)):
            latest[e.slot] = e.value
    if not latest:
        return {}
    haystack = [form for leaf in _leaves(state) for form in _forms(leaf)]
    return {
        slot: value
        for slot, value in latest.items()
        if not _is_set(state.get(slot)) and not _known(value, haystack)
    }
