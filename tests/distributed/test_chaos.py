"""Chaos against the real Redis and PostgreSQL: workers killed with SIGKILL mid-run, and
connections cut under a running worker. Nothing may be lost or done twice.

The team (`tests/distributed/chaos_team.py`): triage hands over to billing, which records a
payment in a PostgreSQL ledger keyed by the call's idempotency key, then answers; the scripted
model has latency, so a kill lands mid-run.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis
from tests.services import POSTGRES, REDIS, require_service

from baton.backends.postgres import PostgresStore
from baton.bus import Envelope
from baton.bus.redis_streams import RedisStreamsBus
from baton.worker import Worker

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
DSN = f"postgresql://postgres@{POSTGRES[0]}:{POSTGRES[1]}/test"
REDIS_URL = f"redis://{REDIS[0]}:{REDIS[1]}/0"
SESSIONS = 200


class Deployment:
    """A fresh PostgreSQL schema (store + ledger) and Redis prefix (bus) for one test."""

    def __init__(self) -> None:
        self.schema = f"chaos_{uuid.uuid4().hex[:10]}"
        self.prefix = f"chaos-{uuid.uuid4().hex[:10]}:"
        self.bus = RedisStreamsBus(REDIS_URL, prefix=self.prefix, partitions=8, claim_idle_s=2.0)
        self.bus_url = f"{REDIS_URL}?prefix={self.prefix}&partitions=8&claim_idle_s=2"
        self.env = {
            **os.environ,
            "BATON_CHAOS_DSN": DSN,
            "BATON_CHAOS_SCHEMA": self.schema,
            "BATON_CHAOS_LATENCY_S": "0.05",
            "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}",
        }
        self.procs: list[subprocess.Popen[str]] = []

    async def setup(self) -> None:
        store = PostgresStore(DSN, schema=self.schema)
        await store.get_session("none")  # creates the schema and the store's tables
        await store.close()
        from tests.distributed.chaos_team import LEDGER_DDL

        conn = await asyncpg.connect(DSN)
        try:
            await conn.execute(LEDGER_DDL.format(schema=self.schema))
        finally:
            await conn.close()

    def start_worker(self, name: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "baton",
                "worker",
                "tests.distributed.chaos_team:team",
                "--bus",
                self.bus_url,
                "--concurrency",
                "100",
                "--name",
                name,
                "--drain-s",
                "5",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    async def balanced(self, workers: set[str], timeout_s: float = 60.0) -> None:
        """Wait until the workers hold the bus's partitions between them, half each."""
        client = aioredis.from_url(REDIS_URL)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                owners = [
                    (await client.get(f"{self.prefix}bus:{{p{i}}}:lease") or b"").decode()
                    for i in range(8)
                ]
                if sorted(owners) == sorted(w for w in workers for _ in range(4)):
                    return
                for p in self.procs:
                    assert p.poll() is None, p.stderr.read() if p.stderr else ""
                await asyncio.sleep(0.1)
        finally:
            await client.aclose()
        raise AssertionError(f"the workers {workers} did not share the partitions: {owners}")

    async def rows(self, query: str) -> list[Any]:
        conn = await asyncpg.connect(DSN)
        try:
            return list(await conn.fetch(query.format(schema=self.schema)))
        finally:
            await conn.close()

    async def teardown(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        await self.bus.drop()
        await self.bus.close()
        store = PostgresStore(DSN, schema=self.schema)
        await store.drop()
        await store.close()


@pytest.fixture
async def deployment() -> AsyncIterator[Deployment]:
    require_service("Redis", REDIS)
    require_service("PostgreSQL", POSTGRES)
    d = Deployment()
    await d.setup()
    try:
        yield d
    finally:
        await d.teardown()


async def submit_all(bus: RedisStreamsBus, n: int) -> list[Envelope]:
    sent = []
    for i in range(n):
        env = Envelope(session_id=f"s{i:03d}", message="please record my payment of 42")
        await bus.publish(env)
        sent.append(env)
    return sent


async def wait_results(bus: RedisStreamsBus, sent: list[Envelope], timeout_s: float) -> list[Any]:
    deadline = time.monotonic() + timeout_s
    results = []
    for env in sent:
        left = max(0.1, deadline - time.monotonic())
        results.append(await bus.get_result(env.session_id, env.id, wait_s=left))
    return results


async def check_exactly_once(d: Deployment, sent: list[Envelope], results: list[Any]) -> None:
    missing = [e.session_id for e, r in zip(sent, results, strict=True) if r is None]
    assert not missing, f"{len(missing)} sessions never answered: {missing[:10]}"
    assert {r.status for r in results} == {"completed"}, {r.status for r in results}
    failed = [r.output for r in results if r.output != "Your payment of 42 is recorded."]
    assert not failed, failed[:3]
    # every side effect exactly once: one ledger row per session, none twice
    ledger = await d.rows("SELECT session_id, count(*) AS n FROM {schema}.ledger GROUP BY 1")
    assert len(ledger) == len(sent) and {r["n"] for r in ledger} == {1}
    # no session was worked on by two workers at once (attempt intervals never overlap)
    attempts = await d.rows(
        "SELECT session_id, pid, started, ended FROM {schema}.attempts ORDER BY session_id, started"
    )
    by_session: dict[str, list[Any]] = {}
    for a in attempts:
        by_session.setdefault(a["session_id"], []).append(a)
    for sid, runs in by_session.items():
        for before, after in itertools.pairwise(runs):
            assert after["started"] >= before["ended"], f"{sid}: two workers at once"
    # one committed run per session, with one hand-off, answering the submitted request
    store = PostgresStore(DSN, schema=d.schema)
    try:
        for env in sent:
            session = await store.get_session(env.session_id)
            assert session is not None and list(session.requests) == [env.id]
            events = await store.get_events(session_id=env.session_id)
            finished = [e for e in events if e.type == "run_finished"]
            handoffs = [e for e in events if e.type == "handoff"]
            assert len(finished) == 1 and len(handoffs) == 1, env.session_id
            users = [m for m in await store.get_messages(env.session_id) if m.role == "user"]
            assert len(users) == 1
    finally:
        await store.close()
    assert await d.bus.dead_letters() == []
    assert await d.bus.pending() == 0


async def test_a_worker_killed_mid_run_loses_nothing_and_repeats_nothing(
    deployment: Deployment,
) -> None:
    d = deployment
    first = d.start_worker("w1")
    d.start_worker("w2")
    await d.balanced({"w1", "w2"})  # else the first one up would take every turn at once
    sent = await submit_all(d.bus, SESSIONS)
    # kill -9 one worker as soon as it has paid in some sessions: it is mid-run in them (it
    # still has to answer) and in others (not paid yet)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        paid = await d.rows(f"SELECT count(*) AS n FROM {{schema}}.ledger WHERE pid = {first.pid}")
        if paid[0]["n"] >= 5:
            break
        await asyncio.sleep(0.005)
    assert first.poll() is None, first.stderr.read() if first.stderr else ""
    first.send_signal(signal.SIGKILL)
    first.wait()
    d.start_worker("w3")  # the replacement
    results = await wait_results(d.bus, sent, timeout_s=180)
    await check_exactly_once(d, sent, results)
    workers = {r.worker for r in results}
    assert workers <= {"w1", "w2", "w3"} and workers & {"w2", "w3"}
    # the kill landed mid-run: sessions the dead worker had paid in were finished by another
    # worker, which resumed them without paying again (one ledger row each, checked above)
    paid_by_dead = {
        r["session_id"]
        for r in await d.rows("SELECT session_id, pid FROM {schema}.ledger")
        if r["pid"] == first.pid
    }
    resumed = [r for r in results if r.session_id in paid_by_dead and r.worker != "w1"]
    assert resumed, "no run was cut off by the kill"
    # the survivors stop gracefully on SIGTERM
    for p in d.procs[1:]:
        p.send_signal(signal.SIGTERM)
    for p in d.procs[1:]:
        assert p.wait(timeout=30) == 0, p.stderr.read() if p.stderr else ""


LEDGER = "SELECT count(*) AS n FROM {schema}.ledger"


async def cut_connections() -> None:
    """Close every PostgreSQL connection to the test database (the store's and the ledger's)
    and every Redis client connection (the bus's), from the servers' side."""
    admin = await asyncpg.connect(DSN)
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = 'test' AND pid <> pg_backend_pid()"
        )
    finally:
        await admin.close()
    killer = aioredis.from_url(REDIS_URL)
    try:
        await killer.client_kill_filter(_type="normal", skipme=True)
    finally:
        await killer.aclose()


def said_so(caplog: pytest.LogCaptureFixture) -> bool:
    """The worker, the store or the bus logged a failure it went on from."""
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("baton")]
    return any(
        "trying again" in m or "trying once more" in m or "the bus failed" in m for m in lines
    )


async def test_cut_connections_are_survived_with_a_clear_log_line(
    deployment: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker in this process; mid-run, every PostgreSQL connection of the store and every
    Redis connection are closed from the servers' side."""
    d = deployment
    os.environ.update(
        BATON_CHAOS_DSN=DSN, BATON_CHAOS_SCHEMA=d.schema, BATON_CHAOS_LATENCY_S="0.05"
    )
    from tests.distributed import chaos_team

    chaos_team.SCHEMA = d.schema
    team = chaos_team.build_team()
    worker = Worker(team, d.bus, name="solo", block_s=0.2)
    caplog.set_level(logging.WARNING, logger="baton")
    running = asyncio.create_task(worker.run())
    client = RedisStreamsBus(REDIS_URL, prefix=d.prefix, partitions=8, claim_idle_s=2.0)
    try:
        sent = await submit_all(client, 60)
        while (await d.rows("SELECT count(*) AS n FROM {schema}.ledger"))[0]["n"] < 15:
            await asyncio.sleep(0.05)
        # cut every connection, again every 100 ms while turns run, until one cut lands under
        # a query in flight (an idle connection the server closes is replaced silently) and
        # someone says so, or the work is done
        for _ in range(40):
            await cut_connections()
            await asyncio.sleep(0.1)
            if said_so(caplog) or (await d.rows(LEDGER))[0]["n"] >= len(sent):
                break
        results = await wait_results(client, sent, timeout_s=120)
    finally:
        worker.stop()
        await running
        await client.close()
        await team.aclose()
    await check_exactly_once(d, sent, results)
    # the worker, the store or the bus said what happened and that it went on
    assert said_so(caplog), [r.getMessage() for r in caplog.records]
