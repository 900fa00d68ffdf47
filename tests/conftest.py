"""Test-wide settings.

The example desks run on the embedded local model by default; the suite runs them on their
scripted policies (BATON_MODEL=scripted) and exercises the real model only in the tests marked
`local_model`, which build their models explicitly.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

os.environ["BATON_MODEL"] = "scripted"


@pytest.fixture
def dies_when_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancelled run records nothing, as when its process is killed: what is left is its
    last checkpoint, as after `kill -9` (tested with real processes in test_durability)."""

    from baton.runtime.runner import Runner

    async def die(self: Any, r: Any, reason: str) -> Any:
        raise asyncio.CancelledError

    monkeypatch.setattr(Runner, "cancelled", die)
