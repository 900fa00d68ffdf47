"""A remote agent's turn: the conductor that decides it and the `a2a` call that reaches the
agent.

The conductor (`conduct`) makes one call, `a2a_<agent>`, of kind `a2a`: it is in the remote
agent's call table only, shown to no model, so nothing but the conductor makes it. The
handler (`reach`) sends the request — the user's words (a worker's sub-run: the question and
its context) and the payload the agent received by hand-off, both redacted, the run's trace
context — and reads the remote task back. The conductor's second step turns the result into
the turn's ending: the remote's answer, or `ToHuman` (an escalation naming the agent and its
URL) when the call failed or the remote escalated.

What comes back is data. The answer is recorded as the holder's reply; the remote's outcome
(`wire.RESULT_MEDIA_TYPE`: status, holder, state) is never written into the session's state
or control state, and no text in it can move the baton: the conductor makes no call but
its own.

Each call keeps its remote task in its `memo` (`PendingCall.memo`) from its first answer on,
checkpointed before anything else happens: when the remote asks for input (or waits for a
person's approval over there), the run pauses with an interrupt
(`baton.core.interrupt`), and answering it (`team.answer_interrupt`) runs the call again,
which sends the answer on the same task instead of sending the first message again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from baton.a2a.link import RemoteAgentError
from baton.a2a.wire import Reply as RemoteReply
from baton.a2a.wire import handoff_message
from baton.core.events import TextDelta
from baton.core.interrupt import GraphInterrupt, interrupt, resuming
from baton.runtime.calls import called
from baton.runtime.conduct import answered, call
from baton.runtime.interrupts import request_interrupt
from baton.runtime.outcomes import ToHuman
from baton.runtime.state import StepResult
from baton.runtime.timeouts import timed
from baton.tools import error_content

if TYPE_CHECKING:
    from a2a.types import Message

    from baton.a2a.remote import RemoteAgent
    from baton.core.payload import HandoffPayload
    from baton.runtime.calls import Handled
    from baton.runtime.kernel import Call, Kernel
    from baton.runtime.model_call import Reply
    from baton.runtime.outcomes import Failed, Tripped
    from baton.runtime.state import PendingCall, RunState, TurnState

A2A = "a2a"
"""The call kind of a remote agent's call."""
ROUNDS = 2
"""A remote agent's turn: the call, then its ending."""
STEP = "a2a_task"
"""The name of a remote task's answers in a call's memo."""
WAITING = frozenset({"input-required", "auth-required"})
"""States in which the remote task waits for the person on this side."""


def call_name(agent: str) -> str:
    """The name of the call that reaches remote agent `agent`."""
    return f"a2a_{agent}"


def context_id(session_id: str, agent: str) -> str:
    """The A2A conversation of a session with a remote agent: the same for every turn of the
    session, so the remote continues it; the session's id itself does not leave."""
    digest = hashlib.sha256(f"{session_id}\x00{agent}".encode()).hexdigest()
    return f"baton-{digest[:32]}"


# ------------------------------------------------------------------ the conductor
async def conduct(
    kernel: Kernel, run: RunState, turn: TurnState
) -> Reply | Failed | ToHuman | Tripped:
    """First step: reach the agent. Second: its answer, or an escalation."""
    agent = _remote(kernel.plans[turn.agent].agent)
    name = call_name(agent.name)
    done = [d for d in answered(turn) if d.name == name]
    if not done:
        return None, [call(name)]
    last = done[-1]
    if last.failed:
        return ToHuman(last.answer)
    data = json.loads(last.content)
    answer = data.get("answer") or ""
    if data.get("status") == "escalated":
        return ToHuman(
            f"remote agent {agent.name!r} at {agent.url} escalated the request to a person "
            f"there; it said: {answer or '(nothing)'}"
        )
    if not answer.strip():
        return ToHuman(f"remote agent {agent.name!r} at {agent.url} completed with no answer")
    return answer, []


# ------------------------------------------------------------------ the call
async def reach(kernel: Kernel, call: Call) -> Handled:
    """Send the turn's request to the remote agent (or the person's answer to its question)
    and answer the call with the remote's reply; an interrupt while the remote waits."""
    run, turn, pending = call.run, call.turn, call.pending
    agent = _remote(call.plan.agent)
    started = time.perf_counter()
    pending.started = True
    try:
        with resuming(pending.resumes):
            reply = await _converse(kernel, run, turn, pending, agent)
    except GraphInterrupt as raised:
        return request_interrupt(kernel, run, turn, pending, pending.call.name, raised)
    except RemoteAgentError as exc:
        error = str(exc)
        content = error_content(error)
        called(kernel, run, turn, pending, ok=False, error=error, **_timing(started, content))
        return content, None
    if reply.state != "completed":
        error = (
            f"remote agent {agent.name!r} at {agent.url} did not complete the request (task "
            f"{reply.state})"
            + (f": {reply.text}" if reply.text else "")
            + "; a person should take the request over"
        )
        content = error_content(error)
        called(kernel, run, turn, pending, ok=False, error=error, **_timing(started, content))
        return content, None
    status = reply.outcome.get("status")
    content = json.dumps(
        {
            "remote": agent.name,
            "answer": reply.text,
            "status": status if isinstance(status, str) else None,
        },
        ensure_ascii=False,
    )
    called(kernel, run, turn, pending, ok=True, **_timing(started, content))
    return content, None


async def _converse(
    kernel: Kernel, run: RunState, turn: TurnState, pending: PendingCall, agent: RemoteAgent
) -> RemoteReply:
    """The remote task's latest reply: the first message sent once (its reply kept in the
    memo), then each answer of a person to the remote's questions, in order. Raises
    `GraphInterrupt` while the remote waits for an answer not given yet."""
    memo = pending.memo
    if any(m.step != STEP for m in memo):
        raise RemoteAgentError(
            f"call {pending.call.id} to remote agent {agent.name!r} holds steps of another "
            "kind; its checkpoint does not belong to this team: discard the run"
        )
    if memo:  # the call runs again (an answer, a resume): the first message went already
        reply = _loaded(memo[0].result)
    else:
        message = handoff_message(
            _text(kernel, run.message),
            message_id=pending.key,  # the same on every attempt of this call
            context_id=context_id(run.session.session_id, agent.name),
            payload=_payload(kernel, run, turn),
            trace_id=run.trace_id,
        )
        reply = await _send(run, turn, agent, message)
        await _keep(kernel, run, pending, reply)
    asked = 0
    while reply.state in WAITING:
        given = interrupt(_question(agent, reply))  # the person's answer, or the run pauses
        asked += 1
        if asked < len(memo):  # sent before the run stopped: never sent twice
            reply = _loaded(memo[asked].result)
            continue
        message = handoff_message(
            _text(
                kernel, given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)
            ),
            message_id=f"{pending.key}:{asked}",
            context_id=reply.context_id or context_id(run.session.session_id, agent.name),
            task_id=reply.task_id,
            trace_id=run.trace_id,
        )
        reply = await _send(run, turn, agent, message)
        await _keep(kernel, run, pending, reply)
    return reply


async def _send(
    run: RunState, turn: TurnState, agent: RemoteAgent, message: Message
) -> RemoteReply:
    """One exchange, bounded by the agent's `timeout_s`; a cancelled or timed-out exchange
    cancels the remote task it started (best effort)."""
    link = agent.link
    seen: list[str] = []

    def on_text(text: str) -> None:
        if run.listener is not None:
            run.listener(TextDelta(**run.base(turn.agent), text=text))

    try:
        return await timed(link.exchange(message, on_text, seen), agent.timeout_s)
    except TimeoutError:
        await link.cancel(message, seen)
        raise RemoteAgentError(
            f"remote agent {agent.name!r} at {agent.url} did not answer within "
            f"{agent.timeout_s:g}s (RemoteAgent timeout_s); it may still be working on it: "
            "check the agent, or raise timeout_s for longer tasks"
        ) from None
    except asyncio.CancelledError:  # the run is cancelled: the remote need not go on
        await link.cancel(message, seen)
        raise


async def _keep(kernel: Kernel, run: RunState, pending: PendingCall, reply: RemoteReply) -> None:
    """Keep the remote's reply in the call's memo and save it before anything else happens,
    so the call run again reads it instead of sending again. Its text is kept redacted."""
    red = kernel.cfg.redactor
    text = red.redact_text(reply.text) if red is not None else reply.text
    status = reply.outcome.get("status")
    pending.memo.append(
        StepResult(
            STEP,
            {
                "state": reply.state,
                "text": text,
                "task_id": reply.task_id,
                "context_id": reply.context_id,
                "status": status if isinstance(status, str) else None,
            },
        )
    )
    await kernel.checkpoint(run)


def _loaded(saved: Any) -> RemoteReply:
    data = saved if isinstance(saved, dict) else {}
    status = data.get("status")
    return RemoteReply(
        state=str(data.get("state", "unknown")),
        text=str(data.get("text", "")),
        task_id=str(data.get("task_id", "")),
        context_id=str(data.get("context_id", "")),
        outcome={"status": status} if isinstance(status, str) else {},
    )


def _question(agent: RemoteAgent, reply: RemoteReply) -> dict[str, Any]:
    """What the person is shown while the remote waits."""
    if reply.state == "auth-required":
        question = (
            f"{agent.name} waits for a person's approval on its side"
            + (f": {reply.text}" if reply.text else "")
            + ". Answer once it is given there, and the task is checked again"
        )
    else:
        question = reply.text or f"{agent.name} needs more input to go on"
    return {"remote": agent.name, "url": agent.url, "state": reply.state, "question": question}


def _text(kernel: Kernel, text: str) -> str:
    red = kernel.cfg.redactor
    return red.redact_text(text) if red is not None else text


def _payload(kernel: Kernel, run: RunState, turn: TurnState) -> HandoffPayload | None:
    """The payload the agent received by hand-off in this run, redacted again before it
    leaves; None when it was not handed the baton now (the entry agent, a worker asked, or
    the holder of the session continuing its remote conversation)."""
    payload = turn.incoming
    if payload is None or payload.trace_id != run.trace_id:
        return None
    red = kernel.cfg.redactor
    return payload if red is None else red.redact_value(payload)


def _timing(started: float, content: str) -> dict[str, Any]:
    return {"latency_ms": (time.perf_counter() - started) * 1000, "result_chars": len(content)}


def _remote(agent: Any) -> RemoteAgent:
    from baton.a2a.remote import RemoteAgent

    if not isinstance(agent, RemoteAgent):
        raise TypeError(f"agent {agent.name!r} is not a RemoteAgent; the a2a call is for those")
    return agent
