"""A planted secret never appears in any event, trace, log, event file or stored event."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from tests.runtime.runtime_kit import handoff

from baton import Agent, JSONLSink, OTelSink, ScriptedModel, Team, tool

S = ScriptedModel
PASSWORD = "hunter2-Zebra!"
CARD = "4111 1111 1111 1111"
SECRETS = [PASSWORD, CARD, CARD.replace(" ", "")]


CHARGED: list[str] = []


@tool
async def charge(card_number: str, amount: float) -> str:
    """Charge a card."""
    logging.getLogger("baton").warning("charging card %s", card_number)
    CHARGED.append(card_number)
    return "charged"


async def test_secrets_stay_out_of_events_traces_logs_and_the_audit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = S(
        {
            "triage": [
                handoff(
                    "billing",
                    state={"card_number": CARD, "order_id": "ORD-9", "password": PASSWORD},
                    reply_to_user=f"Noted: your password is {PASSWORD}.",
                )
            ],
            # the receiver reads the card as a handle and passes it on: the kernel gives the
            # tool the session's value
            "billing": [
                S.call("charge", card_number="[secret:card_number]", amount=12.5),
                S.say("Done."),
            ],
        }
    )
    CHARGED.clear()
    otel = OTelSink.in_memory()
    events_file = tmp_path / "events.jsonl"
    db = tmp_path / "baton.db"
    team = Team(
        [Agent(name="triage", handoffs=["billing"]), Agent(name="billing", tools=[charge])],
        entry="triage",
        model=model,
        store=f"sqlite:///{db}",
        sinks=[JSONLSink(events_file), otel],
    )
    with caplog.at_level(logging.INFO):
        result = await team.run(
            f"my password is {PASSWORD}, pay order ORD-9 with card {CARD}", session_id="S"
        )
    await team.aclose()

    assert result.status == "completed"
    assert CHARGED == [CARD]  # the tool got the real value, through the kernel
    assert result.state["card_number"] == "[REDACTED:card_number]"  # the result shows none
    dumped = "\n".join(e.model_dump_json() for e in result.events)
    spans = "\n".join(s.to_json() for s in otel.finished_spans())
    stored = sqlite3.connect(db).execute("SELECT data FROM events").fetchall()
    audit = sqlite3.connect(db).execute("SELECT * FROM audit").fetchall()
    logs = "\n".join(r.getMessage() for r in caplog.records)
    assert "[REDACTED" in dumped and "[REDACTED" in logs
    for place, text in [
        ("events", dumped),
        ("jsonl", events_file.read_text(encoding="utf-8")),
        ("spans", spans),
        ("stored events", repr(stored)),
        ("audit", repr(audit)),
        ("logs", logs),
    ]:
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked into {place}"
    # the payload (stored, traced) and the receiver's known facts show the card as a handle:
    # no prompt text holds it
    payload = result.handoffs[0]
    assert payload.state["card_number"] == "[secret:card_number]"
    assert payload.state["password"] == "[secret:password]"
    assert PASSWORD not in (payload.reply_to_user or "")
    receiver = model.requests[1].messages[0].content or ""
    assert '"card_number": "[secret:card_number]"' in receiver.split("Known facts:")[-1]
    assert CARD not in receiver and PASSWORD not in receiver


async def test_log_redaction_is_per_team(caplog: pytest.LogCaptureFixture) -> None:
    """A team's redactor rewrites the logs of its own runs only: not another team's (here one
    built with redact=False), not the program's logs outside any run."""

    def team(redact: bool) -> Team:
        model = S([S.call("charge", card_number=CARD, amount=1.0), S.say("Done.")])
        return Team([Agent(name="a", tools=[charge])], entry="a", model=model, redact=redact)

    with caplog.at_level(logging.INFO):
        await team(True).run(f"pay with {CARD}", session_id="A")
        redacted = [r.getMessage() for r in caplog.records]
        caplog.clear()
        await team(False).run(f"pay with {CARD}", session_id="B")
        plain = [r.getMessage() for r in caplog.records]
        caplog.clear()
        logging.getLogger("baton").info("outside any run: %s", CARD)
        outside = [r.getMessage() for r in caplog.records]
    assert any("[REDACTED" in m for m in redacted) and not any(CARD in m for m in redacted)
    assert any(CARD in m for m in plain)
    assert outside == [f"outside any run: {CARD}"]
