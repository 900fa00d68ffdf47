"""Sessions over HTTP: live status, transcript, state causality, the trace tree, and the
session's events as server-sent events (stored, then live)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.server.server_kit import (
    OPERATOR,
    VIEWER,
    WEB_U1,
    bearer,
    client_for,
    desk,
    parse_sse,
    policy,
    served,
)

from baton import Agent, MemoryStore, ScriptedModel, Team, tool
from baton.server import create_app

S = ScriptedModel


async def test_sessions_are_listed_with_their_live_status() -> None:
    team = desk()
    slow = Team(
        list(team.agents.values()),
        entry="triage",
        model=ScriptedModel(policy, latency_s=0.1),
        store=team.store,
    )
    async with client_for(create_app(slow)) as client:
        await client.post("/runs", json={"message": "invoice ORD-1", "session_id": "idle"})
        await client.post("/runs", json={"message": "refund ORD-2", "session_id": "waits"})
        await client.post("/runs", json={"message": "a lawyer", "session_id": "human"})
        running = asyncio.create_task(
            client.post(
                "/runs", json={"message": "invoice ORD-3", "session_id": "busy", "user_id": "u3"}
            )
        )
        for _ in range(50):
            listed = {s["session_id"]: s for s in (await client.get("/sessions")).json()}
            if "busy" in listed:
                break
            await asyncio.sleep(0.02)
        busy = listed["busy"]
        assert busy["status"] == "running" and busy["user_id"] == "u3"
        assert listed["idle"]["status"] == "idle" and listed["idle"]["holder"] == "billing"
        assert listed["waits"]["status"] == "awaiting_approval"
        assert listed["waits"]["approval_id"].startswith("apr_")
        assert listed["human"]["status"] == "escalated" and len(listed["human"]["ticket_ids"]) == 1
        assert (await running).json()["status"] == "completed"
        after = (await client.get("/sessions?limit=2")).json()
        assert [s["session_id"] for s in after] == ["busy", "human"]
        assert after[0]["status"] == "idle"
        assert (await client.get("/sessions?limit=0")).status_code == 422


async def test_a_session_shows_its_transcript_and_where_each_slot_came_from() -> None:
    async with served() as client:
        await client.post(
            "/runs",
            json={"message": "check the invoice for ORD-11", "session_id": "S1", "user_id": "u1"},
            headers=bearer(WEB_U1),
        )
        reply = await client.get("/sessions/S1", headers=bearer(VIEWER))
        assert reply.status_code == 200
        out = reply.json()
    assert out["session"]["user_id"] == "u1" and out["session"]["holder"] == "billing"
    roles = [m["role"] for m in out["messages"]]
    assert roles[0] == "user" and out["messages"][0]["content"] == "check the invoice for ORD-11"
    assert "tool" in roles and out["messages"][-1]["content"] == "Invoice ORD-11 is ISSUED."
    handoff_call = out["messages"][1]["tool_calls"][0]
    assert handoff_call["name"] == "transfer_to_billing"
    assert out["state"] == {"order_id": "ORD-11"}
    (slot,) = out["slots"]
    assert slot["slot"] == "order_id" and slot["value"] == "ORD-11"
    (write,) = slot["writes"]
    assert write["source"] == "handoff" and write["agent"] == "triage"
    assert write["cause"]["type"] == "handoff"
    assert write["cause"]["source"] == "triage" and write["cause"]["target"] == "billing"
    assert write["cause"]["reason"] == "billing question"
    assert out["incoming"]["source"] == "triage" and out["incoming"]["reason"] == "billing question"
    assert out["approval"] is None and out["interrupt"] is None and out["tickets"] == []


async def test_unknown_sessions_are_404_naming_the_way_out() -> None:
    async with served() as client:
        for path in ("/sessions/nope", "/sessions/nope/trace", "/sessions/nope/events"):
            reply = await client.get(path, headers=bearer(VIEWER))
            assert reply.status_code == 404, path
            assert reply.json() == {
                "detail": "no session 'nope' in the store; GET /sessions lists the sessions"
            }


async def test_the_trace_tree_shows_hand_offs_with_reasons_and_guard_trips() -> None:
    @tool
    async def look_up(order_id: str) -> str:
        """Look an order up."""
        return "found"

    model = S(
        {
            "triage": [
                S.call(
                    "transfer_to_clerk",
                    reason="order question",
                    objective="look it up",
                    state={"order_id": "ORD-5"},
                )
            ],
            "clerk": [S.call("look_up", order_id="ORD-404"), S.say("Which order?")],
        }
    )
    team = Team(
        [Agent(name="triage", handoffs=["clerk"]), Agent(name="clerk", tools=[look_up])],
        entry="triage",
        model=model,
    )
    async with client_for(create_app(team)) as client:
        await client.post("/runs", json={"message": "where is ORD-5?", "session_id": "T"})
        reply = await client.get("/sessions/T/trace")
    assert reply.status_code == 200
    doc = reply.json()
    assert doc["session_id"] == "T"
    (run,) = doc["runs"]
    assert run["path"] == ["triage", "clerk"] and run["status"] == "completed"
    assert [t["agent"] for t in run["turns"]] == ["triage", "clerk"]
    steps = [s for t in run["turns"] for s in t["steps"]]
    (handoff,) = [s for s in steps if s["kind"] == "handoff"]
    assert handoff["agent"] == "triage" and handoff["target"] == "clerk"
    assert "order question" in handoff["detail"] and handoff["keys"] == ["order_id"]
    guards = [s for s in steps if s["kind"] == "guard"]
    assert guards and "ORD-404" in guards[0]["detail"]
    model_calls = [s for s in steps if s["kind"] == "model_call"]
    assert all(s["input_tokens"] is not None and s["latency_ms"] is not None for s in model_calls)
    assert run["turns"][1]["reason"] == "order question"


async def test_the_events_stream_sends_the_stored_events_then_ends() -> None:
    async with served() as client:
        first = (
            await client.post(
                "/runs",
                json={"message": "invoice ORD-1", "session_id": "E"},
                headers=bearer(OPERATOR),
            )
        ).json()
        reply = await client.get("/sessions/E/events?follow=false", headers=bearer(VIEWER))
        assert reply.headers["content-type"].startswith("text/event-stream")
        messages = parse_sse(reply.text)
        names = [n for n, _ in messages]
        assert names[0] == "run_started" and names[-2] == "run_finished"
        assert messages[-1] == (
            "end",
            {"session_id": "E", "last_event_id": messages[-2][1]["id"], "reason": "not_following"},
        )
        assert all(d["run_id"] == first["run_id"] for _, d in messages[:-1])
        # every message carries its event id
        assert reply.text.startswith(f"id: {messages[0][1]['id']}\nevent: run_started\n")
        # after an id (query or Last-Event-ID): only what followed it
        mid = messages[2][1]["id"]
        later = parse_sse(
            (
                await client.get(
                    f"/sessions/E/events?follow=false&after={mid}", headers=bearer(VIEWER)
                )
            ).text
        )
        assert [d["id"] for _, d in later[:-1]] == [d["id"] for _, d in messages[3:-1]]
        resumed = parse_sse(
            (
                await client.get(
                    "/sessions/E/events?follow=false",
                    headers={**bearer(VIEWER), "Last-Event-ID": mid},
                )
            ).text
        )
        assert resumed == later
        bad = await client.get("/sessions/E/events?quiet_s=0", headers=bearer(VIEWER))
        assert bad.status_code == 422


async def test_following_a_session_sends_new_events_live_then_ends_when_quiet() -> None:
    store = MemoryStore()
    team = Team(
        list(desk().agents.values()),
        entry="triage",
        model=ScriptedModel(policy, latency_s=0.05),
        store=store,
    )
    other_process = desk(store=store)  # commits to the same store, unseen by the server's hub
    app = create_app(team, poll_s=0.05)
    async with client_for(app) as client:
        await client.post("/runs", json={"message": "hello", "session_id": "F"})

        async def later() -> Any:
            await asyncio.sleep(0.2)
            here = await client.post("/runs", json={"message": "invoice ORD-2", "session_id": "F"})
            there = await other_process.run("invoice ORD-3", session_id="F")
            return here.json(), there

        watching = client.get("/sessions/F/events?quiet_s=1")
        reply, (here, there) = await asyncio.gather(watching, later())
    messages = parse_sse(reply.text)
    runs = [d["run_id"] for n, d in messages if n == "run_started"]
    assert len(runs) == 3 and runs[1:] == [here["run_id"], there.run_id]
    ids = [d["id"] for n, d in messages if n != "end"]
    assert len(ids) == len(set(ids))  # each event once, live and stored alike
    assert "text_delta" not in [n for n, _ in messages]
    assert messages[-1][0] == "end" and messages[-1][1]["reason"] == "quiet"
    assert messages[-1][1]["last_event_id"] == ids[-1]
