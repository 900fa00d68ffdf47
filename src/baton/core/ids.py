"""Identifiers and clocks used across the kernel."""

from __future__ import annotations

import os
import time


def new_id(prefix: str = "") -> str:
    """A random, URL-safe, sortable-enough id: `prefix` + 16 hex chars of entropy."""
    return prefix + os.urandom(8).hex()


def new_trace_id() -> str:
    """A W3C trace id: 32 lowercase hex chars (128 random bits, never all zero).

    Run trace ids use this form so the payload's `trace_id` *is* the OpenTelemetry trace id.
    """
    while True:
        tid = os.urandom(16).hex()
        if tid.strip("0"):
            return tid


def now() -> float:
    """Wall-clock seconds since the epoch (float), the timestamp of every event."""
    return time.time()
