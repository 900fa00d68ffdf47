"""Fixtures of the notification tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.notify.notify_kit import Receiver, start


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver on 127.0.0.1, shut down after the test."""
    rec, server = start()
    yield rec
    if rec.hold is not None:
        rec.hold.set()
    server.shutdown()
    server.server_close()
