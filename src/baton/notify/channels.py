"""Channels: where cards go, and the exact HTTP request each one sends. Pure formatting and
signing, no I/O: `Channel.request(card, key)` gives the URL, headers and body bytes, which
the deliverer (`baton.notify.deliver`) posts.

- `WebhookChannel`: the card as JSON, signed with HMAC-SHA256 (`baton.notify.signing`).
- `SlackChannel`: a Slack incoming webhook (`text` plus Block Kit blocks).
- `WeComChannel`: a WeCom (企业微信) group robot, `msgtype` `markdown`.
- `DingTalkChannel`: a DingTalk (钉钉) robot, `msgtype` `markdown`, signed in its query when
  the robot has a secret.

Every body is UTF-8 JSON with non-ASCII text as it is (`ensure_ascii=False`), so Chinese
reaches the chat unescaped; every request carries the `Idempotency-Key` header.
"""

from __future__ import annotations

import json
import time
from abc import abstractmethod
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from baton.notify.cards import Card, CardKind
from baton.notify.signing import IDEMPOTENCY_HEADER, dingtalk_url, sign_webhook

__all__ = [
    "Channel",
    "ChannelConfig",
    "DingTalkChannel",
    "HttpRequest",
    "SlackChannel",
    "WeComChannel",
    "WebhookChannel",
]

_WECOM_BYTES = 4096
"""WeCom refuses markdown content over 4096 bytes."""
_DINGTALK_CHARS = 5000
"""DingTalk's practical cap on a markdown message."""
_KINDS: tuple[CardKind, ...] = ("approval", "escalation", "failed_run", "guard_alert")


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One POST a channel sends: URL, headers and the exact body bytes (the ones signed)."""

    url: str
    headers: dict[str, str]
    body: bytes


def _body(data: dict[str, Any]) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _headers(key: str) -> dict[str, str]:
    return {"Content-Type": "application/json; charset=utf-8", IDEMPOTENCY_HEADER: key}


class Channel(BaseModel):
    """A configured destination: a name (unique among channels), its URL and the card kinds
    it takes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    """Names the channel in the delivery log and in idempotency keys; keep it stable."""
    url: str
    """The endpoint to POST to (http or https)."""
    kinds: tuple[CardKind, ...] = _KINDS
    """The card kinds this channel takes (all by default)."""

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"channel url {url!r} must start with http:// or https://")
        return url

    @abstractmethod
    def request(self, card: Card, key: str, *, now: float | None = None) -> HttpRequest:
        """The POST that delivers `card`, with idempotency key `key` (each channel's own)."""


class WebhookChannel(Channel):
    """A generic JSON webhook signed with HMAC-SHA256 over `timestamp + "." + body`."""

    type: Literal["webhook"] = "webhook"
    secret: SecretStr
    """Shared with the receiver, which checks requests with `verify_signature`."""

    @field_validator("secret")
    @classmethod
    def _secret(cls, secret: SecretStr) -> SecretStr:
        if not secret.get_secret_value():
            raise ValueError("a webhook secret must not be empty: receivers verify with it")
        return secret

    def request(self, card: Card, key: str, *, now: float | None = None) -> HttpRequest:
        """The card as JSON (`{"id", "kind", "card", "markdown"}`), signed."""
        body = _body(
            {"id": key, "kind": card.kind, "card": card.model_dump(), "markdown": card.markdown()}
        )
        ts = int(time.time() if now is None else now)
        headers = _headers(key) | sign_webhook(self.secret.get_secret_value(), body, ts)
        return HttpRequest(self.url, headers, body)


class SlackChannel(Channel):
    """A Slack incoming webhook (the URL Slack gives holds its secret)."""

    type: Literal["slack"] = "slack"

    def request(self, card: Card, key: str, *, now: float | None = None) -> HttpRequest:
        """`text` (the notification's fallback) and Block Kit blocks, links as buttons."""
        lines = [card.summary] if card.summary else []
        lines += [f"*{f.label}*: {f.value}" for f in card.fields]
        blocks: list[dict[str, Any]] = [
            {"type": "header", "text": {"type": "plain_text", "text": card.title[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}},
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": f"session `{card.session_id}` · trace `{card.trace_id}`",
                    }
                ],
            },
        ]
        if card.links:
            buttons = [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": link.label},
                    "url": link.url,
                }
                for link in card.links
            ]
            blocks.append({"type": "actions", "elements": buttons})
        return HttpRequest(self.url, _headers(key), _body({"text": card.title, "blocks": blocks}))


class WeComChannel(Channel):
    """A WeCom group robot (`https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...`)."""

    type: Literal["wecom"] = "wecom"

    def request(self, card: Card, key: str, *, now: float | None = None) -> HttpRequest:
        """`{"msgtype": "markdown", "markdown": {"content": ...}}`, cut to WeCom's size."""
        content = card.markdown()
        raw = content.encode("utf-8")
        if len(raw) > _WECOM_BYTES:  # cut on a character boundary
            content = raw[: _WECOM_BYTES - 3].decode("utf-8", errors="ignore") + "…"
        body = _body({"msgtype": "markdown", "markdown": {"content": content}})
        return HttpRequest(self.url, _headers(key), body)


class DingTalkChannel(Channel):
    """A DingTalk robot (`https://oapi.dingtalk.com/robot/send?access_token=...`), with its
    signing secret (`SEC...`) when the robot's security setting is 加签 (signature)."""

    type: Literal["dingtalk"] = "dingtalk"
    secret: SecretStr | None = None
    """The robot's signing secret (its 加签 setting); None for a robot without one."""

    def request(self, card: Card, key: str, *, now: float | None = None) -> HttpRequest:
        """`{"msgtype": "markdown", "markdown": {"title", "text"}}`; the URL signed."""
        text = card.markdown()[:_DINGTALK_CHARS]
        body = _body({"msgtype": "markdown", "markdown": {"title": card.title, "text": text}})
        url = self.url
        if self.secret is not None:
            ms = int((time.time() if now is None else now) * 1000)
            url = dingtalk_url(url, self.secret.get_secret_value(), ms)
        return HttpRequest(url, _headers(key), body)


ChannelConfig = Annotated[
    WebhookChannel | SlackChannel | WeComChannel | DingTalkChannel, Field(discriminator="type")
]
"""One channel in a notification config, chosen by its `type`."""
