"""Trace context in a bus message's headers (W3C `traceparent`), so that one OpenTelemetry
trace spans the client that submitted a turn and every worker that ran it.

The client injects the current span's context when there is one (an API request being
traced), else a fresh trace id; the worker reads the trace id back and runs the turn under it
(`team.run(..., trace_id=...)`), and `OTelSink` uses a run's `trace_id` as its OpenTelemetry
trace id. The propagator is OpenTelemetry's own (`TraceContextTextMapPropagator`).
"""

from __future__ import annotations

import secrets

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from baton.core.ids import new_trace_id

_PROPAGATOR = TraceContextTextMapPropagator()


def trace_headers() -> dict[str, str]:
    """Headers carrying the caller's trace context: the current span's, or a new trace."""
    headers: dict[str, str] = {}
    _PROPAGATOR.inject(headers)
    if "traceparent" not in headers:  # no span is active: the turn starts a trace of its own
        headers["traceparent"] = f"00-{new_trace_id()}-{secrets.token_hex(8)}-01"
    return headers


def trace_id_of(headers: dict[str, str]) -> str | None:
    """The W3C trace id (32 lowercase hex chars) the headers carry, or None (absent or
    malformed: the run then starts a new trace)."""
    if "traceparent" not in headers:
        return None
    context = _PROPAGATOR.extract(headers)
    span = trace.get_current_span(context).get_span_context()
    return format(span.trace_id, "032x") if span.is_valid else None
