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
from collections.abc import Iterator

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

__all__ = ["API_KEY", "API_KEY_FAMILIES", "PRIVATE_KEY", "find_api_keys", "find_private_keys"]

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
            families[family].append(
                (f"(?P<{name}>{edge}{_scoped(rx)}{_REST.get(plugin, '')})", part)
            )
    for extra in _MORE:
        name = f"k{n}"
        n += 1
        families["keys"].append((f"(?P<{name}>{extra})", _Part(name, False, False)))
    return families


API_KEY_FAMILIES = ("jwt", "slack", "aws_secret", "keys")
"""The families of `API_KEY`, each with its own regex and gate check."""
_FAMILIES = _api_key_parts()
API_KEY = "|".join(rx for family in _FAMILIES.values() for rx, _part in family)
"""The built-in `api_key` pattern: detect-secrets' key and token patterns, and `_MORE`."""
_FAMILY_RX = {f: re.compile("|".join(rx for rx, _p in parts)) for f, parts in _FAMILIES.items()}
_PARTS = {part.group: part for family in _FAMILIES.values() for _rx, part in family}

_HEADS = "|".join(_scoped(rx) for rx in PrivateKeyDetector().denylist)
PRIVATE_KEY = (
    # the plugin's BEGIN line, then the block up to its END line (`Private-MAC:` ends a PuTTY
    # key), never past the next key's start (so hostile text with many BEGIN lines costs one
    # scan); a block cut short runs to the end of its base64 lines, `\n` escapes included (a
    # key pasted from JSON)
    rf"(?:-----)?(?:{_HEADS})[^\n\\]*"
    rf"(?:(?:(?!BEGIN |PuTTY-User-Key-File)[\s\S]){{0,{_MAX_KEY_BLOCK}}}?"
    r"(?:-----END[^\n\\]{0,40}?-----"
    r"|Private-MAC:[ \t]*[0-9A-Fa-f]+)|(?:\\[nr]|[A-Za-z0-9+/=\r\n])*)"
)
"""The built-in `private_key` pattern: a whole PEM, OpenSSH, PGP or PuTTY private key."""

_NAME_EQUALS = re.compile(r"[A-Za-z]+=")  # `AccountKey=`: the name stays, the key goes
_PRIVATE_KEY_RX = re.compile(PRIVATE_KEY)


def find_api_keys(text: str, family: str, head: str, rank: int) -> Iterator[Hit]:
    """The API keys and tokens of a family (`API_KEY_FAMILIES`) in `text`, labelled
    `api_key`; none starting with `head`."""
    matches = _jwt_matches(text) if family == "jwt" else _FAMILY_RX[family].finditer(text)
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
