"""`POST /runs` and `POST /runs/stream`: a run's summary, its events live, clear 4xx answers."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.server.server_kit import (
    GATEWAY,
    OPERATOR,
    WEB_U1,
    bearer,
    client_for,
    desk,
    parse_sse,
    served,
)

from baton import Agent, ScriptedModel, Team, tool
from baton.server import create_app

S = ScriptedModel


async def test_a_run_answers_with_its_summary() -> None:
    async with served() as client:
        reply = await client.post(
            "/runs",
            json={"message": "please check the invoice for ORD-7", "user_id": "u1"},
            headers=bearer(WEB_U1),
        )
        assert reply.status_code == 200
        out = reply.json()
        assert out["status"] == "completed"
        assert out["output"] == "Invoice ORD-7 is ISSUED."
        assert out["path"] == ["triage", "billing"]
        assert out["holder"] == "billing"
        assert out["approval"] is None and out["interrupt"] is None and out["error"] is None
        assert set(out["usage"]) == {"triage", "billing"}
        total = out["total_tokens"]
        assert total["input_tokens"] == sum(u["input_tokens"] for u in out["usage"].values())
        # the same session continues with the agent holding the baton
        again = await client.post(
            "/runs",
            json={"message": "and the invoice again?", "session_id": out["session_id"]},
            headers=bearer(WEB_U1),
        )
        assert again.json()["path"] == ["billing"]


async def test_an_escalated_run_names_its_ticket() -> None:
    async with served() as client:
        out = (
            await client.post(
                "/runs", json={"message": "I want a lawyer"}, headers=bearer(OPERATOR)
            )
        ).json()
        assert out["status"] == "escalated"
        assert out["escalation"]["reasons"] == [
            "triage asked for a human: the user asks for a lawyer"
        ]
        tickets = (await client.get("/tickets", headers=bearer(OPERATOR))).json()
        assert [t["id"] for t in tickets] == [out["ticket_id"]]


async def test_bad_run_requests_are_4xx_with_a_detail() -> None:
    async with served() as client:
        h = bearer(OPERATOR)
        missing = await client.post("/runs", json={}, headers=h)
        assert missing.status_code == 422
        assert missing.json()["detail"].startswith("body.message: Field required")
        assert missing.json()["errors"][0]["loc"] == ["body", "message"]
        blank = await client.post("/runs", json={"message": "  \n\t "}, headers=h)
        assert blank.status_code == 422 and "empty" in blank.json()["detail"]
        extra = await client.post("/runs", json={"message": "hi", "nope": 1}, headers=h)
        assert extra.status_code == 422
        broken = await client.post(
            "/runs", content=b"{not json", headers={**h, "Content-Type": "application/json"}
        )
        assert broken.status_code == 422
        gate = bearer(GATEWAY)
        owned = await client.post(
            "/runs",
            json={"message": "invoice ORD-1", "session_id": "S1", "user_id": "u1"},
            headers=gate,
        )
        assert owned.status_code == 200
        other = await client.post(
            "/runs", json={"message": "hi", "session_id": "S1", "user_id": "u2"}, headers=gate
        )
        assert other.status_code == 403 and "another user" in other.json()["detail"]


async def test_a_session_waiting_for_approval_refuses_new_messages_with_409() -> None:
    async with served() as client:
        h = bearer(OPERATOR)
        paused = (await client.post("/runs", json={"message": "refund ORD-3"}, headers=h)).json()
        assert paused["status"] == "awaiting_approval"
        card = paused["approval"]
        assert card["tool"] == "issue_refund" and card["required_roles"] == ["finance"]
        body = {"message": "hello?", "session_id": paused["session_id"]}
        for path in ("/runs", "/runs/stream"):
            refused = await client.post(path, json=body, headers=h)
            assert refused.status_code == 409, path
            assert f"/approvals/{card['id']}/approve" in refused.json()["detail"]


async def test_the_stream_sends_every_event_the_deltas_and_the_result() -> None:
    async with served() as client:
        reply = await client.post(
            "/runs/stream",
            json={"message": "check the invoice for ORD-9", "session_id": "S9"},
            headers=bearer(OPERATOR),
        )
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        messages = parse_sse(reply.text)
    names = [name for name, _ in messages]
    assert names[0] == "run_started" and names[-1] == "result"
    for name, data in messages[:-1]:
        assert data["type"] == name and data["session_id"] == "S9"
    assert {"route_decided", "agent_started", "handoff", "tool_called", "run_finished"} <= set(
        names
    )
    deltas = "".join(d["text"] for n, d in messages if n == "text_delta")
    result = messages[-1][1]
    assert deltas == result["output"] == "Invoice ORD-9 is ISSUED."
    assert result["status"] == "completed" and result["path"] == ["triage", "billing"]


async def test_a_failure_inside_the_stream_is_an_error_event() -> None:
    team = desk()

    async def broken(*args: Any, **kw: Any) -> Any:
        raise ValueError("the message is not for this desk")
        yield  # an async generator

    team.stream = broken  # type: ignore[method-assign]
    async with client_for(create_app(team)) as client:
        reply = await client.post("/runs/stream", json={"message": "hi"})
    assert parse_sse(reply.text) == [
        ("error", {"status": 422, "detail": "the message is not for this desk"})
    ]


async def test_a_slow_stream_sends_keep_alive_comments(monkeypatch: Any) -> None:
    from baton.server import sse

    monkeypatch.setattr(sse, "PING_S", 0.05)
    slow = ScriptedModel([ScriptedModel.say("Slow but sure.")], latency_s=0.3)
    team = Team([Agent(name="a")], entry="a", model=slow)
    async with client_for(create_app(team)) as client:
        reply = await client.post("/runs/stream", json={"message": "hi"})
    assert ": ping\n\n" in reply.text
    assert parse_sse(reply.text)[-1][1]["output"] == "Slow but sure."


async def test_runs_of_many_clients_at_once() -> None:
    async with served() as client:
        replies = await asyncio.gather(
            *(
                client.post("/runs", json={"message": f"invoice ORD-{i}"}, headers=bearer(OPERATOR))
                for i in range(20)
            )
        )
    assert [r.json()["output"] for r in replies] == [
        f"Invoice ORD-{i} is ISSUED." for i in range(20)
    ]


async def test_a_retried_streamed_request_answers_from_the_record_and_runs_no_tool_twice() -> None:
    calls: list[str] = []

    @tool
    async def charge(order_id: str) -> str:
        """Charge an order once."""
        calls.append(order_id)
        return f"charged {order_id}"

    model = S(
        lambda r: (
            S.say("已扣款。")
            if r.messages[-1].role == "tool"
            else S.call("charge", order_id="ORD-1")
        )
    )
    team = Team([Agent(name="billing", tools=[charge])], entry="billing", model=model)
    body = {"message": "请扣款 ORD-1", "session_id": "R1", "request_id": "req-retry-1"}
    async with client_for(create_app(team)) as client:
        first = parse_sse((await client.post("/runs/stream", json=body)).text)
        again = parse_sse((await client.post("/runs/stream", json=body)).text)
        plain = (await client.post("/runs", json=body)).json()
        other = parse_sse(
            (await client.post("/runs/stream", json={**body, "request_id": "req-retry-2"})).text
        )
    assert calls == ["ORD-1", "ORD-1"]  # once for each request id, never for a retry
    result = first[-1][1]
    assert first[-1][0] == "result" and result["output"] == "已扣款。"
    assert "tool_called" in [n for n, _ in first]
    assert again == [("result", result)]  # the record, as the one result event
    assert plain == result
    assert other[-1][1]["run_id"] != result["run_id"]
    # a request id first answered by POST /runs is answered from the record when streamed
    body3 = {**body, "request_id": "req-retry-3"}
    async with client_for(create_app(team)) as client:
        plain3 = (await client.post("/runs", json=body3)).json()
        streamed3 = parse_sse((await client.post("/runs/stream", json=body3)).text)
    assert streamed3 == [("result", plain3)]
    assert len(calls) == 3
