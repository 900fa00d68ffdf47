"""`baton submit` against a real Redis bus with a real `Worker` (in a thread of its own, as
another process would be): a request id is a request of its session, so the same id sent in
two sessions runs in each and `--wait` prints each session's own answer."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from tests.bus import test_worker
from tests.services import REDIS, require_service
from typer.testing import CliRunner

from baton.cli.app import app

REDIS_URL = f"redis://{REDIS[0]}:{REDIS[1]}/0"


class Serving:
    """A worker on a fresh bus prefix, running in its own thread and event loop."""

    def __init__(self) -> None:
        from baton.bus.redis_streams import RedisStreamsBus

        self.prefix = f"t_{uuid.uuid4().hex[:12]}"
        self.url = f"{REDIS_URL}?prefix={self.prefix}"
        self.bus = RedisStreamsBus(REDIS_URL, prefix=self.prefix)
        self.worker = test_worker.Worker(test_worker.echo_desk(self.bus), block_s=0.05)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._run(),))

    async def _run(self) -> Any:
        try:
            return await self.worker.run()
        finally:
            await self.bus.drop()
            await self.bus.close()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.worker.stop)
        self.thread.join(30)
        self.loop.close()


@pytest.fixture
def serving() -> Iterator[Serving]:
    require_service("Redis", REDIS)
    test_worker.ANSWERED.clear()
    s = Serving()
    s.thread.start()
    try:
        yield s
    finally:
        s.stop()


def submit(runner: CliRunner, serving: Serving, message: str, session: str) -> Any:
    args = ["submit", message, "--session", session, "--request-id", "req-42", "--wait", "20"]
    return runner.invoke(app, [*args, "--bus", serving.url])


def test_the_same_request_id_in_two_sessions_gets_each_its_own_answer(
    serving: Serving,
) -> None:
    runner = CliRunner()
    first = submit(runner, serving, "where is invoice A?", "alice-1")
    assert first.exit_code == 0, first.output
    assert "submitted req-42 (session alice-1)" in first.output
    assert "answer to where is invoice A?" in first.output
    second = submit(runner, serving, "where is invoice B?", "bob-1")
    assert second.exit_code == 0, second.output
    assert "answer to where is invoice B?" in second.output
    assert "invoice A" not in second.output  # not the other session's answer
    again = submit(runner, serving, "where is invoice A?", "alice-1")  # a retry: answered once
    assert again.exit_code == 0 and "answer to where is invoice A?" in again.output
    assert test_worker.ANSWERED == ["where is invoice A?", "where is invoice B?"]


def test_a_message_with_undecodable_bytes_is_cleaned(serving: Serving) -> None:
    """argv holds bytes that are not UTF-8 as lone surrogates: the turn still goes, cleaned."""
    result = submit(CliRunner(), serving, "pay \udcff now", "carol-1")
    assert result.exit_code == 0, result.output
    assert "answer to pay \ufffd now" in result.output


def test_a_session_id_the_bus_cannot_carry_is_refused_clearly(serving: Serving) -> None:
    result = submit(CliRunner(), serving, "hello", "s\udcff")
    assert result.exit_code == 1
    assert "lone surrogate" in result.output and "session_id" in result.output
    assert "Traceback" not in result.output
