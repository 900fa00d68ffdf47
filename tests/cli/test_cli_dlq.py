"""`baton dlq list|retry` against a real Redis bus (skipped when Redis is down, failed under
BATON_REQUIRE_SERVICES=1), and its errors: an unknown id, an unreachable bus, a bad URL."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

import pytest
from tests.services import REDIS, require_service
from typer.testing import CliRunner

from baton.bus import DeadLetter, Envelope
from baton.cli.app import app

if TYPE_CHECKING:
    from baton.bus.redis_streams import RedisStreamsBus

T = TypeVar("T")

REDIS_URL = f"redis://{REDIS[0]}:{REDIS[1]}/0"


class Deployment:
    """A bus under a fresh prefix, with turns failed into its dead-letter queue."""

    def __init__(self) -> None:
        self.prefix = f"t_{uuid.uuid4().hex[:12]}"
        self.url = f"{REDIS_URL}?prefix={self.prefix}"

    def run(self, work: Callable[[RedisStreamsBus], Awaitable[T]]) -> T:
        """`work(bus)` on a bus of the deployment (in an event loop of its own)."""
        from baton.bus.redis_streams import RedisStreamsBus

        async def main() -> T:
            bus = RedisStreamsBus(REDIS_URL, prefix=self.prefix, max_deliveries=1)
            try:
                return await work(bus)
            finally:
                await bus.close()

        return asyncio.run(main())

    def dead(self, n: int) -> list[Envelope]:
        """`n` turns (sessions s0, s1, ...) failed once: dead letters (max_deliveries=1)."""

        async def work(bus: RedisStreamsBus) -> list[Envelope]:
            sent = []
            for i in range(n):
                env = Envelope(session_id=f"s{i}", message=f"pay {i}")
                await bus.publish(env)
                sent.append(env)
            for d in await bus.receive("w1", count=n, block_s=0):
                await bus.fail("w1", d, f"StoreError: down for {d.envelope.session_id}")
            return sent

        return self.run(work)

    def letters(self) -> list[DeadLetter]:
        return self.run(lambda bus: bus.dead_letters())

    def pending(self) -> int:
        return self.run(lambda bus: bus.pending())


@pytest.fixture
def deployment() -> Iterator[Deployment]:
    require_service("Redis", REDIS)
    d = Deployment()
    try:
        yield d
    finally:
        d.run(lambda bus: bus.drop())


def closed_port() -> int:
    with socket.socket() as s:  # nobody listens on it once this socket is closed
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_list_shows_the_dead_letters(runner: CliRunner, deployment: Deployment) -> None:
    empty = runner.invoke(app, ["dlq", "list", "--bus", deployment.url])
    assert empty.exit_code == 0, empty.output
    assert "no dead letters" in empty.output
    sent = deployment.dead(2)
    shown = runner.invoke(app, ["dlq", "list", "--bus", deployment.url])
    assert shown.exit_code == 0, shown.output
    for env in sent:
        assert env.id in shown.output and env.session_id in shown.output
    assert "StoreError: down for s0" in shown.output
    assert "2 dead letters" in shown.output and "baton dlq retry" in shown.output
    for column in ("id", "session", "request id", "deliveries", "error", "failed at"):
        assert column in shown.output


def test_list_as_json_with_a_limit(runner: CliRunner, deployment: Deployment) -> None:
    sent = deployment.dead(3)
    result = runner.invoke(app, ["dlq", "list", "--bus", deployment.url, "-f", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert sorted(r["request_id"] for r in rows) == sorted(e.id for e in sent)
    by_session = {r["session_id"]: r for r in rows}
    assert by_session["s0"]["deliveries"] == 1 and by_session["s0"]["message"] == "pay 0"
    assert by_session["s0"]["error"] == "StoreError: down for s0"
    limited = runner.invoke(app, ["dlq", "list", "--bus", deployment.url, "-f", "json", "-n", "1"])
    assert [r["request_id"] for r in json.loads(limited.output)] == [rows[0]["request_id"]]


def test_retry_publishes_named_letters_again(runner: CliRunner, deployment: Deployment) -> None:
    deployment.dead(2)
    first = deployment.letters()[0]
    result = runner.invoke(app, ["dlq", "retry", first.id, "--bus", deployment.url])
    assert result.exit_code == 0, result.output
    assert f"requeued {first.id}" in result.output
    assert f"session {first.envelope.session_id}" in result.output
    assert [d.id for d in deployment.letters()] != [first.id]
    assert len(deployment.letters()) == 1 and deployment.pending() == 1


def test_retry_all(runner: CliRunner, deployment: Deployment) -> None:
    deployment.dead(3)
    result = runner.invoke(app, ["dlq", "retry", "--all", "--bus", deployment.url])
    assert result.exit_code == 0, result.output
    assert result.output.count("requeued ") == 3
    assert deployment.letters() == [] and deployment.pending() == 3
    again = runner.invoke(app, ["dlq", "retry", "--all", "--bus", deployment.url])
    assert again.exit_code == 0 and "no dead letters" in again.output


def test_retry_of_an_unknown_id_fails_clearly(runner: CliRunner, deployment: Deployment) -> None:
    deployment.dead(1)
    known = deployment.letters()[0].id
    result = runner.invoke(app, ["dlq", "retry", "9-9", known, "--bus", deployment.url])
    assert result.exit_code == 1
    assert "no dead letter '9-9'" in result.output and "baton dlq list" in result.output
    assert f"requeued {known}" in result.output  # the known one still goes
    assert "Traceback" not in result.output
    bad = runner.invoke(app, ["dlq", "retry", "not-an-id", "--bus", deployment.url])
    assert bad.exit_code == 1 and "no dead letter 'not-an-id'" in bad.output


def test_retry_needs_ids_or_all(runner: CliRunner) -> None:
    neither = runner.invoke(app, ["dlq", "retry", "--bus", "memory://"])
    assert neither.exit_code == 2 and "--all" in neither.output
    both = runner.invoke(app, ["dlq", "retry", "1-0", "--all", "--bus", "memory://"])
    assert both.exit_code == 2


def test_an_unreachable_bus_fails_clearly(runner: CliRunner) -> None:
    url = f"redis://:s3cret@127.0.0.1:{closed_port()}/0"
    for args in (["dlq", "list"], ["dlq", "retry", "1-0"], ["dlq", "retry", "--all"]):
        result = runner.invoke(app, [*args, "--bus", url])
        assert result.exit_code == 1, result.output
        assert "unreachable" in result.output and "start Redis" in result.output
        assert "s3cret" not in result.output and "Traceback" not in result.output


def test_a_bad_bus_url_fails_clearly(runner: CliRunner) -> None:
    result = runner.invoke(app, ["dlq", "list", "--bus", "kafka://broker:9092"])
    assert result.exit_code == 2
    assert "unknown bus URL" in result.output and "redis://" in result.output


def test_an_unreadable_entry_is_listed_and_cannot_be_retried(
    runner: CliRunner, deployment: Deployment
) -> None:
    import redis.asyncio as aioredis

    async def poison(bus: RedisStreamsBus) -> None:
        client = aioredis.from_url(REDIS_URL)
        try:
            await client.xadd(bus._pkey(0), {"e": b"\x1b]0;owned\x07 \xff not an envelope"})
        finally:
            await client.aclose()
        assert await bus.receive("w1", count=10, block_s=0) == []  # refused: a dead letter

    deployment.run(poison)
    deployment.dead(1)
    shown = runner.invoke(app, ["dlq", "list", "--bus", deployment.url])
    assert shown.exit_code == 0, shown.output
    assert "(unreadable)" in shown.output and "EnvelopeError: the entry is not UTF-8" in (
        shown.output.replace("\n", " ")
    )
    assert "\x1b" not in shown.output and "\x07" not in shown.output
    rows = json.loads(
        runner.invoke(app, ["dlq", "list", "--bus", deployment.url, "-f", "json"]).output
    )
    bad = next(r for r in rows if r["session_id"] is None)
    assert bad["request_id"] is None and bad["message"] is None
    assert bad["raw"] == "\x1b]0;owned\x07 \\xff not an envelope"  # JSON escapes it
    good = next(r for r in rows if r["session_id"] is not None)
    assert good["raw"] == ""
    result = runner.invoke(app, ["dlq", "retry", "--all", "--bus", deployment.url])
    assert result.exit_code == 1, result.output
    assert "holds no envelope to publish again" in result.output
    assert result.output.count("requeued ") == 1  # the readable one still goes
    assert "no dead letters" not in result.output and "Traceback" not in result.output
    assert [d.envelope for d in deployment.letters()] == [None]
