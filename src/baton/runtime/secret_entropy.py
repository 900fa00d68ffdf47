"""Random-looking strings where a secret is expected, scored by detect-secrets.

The charsets, the Shannon entropy and its limits are those of detect-secrets'
`Base64HighEntropyString` (4.5 bits) and `HexHighEntropyString` (3.0 bits, digit-only strings
discounted), and its heuristic filters drop sequences (`ABCDEF...`), UUIDs and ids. Where to
look is narrower than "any long word", because ids are data, not secrets:

- a **quoted** string of 20 or more characters (detect-secrets itself only scores quoted
  strings), unless the key before it names an id or a digest (`"trace_id": "..."`,
  `"sha256": "..."`, `"etag": "..."`); hex strings in quotes are left alone, since in text
  they are digests and ids (trace ids, commit hashes, sha256 sums) far more often than secrets;
- a value of 16 or more characters **labelled** by a secret word: `key`, `secret`, `token`,
  `credential`, `密钥`, `秘钥`, `令牌` with `is`, `was`, `:`, `=`, `是` or `为` before it ("my AWS
  secret key is wJalr..."); hex counts only after a word other than a bare `key` (a "cache key"
  or "idempotency key" is an id).

A bare word in a sentence is never scored: order ids, run ids, trace ids and hashes in prose
pass untouched.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator

from detect_secrets.filters.heuristic import (
    is_likely_id_string,
    is_potential_uuid,
    is_sequential_string,
)
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
)

from baton.runtime.secret_hits import Hit
from baton.runtime.secret_phrases import words_regex

__all__ = ["HIGH_ENTROPY", "find_high_entropy"]

_BASE64 = Base64HighEntropyString()
_HEX = HexHighEntropyString()
# The plugin's charset counts a backslash as base64; in text a backslash escapes a quote
# (JSON held in a JSON string), so it ends a value here.
_CHARS = re.escape(_BASE64.charset.replace("\\", ""))
_HEX_DIGITS = frozenset(string.hexdigits)
_IS = r"(?:[ \t]+(?ai:is|was)(?:[ \t]*[:：])?|[ \t]*[:=：]|[ \t]*[是为][ \t]*[:：]?)"
_QUOTED = rf"(?P<he_q>[\"'])(?P<he_quoted>[{_CHARS}]{{20,}})\\?(?P=he_q)"
_LABEL_WORDS = ("secret", "secrets", "token", "tokens", "credential", "credentials", "key", "keys")
_LABELLED = (
    rf"(?P<he_word>{words_regex((*_LABEL_WORDS, '密钥', '秘钥', '令牌'))})"
    rf"{_IS}[ \t]*\\?[\"']?(?P<he_labelled>[{_CHARS}]{{16,}})"
)
HIGH_ENTROPY = f"{_QUOTED}|{_LABELLED}"
"""The built-in `high_entropy` pattern: quoted strings and labelled values to score."""

_RX = {"quoted": re.compile(_QUOTED), "labelled": re.compile(_LABELLED)}
# Keys whose values are digests, not secrets (detect-secrets' `is_likely_id_string` knows ids)
_DIGEST_KEY = re.compile(
    r"(?:^|_)(?:sha\d*|md5|hash|digest|checksum|crc\d*|etag|integrity|fingerprint)(?:_|$)"
)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _random(value: str, hex_counts: bool) -> bool:
    """True when `value` scores above the plugin's entropy limit and is no sequence or UUID."""
    hex_only = _HEX_DIGITS.issuperset(value)
    if (hex_only and not hex_counts) or is_sequential_string(value) or is_potential_uuid(value):
        return False
    if hex_only:
        return _HEX.calculate_shannon_entropy(value) > _HEX.entropy_limit
    return _BASE64.calculate_shannon_entropy(value) > _BASE64.entropy_limit


def _key_before(text: str, start: int) -> str:
    """The key a quoted value at `start` is the value of (`"trace_id": "..."`), or ''."""
    window = text[max(0, start - 80) : start].rstrip(" \t\\")
    if not window.endswith((":", "=")):
        return ""
    window = window[:-1].rstrip(" \t\"'\\")
    i = len(window)
    while i > 0 and window[i - 1] in _KEY_CHARS:
        i -= 1
    return window[i:]


def find_high_entropy(
    text: str, kind: str, head: str, rank: int, normalise_key: Callable[[str], str]
) -> Iterator[Hit]:
    """The `quoted` or `labelled` random-looking strings in `text`, labelled `high_entropy`."""
    for m in _RX[kind].finditer(text):
        if kind == "quoted":
            group, hex_counts = "he_quoted", False
        else:
            group = "he_labelled"
            hex_counts = m.group("he_word").casefold().rstrip("s") != "key"
        value = m.group(group)
        if (head and value.startswith(head)) or not _random(value, hex_counts):
            continue
        if kind == "quoted":
            key = _key_before(text, m.start())
            if key and (
                is_likely_id_string(value, f"{key}: {value}")
                or _DIGEST_KEY.search(normalise_key(key))
            ):
                continue
        yield Hit(m.start(group), m.end(group), "high_entropy", m.start(), rank)
