"""Secret phrasings, one row each: the secret disappears, the words around it survive.

The first table holds texts with a secret (English and Chinese phrasings, key and token shapes,
private key blocks, code); the second holds look-alikes that carry no secret (order ids,
timestamps, phone numbers, hashes and ids, amounts, sentences about passwords) and must come
back unchanged, as the same object.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import pytest

from baton.runtime.redact import Redactor

R = Redactor()

RSA_BODY = (
    "MIIEowIBAAKCAQEAv7Zq3bWm9bB1M8fQ2Ckz0Jm5QnT0p3mQp0x7dJpL8u0sVv1X",
    "k2dQe8Hn5PjJ3l6S0Qm8uYbRr1Xo4Kz9YtW7cD2fN6hG5jL3pM8qT1vR4sU0wE9x",
    "Zq7Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5Yz7Ab9Cd1Ef3Gh5Ij7Kl9Mn1Op",
)
RSA_KEY = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *RSA_BODY, "-----END RSA PRIVATE KEY-----"])
SSH_BODY = (
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "QyNTUxOQAAACBHqGVwGH3wWz6b1H4bVqG1a0rV8cGHnHdG9kCt3hYjxwAAAJi0m2IItJti",
)
SSH_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "\n".join(SSH_BODY)
    + "\n-----END OPENSSH PRIVATE KEY-----"
)
PKCS8_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7Zq3bWm9bB1M8fQ2C"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkxpIExlaSIsImlh"
    "dCI6MTUxNjIzOTAyMn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
JWT_SIGNATURE = "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
SLACK = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_HOOK = "https://hooks.slack.com/services/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"
STRIPE = "sk_live_51H8xYzAbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"
STRIPE_RESTRICTED = "rk_live_4eC39HqLyjWDarjtT1zdp7dc"
GITHUB = "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"
GITLAB = "glpat-xYz12AbC34dEf56GhI78jK"
SENDGRID = "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"
PYPI = (
    "pypi-AgEIcHlwaS5vcmcCJDU3OTM1MjliLWIyYTYtNDEwOC05NzRkLTM0MjNiZmEyNDBlOQACKlszLCJmMmM3"
    "ZTZlZi1iNjQ0LTQ3NTAtYjFkYy0xMzVlOWQ1NjY2NGQiXQAABiBjyvUQIeY3bA2L3ZWk"
)
SEED = "abandon ability able about above absent absorb abstract absurd abuse access accident"
HEX_TOKEN = "8f14e45fceea167a5a36dedd4bea2543"
BASE64_BLOB = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3A"


class Row(NamedTuple):
    """A text, the secrets that must disappear from it and the words that must survive."""

    text: str
    secrets: tuple[str, ...]
    keep: tuple[str, ...] = ()


# fmt: off
SECRETS: dict[str, Row] = {
    # -- English phrasings --------------------------------------------------------------------
    "comma password": Row("user li, password hunter2x", ("hunter2x",), ("user li, password",)),
    "comma password symbols": Row(
        "Here you go, password Tr0ub4dor&3 thanks", ("Tr0ub4dor&3",), ("Here you go", "thanks")
    ),
    "password colon": Row("password: Zq7hunter2, please", ("Zq7hunter2",), ("please",)),
    "password to": Row(
        "please reset my password to Zebra-hunter2 now", ("Zebra-hunter2",), ("please reset",)
    ),
    "password is": Row("ok, my password is Zq7hunter2 and thanks", ("Zq7hunter2",), ("thanks",)),
    "passphrase colon": Row(
        "passphrase: correct horse battery staple",
        ("correct", "horse", "battery", "staple"),
        ("passphrase:",),
    ),
    "passphrase is": Row(
        "my passphrase is purple monkey dishwasher 42. Then sign in.",
        ("purple", "monkey", "dishwasher"),
        ("my passphrase is", "Then sign in."),
    ),
    "seed phrase": Row(f"wallet seed phrase: {SEED}", SEED.split(), ("wallet seed phrase:",)),
    "pw colon": Row("pw: s3cr3tZq then enter", ("s3cr3tZq",), ("pw:", "then enter")),
    "cvv": Row("card ok, cvv 737", ("737",), ("card ok, cvv",)),
    "cvv colon": Row("CVV: 737", ("737",), ("CVV",)),
    "security code": Row("security code is 737, exp 12/27", ("737",), ("exp 12/27",)),
    "pin": Row("PIN 4821", ("4821",), ("PIN",)),
    "my pin is": Row("my pin is 4821", ("4821",), ("my pin is",)),
    "pin number": Row("PIN number: 4821 for the card", ("4821",), ("for the card",)),
    "verification code": Row(
        "your verification code is 482913", ("482913",), ("your verification code is",)
    ),
    "otp": Row("OTP 482913 expires soon", ("482913",), ("expires soon",)),
    # -- key and token shapes (detect-secrets' plugins) -----------------------------------------
    "aws access key id": Row(f"use {AWS_ID} for the upload", (AWS_ID,), ("for the upload",)),
    "aws secret ini": Row(
        f"aws_secret_access_key = {AWS_SECRET}", (AWS_SECRET,), ("aws_secret_access_key",)
    ),
    "aws secret prose": Row(
        f"my AWS secret key is {AWS_SECRET}, keep it safe", (AWS_SECRET,), ("keep it safe",)
    ),
    "aws secret code": Row(
        f'boto3.client("s3", aws_access_key_id="{AWS_ID}", aws_secret_access_key="{AWS_SECRET}")',
        (AWS_ID, AWS_SECRET),
        ("boto3.client", "aws_secret_access_key="),
    ),
    "pem rsa block": Row(
        f"here is the key:\n{RSA_KEY}\nthanks", RSA_BODY, ("here is the key:", "thanks")
    ),
    "pem in json": Row(
        json.dumps({"type": "service_account", "private_key": f"-----BEGIN PRIVATE KEY-----\n"
                    f"{PKCS8_BODY}\n-----END PRIVATE KEY-----\n"}),
        (PKCS8_BODY,),
        ("service_account",),
    ),
    "openssh block": Row(SSH_KEY, SSH_BODY),
    "jwt": Row(f"the session is {JWT} ok", (JWT, JWT_SIGNATURE), ("the session is", "ok")),
    "jwt header": Row(f"Authorization: Bearer {JWT}", (JWT_SIGNATURE,), ("Authorization",)),
    "slack token": Row(f"bot token {SLACK} works", (SLACK,), ("works",)),
    "slack webhook": Row(f"post to {SLACK_HOOK} now", (SLACK_HOOK[32:],), ("post to", "now")),
    "stripe live key": Row(f"stripe {STRIPE} set", (STRIPE, STRIPE[-20:]), ("set",)),
    "stripe restricted key": Row(f"key {STRIPE_RESTRICTED}", (STRIPE_RESTRICTED,)),
    "github token": Row(f"GITHUB_TOKEN {GITHUB}", (GITHUB,), ("GITHUB_TOKEN",)),
    "gitlab token": Row(f"gitlab {GITLAB} ok", (GITLAB,), ("gitlab", "ok")),
    "sendgrid key": Row(f"mail via {SENDGRID}", (SENDGRID,), ("mail via",)),
    "pypi token": Row(f"twine upload -p {PYPI}", (PYPI,), ("twine upload",)),
    "basic auth url": Row(
        "clone https://deploy:Zq9!pa$$w0rd@git.example.com/repo.git",
        ("Zq9!pa$$w0rd",),
        ("https://deploy:", "@git.example.com/repo.git"),
    ),
    "dsn": Row(
        "postgresql://app:s3cr3tZq@db.internal:5432/shop",
        ("s3cr3tZq",),
        ("postgresql://app:", "@db.internal:5432/shop"),
    ),
    # -- numbers ------------------------------------------------------------------------------
    "card with spaces": Row("card 4111 1111 1111 1111, exp 12/27", ("4111 1111 1111 1111",),
                            ("exp 12/27",)),
    "chinese id": Row("ID 11010519491231002X", ("11010519491231002X",), ("ID",)),
    # -- Chinese phrasings --------------------------------------------------------------------
    "密码冒号": Row("密码：Zq12345", ("Zq12345",), ("密码",)),
    "密码是": Row("我的密码是Zq12345，谢谢", ("Zq12345",), ("我的密码是", "谢谢")),
    "密码改成": Row("帮我把密码改成 Zq12345，谢谢", ("Zq12345",), ("帮我把密码改成", "谢谢")),
    "口令": Row("口令 Tiger2026", ("Tiger2026",), ("口令",)),
    "口令为": Row("登录口令为：Tiger2026。", ("Tiger2026",), ("登录口令为", "。")),
    "PIN码": Row("PIN码 4821", ("4821",), ("PIN码",)),
    "安全码": Row("安全码 737", ("737",), ("安全码",)),
    "支付密码": Row("支付密码 123456", ("123456",), ("支付密码",)),
    "身份证号": Row("身份证号 11010519491231002X，请核实", ("11010519491231002X",), ("请核实",)),
    "卡号": Row("卡号 6222 0212 3456 7890 128", ("6222 0212 3456 7890 128",), ("卡号",)),
    "验证码": Row("验证码 482913，五分钟内有效", ("482913",), ("五分钟内有效",)),
    "验证码是": Row("您的验证码是482913", ("482913",), ("您的验证码是",)),
    "密钥": Row(f"密钥：{AWS_SECRET}", (AWS_SECRET,), ("密钥",)),
    "助记词": Row(f"助记词：{SEED}", SEED.split(), ("助记词",)),
    # -- code and config ----------------------------------------------------------------------
    "assignment": Row('DB_PASSWORD_PROD = "hunter2x"', ("hunter2x",), ("DB_PASSWORD_PROD",)),
    "assignment colon": Row('db_pass: "Zq12!x"', ("Zq12!x",), ("db_pass",)),
    "quoted high entropy": Row(
        f'config = {{"signing_seed": "{BASE64_BLOB}"}}', (BASE64_BLOB,), ("signing_seed",)
    ),
    "labelled hex token": Row(
        f"the deploy token was {HEX_TOKEN} yesterday", (HEX_TOKEN,), ("yesterday",)
    ),
}

LOOK_ALIKES: dict[str, str] = {
    "order id": "order ORD-202607-99 shipped",
    "order number": "order W2378156 is on its way",
    "long order number": "订单号 4111111111111112 已发货",  # 16 digits, Luhn-invalid
    "password is incorrect": "the password is incorrect",
    "reset your password": "Please reset your password using the link below.",
    "password manager": "I keep it in a password manager with password protection",
    "timestamp": "created 2026-07-01T10:30:00Z, ts 1719800000123",
    "phone": "call me at 13800138000 or +86 138 0013 8000",
    "commit hash": "fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "sha256 in json": (
        '{"sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}'
    ),
    "sri digest": '{"integrity": "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}',
    "ids in json": (
        '{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "run_id": "run_9f8e7d6c5b4a3f2e"}'
    ),
    "call id": '{"id": "call_8fX2kLmN9pQrStUvWxYz0aBc", "type": "function"}',
    "ulid": '{"idempotency_key": "01J8ZK3QW7X9V2M4N6P8R0T2Y4"}',
    "uuid": "request 123e4567-e89b-12d3-a456-426614174000 failed",
    "amounts": "total 1,299.00 CNY, refund ¥299.00 on 2026-07-02",
    "error code": "error code 404, retry in 30 s",
    "pin the order": "pin the order to the top",
    "key word": "the key is ready; primary key: order_id",
    "secretary": 'Secretary: "Ms Wang"',
    "token count": "sent 512 tokens: fine, input_tokens=500",
    "base64 in prose": "logo iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAC",
    "密码错误": "密码错误，请重试",
    "密码改成功": "密码改成功了，请重新登录",
    "password to words": "change the password to something stronger",
    "重置密码": "请重置密码后登录",
    "验证码已发送": "验证码已发送，请查收",
    "身份证格式": "身份证号码格式错误",
    "git url": "git@github.com:acme/repo.git",
}
# fmt: on


@pytest.mark.parametrize("row", SECRETS.values(), ids=SECRETS.keys())
def test_the_secret_disappears_and_the_words_around_it_survive(row: Row) -> None:
    out = R.redact_text(row.text)
    for secret in row.secrets:
        assert secret not in out, out
    for word in row.keep:
        assert word in out, out
    assert "[REDACTED:" in out
    assert R.redact_text(out) == out  # a second pass changes nothing


@pytest.mark.parametrize("text", LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
def test_look_alikes_come_back_unchanged(text: str) -> None:
    assert R.redact_text(text) is text


def test_the_tables_are_large_enough() -> None:
    assert len(SECRETS) >= 40
    assert len(LOOK_ALIKES) >= 20
