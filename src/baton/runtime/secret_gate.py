"""The cheap checks that let text with nothing sensitive in it skip every detector.

The redactor runs on every event, and most texts hold no secret. `re` pays a fixed cost at
every position where a pattern may start, so before any detector runs, a few scans in C decide
which detectors could match at all: runs of digits and of token characters are found with
`bytes.translate` and one substring test, key words with `in`, and `<key>: value` phrases with
one regex over the lower-cased text *reversed* (`password: x` reads `x :drowssap`) that starts
only at `:` and `=`. Each check is a necessary condition of its detector's patterns (a test
compares every result with the detectors run on every text), and the checks share their scans:
the words the detectors have in common are looked for once.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable

from baton.runtime.secret_hits import Hit

__all__ = ["Finder", "Gate"]

Finder = Callable[[str], Iterable[Hit]]
"""A detector: the secrets it finds in a text."""


def _byte_map(*ranges: tuple[int, int]) -> bytes:
    """A `bytes.translate` table: bytes in `ranges` -> 0, every other byte -> 1."""
    return bytes(0 if any(lo <= b <= hi for lo, hi in ranges) else 1 for b in range(256))


# UTF-8 bytes of digits -> 0: ASCII, and the last byte of full-width ones (EF BC 90-99)
_DIGIT_BYTES = _byte_map((0x30, 0x39), (0x90, 0x99))
# bytes of API keys and JWTs -> 0: [A-Za-z0-9_.-] (and `\\`, which Square's pattern allows)
_TOKEN_BYTES = _byte_map(
    (0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A), (0x5F, 0x5F), (0x2D, 0x2E), (0x5C, 0x5C)
)
# bytes of base64 -> 0: [A-Za-z0-9+/=_-]
_BASE64_BYTES = _byte_map(
    (0x30, 0x39),
    (0x41, 0x5A),
    (0x61, 0x7A),
    (0x5F, 0x5F),
    (0x2B, 0x2B),
    (0x2D, 0x2D),
    (0x2F, 0x2F),
    (0x3D, 0x3D),
)
_WIDE_LABELS = ("密钥", "秘钥", "令牌")  # the high-entropy labels in Chinese


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return text.encode("utf-8", "surrogatepass")


@dataclasses.dataclass(frozen=True)
class Gate:
    """Which detectors could find something in a text: none, for most texts."""

    numbers: Finder | None = None
    """Card and ID numbers: 13 digits in a row (spaces and dashes between them allowed)."""
    bearer: Finder | None = None
    """Bearer tokens: `bearer`."""
    jwt: Finder | None = None
    """JWTs: `eyJ`."""
    slack: Finder | None = None
    """Slack tokens and webhooks: `xox`, or `://` and `hooks.slack`."""
    aws_secret: Finder | None = None
    """AWS secret keys in code: `aws` and a quote."""
    keys: Finder | None = None
    """The other API keys: a run of 19 token characters and one of `key_starts` (their
    prefixes), or one of `key_words`."""
    key_starts: re.Pattern[str] | None = None
    """Finds a lower-cased prefix of the keys (`akia`, `ghp_`, `sk-`, ...)."""
    key_words: tuple[str, ...] = ()
    """Lower-cased words of the keys that need no run (`accountkey=`)."""
    private_keys: Finder | None = None
    """Private key blocks: `PRIVATE KEY` or `PuTTY-User-Key-File`."""
    urls: Finder | None = None
    """Passwords in URLs: `://` and `@`."""
    custom: tuple[re.Pattern[str], Finder] | None = None
    """The user's patterns (no key words to check): their regex finds a match."""
    colon: Finder | None = None
    """`<key>: value`: `colon_rx` finds a key before a `:` or `=`, or a `colon_wide` word."""
    colon_rx: re.Pattern[str] | None = None
    """Searched in `text.lower()[::-1]`: `[:=：]`, then a key word written backwards."""
    colon_wide: tuple[str, ...] = ()
    """The CJK key words."""
    passwords: Finder | None = None
    """`password is x`, `with password x`, `password x`: `pass` or `pwd`."""
    chinese: Finder | None = None
    """`密码是x`, `口令 x`: one of `chinese_words`."""
    chinese_words: tuple[str, ...] = ()
    """The CJK password words."""
    codes: Finder | None = None
    """PINs, CVVs, one-time codes: a `code_stems` word and 3 digits, or a `code_wide` word."""
    code_stems: tuple[str, ...] = ()
    """The lower-cased words of the codes (`pin`, `cvv`, `code`)."""
    code_wide: tuple[str, ...] = ()
    """The CJK words of the codes (`安全码`, `验证码`)."""
    passphrase: Finder | None = None
    """Passphrases: `pass`, `phrase`, `mnemonic` or `助记词`."""
    assignments: Finder | None = None
    """Secret assignments in code: a quote and `key`, `pass`, `pwd`, `secret` or `contrase`
    (each key word of detect-secrets' keyword plugin holds one)."""
    quoted_entropy: Finder | None = None
    """Random quoted strings: a quote, and 20 base64 characters in a row."""
    labelled_entropy: Finder | None = None
    """Random labelled values: 16 base64 characters in a row, and a label word (`key`,
    `secret`, `token`, `credential`, `密钥`, `秘钥`, `令牌`)."""

    @property
    def every(self) -> tuple[Finder, ...]:
        """Every detector, as if every check passed."""
        found = [self.numbers, self.bearer, self.jwt, self.slack, self.aws_secret, self.keys]
        found += [self.private_keys, self.urls, self.custom[1] if self.custom else None]
        found += [self.colon, self.passwords, self.chinese, self.codes, self.passphrase]
        found += [self.assignments, self.quoted_entropy, self.labelled_entropy]
        return tuple(f for f in found if f is not None)

    def __call__(self, text: str) -> tuple[Finder, ...]:
        """The detectors that could find something in `text`.

        The checks are ordered so that the rarer condition of each comes first, and the words
        several detectors need are looked for once.
        """
        found: list[Finder] = []
        low = text.lower()
        n = len(text)
        wide = not text.isascii()
        raw = runs = digits = b""
        if n >= 13:  # the shortest card number, JWT and token run any detector needs
            raw = _utf8(text)
            runs = raw.translate(_TOKEN_BYTES)
            if self.numbers is not None:
                digits = raw.translate(_DIGIT_BYTES, b" -\xef\xbc")
                if b"\0" * 13 in digits:
                    found.append(self.numbers)
        if self.bearer is not None and "bearer" in low:
            found.append(self.bearer)
        if self.jwt is not None and "eyJ" in text:
            found.append(self.jwt)
        url = "://" in text
        if self.slack is not None and ("xox" in low or (url and "hooks.slack" in low)):
            found.append(self.slack)
        quote = None  # '"' or "'" in text, looked for when needed
        if self.aws_secret is not None and "aws" in low:
            quote = '"' in text or "'" in text
            if quote:
                found.append(self.aws_secret)
        if self.keys is not None and (
            _any_in(self.key_words, low) or (b"\0" * 19 in runs and self._key_in_runs(raw, runs))
        ):
            found.append(self.keys)
        if self.private_keys is not None and (
            "PRIVATE KEY" in text or "PuTTY-User-Key-File" in text
        ):
            found.append(self.private_keys)
        if self.urls is not None and url and "@" in text:
            found.append(self.urls)
        if self.custom is not None and self.custom[0].search(text) is not None:
            found.append(self.custom[1])
        if (
            self.colon is not None
            and (":" in text or "=" in text or (wide and "：" in text))
            and (
                (self.colon_rx is not None and self.colon_rx.search(low[::-1]))
                or (wide and _any_in(self.colon_wide, text))
            )
        ):
            found.append(self.colon)
        pass_, pwd = "pass" in low, "pwd" in low
        if self.passwords is not None and (pass_ or pwd):  # password, passwd, passcode, pwd
            found.append(self.passwords)
        if self.chinese is not None and wide and _any_in(self.chinese_words, text):
            found.append(self.chinese)
        if self.codes is not None:
            if not digits and n >= 3:
                digits = (raw or _utf8(text)).translate(_DIGIT_BYTES, b" -\xef\xbc")
            if b"\0" * 3 in digits and (  # every code has 3 digits or more
                _any_in(self.code_stems, low) or (wide and _any_in(self.code_wide, text))
            ):
                found.append(self.codes)
        if self.passphrase is not None and (
            pass_ or "phrase" in low or "mnemonic" in low or (wide and "助记词" in text)
        ):
            found.append(self.passphrase)
        if self.assignments is not None:
            quote = ('"' in text or "'" in text) if quote is None else quote
            if (quote or "`" in text) and (
                # the plugin's key words each hold one of these
                pass_ or pwd or "key" in low or "secret" in low or "contrase" in low
            ):
                found.append(self.assignments)
        if (self.quoted_entropy is not None or self.labelled_entropy is not None) and n >= 16:
            runs = (raw or _utf8(text)).translate(_BASE64_BYTES)
        else:
            runs = b""
        if b"\0" * 16 in runs:
            if self.quoted_entropy is not None and b"\0" * 20 in runs:
                quote = ('"' in text or "'" in text) if quote is None else quote
                if quote:
                    found.append(self.quoted_entropy)
            if self.labelled_entropy is not None and (
                "key" in low
                or "secret" in low
                or "token" in low
                or "credential" in low
                or (wide and _any_in(_WIDE_LABELS, text))
            ):
                found.append(self.labelled_entropy)
        return tuple(found)

    def _key_in_runs(self, raw: bytes, runs: bytes) -> bool:
        """True when a run of 19 token characters holds a key prefix: each key of the family
        is such a run, so only the runs are searched, not the whole text."""
        if self.key_starts is None:
            return False
        search, run = self.key_starts.search, b"\0" * 19
        i = runs.find(run)
        while i >= 0:
            stop = runs.find(b"\1", i)
            stop = len(runs) if stop < 0 else stop
            if search(raw[i:stop].decode("ascii").lower()):
                return True
            i = runs.find(run, stop)
        return False


def _any_in(words: tuple[str, ...], text: str) -> bool:
    """True when one of `words` is in `text` (a loop: cheaper than `any()` of a generator)."""
    for w in words:  # noqa: SIM110
        if w in text:
            return True
    return False
