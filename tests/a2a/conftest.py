"""Fixtures of the A2A server tests: a scripted orders desk served in process (the a2a-sdk's
client over httpx's ASGI transport)."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from typing import Any

import pytest

if importlib.util.find_spec("a2a") is None:  # the `a2a` extra (the dev install brings it)
    collect_ignore_glob = ["test_*.py"]

BASE = "http://desk.a2a.test"


@pytest.fixture
async def desk(tmp_path) -> AsyncIterator[Any]:
    """The test desk bound to a SQLite store of its own."""
    from a2a_server_team import team

    served = team.bind(store=f"sqlite:///{tmp_path}/a2a.db")
    try:
        yield served
    finally:
        await served.aclose()


@pytest.fixture
async def a2a(desk) -> AsyncIterator[Any]:
    """(card, plain client, streaming client) of the desk served in process."""
    import httpx
    from a2a_kit import clients

    from baton.a2a.server import build_app

    app = build_app(desk, url=f"{BASE}/", name="orders-desk")
    async with clients(BASE, transport=httpx.ASGITransport(app=app)) as found:
        yield found
