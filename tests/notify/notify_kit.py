"""What the notification tests share: a loopback HTTP receiver that records every POST it
gets and answers with the statuses it is told to (then 200), and notifiable events."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.services import POSTGRES, REDIS, require_service

from baton.backends import MemoryStore
from baton.backends.sqlite import SQLiteStore
from baton.core.approval import ApprovalCard
from baton.core.events import (
    ApprovalRequested,
    Escalated,
    EscalationCard,
    GuardTripped,
    RunFinished,
)


@dataclass
class Received:
    """One request as the receiver got it."""

    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    status: int


@dataclass
class Receiver:
    """Records requests; answers `statuses` in order, then 200. `hold` (an Event) makes the
    handler wait before answering (a deliverer killed mid-request)."""

    received: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    hold: threading.Event | None = None
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self) -> int:
        with self._lock:
            return self.statuses.pop(0) if self.statuses else 200

    def keys(self) -> list[str]:
        """The idempotency keys received, in order."""
        return [r.headers.get("Idempotency-Key", "") for r in self.received]


def start() -> tuple[Receiver, ThreadingHTTPServer]:
    """A receiver listening on 127.0.0.1 (a free port), served from a daemon thread."""
    rec = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status = rec.answer()
            parts = urlsplit(self.path)
            with rec._lock:
                rec.received.append(
                    Received(parts.path, parse_qs(parts.query), dict(self.headers), body, status)
                )
            if rec.hold is not None:
                rec.hold.wait(10)
            answer = b'{"errcode":0}' if status == 200 else b'{"error":"boom"}'
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(answer)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the sender died or gave up waiting (what some tests do)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet test output

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return rec, server


def approval(session_id: str = "S1", run_id: str = "R1", **card: object) -> ApprovalRequested:
    """An approval_requested event of a refund waiting for a `finance` approver."""
    fields: dict[str, object] = {
        "id": "ap-1",
        "session_id": session_id,
        "run_id": run_id,
        "trace_id": "T1",
        "agent": "billing",
        "kind": "tool",
        "tool": "refund",
        "call_id": "c1",
        "arguments": {"order_id": "ORD-202607-99", "amount": 120},
        "reason": "退款超过 100 元需要财务审批",
        "required_roles": ["finance"],
    }
    fields.update(card)
    return ApprovalRequested(
        trace_id="T1",
        session_id=session_id,
        run_id=run_id,
        agent="billing",
        card=ApprovalCard(**fields),  # type: ignore[arg-type]
    )


def escalated(session_id: str = "S1") -> Escalated:
    """An escalation to the human queue, with a hand-over card in Chinese."""
    card = EscalationCard(
        session_id=session_id,
        trace_id="T1",
        user_id="U1",
        path=["triage", "billing", "tech"],
        reasons=["ping-pong billing ↔ tech"],
        state={"order_id": "ORD-202607-99"},
        last_user_message="服务器 srv-7 又挂了，发票也没收到",
    )
    return Escalated(trace_id="T1", session_id=session_id, run_id="R1", to="human", card=card)


def failed(session_id: str = "S1") -> RunFinished:
    """A run that ended failed."""
    return RunFinished(
        trace_id="T1", session_id=session_id, run_id="R1", status="failed", error="model down"
    )


def tripped(guard: str = "max_hops", ts: float = 1000.0, session_id: str = "S1") -> GuardTripped:
    """A guard trip at `ts`."""
    return GuardTripped(
        trace_id="T1", session_id=session_id, run_id="R1", guard=guard, detail="5 hops", ts=ts
    )


OUTBOX_BACKENDS = ["memory", "sqlite", "postgres", "redis"]
"""The stores with the outbox."""

POSTGRES_URL = f"postgresql://postgres@{POSTGRES[0]}:{POSTGRES[1]}/test"
REDIS_URL = f"redis://{REDIS[0]}:{REDIS[1]}/0"


def outbox_store(kind: str, tmp_path: Path, schema: str | None = None) -> Any:
    """A fresh store of `kind` (PostgreSQL in a schema, Redis under a prefix of its own;
    `schema` names one to share)."""
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(f"sqlite:///{tmp_path}/notify.db")
    if kind == "redis":
        require_service("Redis", REDIS)
        from baton.backends.redis_store import RedisStore

        return RedisStore(REDIS_URL, prefix=f"{schema or f't_{uuid.uuid4().hex[:12]}'}:")
    require_service("PostgreSQL", POSTGRES)
    from baton.backends.postgres import PostgresStore

    return PostgresStore(POSTGRES_URL, schema=schema or f"t_{uuid.uuid4().hex[:12]}")


async def dispose(store: Any) -> None:
    """Close a store, dropping a PostgreSQL store's schema first."""
    drop = getattr(store, "drop", None)
    try:
        if drop is not None:
            await drop()
    finally:
        await store.close()
