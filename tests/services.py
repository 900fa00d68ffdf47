"""The services the scale-out backends' tests talk to, and the gate that decides whether a
missing one skips a test (a developer's machine) or fails it (`BATON_REQUIRE_SERVICES=1`, as
`.ci/run` sets it: on CI a service that is down must not pass unnoticed)."""

from __future__ import annotations

import os
import socket

import pytest

REDIS = ("127.0.0.1", 6379)
POSTGRES = ("127.0.0.1", 5432)


def reachable(address: tuple[str, int], timeout_s: float = 1.0) -> str | None:
    """None when something accepts connections at `address`, else why not."""
    try:
        with socket.create_connection(address, timeout=timeout_s):
            return None
    except OSError as exc:
        return f"{exc.__class__.__name__}: {exc}"


def require_service(name: str, address: tuple[str, int]) -> None:
    """Skip the calling test when `name` is not reachable, or fail it under
    BATON_REQUIRE_SERVICES=1."""
    why = reachable(address)
    if why is None:
        return
    reason = f"{name} is not reachable at {address[0]}:{address[1]} ({why})"
    if os.environ.get("BATON_REQUIRE_SERVICES") == "1":
        pytest.fail(f"BATON_REQUIRE_SERVICES=1 but {reason}")
    pytest.skip(f"{reason}; start it to run this test")
