"""Fixtures of the notification tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.notify.notify_kit import OUTBOX_BACKENDS, Receiver, dispose, outbox_store, start


@pytest.fixture(params=OUTBOX_BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Every store with an outbox in turn."""
    s = outbox_store(request.param, tmp_path)
    try:
        yield s
    finally:
        await dispose(s)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver on 127.0.0.1, shut down after the test."""
    rec, server = start()
    yield rec
    if rec.hold is not None:
        rec.hold.set()
    server.shutdown()
    server.server_close()
