"""Secrets people write in sentences: `password: x`, `my PIN is 4821`, `cvv 737`, `密码是x`.

Hand-written on purpose: detect-secrets finds key and token shapes and `secret = "x"`
assignments in code, and knows none of these: "my pin is 4821", "with password hunter2",
"..., password hunter2", "passphrase: correct horse battery staple", "cvv 737", "PIN码 4821",
"支付密码 123456", "验证码 482913", "密码是x". Each rule is tied to a key word of the redactor
(`password`, `pin`, `cvv`, `otp`, `passphrase`, `密码`, ...): without the word, no rule.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator

from baton.runtime.secret_hits import Hit

__all__ = ["NOT_SECRETS", "PASSWORD_WORDS", "PhraseRules", "Rules", "spelled", "words_regex"]

PASSWORD_WORDS = ("password", "passwd", "passcode", "pwd", "密码", "口令")
"""Key words that also redact `<word> is <value>`, `with <word> <value>`, `<word> <value>`
(the value needs a digit) and `<word>是<value>`, `<word> <value>` phrases."""

# Words that follow "password is" in ordinary sentences: not secrets.
# fmt: off
NOT_SECRETS = frozenset((
    "incorrect", "wrong", "invalid", "expired", "required", "correct", "reset", "changed",
    "updated", "set", "not", "too", "the", "a", "an", "being", "now", "still", "missing", "empty",
    "weak", "strong", "valid", "case", "at", "of", "and", "in", "on", "for", "to", "only", "also",
    "same", "different", "saved", "stored", "encrypted", "hashed", "needed", "sensitive",
    "secure", "protected", "this", "that", "it", "your", "my", "our", "their", "his", "her",
    "no", "never", "always", "please", "here", "there", "below", "above", "following",
))
# fmt: on
# Passphrases are words, and may start with an adjective ("correct horse battery staple"):
# only the function words and states of `NOT_SECRETS` start a sentence instead.
_NOT_PASSPHRASES = NOT_SECRETS - {
    "correct",
    "weak",
    "strong",
    "valid",
    "case",
    "same",
    "different",
    "sensitive",
    "secure",
    "protected",
}  # fmt: skip
_TRAILING = ".,;:!?)]}>"
_LEADING = "([{<"
_DIGIT = re.compile(r"[0-9０-９]")
_SYMBOL = re.compile(r"[^0-9A-Za-z]")

# The digit codes: (the key word that enables the rule, how text spells it, digits, label,
# the gate's words for it). "PIN码 4821" and "CVV码" are how Chinese text writes them.
_CODES = (
    (
        "pin",
        r"(?<![A-Za-z])(?ai:pin)(?:[ _-]?(?ai:code|number))?(?![A-Za-z])码?",
        (4, 8),
        "pin",
        ("pin",),
    ),
    (
        "cvv",
        r"(?<![A-Za-z])(?ai:cvv2?|cvc2?|cvn|(?:card[ _-]?)?security[ _-]?code)(?![A-Za-z])码?"
        r"|安全码",
        (3, 4),
        "cvv",
        ("cv", "code", "安全码"),
    ),
    (
        "otp",
        r"(?<![A-Za-z])(?ai:otp|one[ _-]?time[ _-]?(?:code|passcode)|verification[ _-]?code"
        r"|2fa[ _-]?code|sms[ _-]?code)(?![A-Za-z])|验证码|动态码|校验码",
        (4, 8),
        "otp",
        ("otp", "code", "验证码", "动态码", "校验码"),
    ),
)
# the first words of the codes' spellings (`pin`, `cvv`, `card security code`, `one-time code`,
# `2fa code`, `安全码`, ...)
_CODE_STARTS: tuple[str, ...] = ("pin", "cvv", "card", "security", "otp", "one", "verification")
_CODE_STARTS += ("2fa", "sms", "安", "验", "动", "校")
_CODE_ALIASES = {"otp": ("otp", "验证码"), "cvv": ("cvv", "安全码"), "pin": ("pin",)}
"""A digit code's rule is on when the redactor has one of these key words."""
_PASSPHRASE_WORDS = ("passphrase", "seed_phrase", "mnemonic", "助记词")
_PASSPHRASE = (
    r"(?<![A-Za-z])(?ai:pass[ _-]?phrase|seed[ _-]?phrase|recovery[ _-]?phrase"
    r"|mnemonic(?:[ _-]?phrase)?)(?![A-Za-z])|助记词"
)
# a word of a passphrase: its clause ends at `. `, `,`, `;`, a dash, a bracket, a quote or a
# new line ("passphrase: x y — order ORD-1" keeps the order)
_PHRASE_END = r"""\s"'。；;,，.!?—–()（）\[\]"""
_PHRASE_WORD = rf"(?:[^{_PHRASE_END}]|[.!?](?=[^{_PHRASE_END}]))+"
_PHRASE_NEXT = r"[ \t]+(?!-(?:\s|$))"  # a lone `-` ends it too
# `is`, `was`, `:`, `=`, `是`, `为`, each optional where `code` says so
_IS = r"(?:[ \t]+(?ai:is|was)(?:[ \t]*[:：])?|[ \t]*[:=：]|[ \t]*[是为][ \t]*[:：]?)"


def spelled(word: str) -> str:
    """A key word as text may write it: `api_key` also matches `api-key`, `API key`, `apikey`."""
    return r"[ _-]?".join(re.escape(part) for part in word.split("_"))


def words_regex(words: Iterable[str]) -> str:
    """Any of `words` (normalised key words, `spelled`), an ASCII one not inside a longer word.

    The regex starts with the class of the words' first characters, which `re` checks with a
    fast scan, and only then (after the character) tells which words start with it: several
    times faster than an alternation of words, each of which `re` would try at every position.
    """
    by_first: dict[str, list[str]] = {}
    for w in sorted(set(words), key=len, reverse=True):
        by_first.setdefault(w[0].lower() if w.isascii() else w[0], []).append(w)
    firsts, branches = "", []
    for first, group in sorted(by_first.items()):
        if group[0].isascii():
            pair = re.escape(first + first.upper()) if first.upper() != first else re.escape(first)
            firsts += pair
            rests = "|".join(spelled(w)[1:] for w in group)
            # after the first character: it starts a word, and the word ends there
            branches.append(rf"(?<=[{pair}])(?<![A-Za-z].)(?ai:{rests})(?![A-Za-z])")
        else:
            firsts += re.escape(first)
            rests = "|".join(re.escape(w[1:]) for w in group)
            branches.append(rf"(?<={re.escape(first)})(?:{rests})")
    return f"[{firsts}](?:{'|'.join(branches)})"


@dataclasses.dataclass(frozen=True)
class Rules:
    """A family of phrase rules, compiled into one regular expression."""

    rx: re.Pattern[str]
    """Every rule of the family, one alternative each; the value's group names the rule."""
    groups: tuple[tuple[str, str], ...]
    """(value group, label when the key word names none) of each rule."""
    head: str
    """The placeholder's start (`[REDACTED:`): a value starting with it is already redacted."""
    key_label: Callable[[str], str | None]
    """The redactor's `key_label`: names a value by the key word before it."""

    def find(self, text: str, rank: int) -> Iterator[Hit]:
        """The values of the phrases in `text`.

        A match the rules then refuse (`password is incorrect`) is retried one character
        later, so a refused reading never hides another rule's match inside it.
        """
        search = self.rx.search
        pos = 0
        while (m := search(text, pos)) is not None:
            hit = self._pick(m, rank)
            if hit is None:
                pos = m.start() + 1
            else:
                yield hit
                pos = m.end()

    def _pick(self, match: re.Match[str], rank: int) -> Hit | None:
        group, fallback = next(g for g in self.groups if match.group(g[0]) is not None)
        value = match.group(group)
        start, stop = match.span(group)
        if group not in ("cred_vq", "cred_vs"):  # "pw: x," keeps the comma
            stripped = value.rstrip(_TRAILING)
            stop -= len(value) - len(stripped)
            value = stripped
        if group in ("cred_bare", "cred_zhbare"):  # "password (at least 8 characters)"
            stripped = value.lstrip(_LEADING)
            start += len(value) - len(stripped)
            value = stripped
        if not value or (self.head and value.startswith(self.head)):
            return None
        if not _plausible(group, value):
            return None
        label = self.key_label(match.string[match.start() : match.start(group)]) or fallback
        return Hit(start, stop, label, match.start(), rank)


def _plausible(group: str, value: str) -> bool:
    """False for a value that reads as an ordinary word where a secret would be."""
    folded = value.casefold()
    if group == "cred_is":
        return folded not in NOT_SECRETS
    if group in ("cred_with", "cred_to"):
        return not value.isalpha() and folded not in NOT_SECRETS
    if group == "cred_bare":  # "..., password hunter2"; not "password managers"
        return len(value) >= 4 and _DIGIT.search(value) is not None
    if group == "cred_zhbare":  # "口令 Tiger2026", "支付密码 123456"; not "密码 OK"
        return len(value) >= 4 and (
            _DIGIT.search(value) is not None or _SYMBOL.search(value) is not None
        )
    if group == "phrase_v":
        return folded.split(None, 1)[0] not in _NOT_PASSPHRASES
    return True


@dataclasses.dataclass(frozen=True)
class PhraseRules:
    """The phrase rules for a set of key words, by family, and the gate's words for each."""

    colon: Rules
    """`<key>: value`, `<key>=value`, `"<key>": "value"` for every key word."""
    colon_rx: re.Pattern[str] | None
    """The gate's check for `colon` (ASCII key words): searched in the lower-cased text
    reversed, so it starts only at `:` and `=`."""
    colon_wide: tuple[str, ...]
    """The CJK key words of `colon`, for the gate."""
    passwords: Rules | None
    """`password is x`, `with password x`, `..., password x`."""
    chinese: Rules | None
    """`密码是x`, `支付密码 123456`, `口令 x`."""
    chinese_words: tuple[str, ...]
    """The key words of `chinese`, for the gate."""
    codes: Rules | None
    """PINs, CVVs and one-time codes: `PIN 4821`, `cvv 737`, `验证码 482913`."""
    code_stems: tuple[str, ...]
    """The gate's ASCII words for `codes` (which also need 3 digits in a row)."""
    code_wide: tuple[str, ...]
    """The gate's CJK words for `codes`."""
    passphrase: Rules | None
    """`passphrase: correct horse battery staple`, `助记词：...`."""

    @classmethod
    def build(
        cls, words: set[str], head: str, key_label: Callable[[str], str | None]
    ) -> PhraseRules | None:
        """The rules for key `words` (normalised, `normalise_key`); None without words."""
        if not words:
            return None

        def rules(family: list[tuple[str, str, str]], starts: Iterable[str]) -> Rules | None:
            if not family:
                return None
            # a match starts with one of these characters: checked first, it spares `re` the
            # alternatives at every other position (twice as fast on text with a key word)
            first = "".join(sorted({c for w in starts for c in (w[0].lower(), w[0].upper())}))
            alts = "|".join(f"(?:{r})" for r, _g, _label in family if r)
            rx = re.compile(f"(?=[{re.escape(first)}])(?:{alts})" if first else alts)
            return Rules(rx, tuple((g, label) for _r, g, label in family), head, key_label)

        guard = (f"(?!{re.escape(head)})" if head else "") + _NO_SCHEME
        ascii_words = sorted(w for w in words if w.isascii())
        colon_rx = None
        if ascii_words:
            backwards = "|".join(
                spelled("_".join(p[::-1] for p in reversed(w.split("_")))) for w in ascii_words
            )
            colon_rx = re.compile(rf"[:=：][\"'\\ \t]*(?:{backwards})")
        codes = [
            (i, word) for i, (word, *_rest) in enumerate(_CODES)
            if any(w in words for w in _CODE_ALIASES[word])
        ]  # fmt: skip
        hints = [h for i, _word in codes for h in _CODES[i][4]]
        colon = rules(_colon(words, guard), ())  # `words_regex` starts with its own check
        assert colon is not None  # there is a key word
        chinese = [w for w in PASSWORD_WORDS if not w.isascii() and w in words]
        return cls(
            colon=colon,
            colon_rx=colon_rx,
            colon_wide=tuple(sorted(w for w in words if not w.isascii())),
            passwords=rules(_passwords(words, guard), [*PASSWORD_WORDS, "with", "using", "use"]),
            chinese=rules(_chinese(chinese, guard), chinese),
            chinese_words=tuple(chinese),
            codes=rules(_codes(codes), _CODE_STARTS),
            code_stems=tuple(sorted({h for h in hints if h.isascii()})),
            code_wide=tuple(sorted({h for h in hints if not h.isascii()})),
            passphrase=rules(
                _passphrase(guard) if words & set(_PASSPHRASE_WORDS) else [],
                ["pass", "seed", "recovery", "mnemonic", "助"],
            ),
        )


# a value is never a skipped scheme (so a second pass changes nothing)
_NO_SCHEME = r"(?!(?ai:bearer|basic|token|digest)\s)"


def _colon(words: set[str], guard: str) -> list[tuple[str, str, str]]:
    """`<key>: value`, `<key>=value`, `"<key>": "value"`, `Authorization: Bearer value`."""
    keyword = words_regex(words)
    scheme = r"(?:(?ai:bearer|basic|token|digest)\s+)?"  # `Authorization: Bearer x` hides x
    quoted = (  # `"password": "x"`, also inside JSON held in a JSON string (`\"x\"`)
        rf'\\?"(?P<cred_vq>{guard}[^"\\\n]+)\\?"|\\?\'(?P<cred_vs>{guard}[^\'\\\n]+)\\?\''
    )
    bare = rf"(?P<cred_v>{guard}(?!\\?[\"'])[^\s\"'&，。；、）】]+)"
    rx = rf"(?:{keyword})(?:\\?[\"'])?[ \t]*[:=：][ \t]*{scheme}(?:{quoted}|{bare})"
    # one regex, three value groups (the next two entries add no regex)
    return [(rx, "cred_vq", "secret"), ("", "cred_vs", "secret"), ("", "cred_v", "secret")]


def _passwords(words: set[str], guard: str) -> list[tuple[str, str, str]]:
    """`password is x`, `with password x`, `..., password x` for the ASCII password words."""
    pw = "|".join(w for w in PASSWORD_WORDS if w.isascii() and w in words)
    if not pw:
        return []
    return [
        # "my password is hunter2", "the password was: hunter2" (the `NOT_SECRETS` words
        # are let through)
        (
            rf"(?<![A-Za-z])(?ai:{pw})\s+(?ai:is|was)(?:[ \t]*[:：][ \t]*|\s+)"
            rf"(?P<cred_is>{guard}[!-~]+)",
            "cred_is",
            "secret",
        ),
        # "log in with password hunter2", "using the pwd hunter2": the value needs a digit or
        # a symbol, so "with password reset link" and "with password managers" are left alone
        (
            rf"(?<![A-Za-z])(?ai:with|using|use)\s+(?:(?ai:the|my|a|this|your)\s+)?"
            rf"(?ai:{pw})\s+(?!(?ai:is|was)(?:[\s:：]|$))(?P<cred_with>{guard}[!-~]+)",
            "cred_with",
            "secret",
        ),
        # "reset my password to hunter2!", "set the pwd as S3cret": the value needs a digit or a
        # symbol, so "change the password to something stronger" is left alone
        (
            rf"(?<![A-Za-z])(?ai:{pw})\s+(?ai:to|as|into)\s+(?P<cred_to>{guard}[!-~]+)",
            "cred_to",
            "secret",
        ),
        # "user li, password hunter2": the value needs a digit, so "password manager" survives
        (
            rf"(?<![A-Za-z])(?ai:{pw})(?![A-Za-z])[ \t]+(?!(?ai:is|was)(?:[\s:：]|$))"
            rf"(?P<cred_bare>{guard}[!-~]+)",
            "cred_bare",
            "secret",
        ),
    ]


def _chinese(words: list[str], guard: str) -> list[tuple[str, str, str]]:
    """`密码是x`, `密码为：x`, `支付密码 123456`, `口令 x`, `密码abc123`."""
    if not words:
        return []
    zh = "|".join(words)
    return [
        # passwords are ASCII, so "密码是错误的" is not one
        # "密码是x", "密码为：x", "密码改成x", "密码设为x", "密码换成x"
        (
            rf"(?:{zh})\s*(?:[改设换重]?[成为]|是)[ \t]*[:：]?\s*(?P<cred_zh>{guard}[!-~]+)",
            "cred_zh",
            "secret",
        ),
        (rf"(?:{zh})[ \t]*(?![:=])(?P<cred_zhbare>{guard}[!-~]+)", "cred_zhbare", "secret"),
    ]


def _codes(codes: list[tuple[int, str]]) -> list[tuple[str, str, str]]:
    """ "PIN 4821", "my pin is 4821", "cvv 737", "安全码：737", "验证码是482913"."""
    family = []
    for i, _word in codes:
        _w, spelling, (low, high), label, _hints = _CODES[i]
        family.append(
            (
                rf"(?:{spelling})(?:{_IS})?[ \t]*"
                rf"(?P<code{i}>[0-9０-９]{{{low},{high}}})(?![0-9０-９A-Za-z])",
                f"code{i}",
                label,
            )
        )
    return family


def _passphrase(guard: str) -> list[tuple[str, str, str]]:
    """ "passphrase: correct horse battery staple", "助记词：abandon ability ...": the whole
    clause, up to a full stop, comma, semicolon, quote or line end."""
    return [
        (
            rf"(?:{_PASSPHRASE}){_IS}[ \t]*"
            rf"(?P<phrase_v>{guard}(?![\"']){_PHRASE_WORD}(?:{_PHRASE_NEXT}{_PHRASE_WORD}){{0,40}})",
            "phrase_v",
            "passphrase",
        )
    ]
