"""The team of the durability tests, built the same way in the test process and in the child
processes it kills (`python durable_kit.py '<json config>'` runs one child).

The scripted model is a function of the request, never a positional script: a team built
afresh in another process must answer a resumed run from where it stopped, not from the start
of a list. The tools write every attempt to a ledger file (one line each), so a test can
count how often a side effect really ran, across processes and crashes.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from baton import Agent, ScriptedModel, Team, tool
from baton.backends.base import Store
from baton.backends.sqlite import SQLiteStore
from baton.core.errors import ConflictError
from baton.models import Step
from baton.models.base import ModelRequest
from baton.tools import ToolContext

S = ScriptedModel
AGENT = "clerk"
ORDER = re.compile(r"\b(ORD-\d+|BK-\d+)\b")
KIT = Path(__file__).resolve()
REPO = KIT.parents[2]


@dataclass
class Knobs:
    """What the model and the tools do; mutable, so an in-process test can change them between
    a run that it interrupts and the run that resumes it."""

    ledger: str
    kill_after_tool: bool = False
    """The model SIGKILLs its own process when it reads a tool result."""
    model_sleep_after_tool_s: float = 0.0
    """The model answers a tool result only after this long."""
    tool_block_s: float = 0.0
    """The tool sleeps this long (`asyncio.sleep`) between writing `started` and `done`."""
    block_only: str | None = None
    """When set, `tool_block_s` applies to this tool only (`refund` or `cancel`)."""
    tool_freeze_s: float = 0.0
    """The tool blocks its whole process this long (`time.sleep` on the event loop: no lease
    renewal either, like a process stopped by a debugger or a stalled VM)."""
    marker: str | None = None
    """A file the tool creates once it has written `started` (the parent's cue to kill)."""
    tool_sleep_s: float = 0.0
    """Plain latency of the tool (after `done`), to make two runs overlap."""
    result: Any = None
    """What the tool returns (None: a small dict)."""
    details: Any = None
    """Extra (nested) arguments the model passes to `refund`."""


def ledger_lines(path: str | Path) -> list[str]:
    p = Path(path)
    return p.read_text(encoding="utf-8").splitlines() if p.exists() else []


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def _atomic_write(path: str, text: str) -> None:
    """Write `text` so that the file, once it exists, is whole (a parent polls for it)."""
    tmp = f"{path}.tmp"
    Path(tmp).write_text(text, encoding="utf-8")
    os.replace(tmp, path)


async def _side_effect(k: Knobs, name: str, ident: str, ctx: ToolContext) -> Any:
    """Write `started <key>`, maybe block, then `done <key>` once per key (deduplicated)."""
    key = ctx.idempotency_key
    _append(k.ledger, f"started {key} {name} {ident}")
    if k.marker is not None:
        _atomic_write(k.marker, key)
    if k.tool_block_s and k.block_only in (None, name):
        await asyncio.sleep(k.tool_block_s)
    if k.tool_freeze_s:
        time.sleep(k.tool_freeze_s)
    if not any(line.startswith(f"done {key} ") for line in ledger_lines(k.ledger)):
        _append(k.ledger, f"done {key} {name} {ident}")
    if k.tool_sleep_s:
        await asyncio.sleep(k.tool_sleep_s)
    if k.result is not None:
        return k.result
    return {"id": ident, "status": "OK"}


def make_tools(k: Knobs) -> list[Any]:
    @tool(records=("order_id",), max_result_chars=2_000_000)
    async def refund(order_id: str, ctx: ToolContext, details: dict[str, Any] | None = None) -> Any:
        """Refund an order.

        Args:
            order_id: Order number, e.g. ORD-1.
            details: Anything the refund desk should know.
        """
        return await _side_effect(k, "refund", order_id, ctx)

    @tool(records=("booking_id",))
    async def cancel(booking_id: str, ctx: ToolContext) -> Any:
        """Cancel a booking.

        Args:
            booking_id: Booking number, e.g. BK-1.
        """
        return await _side_effect(k, "cancel", booking_id, ctx)

    return [refund, cancel]


def last_user(request: ModelRequest) -> str:
    return next(m.content or "" for m in reversed(request.messages) if m.role == "user")


def answer_for(message: str) -> str:
    """The clerk's final answer to a user message (so a test can find it in a transcript)."""
    return f"done: {message}"


def policy(k: Knobs) -> ScriptedModel:
    """Tool result last -> answer; a user message last -> the tool its id asks for."""

    def respond(request: ModelRequest) -> Step:
        last = request.messages[-1]
        if last.role == "tool":
            if k.kill_after_tool:
                os.kill(os.getpid(), signal.SIGKILL)
            step = S.say(answer_for(last_user(request)))
            if k.model_sleep_after_tool_s:
                step = S.slow(step, k.model_sleep_after_tool_s)
            return step
        text = last_user(request)
        found = ORDER.search(text)
        if found is None:
            return S.say(answer_for(text))
        ident = found.group(1)
        if ident.startswith("ORD-"):
            if k.details is not None:
                return S.call("refund", order_id=ident, details=k.details)
            return S.call("refund", order_id=ident)
        return S.call("cancel", booking_id=ident)

    return S(respond)


def build_team(store: Store | str, k: Knobs, *, lease_s: float = 30.0) -> Team:
    clerk = Agent(
        name=AGENT, instructions="You refund orders and cancel bookings.", tools=make_tools(k)
    )
    return Team([clerk], entry=AGENT, model=policy(k), store=store, lease_s=lease_s)


def url(db: str | Path) -> str:
    return f"sqlite:///{Path(db).resolve()}"


# ------------------------------------------------------------------ child processes
@dataclass
class Child:
    """One child process: run `message` on `session_id` in the SQLite file `db`."""

    db: str
    session_id: str
    message: str
    knobs: Knobs
    lease_s: float = 30.0
    ready: str | None = None
    """Created once the team is built (the parent's cue)."""
    go: str | None = None
    """The child waits for this file before it runs (a barrier between processes)."""

    def argv(self) -> list[str]:
        return [sys.executable, str(KIT), json.dumps(asdict(self))]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    parts = [str(REPO / "src"), str(REPO / "tests"), str(KIT.parent)]
    if env.get("PYTHONPATH"):
        parts.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["BATON_MODEL"] = "scripted"
    return env


class _Ids:
    """An event sink keeping the ids of the events a run emitted (the child reports them)."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def emit(self, event: Any) -> None:
        self.ids.append(event.id)


async def _child(c: Child) -> None:
    sink = _Ids()
    team = build_team(SQLiteStore(url(c.db), busy_timeout_s=30), c.knobs, lease_s=c.lease_s)
    team.add_sink(sink)
    try:
        if c.ready is not None:
            _atomic_write(c.ready, "ready")
        if c.go is not None:
            while not Path(c.go).exists():
                await asyncio.sleep(0.005)
        started = time.time()
        out: dict[str, Any]
        try:
            result = await team.run(c.message, session_id=c.session_id)
        except ConflictError as exc:
            out = {"conflict": exc.key, "error": str(exc)}
        else:
            out = {"status": result.status, "output": result.output, "run_id": result.run_id}
        out.update(started=started, ended=time.time(), event_ids=sink.ids)
        print(json.dumps(out), flush=True)
    finally:
        await team.aclose()


def main(argv: list[str]) -> None:
    raw = json.loads(argv[1])
    raw["knobs"] = Knobs(**raw["knobs"])
    asyncio.run(_child(Child(**raw)))


if __name__ == "__main__":
    main(sys.argv)
