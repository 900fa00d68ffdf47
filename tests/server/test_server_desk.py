"""Approvals, interrupts and the human queue over HTTP: a decision resumes the run, a ticket
answer goes into the user's session."""

from __future__ import annotations

from typing import Any

import httpx
from tests.server.server_kit import (
    FINANCE,
    GATEWAY,
    LEGAL,
    OPERATOR,
    REFUNDED,
    VIEWER,
    bearer,
    client_for,
    parse_sse,
    served,
)

from baton import Agent, ScriptedModel, Team, interrupt, tool
from baton.server import AuthConfig, create_app


async def _paused(client: httpx.AsyncClient, order: str = "ORD-5") -> dict[str, Any]:
    reply = await client.post(
        "/runs", json={"message": f"refund {order} please"}, headers=bearer(OPERATOR)
    )
    out: dict[str, Any] = reply.json()
    assert out["status"] == "awaiting_approval"
    return out


async def test_approving_a_card_completes_the_run() -> None:
    REFUNDED.clear()
    async with served() as client:
        paused = await _paused(client)
        card = paused["approval"]
        listed = (await client.get("/approvals", headers=bearer(VIEWER))).json()
        assert [c["id"] for c in listed] == [card["id"]]
        assert listed[0]["arguments"] == {"order_id": "ORD-5"}
        session = (
            await client.get(f"/sessions/{paused['session_id']}", headers=bearer(VIEWER))
        ).json()
        assert session["session"]["status"] == "awaiting_approval"
        assert session["session"]["approval_id"] == card["id"]
        assert session["approval"]["id"] == card["id"]
        # an approver of another role may not decide it; nothing ran
        legal = await client.post(f"/approvals/{card['id']}/approve", headers=bearer(LEGAL))
        assert legal.status_code == 403 and "finance" in legal.json()["detail"]
        assert REFUNDED == []
        done = await client.post(
            f"/approvals/{card['id']}/approve",
            json={"session_id": paused["session_id"]},
            headers=bearer(FINANCE),
        )
        assert done.status_code == 200
        out = done.json()
        assert out["status"] == "completed" and out["output"] == "Refunded ORD-5."
        assert REFUNDED == ["ORD-5"]
        assert (await client.get("/approvals", headers=bearer(VIEWER))).json() == []
        # decided: it is gone
        again = await client.post(f"/approvals/{card['id']}/approve", headers=bearer(FINANCE))
        assert again.status_code == 404 and "GET /approvals" in again.json()["detail"]
        trace = (
            await client.get(f"/sessions/{paused['session_id']}/trace", headers=bearer(VIEWER))
        ).json()
        (run,) = trace["runs"]  # the same run, resumed where it paused
        assert run["status"] == "completed" and run["output"] == "Refunded ORD-5."
        session = (
            await client.get(f"/sessions/{paused['session_id']}", headers=bearer(VIEWER))
        ).json()
        assert session["session"]["status"] == "idle"


async def test_rejecting_a_card_tells_the_user_and_records_who() -> None:
    REFUNDED.clear()
    async with served() as client:
        paused = await _paused(client, "ORD-6")
        card = paused["approval"]
        wrong_session = await client.post(
            f"/approvals/{card['id']}/reject",
            json={"session_id": "elsewhere"},
            headers=bearer(FINANCE),
        )
        assert wrong_session.status_code == 404
        wrong_role = await client.post(
            f"/approvals/{card['id']}/reject", json={"role": "legal"}, headers=bearer(FINANCE)
        )
        assert (
            wrong_role.status_code == 403
            and "not an approver for role 'legal'" in wrong_role.json()["detail"]
        )
        rejected = await client.post(
            f"/approvals/{card['id']}/reject",
            json={"reason": "duplicate request", "role": "finance"},
            headers=bearer(FINANCE),
        )
        assert rejected.status_code == 200
        assert rejected.json()["output"] == "The refund was not approved, sorry."
        assert REFUNDED == []
        trace = (
            await client.get(
                f"/sessions/{paused['session_id']}/events?follow=false", headers=bearer(VIEWER)
            )
        ).text
        assert (
            '"decision":"rejected","by":"alice","role":"finance","reason":"duplicate request"'
            in trace
        )


async def test_a_dual_card_needs_two_people_and_refuses_the_same_one_twice() -> None:
    @tool(requires_approval=True, approver_roles=["finance"], dual=True)
    async def wire(amount: int) -> str:
        """Wire money."""
        return "sent"

    S = ScriptedModel
    team = Team(
        [Agent(name="treasury", tools=[wire])],
        entry="treasury",
        model=S([S.call("wire", amount=5), S.say("Done.")]),
    )
    tokens = AuthConfig.from_mapping(
        {
            "tokens": {
                "alice-token-0123456789": {"name": "alice", "roles": ["approver:finance"]},
                "bob-token-01234567890": {"name": "bob", "roles": ["approver:finance"]},
                "ops-token-01234567890": {"name": "otto", "roles": ["operator"]},
            }
        }
    )
    async with client_for(create_app(team, auth=tokens)) as client:
        paused = (
            await client.post(
                "/runs", json={"message": "wire 5"}, headers=bearer("ops-token-01234567890")
            )
        ).json()
        aid = paused["approval"]["id"]
        first = await client.post(
            f"/approvals/{aid}/approve", headers=bearer("alice-token-0123456789")
        )
        assert first.json()["status"] == "awaiting_approval"
        twice = await client.post(
            f"/approvals/{aid}/approve", headers=bearer("alice-token-0123456789")
        )
        assert twice.status_code == 409 and "alice" in twice.json()["detail"]
        second = await client.post(
            f"/approvals/{aid}/approve", headers=bearer("bob-token-01234567890")
        )
        assert second.json()["status"] == "completed" and second.json()["output"] == "Done."


async def test_answering_a_ticket_continues_the_users_session() -> None:
    async with served() as client:
        h = bearer(OPERATOR)
        escalated = (
            await client.post(
                "/runs",
                json={"message": "I want a lawyer about ORD-8", "user_id": "u8"},
                headers=bearer(GATEWAY),
            )
        ).json()
        sid, tid = escalated["session_id"], escalated["ticket_id"]
        session = (await client.get(f"/sessions/{sid}", headers=h)).json()["session"]
        assert session["status"] == "escalated" and session["ticket_ids"] == [tid]
        (ticket,) = (await client.get("/tickets", headers=bearer(VIEWER))).json()
        assert ticket["id"] == tid and ticket["session_id"] == sid
        assert ticket["summary"].startswith("ESCALATION\nPath: triage")
        assert ticket["card"]["last_user_message"] == "I want a lawyer about ORD-8"
        claimed = await client.post(f"/tickets/{tid}/claim", headers=h)
        assert claimed.json()["status"] == "claimed" and claimed.json()["claimed_by"] == "otto"
        # someone else may neither claim nor answer it
        assert (
            await client.post(f"/tickets/{tid}/claim", headers=bearer(LEGAL))
        ).status_code == 409
        stolen = await client.post(
            f"/tickets/{tid}/answer", json={"reply": "mine"}, headers=bearer(LEGAL)
        )
        assert stolen.status_code == 409 and "lena cannot answer" in stolen.json()["detail"]
        unknown_agent = await client.post(
            f"/tickets/{tid}/answer", json={"reply": "hi", "hand_back_to": "nobody"}, headers=h
        )
        assert unknown_agent.status_code == 422 and "not an agent" in unknown_agent.json()["detail"]
        empty = await client.post(f"/tickets/{tid}/answer", json={"reply": "   "}, headers=h)
        assert empty.status_code == 422
        answered = await client.post(
            f"/tickets/{tid}/answer",
            json={
                "reply": "Our lawyer will call you; billing has your invoice.",
                "hand_back_to": "billing",
            },
            headers=h,
        )
        assert answered.status_code == 200
        assert answered.json()["status"] == "answered"
        detail = (await client.get(f"/sessions/{sid}", headers=h)).json()
        last = detail["messages"][-1]
        assert last["agent"] == "human" and last["content"].startswith("Our lawyer will call")
        assert detail["session"]["status"] == "idle" and detail["session"]["holder"] == "billing"
        assert [t["status"] for t in detail["tickets"]] == ["answered"]
        # the user's next message continues with billing
        nxt = await client.post(
            "/runs",
            json={"message": "and my invoice for ORD-8?", "session_id": sid, "user_id": "u8"},
            headers=bearer(GATEWAY),
        )
        assert nxt.json()["path"] == ["billing"]
        assert nxt.json()["output"] == "Invoice ORD-8 is ISSUED."
        assert (
            await client.post(f"/tickets/{tid}/answer", json={"reply": "x"}, headers=h)
        ).status_code == 409
        everything = (await client.get("/tickets?status=all", headers=h)).json()
        assert [t["status"] for t in everything] == ["answered"]
        assert (await client.get("/tickets?status=open", headers=h)).json() == []
        assert (await client.get("/tickets?status=bogus", headers=h)).status_code == 422


async def test_closing_tickets_and_unknown_ones() -> None:
    async with served() as client:
        h = bearer(OPERATOR)
        tid = (await client.post("/runs", json={"message": "lawyer!"}, headers=h)).json()[
            "ticket_id"
        ]
        closed = await client.post(f"/tickets/{tid}/close", json={"note": "spam"}, headers=h)
        assert closed.json()["status"] == "closed" and closed.json()["note"] == "spam"
        again = await client.post(f"/tickets/{tid}/close", headers=h)
        assert again.status_code == 409 and "already closed" in again.json()["detail"]
        for step in ("claim", "close"):
            missing = await client.post(f"/tickets/999/{step}", headers=h)
            assert missing.status_code == 404 and "no ticket 999" in missing.json()["detail"]
        assert (await client.post("/tickets/0/claim", headers=h)).status_code == 422
        assert (await client.post("/tickets/x/claim", headers=h)).status_code == 422
        huge = await client.post(f"/tickets/{2**70}/claim", headers=h)
        assert huge.status_code == 422


async def test_an_interrupt_is_listed_and_answered() -> None:
    @tool
    async def ask_amount(order_id: str) -> str:
        """Ask a person how much to refund."""
        amount = interrupt({"question": f"how much to refund on {order_id}?"})
        return f"refund {amount}"

    S = ScriptedModel
    team = Team(
        [Agent(name="desk", tools=[ask_amount])],
        entry="desk",
        model=S([S.call("ask_amount", order_id="ORD-1"), S.say("Refund set.")]),
    )
    async with client_for(create_app(team)) as client:
        paused = (await client.post("/runs", json={"message": "refund ORD-1"})).json()
        assert paused["status"] == "interrupted"
        card = paused["interrupt"]
        assert card["value"] == {"question": "how much to refund on ORD-1?"}
        assert [c["id"] for c in (await client.get("/interrupts")).json()] == [card["id"]]
        summary = (await client.get("/sessions")).json()[0]
        assert summary["status"] == "interrupted" and summary["interrupt_id"] == card["id"]
        busy = await client.post(
            "/runs", json={"message": "hi", "session_id": paused["session_id"]}
        )
        assert busy.status_code == 409 and "interrupt" in busy.json()["detail"]
        missing = await client.post("/interrupts/nope/answer", json={"value": 1})
        assert missing.status_code == 404
        assert (await client.post(f"/interrupts/{card['id']}/answer", json={})).status_code == 422
        done = await client.post(f"/interrupts/{card['id']}/answer", json={"value": 42})
        assert done.status_code == 200 and done.json()["output"] == "Refund set."
        assert (await client.get("/interrupts")).json() == []


async def test_no_body_field_decides_who_approves() -> None:
    REFUNDED.clear()
    async with served() as client:
        paused = await _paused(client, "ORD-31")
        card = paused["approval"]
        for field in ("by", "approved_by", "user", "name", "approver", "who"):
            for decision in ("approve", "reject"):
                forged = await client.post(
                    f"/approvals/{card['id']}/{decision}",
                    json={field: "mallory", "role": "finance"},
                    headers=bearer(FINANCE),
                )
                assert forged.status_code == 422, (field, decision)
                assert forged.json()["errors"][0]["loc"] == ["body", field]
        assert [c["id"] for c in (await client.get("/approvals", headers=bearer(VIEWER))).json()]
        assert REFUNDED == []
        # the reason is text, never who decided
        done = await client.post(
            f"/approvals/{card['id']}/approve",
            json={"reason": 'by: "mallory"', "session_id": paused["session_id"]},
            headers=bearer(FINANCE),
        )
        assert done.status_code == 200 and REFUNDED == ["ORD-31"]
        events = (
            await client.get(
                f"/sessions/{paused['session_id']}/events?follow=false", headers=bearer(VIEWER)
            )
        ).text
    decided = [d for n, d in parse_sse(events) if n == "approval_decided"]
    assert [(d["by"], d["role"], d["decision"], d["authenticated"]) for d in decided] == [
        ("alice", "finance", "approved", True)  # the token's user, verified by the token
    ]
