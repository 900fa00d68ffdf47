"""Observability: event sinks that consume the typed events of every run."""

from baton.observe.base import EventSink
from baton.observe.console import ConsoleSink
from baton.observe.jsonl import JSONLSink

__all__ = ["ConsoleSink", "EventSink", "JSONLSink"]
