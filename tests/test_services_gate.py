"""The service gate: a missing service skips a test, or fails it under
BATON_REQUIRE_SERVICES=1 (set by .ci/run)."""

from __future__ import annotations

import socket

import pytest

from services import POSTGRES, REDIS, reachable, require_service


def _closed_port() -> tuple[str, int]:
    with socket.socket() as s:  # a port nobody listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        return ("127.0.0.1", s.getsockname()[1])


def test_a_missing_service_skips_without_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BATON_REQUIRE_SERVICES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not reachable"):
        require_service("Redis", _closed_port())


def test_a_missing_service_fails_with_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_REQUIRE_SERVICES", "1")
    with pytest.raises(pytest.fail.Exception, match="BATON_REQUIRE_SERVICES=1 but Redis"):
        require_service("Redis", _closed_port())


@pytest.mark.services
@pytest.mark.parametrize(("name", "address"), [("Redis", REDIS), ("PostgreSQL", POSTGRES)])
def test_the_services_of_the_scale_out_backends_are_up(name: str, address: tuple[str, int]) -> None:
    require_service(name, address)
    assert reachable(address) is None
