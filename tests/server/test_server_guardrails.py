"""The API server reports a run a guardrail blocked: status `blocked`, the rule's message, the
rule and its reason, and no reply text in the stream."""

from __future__ import annotations

from tests.runtime.guardrails_kit import BLOCKED, INJECTION, JAILBREAK_RULE, PII_RULE
from tests.server.server_kit import OPERATOR, bearer, desk, parse_sse, served


async def test_a_blocked_run_answers_blocked_with_the_rules_message() -> None:
    async with served(desk(guardrails=[JAILBREAK_RULE])) as client:
        reply = await client.post(
            "/runs", json={"message": INJECTION, "session_id": "G1"}, headers=bearer(OPERATOR)
        )
        assert reply.status_code == 200
        out = reply.json()
        assert (out["status"], out["output"]) == ("blocked", BLOCKED)
        assert "guardrail 'no_jailbreak'" in out["error"]
        detail = (await client.get("/sessions/G1", headers=bearer(OPERATOR))).json()
        assert detail["session"]["status"] == "idle"  # it goes on with the next message
        shown = [m["content"] for m in detail["messages"]]
        assert shown == [
            "[withheld: this message was blocked by guardrail 'no_jailbreak']",
            BLOCKED,
        ]


async def test_the_stream_of_a_blocked_run_has_the_trip_and_no_reply_text() -> None:
    async with served(desk(guardrails=[JAILBREAK_RULE, PII_RULE])) as client:
        reply = await client.post(
            "/runs/stream", json={"message": INJECTION}, headers=bearer(OPERATOR)
        )
        messages = parse_sse(reply.text)
    names = [name for name, _ in messages]
    assert "text_delta" not in names
    [trip] = [d for n, d in messages if n == "guardrail_tripped"]
    assert (trip["guardrail"], trip["stage"], trip["agent"]) == ("no_jailbreak", "input", "triage")
    assert messages[-1][1]["status"] == "blocked"
