"""Notifications where people work: approval requests, escalations, failed runs and guard
alerts pushed as cards to webhooks, Slack, WeCom and DingTalk (`docs/notifications.md`)."""

from baton.notify.cards import Card, CardField, CardKind, CardLink, GuardRate, card_for
from baton.notify.channels import (
    Channel,
    ChannelConfig,
    DingTalkChannel,
    HttpRequest,
    SlackChannel,
    WebhookChannel,
    WeComChannel,
)
from baton.notify.deliver import Notifier, NotifyConfig, backoff_s
from baton.notify.links import ApprovalLinks, LinkClaims, read_link, sign_link
from baton.notify.signing import (
    DEFAULT_WINDOW_S,
    dingtalk_sign,
    dingtalk_url,
    sign_webhook,
    verify_dingtalk,
    verify_signature,
)

__all__ = [
    "DEFAULT_WINDOW_S",
    "ApprovalLinks",
    "Card",
    "CardField",
    "CardKind",
    "CardLink",
    "Channel",
    "ChannelConfig",
    "DingTalkChannel",
    "GuardRate",
    "HttpRequest",
    "LinkClaims",
    "Notifier",
    "NotifyConfig",
    "SlackChannel",
    "WeComChannel",
    "WebhookChannel",
    "backoff_s",
    "card_for",
    "dingtalk_sign",
    "dingtalk_url",
    "read_link",
    "sign_link",
    "sign_webhook",
    "verify_dingtalk",
    "verify_signature",
]
