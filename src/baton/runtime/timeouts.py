"""A cheap timeout for awaitables on every supported Python."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


if sys.version_info >= (3, 11):

    async def with_timeout(aw: Awaitable[T], seconds: float | None) -> T:
        """Await `aw`; raise `TimeoutError` after `seconds` (None = no limit).

        `asyncio.timeout` cancels in place; `wait_for` would wrap `aw` in a new task, which
        costs tens of microseconds per call on the kernel's hot path.
        """
        if seconds is None:
            return await aw
        async with asyncio.timeout(seconds):
            return await aw

else:  # pragma: no cover - exercised on 3.10 only

    async def with_timeout(aw: Awaitable[T], seconds: float | None) -> T:
        """Await `aw`; raise `TimeoutError` after `seconds` (None = no limit)."""
        if seconds is None:
            return await aw
        try:
            return await asyncio.wait_for(aw, seconds)
        except asyncio.TimeoutError as exc:
            raise TimeoutError(str(exc)) from exc
