"""API keys, tokens and private key blocks, found by detect-secrets' maintained plugins.

The patterns are the plugin classes' own (`AWSKeyDetector.denylist`, `SlackDetector.denylist`,
...), read when a redactor is built, and a JWT must pass `JwtTokenDetector.is_formally_valid`
(its header and payload decode to JSON), so detect-secrets' fixes arrive with its releases.
`analyze_line` is not called: it reports a value without its place in the text, and when a
program turns detect-secrets' verification on (process-wide settings) it sends each candidate
to the vendor's API to check it; a secret must not leave the process to be redacted.

Baton only widens what a plugin's match leaves out: the rest of a token longer than its
pattern (Stripe's keys grew past 24 characters, a JWT's signature follows the lazy end of the
plugin's pattern), a private key's whole block (the plugin matches its `BEGIN` line), and a
few key formats detect-secrets 1.5 has no rule for (below, `_MORE`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector

from baton.runtime.secret_hits import Hit

__all__ = [
    "API_KEY",
    "API_KEY_FAMILIES",
    "KEY_STARTS",
    "KEY_WORDS",
    "PRIVATE_KEY",
    "find_api_keys",
    "find_private_keys",
]

# Plugins whose every pattern is a key or token with a fixed prefix (no key word before it).
# Left out: Twilio's and Artifactory's patterns (account ids, and `AP` + 9 letters, which
# ordinary words match), Discord's and Telegram's (no prefix: they read as any long token),
# npm's (a whole `.npmrc` line), and the keyword plugins of IBM, Cloudant and SoftLayer (the
# phrase rules and `secret_code` cover `<key> = value`).
_PLUGINS: tuple[type[RegexBasedDetector], ...] = (
    AWSKeyDetector,
    GitHubTokenDetector,
    GitLabTokenDetector,
    SlackDetector,
    StripeDetector,
    JwtTokenDetector,
    OpenAIDetector,
    SendGridDetector,
    PypiTokenDetector,
    SquareOAuthDetector,
    AzureStorageKeyDetector,
    MailchimpDetector,
)
# A token starts at the edge of a word. The plugins' patterns have no such edge, and some fail
# late (OpenAI's scans a whole run of token characters for `T3BlbkFJ`): retried at every
# position of a long run, they cost the square of its length on hostile input (`xsk-xsk-...`).
# With the edge a run is tried once.
_EDGE = r"(?<![A-Za-z0-9_.-])"
# What may follow a plugin's match and still be the same token: Stripe's keys are longer than
# the 24 characters of its pattern, GitHub's may grow, and a JWT's pattern ends lazily, before
# its signature.
_REST = {
    GitHubTokenDetector: r"[A-Za-z0-9_]*",
    StripeDetector: r"[0-9A-Za-z]*",
    JwtTokenDetector: r"[A-Za-z0-9_+/=-]*",
}
# Key formats detect-secrets 1.5 has no rule for. Its OpenAI rule knows the legacy keys only
# (`sk-...T3BlbkFJ...`), its Stripe rule live secret keys only, its GitHub rule the classic
# tokens only; project keys (`sk-proj-`), Anthropic keys (`sk-ant-`), Stripe test and
# restricted keys, fine-grained GitHub tokens and Google API keys are common in chat too.
_MORE = (
    r"(?<![A-Za-z0-9])(?:sk|pk|rk)[-_](?:live[-_]|test[-_]|proj[-_]|ant[-_])?[A-Za-z0-9_-]{16,}",
    _EDGE + r"github_pat_[A-Za-z0-9_]{22,}",
    _EDGE + r"AIza[0-9A-Za-z_-]{35}",
)
_MAX_KEY_BLOCK = 20_000  # characters between a private key's BEGIN and END lines (PGP: ~7k)


def _scoped(rx: re.Pattern[str]) -> str:
    """A plugin's compiled pattern as a part of a larger one, its flags scoped to it."""
    flags = "i" if rx.flags & re.IGNORECASE else ""
    return f"(?{flags}:{rx.pattern})" if flags else f"(?:{rx.pattern})"


def _family(plugin: type[RegexBasedDetector], rx: re.Pattern[str]) -> str:
    """Which of `API_KEY_FAMILIES` a plugin's pattern belongs to (the gate checks each
    family's own words: `eyJ`, `xox`, `aws` and a quote, a key prefix)."""
    if plugin is JwtTokenDetector:
        return "jwt"
    if plugin is SlackDetector:
        return "slack"
    if plugin is AWSKeyDetector and rx.groups:
        return "aws_secret"
    return "keys"


# The `keys` family: the lower-cased words one of which each plugin's every pattern holds (its
# prefixes). Each plugin's patterns run only on a text with one of them, and the gate lets a
# text through to the family only with one of them and a run of 19 token characters (Azure's
# keys hold `+`, `/` and `=`: `accountkey=` is looked for on its own). A test draws matches of
# every pattern (`hypothesis.strategies.from_regex`): a new prefix in a release fails there.
_STARTS: dict[object, tuple[str, ...]] = {
    AWSKeyDetector: ("a3t", "abia", "acca", "akia", "asia"),
    GitHubTokenDetector: ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    GitLabTokenDetector: (
        "glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-",
        "glptt-", "glagent-", "gloas-",
    ),
    StripeDetector: ("k_live_",),
    OpenAIDetector: ("t3blbkfj",),
    SendGridDetector: ("sg.",),
    PypiTokenDetector: ("pypi-",),
    SquareOAuthDetector: ("sq0csp-",),
    AzureStorageKeyDetector: ("accountkey=",),
    MailchimpDetector: ("-us",),
    _MORE[0]: ("sk-", "sk_", "pk-", "pk_", "rk-", "rk_"),
    _MORE[1]: ("github_pat_",),
    _MORE[2]: ("aiza",),
}  # fmt: skip
KEY_WORDS = ("accountkey=",)
"""Words of the `keys` family looked for without a run of 19 token characters."""
KEY_STARTS = tuple(sorted({w for ws in _STARTS.values() for w in ws} - set(KEY_WORDS)))
"""Words of the `keys` family looked for in a text with a run of 19 token characters."""


@dataclasses.dataclass(frozen=True)
class _Part:
    """One pattern of the `api_key` regex."""

    group: str
    """Its group in the regex."""
    jwt: bool
    """A JWT: the plugin's `is_formally_valid` must accept it."""
    in_group: bool
    """The secret is the pattern's group 1 (an AWS secret key after `aws ... key = `)."""


def _api_key_parts() -> dict[str, list[tuple[str, _Part]]]:
    """The alternatives of the `api_key` regex by family: (regex, part)."""
    families: dict[str, list[tuple[str, _Part]]] = {f: [] for f in API_KEY_FAMILIES}
    keys: dict[tuple[str, ...], list[str]] = {}
    n = 0
    for plugin in _PLUGINS:
        for rx in plugin().denylist:
            name = f"k{n}"
            n += 1
            # AWS secret keys are matched with the key word before them (`aws ... key = "x"`)
            # and captured in group 1; every other pattern is the token itself
            part = _Part(
                name, plugin is JwtTokenDetector, plugin is AWSKeyDetector and rx.groups == 1
            )
            family = _family(plugin, rx)
            edge = _EDGE if family in ("keys", "slack") else ""  # AWS secrets: a key word first
            alt = f"(?P<{name}>{edge}{_scoped(rx)}{_REST.get(plugin, '')})"
            families[family].append((alt, part))
            if family == "keys":
                keys.setdefault(_STARTS[plugin], []).append(alt)
    for extra in _MORE:
        name = f"k{n}"
        n += 1
        families["keys"].append((f"(?P<{name}>{extra})", _Part(name, False, False)))
        keys.setdefault(_STARTS[extra], []).append(f"(?P<{name}>{extra})")
    _KEYS.extend((starts, re.compile("|".join(alts))) for starts, alts in keys.items())
    return families


_KEYS: list[tuple[tuple[str, ...], re.Pattern[str]]] = []
"""The `keys` family by plugin: (its words, its patterns)."""


API_KEY_FAMILIES = ("jwt", "slack", "aws_secret", "keys")
"""The families of `API_KEY`, each with its own regex and gate check."""
_FAMILIES = _api_key_parts()
API_KEY = "|".join(rx for family in _FAMILIES.values() for rx, _part in family)
"""The built-in `api_key` pattern: detect-secrets' key and token patterns, and `_MORE`."""
_FAMILY_RX = {f: re.compile("|".join(rx for rx, _p in parts)) for f, parts in _FAMILIES.items()}
_PARTS = {part.group: part for family in _FAMILIES.values() for _rx, part in family}

# a character of a key block: anything but the start of its END line, of a PuTTY key's MAC line
# or of the next key (a character class first: `re` tests the rest only at `-`, `B` and `P`)
_BODY = r"(?:[^BP-]|B(?!EGIN )|P(?!uTTY-User-Key-File|rivate-MAC:)|-(?!----END))"
_HEADS = "|".join(_scoped(rx) for rx in PrivateKeyDetector().denylist)
PRIVATE_KEY = (
    # the plugin's BEGIN line, then the block up to its END line (`Private-MAC:` ends a PuTTY
    # key), never past the next key's start (so hostile text with many BEGIN lines costs one
    # scan); a block cut short runs to the end of its base64 lines, `\n` escapes included (a
    # key pasted from JSON)
    rf"(?:-----)?(?:{_HEADS})[^\n\\]*"
    rf"(?:{_BODY}{{0,{_MAX_KEY_BLOCK}}}(?:-----END[^\n\\]{{0,40}}?-----"
    r"|Private-MAC:[ \t]*[0-9A-Fa-f]+)|(?:\\[nr]|[A-Za-z0-9+/=\r\n])*)"
)
"""The built-in `private_key` pattern: a whole PEM, OpenSSH, PGP or PuTTY private key."""

_NAME_EQUALS = re.compile(r"[A-Za-z]+=")  # `AccountKey=`: the name stays, the key goes
_PRIVATE_KEY_RX = re.compile(PRIVATE_KEY)


def find_api_keys(text: str, family: str, head: str, rank: int) -> Iterator[Hit]:
    """The API keys and tokens of a family (`API_KEY_FAMILIES`) in `text`, labelled
    `api_key`; none starting with `head`."""
    if family == "jwt":
        matches: Iterable[re.Match[str]] = _jwt_matches(text)
    elif family == "keys":
        low = text.lower()
        matches = [m for starts, rx in _KEYS if _any_in(starts, low) for m in rx.finditer(text)]
    else:
        matches = _FAMILY_RX[family].finditer(text)
    for m in matches:
        part = _PARTS[m.lastgroup or ""]
        # the plugin's own check, on what its pattern matched: the header and the payload
        if part.jwt and not JwtTokenDetector.is_formally_valid(".".join(m.group().split(".")[:2])):
            continue
        start, stop = m.span(m.re.groupindex[part.group] + 1) if part.in_group else m.span()
        named = _NAME_EQUALS.match(text, start, stop)
        if named is not None:
            start = named.end()
        if start < stop and not (head and text.startswith(head, start)):
            yield Hit(start, stop, "api_key", m.start(), rank)


def _any_in(words: tuple[str, ...], text: str) -> bool:
    for w in words:  # noqa: SIM110 (a loop: cheaper than `any()` of a generator)
        if w in text:
            return True
    return False


_JWT_HEAD = re.compile(r"[A-Za-z0-9_=-]*")  # the charset of the first part of the JWT pattern


def _jwt_matches(text: str) -> Iterator[re.Match[str]]:
    """The JWT pattern's matches, tried at each `eyJ`.

    The plugin's pattern (`eyJ[A-Za-z0-9-_=]+\\.`...) has no edge, and `=` may both end the
    word before a token (`id_token=eyJ...`) and sit inside its first part: so where it fails at
    one `eyJ`, every `eyJ` up to the end of that first part fails alike (the same `.` must
    follow), and is skipped. Hostile text (`eyJ=eyJ=eyJ...`) then costs one scan, not its
    length squared.
    """
    rx = _FAMILY_RX["jwt"]
    pos = 0
    while (i := text.find("eyJ", pos)) >= 0:
        m = rx.match(text, i)
        if m is not None:
            yield m
            pos = max(m.end(), i + 1)
        else:
            head = _JWT_HEAD.match(text, i + 3)
            pos = max(head.end() if head else i + 3, i + 1)


def find_private_keys(text: str, rank: int) -> Iterator[Hit]:
    """The private key blocks in `text`, labelled `private_key`."""
    for m in _PRIVATE_KEY_RX.finditer(text):
        yield Hit(m.start(), m.end(), "private_key", m.start(), rank)
