"""Shared fixtures for the kernel tests: a small three-agent desk and a tool-call counter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from baton import Agent, ScriptedModel, Team, tool


class Calls:
    """Counts how often the desk's tools really ran (to prove a call was not executed)."""

    def __init__(self) -> None:
        self.invoice: list[str] = []
        self.restart: list[str] = []


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def desk(calls: Calls) -> Callable[..., Team]:
    """Factory: triage -> {billing, tech}; billing -> {triage, tech}; tech -> {billing}."""

    @tool(scopes=["billing:read"])
    async def query_invoice(order_id: str) -> dict[str, Any]:
        """Look up the e-invoice of an order.

        Args:
            order_id: Order number, e.g. ORD-1.
        """
        calls.invoice.append(order_id)
        return {"order_id": order_id, "status": "ISSUED"}

    @tool(scopes=["ops:write"])
    async def restart_server(server_id: str) -> dict[str, Any]:
        """Restart a server.

        Args:
            server_id: Instance id.
        """
        calls.restart.append(server_id)
        return {"server_id": server_id, "status": "RESTARTED"}

    def build(model: ScriptedModel, **team_kwargs: Any) -> Team:
        billing_kwargs = team_kwargs.pop("billing_kwargs", {})
        triage = Agent(
            name="triage",
            instructions="You are the front desk.",
            handoffs=["billing", "tech"],
        )
        billing = Agent(
            name="billing",
            instructions="You are billing.",
            description="Invoices.",
            tools=[query_invoice],
            scopes=["billing:read"],
            handoffs=["triage", "tech"],
            **billing_kwargs,
        )
        tech = Agent(
            name="tech",
            instructions="You are tech support.",
            tools=[restart_server],
            scopes=["ops:write"],
            handoffs=["billing"],
        )
        return Team([triage, billing, tech], entry="triage", model=model, **team_kwargs)

    return build


@pytest.fixture(params=["memory", "memory-json", "sqlite", "postgres", "redis"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    """A fresh store of every backend in turn (PostgreSQL and Redis in a namespace of their
    own, dropped after the test; skipped, or failed under BATON_REQUIRE_SERVICES=1, when the
    service is down)."""
    from tests.backends.conftest import dispose, make_store

    store = make_store(request.param, tmp_path)
    try:
        yield store
    finally:
        await dispose(store)
