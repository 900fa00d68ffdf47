"""Redaction: planted secrets never survive, look-alikes do, and redacting twice changes nothing."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import typing
from datetime import date
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from baton.core.approval import ApprovalCard
from baton.core.events import (
    AgentStarted,
    ApprovalDecided,
    ApprovalRequested,
    BoardWritten,
    Escalated,
    EscalationCard,
    Event,
    GuardrailRewrote,
    GuardrailTripped,
    GuardTripped,
    Handoff,
    HandoffRefused,
    InterruptRaised,
    InterruptResumed,
    ModelCalled,
    RouteDecided,
    RunFinished,
    RunResumed,
    RunStarted,
    StateUpdated,
    TaskTransitioned,
    TextDelta,
    ToolCalled,
    ToolRefused,
)
from baton.core.interrupt import InterruptCard
from baton.core.messages import Usage
from baton.core.payload import HandoffPayload
from baton.runtime.redact import RedactingFilter, Redactor, cn_id_ok, luhn_ok

R = Redactor()

# -- independent generators (not the module's own checks) ---------------------------------------


def luhn_digit(body: str) -> str:
    """The digit that makes `body + digit` Luhn-valid."""
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        if i % 2 == 0:  # doubled once the check digit is appended
            d = sum(divmod(d * 2, 10))
        total += d
    return str(-total % 10)


def id_check(body17: str) -> str:
    """ISO 7064 MOD 11-2: weights are 2^(17-i) mod 11."""
    s = sum(int(c) * pow(2, 17 - i, 11) for i, c in enumerate(body17))
    return "0123456789X"[(12 - s % 11) % 11]


def grouped(digits: str, sep: str) -> str:
    return sep.join(digits[i : i + 4] for i in range(0, len(digits), 4)) if sep else digits


@st.composite
def cards(draw: st.DrawFn) -> tuple[str, str]:
    """(as written, digits) of a Luhn-valid payment card number, 13-19 digits."""
    n = draw(st.integers(13, 19))
    body = draw(st.sampled_from("23456")) + draw(
        st.text("0123456789", min_size=n - 2, max_size=n - 2)
    )
    digits = body + luhn_digit(body)
    return grouped(digits, draw(st.sampled_from(["", " ", "-"]))), digits


@st.composite
def order_numbers(draw: st.DrawFn) -> str:
    """A 13-19 digit number that is no card: Luhn-invalid, or not starting with 2-6."""
    n = draw(st.integers(13, 19))
    if draw(st.booleans()):
        body = draw(st.sampled_from("23456")) + draw(
            st.text("0123456789", min_size=n - 2, max_size=n - 2)
        )
        good = luhn_digit(body)
        return body + draw(st.sampled_from([d for d in "0123456789" if d != good]))
    body = draw(st.sampled_from("1789")) + draw(
        st.text("0123456789", min_size=n - 2, max_size=n - 2)
    )
    return body + luhn_digit(body)


PROVINCES = [11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46]


@st.composite
def cn_ids(draw: st.DrawFn) -> str:
    province = draw(st.sampled_from(PROVINCES))
    area = draw(st.integers(0, 9999))
    born = draw(st.dates(date(1900, 1, 1), date.today()))
    seq = draw(st.integers(0, 999))
    body = f"{province:02d}{area:04d}{born:%Y%m%d}{seq:03d}"
    return body + id_check(body)


SECRET_CHARS = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789!@$%^*"
passwords = st.text(SECRET_CHARS, min_size=6, max_size=16).filter(
    lambda s: any(c.isdigit() for c in s)
)
tokens = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=20, max_size=40
)


@st.composite
def planted(draw: st.DrawFn) -> tuple[str, list[str]]:
    """(a sentence carrying a secret, the strings that must not survive)."""
    kinds = ["card", "id", "header", "bearer", "sk", "pw_en", "pw_is", "pw_zh", "json"]
    kinds += ["pw_is_colon", "pw_with", "pw_dot", "pw_zh_dot", "url", "url_token"]
    kind = draw(st.sampled_from(kinds))
    if kind == "card":
        written, digits = draw(cards())
        return f"my card is {written} thanks", [written, digits]
    if kind == "id":
        number = draw(cn_ids())
        return f"身份证号码{number}，请核实", [number]
    if kind == "header":
        token = draw(tokens) + "9"
        return f"curl -H 'Authorization: Bearer {token}' https://x", [token]
    if kind == "bearer":
        token = draw(tokens) + "9"
        return f"send it with bearer {token} please", [token]
    if kind == "sk":
        key = "sk-" + draw(tokens)
        return f"use key {key} for the call", [key[3:]]
    secret = draw(passwords)
    if kind == "pw_en":
        return f"Password: {secret}", [secret]
    if kind == "pw_is":
        return f"ok, my password is {secret} and thanks", [secret]
    if kind == "pw_zh":
        return f"我的密码是{secret}，谢谢", [secret]
    if kind == "pw_is_colon":
        return f"my password is: {secret}", [secret]
    if kind == "pw_with":
        return f"log in with password {secret}, thanks", [secret]
    if kind == "pw_dot":
        return f"password: {secret}.", [secret]
    if kind == "pw_zh_dot":
        return f"密码：{secret}。", [secret]
    if kind == "url":
        return f"dsn postgresql://li:{secret}@db.internal:5432/app ok", [secret]
    if kind == "url_token":
        token = draw(tokens)
        return f"clone https://li:{token}@git.example.com/x.git", [token]
    return json.dumps({"tool": "login", "arguments": {"user": "li", "password": secret}}), [secret]


filler = st.text(
    st.sampled_from("abcdefghij klmnopq rstuvwxyz ABC 你好订单服务器查询发票 ,.!?，。"), max_size=40
)


@st.composite
def sentences(draw: st.DrawFn) -> tuple[str, list[str]]:
    text, secrets = draw(planted())
    return f"{draw(filler)} {text} {draw(filler)}", secrets


# -- text ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "card",
    [
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "5555555555554444",
        "378282246310005",
        "6011111111111117",
        "3530111333300000",
        "6250941006528599",
    ],
)
def test_known_test_cards_are_redacted(card: str) -> None:
    assert R.redact_text(f"card {card}, exp 12/27") == "card [REDACTED:card], exp 12/27"


@given(cards())
def test_luhn_valid_cards_are_redacted(card: tuple[str, str]) -> None:
    written, digits = card
    out = R.redact_text(f"卡号{written}。")
    assert out == "卡号[REDACTED:card]。" or out == "卡号[REDACTED:id_card]。"
    assert digits not in out


@given(order_numbers())
def test_order_numbers_of_card_length_survive(number: str) -> None:
    text = f"order {number} shipped"
    out = R.redact_text(text)
    if len(number) == 18 and cn_id_ok(number):  # a valid ID number is redacted as one
        assert out == "order [REDACTED:id_card] shipped"
    else:
        assert out == text


def test_timestamps_and_ids_survive() -> None:
    for text in [
        "ts 1719800000123",
        "trace 4bf92f3577b34da6a3ce929d0e0e4736",
        "ORD-4111111111111111",
        "W2378156",
        "call 13800138000",
        "1234 5678 9012 3456 7890 1234",  # longer than any card
    ]:
        assert R.redact_text(text) == text


@given(cn_ids())
def test_valid_chinese_ids_are_redacted(number: str) -> None:
    assert cn_id_ok(number)
    assert R.redact_text(f"身份证{number}") == "身份证[REDACTED:id_card]"
    assert R.redact_text(f"ID {number.lower()} ok") == "ID [REDACTED:id_card] ok"


@given(cn_ids(), st.integers(1, 10))
def test_chinese_ids_with_a_wrong_check_digit_are_not_ids(number: str, shift: int) -> None:
    alphabet = "0123456789X"
    wrong = number[:17] + alphabet[(alphabet.index(number[17]) + shift) % 11]
    assert not cn_id_ok(wrong)
    out = R.redact_text(f"号码 {wrong} 。")
    assert "id_card" not in out
    if out != f"号码 {wrong} 。":  # only a card number can still match
        assert wrong.isdigit() and wrong[0] in "23456" and luhn_ok([int(c) for c in wrong])


def test_chinese_ids_need_a_plausible_birth_date_and_province() -> None:
    good = "11010519491231002X"
    assert cn_id_ok(good)
    future = f"110105{date.today().year + 1}0101002"
    bad_month = "110105194913310021"[:17]
    no_province = "99" + good[2:17]
    for body in (future, bad_month, no_province):
        assert not cn_id_ok(body + id_check(body))


@given(sentences())
@settings(max_examples=300)
def test_planted_secrets_never_survive(case: tuple[str, list[str]]) -> None:
    text, secrets = case
    out = R.redact_text(text)
    for secret in secrets:
        assert secret not in out
    assert "[REDACTED:" in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password: hunter2, please", "password: [REDACTED:password], please"),
        ("PWD=s3cret&user=li", "PWD=[REDACTED:pwd]&user=li"),
        ("my password is hunter2.", "my password is [REDACTED:password]."),
        ("your password is incorrect", "your password is incorrect"),
        ("密码：abc123", "密码：[REDACTED:密码]"),
        ("密码是abc123，谢谢", "密码是[REDACTED:密码]，谢谢"),
        ("密码是错误的", "密码是错误的"),
        ("my password is: hunter2", "my password is: [REDACTED:password]"),
        ("The password was hunter2!", "The password was [REDACTED:password]!"),
        (
            "log in with password hunter2, thanks",
            "log in with password [REDACTED:password], thanks",
        ),
        ("using the pwd x9y8z7;", "using the pwd [REDACTED:pwd];"),
        ("password: hunter2.", "password: [REDACTED:password]."),
        ("(password=hunter2)", "(password=[REDACTED:password])"),
        ("密码：abc123。", "密码：[REDACTED:密码]。"),
        ("密码为：abc123；", "密码为：[REDACTED:密码]；"),
        ("with my password is: hunter2", "with my password is: [REDACTED:password]"),
        (
            "postgresql://user:pass@host/db",
            "postgresql://user:[REDACTED:url_password]@host/db",
        ),
        ("https://user:token123@host", "https://user:[REDACTED:url_password]@host"),
        ("redis://:pass@host:6379/0", "redis://:[REDACTED:url_password]@host:6379/0"),
        (
            "mongodb+srv://admin:p@ss:w0rd@cluster0.example.net/db?retryWrites=true",
            "mongodb+srv://admin:[REDACTED:url_password]@cluster0.example.net/db?retryWrites=true",
        ),
        ("API key: abc", "API key: [REDACTED:api_key]"),
        ("cvv: 123", "cvv: [REDACTED:cvv]"),
        ("Authorization: Bearer abc.def.ghi", "Authorization: Bearer [REDACTED:authorization]"),
        ('{"token": "t0k3n"}', '{"token": "[REDACTED:token]"}'),
        ('{\\"password\\": \\"x1\\"}', '{\\"password\\": \\"[REDACTED:password]\\"}'),
        ("sent 512 tokens: fine", "sent 512 tokens: fine"),
        ("input_tokens=500", "input_tokens=500"),
        ("ghp_" + "a1" * 18, "[REDACTED:api_key]"),
        ("AKIAABCDEFGHIJKLMNOP", "[REDACTED:api_key]"),
        ("key=sk_live_" + "a1" * 12, "key=[REDACTED:api_key]"),
        ("slack xoxb-1234567890-abcdefghij ok", "slack [REDACTED:api_key] ok"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N ok",
            "jwt [REDACTED:api_key] ok",
        ),
    ],
)
def test_phrases_and_keys_in_text(text: str, expected: str) -> None:
    assert R.redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Click the password reset link we sent you.",
        "I forgot my password",
        "forgot my password.",
        "reply with password reset link",
        "protect the file with password protection",
        "files sent with password-protected archives",
        "log in with password swordfish",  # a letters-only word after `with password`: no
        "with password is",
        "the password was changed yesterday",
        "my password is: incorrect",
        "order ORD-2026 shipped, ORD-2026-0001 too",
        "see https://example.com/a?b=c@d and https://host:8443/path@x",
        "git@github.com:acme/repo.git and ssh://git@github.com:22/acme/repo",
        "mail li@example.com at 10:30",
        "密码错误，请重试",
    ],
)
def test_look_alikes_survive(text: str) -> None:
    assert R.redact_text(text) == text


@given(st.text(max_size=200))
@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
def test_redacting_twice_equals_once_on_any_text(text: str) -> None:
    once = R.redact_text(text)
    assert R.redact_text(once) == once


@given(sentences())
def test_redacting_twice_equals_once_on_secrets(case: tuple[str, list[str]]) -> None:
    once = R.redact_text(case[0])
    assert R.redact_text(once) == once


# fmt: off
PIECES = [
    "4111", "1111", "0", "7", " ", "-", "X", "x", "：", ":", "=", '"', "'", "\\", "is", "是", "为",
    "password", "Password", "PWD", "api", "_", "key", "Key", "token", "secret", "bearer",
    "Bearer ", "sk-", "ghp_", "AKIA", "xoxb-", "eyJ", ".", "abcdefgh", "ABCD", "1234567", "身份证",
    "密码", "卡号", "４", "１", "110101", "19900307", "451", "号", "\n", "\t", "password is ",
    "my pwd is ", "api key: ", "Authorization: Bearer ", "4222222", "222222",
    "://", "@", "https://", "li:", "/", "?", "#", "with ", "with password ", "was ", "using ",
    "use pwd ", "password is: ", "密码为：",
]
# fmt: on


@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
@example("card 4222222222222 ok")  # the shortest cards and phrases, at the gates' limits
@example("密码:x")
@example("my password is hunter2")
@example("sk-" + "a" * 16)
@example("redis://:x@h")
@example("with pwd a1")
@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
def test_the_fast_path_never_changes_a_result(text: str) -> None:
    """The cheap checks only skip texts that the full regex would leave as they are."""
    full = Redactor()
    object.__setattr__(full, "_gate", lambda _text: True)
    object.__setattr__(full, "_min_len", 0)
    assert R.redact_text(text) == full.redact_text(text)


def test_odd_text_is_handled() -> None:
    assert R.redact_text("\ud800 card 4111 1111 1111 1111") == "\ud800 card [REDACTED:card]"
    full_width = "卡号４１１１ １１１１ １１１１ １１１１"  # typed with a Chinese input method
    assert R.redact_text(full_width) == "卡号[REDACTED:card]"
    assert R.redact_text("") == ""


def test_clean_text_comes_back_as_the_same_object() -> None:
    text = "Your invoice for ORD-202607-99 was issued; 退款将在3个工作日内到账。"
    assert R.redact_text(text) is text


# -- keys and values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "label"),
    [
        ("password", "password"),
        ("userPassword", "password"),
        ("X-Api-Key", "api_key"),
        ("apiKey", "api_key"),
        ("access_token", "token"),
        ("Authorization", "authorization"),
        ("card_number", "card_number"),
        ("cardNumber", "card_number"),
        ("身份证号", "身份证"),
        ("支付密码", "密码"),
        ("max_tokens", None),
        ("tokenizer", None),
        ("order_id", None),
        ("passenger", None),
    ],
)
def test_sensitive_keys(key: str, label: str | None) -> None:
    assert R.key_label(key) == label


def test_values_under_sensitive_keys_are_replaced_and_the_input_is_untouched() -> None:
    value: dict[str, Any] = {
        "user": {"name": "li", "password": "hunter2", "cardNumber": 4111111111111111},
        "list": [{"token": ["a", "b"]}, "card 4111 1111 1111 1111"],
        "pan": 4111111111111111,
        "max_tokens": 5,
        "password_set": True,
        "otp": None,
    }
    before = json.dumps(value)
    out = R.redact_value(value)
    assert json.dumps(value) == before
    assert out == {
        "user": {
            "name": "li",
            "password": "[REDACTED:password]",
            "cardNumber": "[REDACTED:card_number]",
        },
        "list": [{"token": "[REDACTED:token]"}, "card [REDACTED:card]"],
        "pan": "[REDACTED:card]",
        "max_tokens": 5,
        "password_set": True,
        "otp": None,
    }
    assert R.redact_value(out) == out
    clean = {"order_id": "ORD-1", "items": [1, 2], "note": "fast"}
    assert R.redact_value(clean) is clean


def test_configuration() -> None:
    r = Redactor(keys=["pin", "member_secret"], patterns={"employee": r"EMP-\d{6}", "card": None})
    assert r.redact_value({"userPin": "1234", "member_secret": "x"}) == {
        "userPin": "[REDACTED:pin]",
        "member_secret": "[REDACTED:member_secret]",
    }
    assert r.redact_text("pin: 1234, spinner: 5") == "pin: [REDACTED:pin], spinner: 5"
    assert r.redact_text("EMP-123456 paid with 4111 1111 1111 1111") == (
        "[REDACTED:employee] paid with 4111 1111 1111 1111"
    )
    assert r.redact_text("身份证110101199003074514") == "身份证[REDACTED:id_card]"

    bare = Redactor(use_defaults=False, patterns={"ticket": r"TKT-\d+"})
    assert bare.redact_value({"password": "x", "t": "TKT-9"}) == {
        "password": "x",
        "t": "[REDACTED:ticket]",
    }
    assert bare.redact_text("password: x 4111 1111 1111 1111") == "password: x 4111 1111 1111 1111"

    stars = Redactor(replacement="***")
    assert stars.redact_text("password: hunter2") == "password: ***"
    assert stars.redact_text(stars.redact_text("password: hunter2")) == "password: ***"
    dsn = "postgresql://li:s3cret@db/app"
    assert stars.redact_text(dsn) == "postgresql://li:***@db/app"
    assert stars.redact_text(stars.redact_text(dsn)) == "postgresql://li:***@db/app"
    assert Redactor(patterns={"url_password": None}).redact_text(dsn) == dsn
    assert Redactor(key_phrases=False).redact_text("with password s3cret9") == (
        "with password s3cret9"
    )

    with pytest.raises(ValueError, match="employee"):
        Redactor(patterns={"employee": "EMP-("})
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.use_defaults = False  # type: ignore[misc]


# -- events --------------------------------------------------------------------------------------


def _events(text: str, secret_args: dict[str, Any]) -> list[Any]:
    """One event of every type, free text carrying `text` and arguments `secret_args`."""
    base: dict[str, Any] = {
        "trace_id": "t" * 32,
        "session_id": "s1",
        "run_id": "r1",
        "agent": "billing",
    }
    payload = HandoffPayload(
        reason=text,
        objective=text,
        state={"order_id": "ORD-1", **secret_args, "note": text},
        completed_steps=[text],
        constraints=[text],
        reply_to_user=text,
        trace_id="t" * 32,
        session_id="s1",
        source="triage",
        target="billing",
        hop=1,
        path=["triage"],
        history_ref="s1",
    )
    card = EscalationCard(
        session_id="s1",
        trace_id="t" * 32,
        path=["triage", "billing"],
        reasons=[text],
        state={**secret_args, "note": text},
        last_user_message=text,
        last_reply=text,
    )
    approval = ApprovalCard(
        id="apr_1",
        session_id="s1",
        run_id="r1",
        trace_id="t" * 32,
        agent="billing",
        kind="tool",
        tool="pay",
        call_id="c1",
        arguments={**secret_args, "memo": text},
        reason=text,
        state={**secret_args, "note": text},
    )
    return [
        RunStarted(**base, message=text),
        RouteDecided(**base, target="billing", tier="rules", verdicts=("rules: billing",)),
        AgentStarted(**base, reason=text),
        ModelCalled(
            **base, model="m", usage=Usage(input_tokens=3), latency_ms=1.0, text=text, error=text
        ),
        ToolCalled(
            **base,
            tool="pay",
            call_id="c1",
            arguments={**secret_args, "memo": text},
            ok=False,
            error=text,
        ),
        StateUpdated(**base, slots={**secret_args, "memo": text}, source="tool", tool="pay"),
        Handoff(**base, payload=payload),
        HandoffRefused(**base, target="tech", reason=text),
        GuardTripped(**base, guard="ungrounded_id", detail=text),
        GuardrailTripped(**base, guardrail="no_jailbreak", stage="input", reason=text),
        GuardrailRewrote(**base, guardrail="mask_phones", reason=text),
        Escalated(**base, to="human", card=card),
        RunFinished(**base, status="completed", output=text, error=text),
        ToolRefused(**base, tool="pay", call_id="c1", reason=text, missing_scopes=("pay:x",)),
        ApprovalRequested(**base, card=approval),
        ApprovalDecided(**base, approval_id="apr_1", decision="rejected", by="alice", reason=text),
        RunResumed(**base, checkpoint=3, reason=text),
        TaskTransitioned(
            **base, task_id="t1", from_status="reviewing", to_status="retry", reason=text, attempt=1
        ),
        InterruptRaised(
            **base,
            card=InterruptCard(
                id="int_1",
                session_id="s1",
                run_id="r1",
                trace_id="t" * 32,
                agent="billing",
                call_id="c1",
                name="confirm",
                value={**secret_args, "question": text},
            ),
        ),
        InterruptResumed(**base, interrupt_id="int_1", name="confirm"),
        BoardWritten(**base, board="b", key="notes", version=1, seq=1),
        TextDelta(**base, text=text),
    ]


EVENT_TYPES = set(typing.get_args(typing.get_args(Event)[0]))


def test_every_event_type_is_covered() -> None:
    assert {type(e) for e in _events("x", {})} == EVENT_TYPES


def _dump(event: Any) -> str:
    return str(event.model_dump_json())


@given(sentences(), passwords)
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
def test_planted_secrets_never_survive_any_event(
    case: tuple[str, list[str]], key_secret: str
) -> None:
    text, secrets = case
    for event in _events(text, {"password": key_secret, "cvv": 123}):
        before = _dump(event)
        out = R.redact_event(event)
        assert _dump(event) == before, "the input event was changed"
        dumped = _dump(out)
        for secret in [*secrets, key_secret]:
            assert secret not in dumped, (type(event).__name__, secret, dumped)
        assert out.id == event.id and out.ts == event.ts and out.trace_id == event.trace_id
        again = R.redact_event(out)
        assert _dump(again) == dumped


def test_clean_events_come_back_unchanged_and_uncopied() -> None:
    for event in _events("Your invoice for ORD-202607-99 is issued.", {"amount": "12.50"}):
        assert R.redact_event(event) is event


def test_redacted_payloads_stay_valid_payloads() -> None:
    handoff = _events("password: hunter2", {"card_number": "4111 1111 1111 1111"})[6]
    out = R.redact_event(handoff)
    assert isinstance(out.payload, HandoffPayload)
    assert out.payload.state["card_number"] == "[REDACTED:card_number]"
    assert out.payload.reason == "password: [REDACTED:password]"
    assert HandoffPayload.model_validate(out.payload.model_dump()) == out.payload
    assert R.redact_value(handoff.payload) == out.payload


# -- logging -------------------------------------------------------------------------------------


def test_logging_filter_redacts_messages_args_and_tracebacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("baton.test_redact")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        logger.info("paying with %s for %d items", "4111 1111 1111 1111", 3)
        logger.info("args %r", {"password": "hunter2"})
        logger.info("plain %s", "ORD-1")
        logger.info("bad format %d", "password: hunter2")
        try:
            raise ValueError("token: abc123secret")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert "paying with [REDACTED:card] for 3 items" in out
    assert "'password': '[REDACTED:password]'" in out
    assert "plain ORD-1" in out
    for secret in ("4111", "hunter2", "abc123secret"):
        assert secret not in out
    assert "ValueError: token: [REDACTED:token]" in out
    # logging reports the bad format on stderr, with the (redacted) arguments
    assert "Arguments: ('password: [REDACTED:password]',)" in capsys.readouterr().err
