"""Observability: event sinks that consume the typed events of every run.

`OTelSink` (OpenTelemetry) and `MetricsSink` (Prometheus) load their libraries on first use,
so `import baton` stays fast and works without them installed.
"""

from typing import TYPE_CHECKING, Any

from baton.observe.base import EventSink
from baton.observe.console import ConsoleSink
from baton.observe.declared import OTHER, BindsNames, DeclaredNames
from baton.observe.jsonl import JSONLSink

if TYPE_CHECKING:
    from baton.observe.metrics import MetricsSink, metrics_from_events
    from baton.observe.otel import OTelSink

__all__ = [
    "OTHER",
    "BindsNames",
    "ConsoleSink",
    "DeclaredNames",
    "EventSink",
    "JSONLSink",
    "MetricsSink",
    "OTelSink",
    "metrics_from_events",
]

_LAZY = {
    "OTelSink": "baton.observe.otel",
    "MetricsSink": "baton.observe.metrics",
    "metrics_from_events": "baton.observe.metrics",
}


def __getattr__(name: str) -> Any:
    """Lazy exports: `OTelSink` imports opentelemetry, `MetricsSink` prometheus_client."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
