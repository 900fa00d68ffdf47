"""With a bus, `POST /runs` queues the turn (202) and `GET /runs/{id}` reports what a worker
answered."""

from __future__ import annotations

import asyncio

from tests.server.server_kit import OPERATOR, VIEWER, bearer, desk, served

from baton.bus import MemoryBus, Worker


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
        pending = await client.get("/runs/req-b1", headers=bearer(VIEWER))
        assert pending.status_code == 202
        assert pending.json() == {"request_id": "req-b1", "status": "pending"}
        worker = Worker(team, bus, block_s=0.05)
        serving = asyncio.create_task(worker.run())
        try:
            done = await client.get("/runs/req-b1?wait_s=10", headers=bearer(VIEWER))
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
                f"/runs/{fresh['request_id']}?wait_s=10", headers=bearer(VIEWER)
            )
            assert answer.json()["session_id"] == fresh["session_id"]
            session = await client.get("/sessions/B1", headers=bearer(VIEWER))
            assert session.json()["messages"][-1]["content"] == "Invoice ORD-21 is ISSUED."
        finally:
            worker.stop()
            await serving
        assert (
            await client.get("/runs/req-b1?wait_s=31", headers=bearer(VIEWER))
        ).status_code == 422


async def test_without_a_bus_there_is_no_request_to_look_up() -> None:
    async with served() as client:
        reply = await client.get("/runs/req-1", headers=bearer(VIEWER))
    assert reply.status_code == 404 and "no bus" in reply.json()["detail"]
