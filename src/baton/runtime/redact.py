"""Redaction: secrets and personal data never reach payloads, events, traces or logs.

A `Redactor` replaces two kinds of sensitive data:

- the whole value of a sensitive **key** (`password`, `access_token`, `apiKey`, `身份证号`, ...)
  wherever a dict, a pydantic model or an event carries it;
- sensitive **values** anywhere in free text: payment card numbers (Luhn-checked, so order
  numbers of the same length survive), Chinese resident ID numbers (check digit and birth date
  verified), bearer tokens and API keys (`sk-...`, `ghp_...`, `AKIA...`, JWTs), the password
  in a URL (`postgresql://user:xxx@host`: the user name stays), and `password: xxx`,
  `my password is: xxx`, `with password xxx`, `密码：xxx`, `密码是xxx` style phrases.

The value patterns are compiled once into a single regular expression. Before it runs, a few
cheap checks (`_Gate`: 13 digits in a row, a key word before a `:` or `=`, an API key prefix,
`bearer`, `://` and `@`) let a text with nothing sensitive in it through untouched, and an
event with nothing to redact comes back as the same object. Replacements read
`[REDACTED:<name>]` and match no pattern themselves, so redacting twice gives the same result
as redacting once.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import re
from collections.abc import Mapping, Sequence
from datetime import date
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import BaseModel

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
    "cvv",
    "cvv2",
    "cvc",
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
)
"""Key names whose values are always replaced entirely (matched on whole words of the key)."""

_A = r"(?<![A-Za-z0-9０-９])"  # ASCII edges: `\b` also counts CJK characters as word characters
_Z = r"(?![A-Za-z0-9０-９])"
_D = "[0-9０-９]"  # ASCII and full-width digits (Chinese input methods type both)
_NUMBER = (
    # 13-19 digits, single spaces or dashes allowed between them, not part of a longer run nor
    # of an id (`ORD-4111...`); the last may be an X (Chinese ID check digit). `_number_label`
    # decides what it is, if anything.
    rf"{_A}(?<!{_D}[ -])(?<![A-Za-z][-_]){_D}(?:[ -]?{_D}){{11,17}}[ -]?(?:{_D}|[Xx]){_Z}"
    rf"(?![ -]{_D})"
)
_BEARER = (
    r"(?<![A-Za-z])(?ai:bearer)\s+"
    r"(?P<bearer_v>(?=[\w.~+/-]{0,200}\d)[\w.~+/-]{8,}=*|[\w.~+/-]{16,}=*)"
)
_API_KEY = (
    _A + r"(?:(?:sk|pk|rk)[-_](?:live[-_]|test[-_]|proj[-_]|ant[-_])?[A-Za-z0-9_-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{14,}|AIza[0-9A-Za-z_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)
_URL_PASSWORD = (
    # `scheme://user:secret@host`: the secret runs to the authority's last `@` (a raw `@` in a
    # password is common), never past `/`, `?`, `#` or a space; the user name may be empty
    # (`redis://:secret@host`). Only the secret is replaced.
    r"(?<=://)[^\s:/?#@\[\]]*:(?P<url_v>[^\s/?#]+)@"
)

DEFAULT_PATTERNS: Mapping[str, str] = MappingProxyType(
    {
        "card": _NUMBER,
        "id_card": _NUMBER,
        "token": _BEARER,
        "api_key": _API_KEY,
        "url_password": _URL_PASSWORD,
    }
)
"""Built-in value patterns by name (`card` and `id_card` share one scan of long digit runs).

Pass `patterns={name: None}` to turn one off, `patterns={name: regex}` to replace it.
"""

_BUILTIN_GROUPS = {
    "card": "number",
    "id_card": "number",
    "token": "bearer",
    "api_key": "api_key",
    "url_password": "url",
}
"""Group of each built-in pattern in the combined regex (card and id_card share one scan)."""

_PASSWORD_WORDS = ("password", "passwd", "passcode", "pwd", "密码", "口令")
"""Keywords that also redact `<keyword> is <value>`, `with <keyword> <value>` and
`<keyword>是<value>` phrases."""
# Words that follow "password is" in ordinary sentences: not secrets.
# fmt: off
_NOT_SECRETS = frozenset((
    "incorrect", "wrong", "invalid", "expired", "required", "correct", "reset", "changed",
    "updated", "set", "not", "too", "the", "a", "an", "being", "now", "still", "missing", "empty",
    "weak", "strong", "valid", "case", "at", "of", "and", "in", "on", "for", "to", "only", "also",
    "same", "different", "saved", "stored", "encrypted", "hashed", "needed", "sensitive",
    "secure", "protected", "this", "that", "it", "your", "my", "our", "their", "his", "her",
    "no", "never", "always", "please", "here", "there", "below", "above", "following",
))
# fmt: on
_TRAILING = ".,;:!?)]}>"
_VALUE_GROUPS = ("cred_v", "cred_vq", "cred_vs", "cred_is", "cred_with", "cred_zh")

# Fields of events and payloads that hold ids, names, numbers and enums, never free text.
# fmt: off
_STRUCTURAL = frozenset((
    "id", "ts", "trace_id", "session_id", "run_id", "agent", "hop", "type", "target", "tier",
    "score", "candidates", "verdicts", "latency_ms", "model", "usage", "tool_calls", "reask",
    "tool", "call_id", "ok", "result_chars", "truncated", "source", "cause", "guard", "to",
    "status", "path", "user_id", "policy", "context_tokens", "handoff_usage", "history_ref",
    "created_at", "priority", "parent_run_id", "parent_call_id", "task_id", "from_status",
    "to_status", "attempt", "final",
))
# fmt: on

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_WORD = re.compile(r"[^0-9a-z\u00c0-\U0010ffff]+")
_PLAIN_KEY = re.compile(r"[^\W_][\w\s-]*")
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_PROVINCES = frozenset(
    (11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46, 50)
) | frozenset((51, 52, 53, 54, 61, 62, 63, 64, 65, 71, 81, 82, 83))
_KEY_CACHE_MAX = 4096


def normalise_key(key: str) -> str:
    """A key as the key patterns see it: `apiKey`, `X-Api-Key` -> `api_key`, `x_api_key`."""
    return _NON_WORD.sub("_", _CAMEL.sub("_", key).casefold()).strip("_")


def luhn_ok(digits: Sequence[int]) -> bool:
    """True when the digits pass the Luhn (mod 10) check of payment card numbers."""
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def cn_id_ok(text: str) -> bool:
    """True for a valid Chinese resident ID number: 17 digits and a check digit (0-9 or X).

    The province code must exist, the birth date (digits 7-14) must be a real date between 1900
    and today, and the last character must be the ISO 7064 MOD 11-2 check digit.
    """
    if len(text) != 18 or not text[:17].isdigit():
        return False
    d = [int(c) for c in text[:17]]
    if d[0] * 10 + d[1] not in _ID_PROVINCES:
        return False
    year = d[6] * 1000 + d[7] * 100 + d[8] * 10 + d[9]
    try:
        born = date(year, d[10] * 10 + d[11], d[12] * 10 + d[13])
    except ValueError:
        return False
    if year < 1900 or born > date.today():
        return False
    return (
        text[17].upper()
        == "10X98765432"[sum(w * x for w, x in zip(_ID_WEIGHTS, d, strict=True)) % 11]
    )


def _number_label(raw: str, card: bool, id_card: bool) -> str | None:
    """`id_card`, `card` or None for a 13-19 digit candidate."""
    compact = raw.replace(" ", "").replace("-", "")
    if id_card and len(compact) == 18 and cn_id_ok(compact):
        return "id_card"
    if card and compact.isdigit():
        digits = [int(c) for c in compact]
        # Payment cards start with 2-6 (the major industry identifier); 1, 7, 8, 9 and 0 are
        # airlines, petroleum, telecoms and national schemes, and epoch timestamps start with 1.
        if 2 <= digits[0] <= 6 and luhn_ok(digits):
            return "card"
    return None


def _spelled(word: str) -> str:
    """A key word as text may write it: `api_key` also matches `api-key`, `API key`, `apikey`."""
    return r"[ _-]?".join(re.escape(part) for part in word.split("_"))


def _byte_map(*ranges: tuple[int, int]) -> bytes:
    """A `bytes.translate` table: bytes in `ranges` -> 0, every other byte -> 1."""
    return bytes(0 if any(lo <= b <= hi for lo, hi in ranges) else 1 for b in range(256))


# UTF-8 bytes of digits -> 0: ASCII, and the last byte of full-width ones (EF BC 90-99)
_DIGIT_BYTES = _byte_map((0x30, 0x39), (0x90, 0x99))
# bytes of API keys and JWTs -> 0: [A-Za-z0-9_.-]
_TOKEN_BYTES = _byte_map((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A), (0x5F, 0x5F), (0x2D, 0x2E))
_GITHUB_PREFIXES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")
_CLEAN_CACHE_MAX = 512
_UNSEEN = "\0"  # not a key word: marks a key not looked up yet


def _api_prefix(text: str, low: str) -> bool:
    """True when `text` holds the start of an API key pattern (`sk-`, `ghp_`, `AKIA`, ...)."""
    if "k-" in low or "k_" in low or "xox" in low or ".eyj" in low:  # sk- pk_ rk- xoxb- JWT
        return True
    if "gh" in low and any(p in low for p in _GITHUB_PREFIXES):
        return True
    return "A" in text and ("AKIA" in text or "ASIA" in text or "AIza" in text)


@dataclasses.dataclass(frozen=True)
class _Gate:
    """Cheap necessary conditions for the combined regex to match: a text that meets none of
    them is let through after a few scans in C, without running the regex.

    `re` pays a fixed cost at every position where a pattern may start, so these checks avoid
    it: runs of digits and of token characters are found with `bytes.translate` and one
    substring test, keywords with `in`, and key phrases with one regex over the lower-cased
    text *reversed* (`password: x` reads `x :drowssap`) that starts only at `:` and `=`.
    """

    digits: bool
    """Look for 13 digits in a row (spaces and dashes between them allowed)."""
    api_keys: bool
    """Look for a run of 19 token characters (the shortest key) and a key prefix."""
    bearer: bool
    """Look for `bearer`."""
    urls: bool
    """Look for `://` and `@` (`scheme://user:secret@host`)."""
    phrases_rx: re.Pattern[str] | None
    """Searched in `text.lower()[::-1]` when `text` holds a `:` or `=`: `<key>: value`."""
    is_phrases: bool
    """Look for a password word and `is`, `was`, `with` or `us(e|ing)` (`my password is x`,
    `with password x`)."""
    wide_words: tuple[str, ...]
    """Any of them in a non-ASCII `text`: CJK keys."""
    custom: re.Pattern[str] | None
    """The user's own patterns, which have no keywords to check."""

    @classmethod
    def build(cls, enabled: set[str], words: set[str], custom: list[str]) -> _Gate:
        """The gate for built-in patterns `enabled`, phrase key `words` and `custom` regexes."""
        ascii_words = sorted(w for w in words if w.isascii())
        phrases = None
        if ascii_words:
            spelled = "|".join(
                _spelled("_".join(p[::-1] for p in reversed(w.split("_")))) for w in ascii_words
            )
            phrases = re.compile(rf"[:=：][\"'\\ \t]*(?:{spelled})")
        return cls(
            digits=bool(enabled & {"card", "id_card"}),
            api_keys="api_key" in enabled,
            bearer="token" in enabled,
            urls="url_password" in enabled,
            phrases_rx=phrases,
            is_phrases=any(w in ascii_words for w in _PASSWORD_WORDS),
            wide_words=tuple(sorted(w for w in words if not w.isascii())),
            custom=re.compile("|".join(f"(?:{c})" for c in custom)) if custom else None,
        )

    def __call__(self, text: str) -> bool:
        """False only when no pattern can match `text`."""
        low = text.lower()
        if len(text) >= 13:  # the shortest card number; API keys are longer still
            try:
                raw = text.encode()
            except UnicodeEncodeError:  # a lone surrogate
                raw = text.encode("utf-8", "surrogatepass")
            if self.digits and b"\0" * 13 in raw.translate(_DIGIT_BYTES, b" -\xef\xbc"):
                return True
            if (
                self.api_keys
                and len(text) >= 19
                and b"\0" * 19 in raw.translate(_TOKEN_BYTES)
                and _api_prefix(text, low)
            ):
                return True
        if self.bearer and "bearer" in low:
            return True
        if (
            self.phrases_rx is not None
            and ("=" in text or ":" in text or "：" in text)
            and self.phrases_rx.search(low[::-1])
        ):
            return True
        if self.urls and "://" in text and "@" in text:
            return True
        if (
            self.is_phrases
            and ("passw" in low or "passc" in low or "pwd" in low)
            and ("is" in low or "was" in low or "with" in low or "us" in low)
        ):
            return True
        if self.wide_words and not text.isascii():
            for word in self.wide_words:
                if word in text:
                    return True
        return self.custom is not None and self.custom.search(text) is not None


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
    """Redact the value in `<key>: value`, `<key>=value`, `password is value`, `密码是value`."""
    replacement: str = "[REDACTED:{name}]"
    """What a redacted value becomes; `{name}` is the pattern's or key's name."""

    _key_rx: re.Pattern[str] | None = dataclasses.field(init=False, repr=False)
    _rx: re.Pattern[str] | None = dataclasses.field(init=False, repr=False)
    _gate: _Gate = dataclasses.field(init=False, repr=False)
    _labels: dict[str, str] = dataclasses.field(init=False, repr=False)
    _card: bool = dataclasses.field(init=False, repr=False)
    _id_card: bool = dataclasses.field(init=False, repr=False)
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
        patterns: dict[str, str | None] = dict(DEFAULT_PATTERNS) if self.use_defaults else {}
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

        # values: one combined regex, and the cheap checks that gate it
        alts: list[str] = []
        custom: list[str] = []
        labels: dict[str, str] = {}
        for i, (name, rx) in enumerate(patterns.items()):
            if rx is None:
                continue
            builtin = rx == DEFAULT_PATTERNS.get(name)
            group = _BUILTIN_GROUPS[name] if builtin else f"p{i}"
            if not builtin:
                custom.append(rx)
            elif group in labels:
                continue  # card and id_card share the scan
            labels[group] = name
            alts.append(f"(?P<{group}>{rx})")
        head = self.replacement.split("{name}", 1)[0]
        phrase_words = words if self.key_phrases else set()
        if phrase_words:
            alts.append(_phrases_regex(phrase_words, head))
        try:
            rx_all = re.compile("|".join(alts)) if alts else None
        except re.error as exc:  # e.g. two patterns with the same group name
            raise ValueError(
                f"the redaction patterns do not combine into one regex ({exc}); rename the "
                "named groups that two patterns share, or use scoped flags such as (?i:...)"
            ) from None
        enabled = {name for name, rx in patterns.items() if rx == DEFAULT_PATTERNS.get(name)}
        card, id_card = "card" in enabled, "id_card" in enabled
        init(self, "_rx", rx_all)
        init(self, "_gate", _Gate.build(enabled, phrase_words, custom))
        init(self, "_labels", labels)
        init(self, "_card", card)
        init(self, "_id_card", id_card)
        init(self, "_head", head)
        init(self, "_min_len", 1 if custom else 4)  # `密码:x` is the shortest built-in match
        init(self, "_key_cache", {})
        init(self, "_clean", {})
        init(self, "_fields", {})

    # -- text ----------------------------------------------------------------------------------

    def redact_text(self, text: str) -> str:
        """`text` with every sensitive value replaced; the same object when nothing matched."""
        rx = self._rx
        if rx is None or len(text) < self._min_len:
            return text
        clean = self._clean
        if text in clean:  # events repeat texts: a payload's, a final reply
            return text
        if self._gate(text):
            out = rx.sub(self._replace, text)
            if out != text:
                return out
        if len(clean) >= _CLEAN_CACHE_MAX:
            clean.clear()
        clean[text] = None  # only texts with nothing to redact are kept
        return text

    def _placeholder(self, name: str) -> str:
        return self.replacement.format(name=name)

    def _replace(self, m: re.Match[str]) -> str:
        group = m.lastgroup
        if group == "number":
            label = _number_label(m.group(), self._card, self._id_card)
            return m.group() if label is None else self._placeholder(label)
        if group == "cred":
            return self._replace_phrase(m)
        if group == "bearer":  # keep the scheme: `Bearer [REDACTED:token]`
            return self._splice(m, "bearer_v", self._labels[group])
        if group == "url":  # keep the user name: `postgresql://li:[REDACTED:url_password]@db`
            if self._head and m.group("url_v").startswith(self._head):
                return m.group()
            return self._splice(m, "url_v", self._labels[group])
        return self._placeholder(self._labels.get(group or "", "secret"))

    def _splice(self, m: re.Match[str], group: str, name: str, end: int | None = None) -> str:
        start, stop = m.span(group)
        stop = stop if end is None else end
        s = m.string
        return s[m.start() : start] + self._placeholder(name) + s[stop : m.end()]

    def _replace_phrase(self, m: re.Match[str]) -> str:
        group = next(g for g in _VALUE_GROUPS if m.group(g) is not None)
        value = m.group(group)
        end = m.end(group)
        if group in ("cred_v", "cred_is", "cred_with", "cred_zh"):  # "pw: x," keeps the comma
            stripped = value.rstrip(_TRAILING)
            end -= len(value) - len(stripped)
            value = stripped
        if not value or (self._head and value.startswith(self._head)):
            return m.group()
        if group == "cred_is" and value.casefold() in _NOT_SECRETS:
            return m.group()
        if group == "cred_with" and (value.isalpha() or value.casefold() in _NOT_SECRETS):
            return m.group()
        label = self.key_label(m.string[m.start() : m.start(group)]) or "secret"
        return self._splice(m, group, label, end)

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


def _phrases_regex(words: set[str], head: str) -> str:
    """The `<key>: value` / `password is value` / `密码是value` alternative (group `cred`)."""
    ascii_words = sorted((w for w in words if w.isascii()), key=len, reverse=True)
    other_words = sorted((w for w in words if not w.isascii()), key=len, reverse=True)
    keyword = "|".join(
        [rf"(?<![A-Za-z])(?ai:{_spelled(w)})(?![A-Za-z])" for w in ascii_words]
        + [re.escape(w) for w in other_words]
    )
    scheme = r"(?:(?ai:bearer|basic|token|digest)\s+)?"  # `Authorization: Bearer x` hides x
    # a value is never a placeholder, nor a skipped scheme (so a second pass changes nothing)
    guard = (f"(?!{re.escape(head)})" if head else "") + r"(?!(?ai:bearer|basic|token|digest)\s)"
    quoted = (  # `"password": "x"`, also inside JSON held in a JSON string (`\"x\"`)
        rf'\\?"(?P<cred_vq>{guard}[^"\\\n]+)\\?"|\\?\'(?P<cred_vs>{guard}[^\'\\\n]+)\\?\''
    )
    bare = rf"(?P<cred_v>{guard}(?!\\?[\"'])[^\s\"'&，。；、）】]+)"
    phrases = [rf"(?:{keyword})(?:\\?[\"'])?[ \t]*[:=：][ \t]*{scheme}(?:{quoted}|{bare})"]
    pw_ascii = "|".join(w for w in _PASSWORD_WORDS if w.isascii() and w in words)
    pw_other = "|".join(w for w in _PASSWORD_WORDS if not w.isascii() and w in words)
    if pw_ascii:
        # "my password is hunter2", "the password was: hunter2" (the `_NOT_SECRETS` words are
        # let through)
        phrases.append(
            rf"(?<![A-Za-z])(?ai:{pw_ascii})\s+(?ai:is|was)(?:[ \t]*[:：][ \t]*|\s+)"
            rf"(?P<cred_is>{guard}[!-~]+)"
        )
        # "log in with password hunter2", "using the pwd hunter2": the value needs a digit or a
        # symbol, so "with password reset link" and "with password managers" are left alone
        phrases.append(
            rf"(?<![A-Za-z])(?ai:with|using|use)\s+(?:(?ai:the|my|a|this|your)\s+)?"
            rf"(?ai:{pw_ascii})\s+(?!(?ai:is|was)(?:[\s:：]|$))(?P<cred_with>{guard}[!-~]+)"
        )
    if pw_other:
        # "密码是abc123", "密码为：abc123": passwords are ASCII, so "密码是错误的" is not one
        phrases.append(rf"(?:{pw_other})\s*[是为][ \t]*[:：]?\s*(?P<cred_zh>{guard}[!-~]+)")
    return "(?P<cred>" + "|".join(f"(?:{p})" for p in phrases) + ")"


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
