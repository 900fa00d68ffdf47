"""The bus: how turns reach workers when one process is not enough (see `baton.bus.base`).

`open_bus(spec)` opens one from a URL: `memory://` (in-process, the default) or
`redis://host:6379/0`, `rediss://...`, `unix:///path/to/redis.sock` (Redis Streams, the
`redis` extra). See docs/bus.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from baton.bus.base import (
    Bus,
    BusError,
    DeadLetter,
    Delivery,
    Envelope,
    EnvelopeError,
    TurnResult,
    partition_of,
)
from baton.bus.memory import MemoryBus
from baton.core.errors import ConfigError

if TYPE_CHECKING:
    from baton.bus.redis_streams import RedisStreamsBus as RedisStreamsBus

SCHEMES = ("memory://", "redis://", "rediss://", "unix://")
"""The bus URL schemes `open_bus` knows."""

_MEMORY_PARAMS = {
    "partitions": int,
    "claim_idle_s": float,
    "max_deliveries": int,
    "result_ttl_s": float,
}


def _memory_bus(url: str) -> MemoryBus:
    """A `MemoryBus` from `memory://[?partitions=N&claim_idle_s=S&max_deliveries=N]`."""
    parts = urlsplit(url)
    if parts.netloc or parts.path not in ("", "/"):
        raise ConfigError(f"bad bus URL {url!r}: the in-process bus is just 'memory://'")
    options: dict[str, Any] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        convert = _MEMORY_PARAMS.get(name)
        if convert is None:
            raise ConfigError(
                f"bad bus URL {url!r}: unknown parameter {name!r} (memory:// takes "
                f"{', '.join(_MEMORY_PARAMS)})"
            )
        try:
            options[name] = convert(value)
        except ValueError:
            raise ConfigError(f"bad bus URL {url!r}: {name}={value!r} is not a number") from None
    try:
        return MemoryBus(**options)
    except ValueError as exc:
        raise ConfigError(f"bad bus URL {url!r}: {exc}") from None


def open_bus(spec: Any) -> Bus:
    """A bus from a URL (`memory://`, `redis://...`, `rediss://...`, `unix://...`), a Bus
    object, or None (in-process)."""
    if spec is None:
        return MemoryBus()
    if isinstance(spec, str):
        if spec in ("memory://", "memory") or spec.startswith("memory://"):
            return MemoryBus() if spec in ("memory://", "memory") else _memory_bus(spec)
        if spec.startswith(("redis://", "rediss://", "unix://")):
            try:
                from baton.bus.redis_streams import RedisStreamsBus
            except ImportError:
                raise ConfigError(
                    f"the bus {spec.split('://')[0]}:// needs the redis package: "
                    "pip install 'baton-relay[redis]'"
                ) from None
            return RedisStreamsBus(spec)
        raise ConfigError(
            f"unknown bus URL {spec!r}: use 'memory://' (one process), "
            "'redis://host:6379/0', 'rediss://host:6379/0' (TLS) or "
            "'unix:///path/to/redis.sock'"
        )
    if isinstance(spec, Bus):
        return spec
    raise ConfigError(f"bus must be a URL or a Bus object, got {type(spec).__name__}")


__all__ = [
    "SCHEMES",
    "Bus",
    "BusError",
    "DeadLetter",
    "Delivery",
    "Envelope",
    "EnvelopeError",
    "MemoryBus",
    "RedisStreamsBus",
    "TurnResult",
    "open_bus",
    "partition_of",
]


def __getattr__(name: str) -> Any:
    """`RedisStreamsBus` (with the `redis` extra) loads on first use; `Worker` lives in
    `baton.worker` (it runs teams; the bus only carries turns) and is found here too."""
    if name == "RedisStreamsBus":
        from baton.bus.redis_streams import RedisStreamsBus

        return RedisStreamsBus
    if name == "Worker":
        from baton.worker import Worker

        return Worker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
