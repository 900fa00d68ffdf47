"""Property: a secret, however it is phrased, never leaves the live run in clear.

Hypothesis draws a secret (a password, a URL with credentials, a card number, an API key, a
bearer token, a Chinese ID number, an AWS secret key, a private key block, a JWT, a Slack token)
and a phrasing of it (English and Chinese: "my password is x", "password: x.", "user li,
password x", "passphrase: x", "密码是x", "密码：x。", "口令 x", "支付密码 x", "pwd=x",
"with password x,", `postgresql://li:x@db`, "my AWS secret key is x", ...). The secret goes
everywhere a user, a model or a tool can put it: the user's message, a tool's arguments (under
a sensitive key and inside free text), a tool's exception and log line, and a hand-off to the
human queue (its reason, objective, reply and state). It must not survive
in any event of the run, the JSONL file, the OTel spans, any row of any table of the store (the
transcript and the session's slots are masked at rest; the events, the audit chain, the
`human_queue` row and its card), the log records, nor in what the model reads back from the
tool; and no tool argument holding it becomes a state slot another agent is shown. The live
run keeps the real text (the user's message reaches the model as written).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sqlite3
import tempfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.runtime.runtime_kit import handoff

from baton import Agent, JSONLSink, OTelSink, RunResult, ScriptedModel, Team, Tool, tool

S = ScriptedModel
ORDER = "ORD-2026"  # an order id: must survive everywhere

# letters, digits and the symbols people put in passwords; "Zq" and "9" make each one
# distinctive (it cannot be a piece of an id, a hex trace id or a timestamp by chance)
PW_CHARS = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789!@$%^*_-"
passwords = st.text(PW_CHARS, min_size=4, max_size=14).map(lambda s: f"Zq{s}9")
token_chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
tokens = st.text(token_chars, min_size=20, max_size=36).map(lambda s: f"Tk{s}7")

PASSWORD_PHRASES = (
    "my password is {}",
    "my password is: {}",
    "My Password Is {}!",
    "the password was {}.",
    "password: {}",
    "password: {}.",
    "Password={}; thanks",
    "pwd={}",
    "PWD: {},",
    "log in with password {}, please",
    "sign in using the password {}.",
    "passcode: ({})",
    "我的密码是{}",
    "密码是{}，谢谢",
    "密码：{}。",
    "密码为：{}；",
    "口令：{}",
    "user li, password {}",
    "pw: {}",
    "passphrase: {}",
    "口令 {}",
    "支付密码 {}，谢谢",
    "登录口令为：{}。",
    "postgresql://li:{}@db.internal:5432/app",
    "mysql://admin:{}@10.0.0.5/shop?ssl=true",
    "redis://:{}@cache:6379/0",
)
TOKEN_PHRASES = (
    "https://li:{}@git.example.com/repo.git",
    "Authorization: Bearer {}",
    "send it with bearer {} please",
    "api key: {}",
    '{{"token": "{}"}}',
)


B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
AWS_PHRASES = (
    "aws_secret_access_key = {}",
    "my AWS secret key is {}, keep it",
    'boto3.client("s3", aws_secret_access_key="{}")',
    "密钥：{}",
)


def random_like(key: str) -> bool:
    """A drawn key spread like a generated one (40 random base64 characters hold ~30 distinct
    ones, none more than 3 times): "my AWS secret key is x" is found by its entropy."""
    return len(set(key)) >= 30 and max(key.count(c) for c in set(key)) <= 3


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def luhn_digit(body: str) -> str:
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        if i % 2 == 0:
            d = sum(divmod(d * 2, 10))
        total += d
    return str(-total % 10)


def id_check(body17: str) -> str:
    s = sum(int(c) * pow(2, 17 - i, 11) for i, c in enumerate(body17))
    return "0123456789X"[(12 - s % 11) % 11]


@dataclass(frozen=True)
class Planted:
    phrase: str
    """The text that carries the secret."""
    secrets: tuple[str, ...]
    """Strings that must not survive (the secret as written, and compacted)."""
    value: str
    """The bare secret, as a tool would receive it as an argument."""


@st.composite
def planted(draw: st.DrawFn) -> Planted:
    kinds = ["password", "token", "card", "sk", "ghp", "cn_id", "aws", "pem", "jwt", "slack"]
    kind = draw(st.sampled_from(kinds))
    if kind == "aws":
        key = draw(st.text(B64, min_size=40, max_size=40).filter(random_like))
        phrase = draw(st.sampled_from(AWS_PHRASES)).format(key)
        return Planted(phrase, (key,), key)
    if kind == "pem":
        line = st.text(B64, min_size=64, max_size=64).filter(lambda k: len(set(k)) >= 30)
        body = tuple(draw(st.lists(line, min_size=1, max_size=3)))
        block = "\n".join(
            ["-----BEGIN RSA PRIVATE KEY-----", *body, "-----END RSA PRIVATE KEY-----"]
        )
        return Planted(f"here is my key:\n{block}\n", body, block)
    if kind == "jwt":
        claims = {"sub": draw(tokens), "role": "admin"}
        signature = _b64(draw(st.binary(min_size=32, max_size=32)))
        header = _b64(json.dumps({"alg": "HS256"}).encode())
        token = f"{header}.{_b64(json.dumps(claims).encode())}.{signature}"
        return Planted(f"my session is {token}", (token, signature), token)
    if kind == "slack":
        token = f"xoxb-{draw(st.integers(10**9, 10**12))}-{draw(tokens).lower()}"
        return Planted(f"the bot token {token} works", (token,), token)
    if kind == "password":
        pw = draw(passwords)
        return Planted(draw(st.sampled_from(PASSWORD_PHRASES)).format(pw), (pw,), pw)
    if kind == "token":
        tok = draw(tokens)
        return Planted(draw(st.sampled_from(TOKEN_PHRASES)).format(tok), (tok,), tok)
    if kind == "card":
        n = draw(st.integers(13, 19))
        body = draw(st.sampled_from("2345")) + draw(
            st.text("0123456789", min_size=n - 2, max_size=n - 2)
        )
        digits = body + luhn_digit(body)
        sep = draw(st.sampled_from(["", " ", "-"]))
        written = sep.join(digits[i : i + 4] for i in range(0, n, 4)) if sep else digits
        phrase = draw(st.sampled_from(["card {}", "卡号{}。", "my card is {}, thanks"]))
        return Planted(phrase.format(written), (written, digits), written)
    if kind == "sk":
        key = "sk-proj-" + draw(tokens)
        return Planted(f"use key {key} for the call", (key[8:],), key)
    if kind == "ghp":
        key = "ghp_Gh" + draw(st.text(token_chars, min_size=34, max_size=34))
        return Planted(f"GITHUB_TOKEN {key}", (key[4:],), key)
    born = draw(st.dates(min_value=date(1950, 1, 1), max_value=date.today()))
    body = f"110105{born:%Y%m%d}{draw(st.integers(0, 999)):03d}"
    number = body + id_check(body)
    return Planted(f"身份证号码{number}，请核实", (number,), number)


def tools_for(p: Planted) -> list[Tool]:
    @tool(records=["user", "password", "note", "card_number"])
    def remember(user: str, password: str, note: str, card_number: str) -> str:
        """Remember the user's login details."""
        return "remembered"

    @tool
    def connect(user: str) -> str:
        """Connect to the user's database."""
        logging.getLogger("baton").warning("connecting for %s with %s", user, p.phrase)
        raise RuntimeError(f"cannot connect ({p.phrase})")

    return [remember, connect]


class Keep(logging.Handler):
    """A log handler that keeps every record it is given."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Run:
    result: RunResult
    requests: list[str]
    files: dict[str, str]
    logs: str
    state: dict[str, object]


def run_once(p: Planted) -> Run:
    remember, connect = tools_for(p)
    model = S(
        {
            "triage": [
                S.call("remember", user="li", password=p.value, note=p.phrase, card_number=p.value),
                S.call("connect", user="li"),
                handoff(
                    "human",
                    reason=f"the user shared {p.phrase}",
                    objective=f"check {ORDER}; the user said {p.phrase}",
                    reply_to_user=f"A colleague will take over ({p.phrase}).",
                    state={"order_id": ORDER, "contact": p.phrase},
                ),
            ]
        }
    )
    handler = Keep()
    records = handler.records
    root = logging.getLogger("baton")
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as tmp:
        db, jsonl = Path(tmp) / "baton.db", Path(tmp) / "events.jsonl"
        otel = OTelSink.in_memory()
        team = Team(
            [Agent(name="triage", tools=[remember, connect], handoffs=["human"])],
            entry="triage",
            model=model,
            store=f"sqlite:///{db}",
            sinks=[JSONLSink(jsonl), otel],
        )

        async def go() -> tuple[RunResult, dict[str, object], str]:
            try:
                result = await team.run(f"hi, {p.phrase} — order {ORDER}", session_id="S")
                session = await team.store.get_session("S")
                assert session is not None
                # the stored results of the team's tools
                stored = [
                    m.model_dump_json()
                    for m in await team.store.get_messages("S")
                    if m.role == "tool" and m.name in ("remember", "connect")
                ]
                return result, dict(session.state), "\n".join(stored)
            finally:
                await team.aclose()

        try:
            result, state, tool_messages = asyncio.run(go())
        finally:
            root.removeHandler(handler)
            root.setLevel(old_level)
        con = sqlite3.connect(db)
        try:
            files = {
                "jsonl": jsonl.read_text(encoding="utf-8"),
                "spans": "\n".join(s.to_json() for s in otel.finished_spans()),
                "stored events": repr(con.execute("SELECT * FROM events").fetchall()),
                "audit": repr(con.execute("SELECT * FROM audit").fetchall()),
                "human_queue": repr(con.execute("SELECT * FROM human_queue").fetchall()),
                "tool messages": tool_messages,
            }
            tables = [
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for table in tables:  # every row the store keeps, the transcript and slots included
                files[f"table {table}"] = repr(con.execute(f"SELECT * FROM {table}").fetchall())
            assert {"messages", "sessions"} <= set(tables)
        finally:
            con.close()
    logs = "\n".join(
        r.getMessage() + "\n" + (r.exc_text or "") + (r.stack_info or "") for r in records
    )
    # what the model read back from the tools (the user's own message is live: it keeps it)
    requests = [
        m.content or ""
        for req in model.requests
        for m in req.messages
        if m.role == "tool" and m.name in ("remember", "connect")
    ]
    return Run(result, requests, files, logs, state)


@given(planted())
@example(Planted("my password is: Zqhunter2!9", ("Zqhunter2!9",), "Zqhunter2!9"))
@example(Planted("with password Zqhunter29,", ("Zqhunter29",), "Zqhunter29"))
@example(Planted("密码：Zqabc1239。", ("Zqabc1239",), "Zqabc1239"))
@example(Planted("postgresql://li:Zq p@ss9@db/app".replace(" ", ""), ("Zqp@ss9",), "Zqp@ss9"))
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
def test_no_phrasing_of_a_secret_survives_anywhere(p: Planted) -> None:
    run = run_once(p)
    result = run.result
    assert result.status == "escalated", result.error
    (escalated,) = [e for e in result.events if e.type == "escalated"]
    places = {
        "events": "\n".join(e.model_dump_json() for e in result.events),
        "escalation card (event)": escalated.card.model_dump_json(),
        "logs": run.logs,
        "tool results the model read": "\n".join(run.requests),
        **run.files,
    }
    for place, text in places.items():
        for secret in p.secrets:
            assert secret not in text, f"{secret!r} leaked into {place}: {p.phrase!r}"
            assert json.dumps(secret)[1:-1] not in text, f"{secret!r} (escaped) in {place}"
    # the redaction was real, and the order id is no false positive
    assert "[REDACTED" in places["human_queue"] and "[REDACTED" in places["tool messages"]
    assert ORDER in places["human_queue"] and ORDER in places["events"]
    # tool arguments holding a secret are not state slots; the harmless one is
    assert run.state.get("user") == "li"
    for key in ("password", "card_number", "note"):
        assert key not in run.state, key
    # the connect tool's failure reached the model, redacted but still useful
    assert any("cannot connect" in c and "[REDACTED" in c for c in run.requests)


# -- each fix on its own, with and without redaction --------------------------------------------

CARD = "4111 1111 1111 1111"
PW = "Zqhunter2!9"


@tool
def pay(order_id: str, card_number: str, password: str, token: str) -> str:
    """Pay an order."""
    return "paid"


@tool
def connect(user: str) -> str:
    """Connect to the user's database."""
    raise RuntimeError(f"cannot connect to postgresql://{user}:{PW}@db/app (password: {PW})")


def pay_team(redact: bool) -> tuple[Team, ScriptedModel]:
    model = S(
        {
            "triage": [
                S.call(
                    "pay", order_id=ORDER, card_number=CARD, password=PW, token="Tk1234567890ab"
                ),
                handoff("billing"),
            ],
            "billing": [S.say("Done.")],
        }
    )
    agents = [Agent(name="triage", tools=[pay], handoffs=["billing"]), Agent(name="billing")]
    return Team(agents, entry="triage", model=model, redact=redact), model


async def test_secret_tool_arguments_are_not_state_slots_nor_shown_to_the_receiver() -> None:
    said = f"pay {ORDER} with card {CARD}, token Tk1234567890ab"
    team, model = pay_team(redact=True)
    result = await team.run(said, session_id="S")
    assert result.status == "completed"
    assert result.state == {"order_id": ORDER}  # the id is recorded; the secrets are not
    (slots,) = [e.slots for e in result.events if e.type == "state_updated"]
    assert slots == {"order_id": ORDER}
    assert CARD not in result.handoffs[0].model_dump_json()
    facts = (model.requests[-1].messages[0].content or "").split("Known facts:")[-1]
    assert ORDER in facts and CARD not in facts and PW not in facts

    # without redaction the tool's id-like arguments are recorded, as before
    plain, _ = pay_team(redact=False)
    state = (await plain.run(said, session_id="S")).state
    assert state["card_number"] == CARD and state["token"] == "Tk1234567890ab"


async def test_a_tool_exception_is_redacted_before_the_model_reads_it() -> None:
    def team(redact: bool) -> tuple[Team, ScriptedModel]:
        model = S([S.call("connect", user="li"), S.say("Sorry, the database is down.")])
        return Team(
            [Agent(name="a", tools=[connect])], entry="a", model=model, redact=redact
        ), model

    red, model = team(True)
    result = await red.run("connect me", session_id="S")
    seen = model.requests[1].messages[-1]
    assert seen.role == "tool" and PW not in (seen.content or "")
    assert json.loads(seen.content or "") == {
        "ok": False,
        "error": "RuntimeError: cannot connect to postgresql://li:[REDACTED:url_password]@db/app "
        "(password: [REDACTED:password])",
    }
    (called,) = [e for e in result.events if e.type == "tool_called"]
    assert called.error == json.loads(seen.content or "")["error"]
    stored = [m for m in await red.store.get_messages("S") if m.role == "tool"]
    assert PW not in (stored[0].content or "")

    plain, model = team(False)
    await plain.run("connect me", session_id="S")
    assert PW in (model.requests[1].messages[-1].content or "")


async def test_the_human_queue_card_is_stored_redacted() -> None:
    def team(redact: bool) -> Team:
        model = S(
            [
                handoff(
                    "human",
                    reason=f"user gave password: {PW}",
                    reply_to_user=f"A colleague will call you about card {CARD}.",
                    state={"order_id": ORDER, "card_number": CARD},
                )
            ]
        )
        return Team([Agent(name="a", handoffs=["human"])], entry="a", model=model, redact=redact)

    red = team(True)
    result = await red.run(f"my password is {PW}, card {CARD}, order {ORDER}", session_id="S")
    assert result.status == "escalated"
    (ticket,) = await red.store.list_human()
    text = ticket.card.model_dump_json()
    assert PW not in text and CARD not in text and "[REDACTED" in text
    assert ORDER in ticket.card.last_user_message and ticket.card.trace_id == result.trace_id

    plain = team(False)
    await plain.run(f"my password is {PW}, card {CARD}, order {ORDER}", session_id="S")
    (ticket,) = await plain.store.list_human()
    assert PW in ticket.card.last_user_message


@pytest.mark.parametrize("mask", [True, False])
async def test_the_transcript_and_slots_are_masked_at_rest_unless_opted_out(mask: bool) -> None:
    """The live run keeps the real text (the model reads the user's message, the session holds
    the slot for tools; known facts and the result show it masked); what the store keeps is
    masked, unless `mask_at_rest=False`."""
    said = f"my password is {PW}, card {CARD}, order {ORDER}"
    model = S(
        {
            "triage": [handoff("billing", state={"order_id": ORDER, "card_number": CARD})],
            "billing": [S.say(f"Noted: your password is {PW}."), S.say("Welcome.")],
        }
    )
    agents = [Agent(name="triage", handoffs=["billing"]), Agent(name="billing")]
    team = Team(agents, entry="triage", model=model, mask_at_rest=mask)
    result = await team.run(said, session_id="S")
    assert result.status == "completed"
    assert result.output == f"Noted: your password is {PW}."  # the live reply
    assert model.requests[0].messages[-1].content == said  # the model read the real text
    assert result.state["card_number"] == "[REDACTED:card_number]"
    assert CARD not in (model.requests[1].messages[0].content or "")  # a handle in its facts
    stored = "\n".join(m.model_dump_json() for m in await team.store.get_messages("S"))
    session = await team.store.get_session("S")
    assert session is not None
    for secret in (PW, CARD):
        assert (secret in stored) is not mask
    assert (session.state["card_number"] == CARD) is not mask
    assert ORDER in stored and session.state["order_id"] == ORDER
    again = await team.run("thanks", session_id="S")  # reads the stored transcript
    assert again.status == "completed"
    seen = "\n".join(m.content or "" for m in model.requests[-1].messages)
    assert (PW in seen) is not mask
