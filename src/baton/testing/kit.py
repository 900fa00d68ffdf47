"""What every conformance suite shares: the capability marker and the records its tests build.

`@capability(Tasks)` marks a test with the store capabilities it checks; the autouse fixture
`baton_capability` skips it, with a reason naming the capability, for a store that lacks
one (`isinstance(store, Tasks)` is False). A store passes a suite by passing every test of it
that is not skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from baton.backends.base import Checkpoint, CheckpointStatus, SessionRecord
from baton.core.events import (
    EscalationCard,
    Event,
    Handoff,
    ModelCalled,
    RunFinished,
    RunStarted,
    ToolCalled,
)
from baton.core.ids import new_id
from baton.core.messages import Usage
from baton.core.payload import HandoffPayload

F = TypeVar("F", bound=Callable[..., Any])


def capability(*protocols: type) -> Callable[[F], F]:
    """Mark a test with the store capabilities (protocols of `baton.backends`) it checks."""

    def mark(test: F) -> F:
        test.baton_capabilities = protocols  # type: ignore[attr-defined]
        return test

    return mark


def skip_unless_capable(test: Callable[..., Any], store: Any) -> None:
    """Skip `test` (`pytest.skip`) when `store` lacks a capability it is marked with."""
    for protocol in getattr(test, "baton_capabilities", ()):
        if not isinstance(store, protocol):
            pytest.skip(f"{type(store).__name__} lacks the {protocol.__name__} capability")


@pytest.fixture(autouse=True)
def baton_capability(request: pytest.FixtureRequest, store: Any) -> None:
    """Skip a marked test (`capability`) whose store lacks one of its capabilities."""
    skip_unless_capable(request.function, store)


def make_payload(session_id: str, trace_id: str = "tr_1") -> HandoffPayload:
    """A realistic hand-off from triage to billing."""
    return HandoffPayload(
        reason="billing question",
        objective="Answer the invoice question",
        state={"order_id": "ORD-202607-99", "amount": 299.0, "tags": ["vip", "发票"]},
        completed_steps=["greeted the user"],
        constraints=["be formal"],
        reply_to_user="Passing you to billing.",
        priority="high",
        trace_id=trace_id,
        session_id=session_id,
        user_id="u1",
        source="triage",
        target="billing",
        hop=1,
        path=["triage"],
        history_ref=session_id,
    )


def make_events(session_id: str, trace_id: str, run_id: str) -> list[Event]:
    """One run's worth of events of several concrete types."""
    base: dict[str, Any] = {"trace_id": trace_id, "session_id": session_id, "run_id": run_id}
    return [
        RunStarted(**base, message="where is my invoice?", user_id="u1"),
        ModelCalled(
            **base,
            agent="triage",
            model="scripted",
            usage=Usage(input_tokens=12, output_tokens=4),
            latency_ms=1.5,
            tool_calls=("transfer_to_billing",),
        ),
        Handoff(**base, agent="triage", payload=make_payload(session_id, trace_id)),
        ToolCalled(
            **base,
            agent="billing",
            hop=1,
            tool="query_invoice",
            call_id="call_1",
            arguments={"order_id": "ORD-202607-99"},
            ok=True,
            result_chars=42,
        ),
        RunFinished(
            **base,
            agent="billing",
            hop=1,
            status="completed",
            output="Your invoice is ISSUED.",
            path=["triage", "billing"],
            usage={
                "triage": Usage(input_tokens=12, output_tokens=4),
                "billing": Usage(input_tokens=30, output_tokens=9),
            },
            latency_ms=12.25,
        ),
    ]


def make_card(session_id: str, n: int = 0) -> EscalationCard:
    """An escalation card with non-ASCII text and nested state."""
    return EscalationCard(
        session_id=session_id,
        trace_id=f"tr_{n}",
        user_id="u1",
        path=["triage", "billing"],
        reasons=[f"max_hops: reason {n}"],
        state={"order_id": "ORD-1", "nested": {"a": [1, 2.5, None]}},
        last_user_message="我要退款",
        last_reply="Passing you to billing.",
    )


def new_session(session_id: str | None = None, **kw: Any) -> SessionRecord:
    """A session record with a fresh id unless one is given."""
    return SessionRecord(session_id or new_id("s_"), **kw)


@dataclass
class RunState:
    """A stand-in for the kernel's run state: anything with `to_json() -> str`."""

    step: int
    note: str = "发票 ORD-202607-99"

    def to_json(self) -> str:
        """The state as JSON text."""
        return json.dumps({"step": self.step, "note": self.note}, ensure_ascii=False)


def make_checkpoint(
    session_id: str,
    run_id: str = "run_1",
    seq: int = 1,
    status: CheckpointStatus = "running",
    updated_at: float | None = None,
) -> Checkpoint:
    """A checkpoint whose state records its seq, with a small meta dict."""
    cp = Checkpoint(
        session_id,
        run_id,
        seq,
        status=status,
        state=RunState(seq),
        meta={"agent": "billing", "seq": seq},
    )
    if updated_at is not None:
        cp.updated_at = updated_at
    return cp
