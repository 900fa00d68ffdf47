"""Redaction: secrets and personal data never reach payloads, events, traces or logs.

A `Redactor` replaces two kinds of sensitive data:

- the whole value of a sensitive **key** (`password`, `access_token`, `apiKey`, `身份证号`, ...)
  wherever a dict, a pydantic model or an event carries it;
- sensitive **values** anywhere in free text, found by detectors:
  - key and token shapes (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, SendGrid, PyPI, Square,
    Azure, Mailchimp keys, JWTs), private key blocks, random-looking quoted or labelled
    strings and `secret = "x"` assignments in code: detect-secrets' plugins
    (`secret_shapes`, `secret_entropy`, `secret_code`);
  - what people write in sentences, which detect-secrets does not know: payment card numbers
    (Luhn) and Chinese ID numbers (`secret_numbers`), `password: x`, `my PIN is 4821`,
    `cvv 737`, `passphrase: ...`, `密码是x`, `验证码 482913` (`secret_phrases`), bearer tokens
    and the password in a URL (below).

Before any detector runs, cheap checks (`secret_gate`) let a text with nothing sensitive in it
through untouched, and an event with nothing to redact comes back as the same object. Where
detectors overlap, their union is replaced once (`secret_hits`). Replacements read
`[REDACTED:<name>]` and match no detector themselves, so redacting twice gives the same result
as redacting once. detect-secrets is imported when the first redactor is built, not with Baton.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import BaseModel

from baton.runtime.secret_gate import Finder, Gate
from baton.runtime.secret_hits import Hit, replace_hits
from baton.runtime.secret_numbers import NUMBER, cn_id_ok, find_numbers, luhn_ok
from baton.runtime.secret_phrases import PhraseRules

__all__ = [
    "DEFAULT_KEYS",
    "DEFAULT_PATTERNS",
    "RedactingFilter",
    "Redactor",
    "cn_id_ok",
    "luhn_ok",
    "normalise_key",
]

E = TypeVar("E")

DEFAULT_KEYS: tuple[str, ...] = (
    "password",
    "passwd",
    "passcode",
    "pwd",
    "pw",
    "passphrase",
    "seed_phrase",
    "mnemonic",
    "token",
    "secret",
    "api_key",
    "apikey",
    "access_key",
    "private_key",
    "authorization",
    "cookie",
    "credential",
    "credentials",
    "otp",
    "pin",
    "cvv",
    "cvv2",
    "cvc",
    "security_code",
    "verification_code",
    "card_number",
    "cardnumber",
    "card_no",
    "id_card",
    "ssn",
    "身份证",
    "密码",
    "口令",
    "卡号",
    "验证码",
    "安全码",
    "助记词",
)
"""Key names whose values are always replaced entirely (matched on whole words of the key)."""

# Hand-written: detect-secrets has no rule for an `Authorization: Bearer` token, and its
# basic-auth rule stops a URL's password at the first `@`, `:` or sub-delimiter (`$`, `!`,
# `;`, ...), which passwords in DSNs often hold raw: the rest would leak.
_BEARER = (
    r"(?<![A-Za-z])(?ai:bearer)\s+"
    r"(?P<bearer_v>(?=[\w.~+/-]{0,200}\d)[\w.~+/-]{8,}=*|[\w.~+/-]{16,}=*)"
)
_URL_PASSWORD = (
    # `scheme://user:secret@host`: the secret runs to the authority's last `@` (a raw `@` in a
    # password is common), never past `/`, `?`, `#` or a space; the user name may be empty
    # (`redis://:secret@host`). Only the secret is replaced.
    r"(?<=://)[^\s:/?#@\[\]]*:(?P<url_v>[^\s/?#]+)@"
)
_BASIC_PATTERNS: Mapping[str, str] = MappingProxyType(
    {"card": NUMBER, "id_card": NUMBER, "token": _BEARER, "url_password": _URL_PASSWORD}
)
_LIBRARY_PATTERNS = ("api_key", "private_key", "high_entropy")  # built from detect-secrets
_RANKS = (
    "numbers", "token", "api_key", "private_key", "url_password", "custom", "phrases",
    "assignments", "high_entropy",
)  # fmt: skip
"""Detector order: of overlapping hits whose matches start at one place, the first names."""

DEFAULT_PATTERNS: Mapping[str, str]
"""Built-in value patterns by name: `card` and `id_card` (one scan of long digit runs),
`token` (bearer tokens), `api_key`, `private_key`, `url_password` and `high_entropy`.

Pass `patterns={name: None}` to turn one off, `patterns={name: regex}` to replace it (the
whole match of a replacement is redacted, without the built-in checks). Built on first use:
`api_key`, `private_key` and `high_entropy` come from detect-secrets' plugins.
"""


@functools.cache
def _default_patterns() -> Mapping[str, str]:
    from baton.runtime.secret_entropy import HIGH_ENTROPY
    from baton.runtime.secret_shapes import API_KEY, PRIVATE_KEY

    return MappingProxyType(
        {
            "card": NUMBER,
            "id_card": NUMBER,
            "token": _BEARER,
            "api_key": API_KEY,
            "private_key": PRIVATE_KEY,
            "url_password": _URL_PASSWORD,
            "high_entropy": HIGH_ENTROPY,
        }
    )


def __getattr__(name: str) -> Any:
    """`DEFAULT_PATTERNS`, built on first use (it imports detect-secrets)."""
    if name == "DEFAULT_PATTERNS":
        return _default_patterns()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Fields of events and payloads that hold ids, names, numbers and enums, never free text.
# fmt: off
_STRUCTURAL = frozenset((
    "id", "ts", "trace_id", "session_id", "run_id", "agent", "hop", "type", "target", "tier",
    "score", "candidates", "verdicts", "latency_ms", "model", "usage", "tool_calls", "reask",
    "tool", "call_id", "ok", "result_chars", "truncated", "source", "cause", "guard", "to",
    "status", "path", "user_id", "policy", "context_tokens", "handoff_usage", "history_ref",
    "created_at", "priority", "parent_run_id", "parent_call_id", "task_id", "from_status",
    "to_status", "attempt", "final", "conductor",
))
# fmt: on

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_WORD = re.compile(r"[^0-9a-z\u00c0-\U0010ffff]+")
_PLAIN_KEY = re.compile(r"[^\W_][\w\s-]*")
_KEY_CACHE_MAX = 4096
_CLEAN_CACHE_MAX = 512
# Characters that show nothing: the soft hyphen, zero-width spaces and joiners, direction marks,
# the word joiner and invisible operators, the BOM. Typed or pasted inside a secret, they would
# hide it from every pattern.
_INVISIBLE_CHARS = frozenset(
    "\u00ad\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"
)
_INVISIBLE = re.compile(f"[{''.join(sorted(_INVISIBLE_CHARS))}]")
_UNSEEN = "\0"  # not a key word: marks a key not looked up yet


def normalise_key(key: str) -> str:
    """A key as the key patterns see it: `apiKey`, `X-Api-Key` -> `api_key`, `x_api_key`."""
    return _NON_WORD.sub("_", _CAMEL.sub("_", key).casefold()).strip("_")


def _find_spans(
    rx: re.Pattern[str], text: str, group: str, label: str, head: str, rank: int
) -> Iterator[Hit]:
    """The spans of `group` in the matches of `rx` (`Bearer x`, `://user:x@`): none starting
    with `head` (already redacted)."""
    for m in rx.finditer(text):
        start, stop = m.span(group)
        if start < stop and not (head and text.startswith(head, start)):
            yield Hit(start, stop, label, m.start(), rank)


def _find_custom(rx: re.Pattern[str], labels: Mapping[str, str], text: str) -> Iterator[Hit]:
    """The whole matches of the user's patterns, each named by its pattern."""
    rank = _RANKS.index("custom")
    for m in rx.finditer(text):
        if m.start() < m.end():
            yield Hit(m.start(), m.end(), labels[m.lastgroup or ""], m.start(), rank)


@dataclasses.dataclass(frozen=True, eq=False)
class Redactor:
    """Replaces sensitive keys and values; immutable, safe to share, cheap when nothing matches.

    `keys` adds sensitive key names. A plain word such as `pin` or `member_secret` matches whole
    words of the normalised key (`pin`, `user_pin`, `userPin`, `PIN-code`; not `spinner`) and,
    with `key_phrases`, also redacts `pin: 1234` / `pin=1234` phrases in text; anything else
    is a regular expression searched in the normalised key (`normalise_key`). `patterns` adds
    value patterns by name (regular expressions whose whole match is replaced), replaces the
    built-in one of the same name (`DEFAULT_PATTERNS`), or turns it off with None.
    `use_defaults=False` starts from no keys and no patterns instead of the built-in ones.
    """

    keys: Sequence[str] = ()
    """Extra sensitive key names (or key regexes)."""
    patterns: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    """Extra value patterns by name; None turns a built-in pattern off."""
    use_defaults: bool = True
    """Start from `DEFAULT_KEYS` and `DEFAULT_PATTERNS`."""
    key_phrases: bool = True
    """Redact the value in `<key>: value`, `<key>=value`, `password is value`, `密码是value`,
    `PIN 4821`, and (with the defaults) quoted values assigned to secret names in code."""
    replacement: str = "[REDACTED:{name}]"
    """What a redacted value becomes; `{name}` is the pattern's or key's name."""

    _key_rx: re.Pattern[str] | None = dataclasses.field(init=False, repr=False)
    _gate: Gate = dataclasses.field(init=False, repr=False)
    _head: str = dataclasses.field(init=False, repr=False)
    _min_len: int = dataclasses.field(init=False, repr=False)
    _key_cache: dict[str, str | None] = dataclasses.field(init=False, repr=False)
    _clean: dict[str, None] = dataclasses.field(init=False, repr=False)
    _fields: dict[type, tuple[tuple[str, str | None], ...]] = dataclasses.field(
        init=False, repr=False
    )

    def __post_init__(self) -> None:
        init = object.__setattr__  # frozen: the compiled state is set once, here
        init(self, "keys", tuple(self.keys))
        init(self, "patterns", dict(self.patterns))
        library = self.use_defaults or any(n in _LIBRARY_PATTERNS for n in self.patterns)
        builtins = _default_patterns() if library else _BASIC_PATTERNS
        patterns: dict[str, str | None] = dict(builtins) if self.use_defaults else {}
        patterns.update(self.patterns)
        for name, rx in patterns.items():
            if rx is not None:
                try:
                    re.compile(rx)
                except re.error as exc:
                    raise ValueError(
                        f"redaction pattern {name!r} is not a valid regex: {exc}"
                    ) from None

        # keys: one regex over the normalised key
        words: set[str] = set()
        key_alts = []
        for key in (*(DEFAULT_KEYS if self.use_defaults else ()), *self.keys):
            if _PLAIN_KEY.fullmatch(key):
                word = normalise_key(key)
                words.add(word)
                key_alts.append(
                    rf"(?:^|_)({re.escape(word)})(?:_|$)"
                    if word.isascii()
                    # CJK keys have no word separators: `身份证号` holds `身份证`
                    else f"({re.escape(word)})"
                )
            else:
                key_alts.append(f"({key})")
        try:
            init(self, "_key_rx", re.compile("|".join(key_alts)) if key_alts else None)
        except re.error as exc:
            raise ValueError(f"a redaction key is not a valid regex: {exc}") from None
        init(self, "_key_cache", {})
        init(self, "_clean", {})
        init(self, "_fields", {})
        head = self.replacement.split("{name}", 1)[0]
        init(self, "_head", head)

        # values: the detectors of the enabled built-in patterns, the user's patterns as one
        # regex, and the cheap checks that gate them
        enabled = {n for n, rx in patterns.items() if rx is not None and rx == builtins.get(n)}
        custom = {n: rx for n, rx in patterns.items() if rx is not None and n not in enabled}
        phrases = PhraseRules.build(words, head, self.key_label) if self.key_phrases else None
        init(self, "_gate", self._build_gate(enabled, custom, phrases))
        init(self, "_min_len", 1 if custom else 4)  # `密码:x` is the shortest built-in match

    def _build_gate(
        self, enabled: set[str], custom: dict[str, str], phrases: PhraseRules | None
    ) -> Gate:
        """The detectors of the `enabled` built-in patterns, the `custom` ones and the
        `phrases`, behind their cheap checks."""
        head, rank = self._head, _RANKS.index
        gate: dict[str, Any] = {}
        card, id_card = "card" in enabled, "id_card" in enabled
        if card or id_card:
            gate["numbers"] = functools.partial(
                find_numbers, card=card, id_card=id_card, rank=rank("numbers")
            )
        if "token" in enabled:
            bearer = re.compile(_BEARER)
            gate["bearer"] = functools.partial(
                _find_spans, bearer, group="bearer_v", label="token", head=head, rank=rank("token")
            )
        if "url_password" in enabled:
            url = re.compile(_URL_PASSWORD)
            gate["urls"] = functools.partial(
                _find_spans,
                url,
                group="url_v",
                label="url_password",
                head=head,
                rank=rank("url_password"),
            )
        if "api_key" in enabled:
            from baton.runtime.secret_shapes import (
                API_KEY_FAMILIES,
                KEY_STARTS,
                KEY_WORDS,
                find_api_keys,
            )

            starts = "|".join(map(re.escape, sorted(KEY_STARTS, key=len, reverse=True)))
            gate.update(key_starts=re.compile(starts), key_words=KEY_WORDS)

            for family in API_KEY_FAMILIES:
                gate[family] = functools.partial(
                    find_api_keys, family=family, head=head, rank=rank("api_key")
                )
        if "private_key" in enabled:
            from baton.runtime.secret_shapes import find_private_keys

            gate["private_keys"] = functools.partial(find_private_keys, rank=rank("private_key"))
        if "high_entropy" in enabled:
            from baton.runtime.secret_entropy import find_high_entropy

            for kind in ("quoted", "labelled"):
                gate[f"{kind}_entropy"] = functools.partial(
                    find_high_entropy,
                    kind=kind,
                    head=head,
                    rank=rank("high_entropy"),
                    normalise_key=normalise_key,
                )
        if custom:
            groups = {f"p{i}": name for i, name in enumerate(custom)}
            try:
                rx = re.compile("|".join(f"(?P<p{i}>{r})" for i, r in enumerate(custom.values())))
            except re.error as exc:  # e.g. two patterns with the same group name
                raise ValueError(
                    f"the redaction patterns do not combine into one regex ({exc}); rename the "
                    "named groups that two patterns share, or use scoped flags such as (?i:...)"
                ) from None
            gate["custom"] = (rx, functools.partial(_find_custom, rx, groups))
        if phrases is not None:
            for family in ("colon", "passwords", "chinese", "codes", "passphrase"):
                rules = getattr(phrases, family)
                if rules is not None:
                    gate[family] = functools.partial(rules.find, rank=rank("phrases"))
            gate.update(
                colon_rx=phrases.colon_rx,
                colon_wide=phrases.colon_wide,
                chinese_words=phrases.chinese_words,
                code_stems=phrases.code_stems,
                code_wide=phrases.code_wide,
            )
            if self.use_defaults:
                from baton.runtime.secret_code import find_assignments

                gate["assignments"] = functools.partial(
                    find_assignments, head=head, rank=rank("assignments"), key_label=self.key_label
                )
        return Gate(**gate)

    # -- text ----------------------------------------------------------------------------------

    def redact_text(self, text: str) -> str:
        """`text` with every sensitive value replaced; the same object when nothing matched."""
        if len(text) < self._min_len:
            return text
        clean = self._clean
        if text in clean:  # events repeat texts: a payload's, a final reply
            return text
        if not text.isascii() and _INVISIBLE.search(text) is not None:
            out = self._redact_visible(text)
        else:
            finders = self._gate(text)
            out = self._redact(text, finders) if finders else text
        if out != text:
            return out
        if len(clean) >= _CLEAN_CACHE_MAX:
            clean.clear()
        clean[text] = None  # only texts with nothing to redact are kept
        return text

    def _redact(self, text: str, finders: Sequence[Finder]) -> str:
        """`text` with what `finders` find replaced."""
        hits = [hit for find in finders for hit in find(text)]
        return replace_hits(text, hits, self._placeholder) if hits else text

    def _redact_visible(self, text: str) -> str:
        """`text` redacted as if its invisible characters were not there: `pass\u200bword:
        x` and a card number with zero-width spaces between its digits read as they show. A
        secret's span in the original covers the invisible characters inside it."""
        kept = [i for i, c in enumerate(text) if c not in _INVISIBLE_CHARS]
        visible = "".join([text[i] for i in kept])
        hits = [hit for find in self._gate(visible) for hit in find(visible)]
        if not hits:
            return text
        spans = [
            Hit(kept[h.start], kept[h.stop - 1] + 1, h.label, kept[h.at], h.rank) for h in hits
        ]
        return replace_hits(text, spans, self._placeholder)

    def _placeholder(self, name: str) -> str:
        return self.replacement.format(name=name)

    # -- keys and values -----------------------------------------------------------------------

    def key_label(self, key: str) -> str | None:
        """The key word that makes `key` sensitive (`access_token` -> `token`), or None."""
        cache = self._key_cache
        try:
            return cache[key]
        except KeyError:
            pass
        label = None
        if self._key_rx is not None:
            m = self._key_rx.search(normalise_key(key))
            if m is not None:
                label = next((g for g in m.groups() if g), None) or m.group()
        if len(cache) >= _KEY_CACHE_MAX:
            cache.clear()
        cache[key] = label
        return label

    def redact_value(self, value: Any) -> Any:
        """`value` with sensitive keys and values replaced; dicts, lists, tuples and pydantic
        models are walked (keys matter) and copied where something changed, never mutated.
        Returns `value` itself when nothing needed redaction."""
        if type(value) is str:
            return self.redact_text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] | None = None
            clean, labels = self._clean, self._key_cache
            for k, v in value.items():
                if type(v) is str and v in clean and labels.get(k, _UNSEEN) is None:
                    continue  # a text checked before, under a key known not to be sensitive
                new = self._keyed(k, v) if type(k) is str else self.redact_value(v)
                if new is not v:
                    if out is None:
                        out = dict(value)
                    out[k] = new
            return value if out is None else out
        if isinstance(value, (list, tuple)):
            if not value:
                return value
            items = [self.redact_value(v) for v in value]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            if isinstance(value, list):
                return items
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if isinstance(value, str):  # a str subclass
            return self.redact_text(value)
        if isinstance(value, BaseModel):
            return self._model(value)
        if type(value) is int and value >= 10**12:  # a card number stored as a number
            text = str(value)
            redacted = self.redact_text(text)
            return value if redacted is text else redacted
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            # a Baton data record inside an event (a model call's `ToolCall`s)
            changes = self._changed_fields(value)
            return value if changes is None else dataclasses.replace(value, **changes)
        return value

    def _keyed(self, key: str, value: Any) -> Any:
        """`value` under `key`: replaced entirely when the key is sensitive."""
        if value is None or value is True or value is False:
            return value
        label = self._key_cache.get(key, _UNSEEN)
        if label is _UNSEEN:
            label = self.key_label(key)
        if label is None:
            if type(value) is str:
                return self.redact_text(value)
            return self.redact_value(value)
        if isinstance(value, str):
            if not value:
                return value
            placeholder = self._placeholder(label)
            return value if value == placeholder else placeholder
        return self._placeholder(label)

    def _text_fields(self, cls: type) -> tuple[tuple[str, str | None], ...]:
        """(name, key label) of the fields of an event dataclass or pydantic model that may
        hold free text; the label is not None for a field named like a secret."""
        fields = self._fields.get(cls)
        if fields is None:
            if issubclass(cls, BaseModel):
                every = tuple(cls.model_fields)
            elif dataclasses.is_dataclass(cls):
                every = tuple(f.name for f in dataclasses.fields(cls))
            else:
                raise TypeError(f"expected a Baton event dataclass, not {cls.__name__}")
            fields = tuple((n, self.key_label(n)) for n in every if n not in _STRUCTURAL)
            self._fields[cls] = fields
        return fields

    def _changed_fields(self, obj: Any) -> dict[str, Any] | None:
        """Field -> redacted value for the fields of `obj` that change; None when none does."""
        fields = self._fields.get(type(obj))
        if fields is None:  # () is a class without text fields: known, nothing to check
            fields = self._text_fields(type(obj))
        clean = self._clean
        changes = None
        for name, label in fields:
            old = getattr(obj, name)
            if not old:  # None, "", [], {}, 0, False: nothing to redact
                continue
            if label is None:
                if type(old) is str:
                    if old in clean:  # most event texts were checked before (replies, reasons)
                        continue
                    new = self.redact_text(old)
                else:
                    new = self.redact_value(old)
            else:
                new = self._keyed(name, old)
            if new is not old:
                if changes is None:
                    changes = {}
                changes[name] = new
        return changes

    def _model(self, model: BaseModel) -> BaseModel:
        changes = self._changed_fields(model)
        return model if changes is None else model.model_copy(update=changes)

    def redact_event(self, event: E) -> E:
        """A copy of a Baton event with its free text redacted (message, text, output,
        arguments, payload, card, slots, errors, ...); `event` itself when nothing matched.

        Ids, names, numbers and enums are left alone. Works for any event dataclass, including
        ones added later: every field not known to be structural is checked.
        """
        if isinstance(event, BaseModel):
            return self._model(event)  # type: ignore[return-value]
        changes = self._changed_fields(event)
        if changes is None:
            return event
        return dataclasses.replace(event, **changes)  # type: ignore[type-var]


class RedactingFilter(logging.Filter):
    """A `logging.Filter` that redacts each record's message, arguments and traceback.

    Attach it to a handler (`handler.addFilter(RedactingFilter())`) so it sees the records of
    every `baton.*` logger; a filter on a logger only sees that logger's own records. It never
    drops a record.
    """

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor if redactor is not None else Redactor()
        """The redactor applied to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact `record` in place; always True."""
        _redact_record(self.redactor, record)
        return True


def _redact_record(red: Redactor, record: logging.LogRecord) -> None:
    """Redact a log record's message, arguments and traceback in place."""
    try:
        message = record.getMessage()
    except Exception:  # bad format arguments: logging reports them; redact them first
        if isinstance(record.msg, str):
            record.msg = red.redact_text(record.msg)
        record.args = red.redact_value(record.args)
    else:
        redacted = red.redact_text(message)
        if redacted is not message:
            record.msg, record.args = redacted, None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = red.redact_text(record.exc_text)
    if record.stack_info:
        record.stack_info = red.redact_text(record.stack_info)


def install_log_redaction(redactor: Redactor) -> None:
    """Redact the records of every `baton` logger with `redactor` (idempotent).

    A filter on a logger only sees records made by that logger, so one `RedactingFilter` goes
    on `baton` and on each `baton.*` logger (all are created at import, before any team);
    calling again swaps the redactor in place.
    """
    names = ["baton", *(n for n in logging.Logger.manager.loggerDict if n.startswith("baton."))]
    for name in names:
        logger = logging.getLogger(name)
        mine = [f for f in logger.filters if isinstance(f, RedactingFilter)]
        if mine:
            for f in mine:
                f.redactor = redactor
        else:
            logger.addFilter(RedactingFilter(redactor))


_RUN_REDACTOR: contextvars.ContextVar[Redactor | None] = contextvars.ContextVar(
    "baton_run_redactor", default=None
)


class RunLogFilter(logging.Filter):
    """Redacts a record with the redactor of the team whose run made it (its tools, sinks,
    models), and leaves every other record alone: each team's own redactor, no process-wide
    rewriting of logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact `record` in place when a team's run made it; always True."""
        red = _RUN_REDACTOR.get()
        if red is not None:
            _redact_record(red, record)
        return True


def run_log_redaction(redactor: Redactor | None) -> contextvars.Token[Redactor | None]:
    """Make `redactor` redact the `baton.*` log records of the current run (its context:
    coroutines and the threads sync tools run in); undo with `_RUN_REDACTOR.reset(token)`."""
    if redactor is not None and not _RUN_FILTER_INSTALLED:
        _install_run_filter()
    return _RUN_REDACTOR.set(redactor)


def end_run_log_redaction(token: contextvars.Token[Redactor | None]) -> None:
    """Undo `run_log_redaction`."""
    _RUN_REDACTOR.reset(token)


_RUN_FILTER_INSTALLED: list[bool] = []


def _install_run_filter() -> None:
    """One `RunLogFilter` on `baton` and each `baton.*` logger (a filter on a logger only sees
    that logger's own records); inert outside a run with redaction."""
    names = ["baton", *(n for n in logging.Logger.manager.loggerDict if n.startswith("baton."))]
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RunLogFilter) for f in logger.filters):
            logger.addFilter(RunLogFilter())
    _RUN_FILTER_INSTALLED.append(True)
