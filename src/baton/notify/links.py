"""Signed approve/reject links on approval cards.

A link is `{base_url}/approvals/links/{token}`, where the token is the base64url JSON of its
claims (approval, session, decision, the card's approver roles, expiry, nonce) and an
HMAC-SHA256 of them under a secret the server shares. The server (`baton serve`) checks the
signature and the expiry, that the card still waits and still needs the roles the link names,
and that the identity opening it (the server's own auth) is an approver for one of them; then
it decides through `team.approve` / `team.reject`, once: a link's nonce is taken in the
store (a lease that lives until the link expires), so a second use, or the other decision of
the same card, is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from baton.core.errors import SignatureError
from baton.notify.cards import Card, CardLink

__all__ = ["ApprovalLinks", "LinkClaims", "read_link", "sign_link"]

Decision = Literal["approve", "reject"]

MAX_TOKEN_CHARS = 2048
"""Longer tokens are refused unread."""


class LinkClaims(BaseModel):
    """What a signed link says: which decision on which card, for which roles, until when."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approval_id: str
    session_id: str
    decision: Decision
    roles: list[str]
    """The card's `required_roles` when the link was made (sorted; empty: any approver)."""
    exp: float
    """Expiry, seconds since the epoch."""
    nonce: str
    """The same for both links of one card: using one uses up both."""


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: str, body: str) -> str:
    return _b64(hmac.new(secret.encode("utf-8"), body.encode("ascii"), hashlib.sha256).digest())


def sign_link(secret: str, claims: LinkClaims) -> str:
    """The token of `claims`: `<base64url JSON>.<base64url HMAC-SHA256>`."""
    if not secret:
        raise SignatureError("the approval link secret must not be empty")
    body = _b64(claims.model_dump_json().encode("utf-8"))
    return f"{body}.{_mac(secret, body)}"


def read_link(secret: str, token: str, *, now: float | None = None) -> LinkClaims:
    """The claims of a token signed with `secret` and not expired; `SignatureError` saying
    what is wrong otherwise."""
    if len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
        raise SignatureError("not an approval link token (expected <claims>.<signature>)")
    body, mac = token.split(".")
    if not hmac.compare_digest(mac, _mac(secret, body)):
        raise SignatureError(
            "the approval link's signature does not match: it was changed, or signed with "
            "another secret than this server's"
        )
    try:
        claims = LinkClaims.model_validate(json.loads(_unb64(body)))
    except (ValueError, ValidationError) as exc:
        raise SignatureError(f"the approval link's claims cannot be read: {exc}") from None
    if (time.time() if now is None else now) > claims.exp:
        raise SignatureError("the approval link has expired; decide in the dashboard or CLI")
    return claims


class ApprovalLinks(BaseModel):
    """Settings of the approve/reject links put on approval cards (`NotifyConfig.links`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    """Where `baton serve` is reached by the people who open the links."""
    secret: SecretStr
    """Shared with the server (`create_app(link_secret=...)`, `$BATON_APPROVAL_LINK_SECRET`)."""
    ttl_s: float = Field(default=3600.0, gt=0)
    """How long a link works after the approval was requested."""

    @field_validator("base_url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"links.base_url {url!r} must start with http:// or https://")
        return url.rstrip("/")

    def for_card(self, card: Card) -> list[CardLink]:
        """Approve and reject links for an approval card (none for other kinds). They depend
        on the card alone, so every try of a delivery sends the same links."""
        if card.kind != "approval" or card.approval_id is None:
            return []
        links = []
        for decision, label in (("approve", "Approve"), ("reject", "Reject")):
            claims = LinkClaims(
                approval_id=card.approval_id,
                session_id=card.session_id,
                decision=decision,  # type: ignore[arg-type]
                roles=sorted(card.required_roles),
                exp=card.ts + self.ttl_s,
                nonce=card.event_id,
            )
            token = sign_link(self.secret.get_secret_value(), claims)
            links.append(CardLink(label=label, url=f"{self.base_url}/approvals/links/{token}"))
        return links
