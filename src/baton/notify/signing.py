"""Signatures of outgoing notifications, and the check a receiver runs on them.

The generic webhook signs `f"{timestamp}.{body}"` with HMAC-SHA256 under a secret shared with
the receiver, and sends the Unix timestamp (seconds) and the hex digest in two headers:

    X-Baton-Timestamp: 1767000000
    X-Baton-Signature: sha256=5d41402abc4b2a76b9719d911017c592...

A receiver recomputes the digest over the exact bytes it received and refuses a timestamp
further than its replay window (`DEFAULT_WINDOW_S`, five minutes) from its own clock, so a
captured request cannot be replayed later; within the window it dedupes on the
`Idempotency-Key` header (the same for every try of one card on one channel).
`verify_signature` does both checks.

DingTalk robots sign differently: `base64(HMAC-SHA256(secret, f"{timestamp_ms}\\n{secret}"))`,
sent url-encoded as the `timestamp` and `sign` query parameters (`dingtalk_url`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Mapping
from urllib.parse import parse_qsl, quote_plus, urlencode, urlsplit, urlunsplit

from baton.core.errors import SignatureError

__all__ = [
    "DEFAULT_WINDOW_S",
    "IDEMPOTENCY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "dingtalk_sign",
    "dingtalk_url",
    "sign_webhook",
    "verify_dingtalk",
    "verify_signature",
]

TIMESTAMP_HEADER = "X-Baton-Timestamp"
"""Header with the Unix time (seconds) the request was signed at."""
SIGNATURE_HEADER = "X-Baton-Signature"
"""Header with `sha256=<hex HMAC-SHA256 of "timestamp.body">`."""
IDEMPOTENCY_HEADER = "Idempotency-Key"
"""Header naming the delivery: the same on every try of one card on one channel."""
DEFAULT_WINDOW_S = 300.0
"""Replay window: how far (seconds) a signed timestamp may be from the receiver's clock."""


def _digest(secret: str, timestamp: str, body: bytes) -> str:
    message = timestamp.encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def sign_webhook(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The timestamp and signature headers of a webhook request with `body`."""
    if not secret:
        raise SignatureError("a webhook secret must not be empty; set the channel's secret")
    ts = str(int(time.time()) if timestamp is None else int(timestamp))
    return {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: f"sha256={_digest(secret, ts, body)}"}


def _header(headers: Mapping[str, str], name: str) -> str:
    """A header's value, whatever its case; SignatureError when it is missing."""
    low = name.lower()
    for key, value in headers.items():
        if key.lower() == low:
            return value
    raise SignatureError(f"the request has no {name} header: it was not signed by Baton")


def verify_signature(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    window_s: float = DEFAULT_WINDOW_S,
    *,
    now: float | None = None,
) -> int:
    """Check a signed webhook request as a receiver: the signature over the exact `body`
    received, and a timestamp within `window_s` of `now` (the receiver's clock). Returns the
    signed timestamp; raises `SignatureError` saying which check failed."""
    ts = _header(headers, TIMESTAMP_HEADER).strip()
    sent = _header(headers, SIGNATURE_HEADER).strip()
    if not ts.isdigit():
        raise SignatureError(f"{TIMESTAMP_HEADER} {ts!r} is not a Unix time in seconds")
    scheme, _, digest = sent.partition("=")
    if scheme != "sha256" or not digest:
        raise SignatureError(f"{SIGNATURE_HEADER} must read sha256=<hex digest>, got {sent!r}")
    if not hmac.compare_digest(digest, _digest(secret, ts, body)):
        raise SignatureError(
            "the signature does not match the body: the body was changed on the way, or the "
            "secret differs from the sender's"
        )
    age = (time.time() if now is None else now) - int(ts)
    if abs(age) > window_s:
        raise SignatureError(
            f"the signed timestamp is {age:.0f}s from now, outside the {window_s:g}s replay "
            "window: a replayed request, or clocks out of step (sync them with NTP)"
        )
    return int(ts)


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk's robot signature: base64 of HMAC-SHA256 over `timestamp + "\\n" + secret`."""
    message = f"{timestamp_ms}\n{secret}".encode()
    raw = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).digest()
    return base64.b64encode(raw).decode("ascii")


def dingtalk_url(url: str, secret: str, timestamp_ms: int | None = None) -> str:
    """The robot's webhook URL with the `timestamp` and `sign` query parameters added."""
    ts = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("timestamp", "sign")]
    query += [("timestamp", str(ts)), ("sign", dingtalk_sign(secret, ts))]
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote_plus)))


def verify_dingtalk(
    secret: str, timestamp: str, sign: str, window_s: float = 3600.0, *, now: float | None = None
) -> None:
    """Check DingTalk's `timestamp` and `sign` query parameters (already url-decoded) as
    DingTalk does: the signature, and a timestamp within `window_s` (DingTalk: one hour)."""
    if not timestamp.isdigit():
        raise SignatureError(f"timestamp {timestamp!r} is not a Unix time in milliseconds")
    if not hmac.compare_digest(sign, dingtalk_sign(secret, int(timestamp))):
        raise SignatureError("the DingTalk sign does not match the timestamp and secret")
    age = (time.time() if now is None else now) - int(timestamp) / 1000
    if abs(age) > window_s:
        raise SignatureError(
            f"the DingTalk timestamp is {age:.0f}s from now, outside {window_s:g}s"
        )
