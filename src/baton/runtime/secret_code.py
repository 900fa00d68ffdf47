"""Secret-sounding assignments in code and config, found by detect-secrets' keyword plugin.

`KeywordDetector`'s quotes-required patterns (the ones it uses for source files) find a quoted
value assigned to or compared with a secret-sounding name: `DB_PASSWORD_PROD = "x"`,
`api_key: "x"`, `my_password => "x"`, `private_key "x";`, `"x" == password`. They run on each
line of up to `MAX_LINE` characters, as detect-secrets runs them on source files, and only on
lines with a quote and one of its key words.

Baton adds one filter: the name must read as code (`db_pass`, `dbPass`, `api_key2`), be one of
the plugin's key words itself, or be a key the redactor knows. The plugin's names take any
word that starts with a key word (`secret\\w*`), and prose has words such as "Secretary".
Its heuristic filters for templates (`"{password}"`, `"${DB_PASS}"`) drop references; its
`is_indirect_reference` line test is not needed, a quoted literal is never a call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from detect_secrets.filters.heuristic import is_prefixed_with_dollar_sign, is_templated_secret
from detect_secrets.plugins.keyword import DENYLIST, QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP

from baton.runtime.secret_hits import Hit

__all__ = ["MAX_LINE", "STEMS", "find_assignments"]

STEMS = ("key", "pass", "pwd", "secret", "contrase")
"""Every key word of the plugin holds one of these (lower-cased): the gate's check."""

MAX_LINE = 1000
"""Longer lines are data (minified JSON, base64), not code: the plugin's patterns start at
every key word and scan the rest of the word (`password\\w*`), which costs the square of a
line's length on hostile text (`password_password_...`), so they only see code-sized lines."""

_PATTERNS = tuple(QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items())
_WORD = re.compile(f"(?:{'|'.join(DENYLIST)})", re.IGNORECASE)
_CODE_NAME = re.compile(r"[_0-9]|[a-z][A-Z]")
_IDENT = re.compile(r"\w*")


def _name(line: str, match: re.Match[str], value_group: int) -> str:
    """The whole name the plugin's key word is part of (`DB_PASSWORD_PROD`)."""
    for g in range(1, (match.re.groups or 0) + 1):
        word = match.group(g)
        if g != value_group and word and _WORD.fullmatch(word):
            start, stop = match.span(g)
            while start > 0 and (line[start - 1].isalnum() or line[start - 1] == "_"):
                start -= 1
            ident = _IDENT.match(line, stop)
            return line[start : ident.end() if ident else stop]
    return ""


def find_assignments(
    text: str, head: str, rank: int, key_label: Callable[[str], str | None]
) -> Iterator[Hit]:
    """The quoted values assigned to secret-sounding names in `text`."""
    offset = 0
    for line in text.splitlines(keepends=True):
        low = line.lower()
        if (
            len(line) <= MAX_LINE
            and ('"' in line or "'" in line or "`" in line)
            and any(s in low for s in STEMS)
        ):
            for rx, group in _PATTERNS:
                for m in rx.finditer(line):
                    value = m.group(group)
                    if (
                        not value
                        or is_templated_secret(value)
                        or is_prefixed_with_dollar_sign(value)
                        or (head and value.startswith(head))
                    ):
                        continue
                    name = _name(line, m, group)
                    label = key_label(name) if name else None
                    if label is None and not (_WORD.fullmatch(name) or _CODE_NAME.search(name)):
                        continue  # "Secretary: 'Li'" is prose
                    start, stop = m.span(group)
                    yield Hit(
                        offset + start, offset + stop, label or "secret", offset + m.start(), rank
                    )
        offset += len(line)
