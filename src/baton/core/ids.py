"""Identifiers and clocks used across the kernel."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable

_POOL: deque[str] = deque()
"""Random 16-hex-digit chunks, read from `os.urandom` 256 at a time.

A run makes about twenty ids (events, messages, tool calls); one system call per id cost more
than the rest of `new_id`. `popleft` is atomic, so threads never share a chunk; a forked child
empties its copy, so parent and child never hand out the same ids."""
_CHUNKS_PER_READ = 256

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.clear)


def _refill() -> str:
    """Refill the pool; returns one more chunk."""
    raw = os.urandom(8 * _CHUNKS_PER_READ).hex()
    _POOL.extend([raw[i : i + 16] for i in range(16, len(raw), 16)])
    return raw[:16]


def _random_hex16() -> str:
    """16 lowercase hex digits (64 random bits from `os.urandom`)."""
    try:
        return _POOL.popleft()
    except IndexError:
        return _refill()


def new_id(prefix: str = "") -> str:
    """A random, URL-safe, sortable-enough id: `prefix` + 16 hex chars of entropy."""
    return prefix + _random_hex16()


def id_factory(prefix: str) -> Callable[[], str]:
    """`lambda: new_id(prefix)` in one call frame instead of two: the default factory of the
    ids of events, messages and tool calls, of which a run makes about twenty."""
    pop = _POOL.popleft

    def make() -> str:
        try:
            return prefix + pop()
        except IndexError:
            return prefix + _refill()

    return make


def new_trace_id() -> str:
    """A W3C trace id: 32 lowercase hex chars (128 random bits, never all zero).

    Run trace ids use this form so the payload's `trace_id` *is* the OpenTelemetry trace id.
    """
    while True:
        tid = _random_hex16() + _random_hex16()
        if tid.strip("0"):
            return tid


def now() -> float:
    """Wall-clock seconds since the epoch (float), the timestamp of every event."""
    return time.time()
