"""Channels against a loopback receiver: the webhook signature (good, tampered, replayed),
DingTalk's signed query checked with DingTalk's algorithm, the Slack and WeCom shapes,
Chinese text unescaped, and secrets masked on every card."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from tests.notify.notify_kit import Receiver, approval, escalated, failed, tripped

from baton.core.errors import SignatureError
from baton.notify import (
    DingTalkChannel,
    GuardRate,
    SlackChannel,
    WebhookChannel,
    WeComChannel,
    card_for,
    verify_dingtalk,
    verify_signature,
)
from baton.runtime.redact import Redactor

REDACTOR = Redactor()


def post(req_url: str, headers: dict[str, str], body: bytes) -> None:
    httpx.post(req_url, headers=headers, content=body, timeout=5).raise_for_status()


def test_webhook_signature_verifies_at_the_receiver(receiver: Receiver) -> None:
    channel = WebhookChannel(name="ops", url=f"{receiver.url}/hook", secret="s3cret-shared")
    card = card_for(approval(), REDACTOR)
    req = channel.request(card, "ev1:ops")
    post(req.url, req.headers, req.body)
    got = receiver.received[0]
    assert got.path == "/hook"
    ts = verify_signature("s3cret-shared", got.headers, got.body)
    assert abs(ts - time.time()) < 5
    data = json.loads(got.body)
    assert data["id"] == "ev1:ops" and data["kind"] == "approval"
    assert data["card"]["approval_id"] == "ap-1"
    assert got.headers["Idempotency-Key"] == "ev1:ops"
    # a body changed on the way, another secret, a missing header: refused
    with pytest.raises(SignatureError, match="does not match the body"):
        verify_signature("s3cret-shared", got.headers, got.body.replace(b"120", b"999"))
    with pytest.raises(SignatureError, match="does not match"):
        verify_signature("other", got.headers, got.body)
    with pytest.raises(SignatureError, match="no X-Baton-Signature header"):
        verify_signature("s3cret-shared", {"X-Baton-Timestamp": "1"}, got.body)


def test_an_old_signed_request_is_refused_as_a_replay() -> None:
    channel = WebhookChannel(name="ops", url="http://127.0.0.1:9/h", secret="k")
    req = channel.request(card_for(failed(), REDACTOR), "ev:ops", now=time.time() - 3600)
    with pytest.raises(SignatureError, match="outside the 300s replay window"):
        verify_signature("k", req.headers, req.body)
    # within a wider window it passes: the window is the receiver's choice
    verify_signature("k", req.headers, req.body, window_s=7200)
    # header names are case-insensitive, as HTTP's are
    lower = {k.lower(): v for k, v in req.headers.items()}
    verify_signature("k", lower, req.body, window_s=7200)


def _dingtalk_receiver_check(secret: str, query: dict[str, list[str]]) -> None:
    """What DingTalk's server does, written from its documentation: HMAC-SHA256 over
    `timestamp + "\\n" + secret`, base64; compared with the url-decoded `sign`."""
    ts, sign = query["timestamp"][0], query["sign"][0]
    want = base64.b64encode(
        hmac.new(secret.encode(), f"{ts}\n{secret}".encode(), hashlib.sha256).digest()
    ).decode()
    assert sign == want
    assert abs(int(ts) / 1000 - time.time()) < 3600


def test_dingtalk_sign_is_verified_by_the_receiver(receiver: Receiver) -> None:
    secret = "SECabc+/=具体"  # characters that must be url-encoded
    channel = DingTalkChannel(
        name="dd", url=f"{receiver.url}/robot/send?access_token=t0k", secret=secret
    )
    req = channel.request(card_for(escalated(), REDACTOR), "ev:dd")
    assert "sign=" in req.url and "%" in urlsplit(req.url).query  # url-encoded
    post(req.url, req.headers, req.body)
    got = receiver.received[0]
    assert got.query["access_token"] == ["t0k"]
    _dingtalk_receiver_check(secret, got.query)
    q = parse_qs(urlsplit(req.url).query)
    verify_dingtalk(secret, q["timestamp"][0], q["sign"][0])
    with pytest.raises(SignatureError):
        verify_dingtalk("SECother", q["timestamp"][0], q["sign"][0])
    data = json.loads(got.body)
    assert data["msgtype"] == "markdown"
    assert data["markdown"]["title"] == "Escalated to human"
    assert "服务器 srv-7 又挂了" in data["markdown"]["text"]


def test_dingtalk_without_secret_sends_the_url_as_given() -> None:
    channel = DingTalkChannel(name="dd", url="https://oapi.dingtalk.com/robot/send?access_token=x")
    req = channel.request(card_for(failed(), REDACTOR), "k")
    assert req.url == "https://oapi.dingtalk.com/robot/send?access_token=x"


def test_slack_and_wecom_shapes_with_chinese_unescaped(receiver: Receiver) -> None:
    card = card_for(approval(), REDACTOR)
    slack = SlackChannel(name="sl", url=f"{receiver.url}/slack").request(card, "k1")
    wecom = WeComChannel(name="wc", url=f"{receiver.url}/wecom?key=abc").request(card, "k2")
    for req in (slack, wecom):
        post(req.url, req.headers, req.body)
        assert "退款超过 100 元需要财务审批".encode() in req.body  # UTF-8, not \\u escapes
        assert req.headers["Content-Type"] == "application/json; charset=utf-8"
    s = json.loads(receiver.received[0].body)
    assert s["text"] == card.title
    assert [b["type"] for b in s["blocks"]] == ["header", "section", "context"]
    assert s["blocks"][0]["text"] == {"type": "plain_text", "text": card.title}
    assert "*Approvers*: finance" in s["blocks"][1]["text"]["text"]
    w = json.loads(receiver.received[1].body)
    assert set(w) == {"msgtype", "markdown"} and w["msgtype"] == "markdown"
    assert w["markdown"]["content"].startswith(f"**{card.title}**")
    assert receiver.received[1].query == {"key": ["abc"]}


def test_wecom_cuts_long_content_on_a_character_boundary() -> None:
    ev = approval(reason="很长" * 3000)
    req = WeComChannel(name="wc", url="http://127.0.0.1:9/").request(card_for(ev, REDACTOR), "k")
    content = json.loads(req.body)["markdown"]["content"]
    assert len(content.encode()) <= 4096


def test_secrets_go_out_masked_on_every_channel() -> None:
    ev = approval(
        arguments={
            "order_id": "ORD-1",
            "api_key": "sk-live-0123456789abcdef",
            "card": "4111 1111 1111 1111",
        },
        reason="user wrote password: hunter2hunter2",
    )
    card = card_for(ev, REDACTOR)
    channels = [
        WebhookChannel(name="a", url="http://127.0.0.1:9/", secret="k"),
        SlackChannel(name="b", url="http://127.0.0.1:9/"),
        WeComChannel(name="c", url="http://127.0.0.1:9/"),
        DingTalkChannel(name="d", url="http://127.0.0.1:9/", secret="s"),
    ]
    for channel in channels:
        body = channel.request(card, "k").body.decode()
        for secret in ("sk-live-0123456789abcdef", "4111 1111 1111 1111", "hunter2hunter2"):
            assert secret not in body, (channel.type, secret)
        assert "[REDACTED:" in body and "ORD-1" in body


def test_cards_of_each_kind() -> None:
    assert card_for(escalated(), REDACTOR).fields[0].value == "triage → billing → tech"
    f = card_for(failed(), REDACTOR)
    assert (f.kind, f.summary) == ("failed_run", "model down")
    g = card_for(tripped(), REDACTOR, trips=3, rate=GuardRate(trips=3, window_s=60))
    assert g.title == "Guard max_hops tripped 3 times in 60s"
    with pytest.raises(ValueError, match="not a notifiable event"):
        card_for(failed().model_copy(update={"status": "completed"}), REDACTOR)


def test_channel_config_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="must start with http"):
        SlackChannel(name="s", url="hooks.slack.com/x")
    with pytest.raises(ValueError, match="webhook secret must not be empty"):
        WebhookChannel(name="w", url="http://127.0.0.1:9/", secret="")
