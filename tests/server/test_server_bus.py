"""With a bus, `POST /runs` queues the turn (202) and `GET /runs/{id}` reports what a worker
answered."""

from __future__ import annotations

import asyncio

from tests.server.server_kit import OPERATOR, VIEWER, bearer, desk, served

from baton.bus import MemoryBus
from baton.worker import Worker


async def test_a_queued_run_is_answered_by_a_worker() -> None:
    bus = MemoryBus()
    team = desk()
    async with served(team, bus=bus) as client:
        queued = await client.post(
            "/runs",
            json={"message": "invoice ORD-21", "session_id": "B1", "request_id": "req-b1"},
            headers=bearer(OPERATOR),
        )
        assert queued.status_code == 202
        assert queued.json() == {"request_id": "req-b1", "session_id": "B1", "status": "queued"}
        pending = await client.get("/runs/req-b1?session_id=B1", headers=bearer(VIEWER))
        assert pending.status_code == 202
        assert pending.json() == {"request_id": "req-b1", "session_id": "B1", "status": "pending"}
        worker = Worker(team, bus, block_s=0.05)
        serving = asyncio.create_task(worker.run())
        try:
            done = await client.get("/runs/req-b1?session_id=B1&wait_s=10", headers=bearer(VIEWER))
            assert done.status_code == 200
            out = done.json()
            assert out["status"] == "completed" and out["output"] == "Invoice ORD-21 is ISSUED."
            assert out["session_id"] == "B1" and out["worker"] == worker.name
            # a new session's id comes back with the 202
            fresh = (
                await client.post("/runs", json={"message": "hello"}, headers=bearer(OPERATOR))
            ).json()
            assert fresh["session_id"].startswith("s_") and fresh["request_id"].startswith("req_")
            answer = await client.get(
                f"/runs/{fresh['request_id']}?session_id={fresh['session_id']}&wait_s=10",
                headers=bearer(VIEWER),
            )
            assert answer.json()["session_id"] == fresh["session_id"]
            session = await client.get("/sessions/B1", headers=bearer(VIEWER))
            assert session.json()["messages"][-1]["content"] == "Invoice ORD-21 is ISSUED."
        finally:
            worker.stop()
            await serving
        assert (
            await client.get("/runs/req-b1?session_id=B1&wait_s=31", headers=bearer(VIEWER))
        ).status_code == 422


async def test_without_a_bus_there_is_no_request_to_look_up() -> None:
    async with served() as client:
        reply = await client.get("/runs/req-1?session_id=S1", headers=bearer(VIEWER))
    assert reply.status_code == 404 and "no bus" in reply.json()["detail"]


async def test_a_request_is_looked_up_in_its_own_session() -> None:
    bus = MemoryBus()
    team = desk()
    async with served(team, bus=bus) as client:
        for sid, order in (("B1", "ORD-21"), ("B2", "ORD-22")):  # one request id, two sessions
            queued = await client.post(
                "/runs",
                json={"message": f"invoice {order}", "session_id": sid, "request_id": "req-x"},
                headers=bearer(OPERATOR),
            )
            assert queued.status_code == 202
        worker = Worker(team, bus, block_s=0.05)
        serving = asyncio.create_task(worker.run())
        try:
            for sid, order in (("B1", "ORD-21"), ("B2", "ORD-22")):
                done = await client.get(
                    f"/runs/req-x?session_id={sid}&wait_s=10", headers=bearer(VIEWER)
                )
                assert done.status_code == 200
                assert done.json()["session_id"] == sid
                assert done.json()["output"] == f"Invoice {order} is ISSUED."
            other = await client.get("/runs/req-x?session_id=B3", headers=bearer(VIEWER))
            assert other.status_code == 202
            assert other.json() == {"request_id": "req-x", "session_id": "B3", "status": "pending"}
        finally:
            worker.stop()
            await serving
        missing = await client.get("/runs/req-x", headers=bearer(VIEWER))
        assert missing.status_code == 422
        assert "session_id" in missing.json()["detail"]
        for bad in ("", "B 1", "B1%00", "会话", "x" * 129, "B1%E2%80%8B"):
            reply = await client.get(f"/runs/req-x?session_id={bad}", headers=bearer(VIEWER))
            assert reply.status_code == 422, bad
