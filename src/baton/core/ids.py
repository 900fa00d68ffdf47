"""Identifiers and clocks used across the kernel."""

from __future__ import annotations

import os
import time


def new_id(prefix: str = "") -> str:
    """A random, URL-safe, sortable-enough id: `prefix` + 16 hex chars of entropy."""
    return prefix + os.urandom(8).hex()


def now() -> float:
    """Wall-clock seconds since the epoch (float), the timestamp of every event."""
    return time.time()
