"""A team as an A2A agent: `baton a2a serve module:team` (see docs/a2a-server.md).

`TeamExecutor` runs each A2A message through a bound team, and `build_app` serves it with the
`a2a-sdk`'s own request handler (tasks, `message/stream`, push notifications) and its Agent
Card. The wire convention is `baton.a2a.wire`'s: a text part (what the team is asked), the
`HandoffPayload` as a data part when another Baton desk hands the baton over, the W3C
`traceparent` in the message's metadata; the answer is a task whose artifact holds the reply's
text and the run's outcome.

How a message maps onto a run:

- the A2A `context_id` names the Baton session (`session_for`: a digest of the caller and the
  context, so two callers never share a session), the `message_id` is the run's `request_id`
  (a message sent again is answered once), `traceparent` becomes the run's `trace_id`;
- a task waiting for input (`input-required`) takes the next message as the interrupt's
  answer; a task waiting for a person's approval (`auth-required`) answers the next message
  with the run's result once an approver decided it through Baton's own channels, and stays
  `auth-required` until then: nothing in a message decides an approval;
- everything a message carries is data: its text is the user's words, a hand-off payload is
  the sender's claims (its `state` is shown as unverified, never written to the session), and
  its metadata is read for the trace context only. No part of it sets the holder, an approval
  or a budget.

Needs the `a2a` extra (`pip install 'baton-relay[a2a]'`); importing `baton` never imports it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import Message, Part, Task, TaskState, TaskStatus
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.types import ASGIApp

from baton.a2a.access import CallContextBuilder, TokenGate, principal_of
from baton.a2a.card import build_card
from baton.a2a.wire import (
    HANDOFF_MEDIA_TYPE,
    RESULT_MEDIA_TYPE,
    Incoming,
    WireError,
    metadata_of,
    read_message,
    result_artifact,
    to_value,
)
from baton.core.errors import ApprovalError, BatonError, InterruptError
from baton.core.events import AgentStarted, Handoff, TextDelta
from baton.core.payload import HandoffPayload
from baton.core.text import blank, clean_text
from baton.runtime.result import RunResult
from baton.server.auth import AuthConfig, Principal
from baton.server.ids import REQUEST_ID
from baton.topologies.team import Team

ANSWER_ARTIFACT = "answer"
"""The id of the artifact that holds the reply (streamed chunks, then the final answer)."""

_RECHECK = "(the result of a request that waited for approval)"
"""The text `team.run` is given to look a request up by its id (never run: the id is known)."""

_META = "baton"
"""The key of a task's metadata under which the server keeps what it needs to continue it."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
"""An agent name a received payload may show as its source; anything else is shown as
`a remote agent` (the source is the sender's claim, rendered on the receiver's line)."""


def session_for(caller: str, context_id: str) -> str:
    """The Baton session of an A2A conversation (`context_id`) of `caller` (the token's
    name, `local` without a token file): deterministic, and valid for the API server's
    session ids. Two callers naming the same context get two sessions."""
    digest = hashlib.sha256(f"{caller}\n{context_id}".encode()).hexdigest()[:32]
    return f"a2a:{digest}"


def request_for(message_id: str) -> str:
    """The run's `request_id` for an A2A message id (a digest of it when it is not a valid
    request id): a message sent again is the same request."""
    if re.fullmatch(REQUEST_ID, message_id):
        return message_id
    return "a2a-m:" + hashlib.sha256(message_id.encode()).hexdigest()[:32]


def received_text(text: str, payload: HandoffPayload | None) -> str:
    """What the team runs for a message: its text, after the hand-off it carries rendered
    as the receiving agent of a local hand-off reads it — except that every state slot is
    the sender's claim (`unverified`), never a known fact, and its source is named only
    when it is a plain agent name."""
    if payload is None:
        return text
    claims = {**payload.state, **payload.unverified}
    source = payload.source if _NAME.fullmatch(payload.source) else "a remote agent"
    shown = payload.model_copy(update={"state": {}, "unverified": claims, "source": source})
    return f"{shown.render()}\n\nThe message with it:\n{text or payload.objective}"


def outcome_of(result: RunResult) -> dict[str, Any]:
    """The run's outcome as the result artifact carries it (state as the run returns it:
    secrets masked)."""
    return {
        "status": result.status,
        "holder": result.holder,
        "path": list(result.path),
        "state": json.loads(json.dumps(result.state, default=str)),
        "run_id": result.run_id,
        "trace_id": result.trace_id,
        "session_id": result.session_id,
    }


class TeamExecutor(AgentExecutor):
    """Runs A2A messages through a bound team (see the module's docstring for the mapping)."""

    def __init__(self, team: Team) -> None:
        self.team = team

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run the message (or continue the task it answers) and publish the outcome."""
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        task = context.current_task
        if task is None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message] if context.message is not None else [],
                )
            )
        who = principal_of(context)
        if not who.can_operate():
            await updater.reject(
                _say(updater, f"user {who.name!r} may not run the team: it needs the role operator")
            )
            return
        if context.message is None:
            await updater.reject(_say(updater, "the request carries no message"))
            return
        try:
            incoming = read_message(context.message)
        except WireError as exc:
            await updater.reject(_say(updater, f"invalid message: {exc}"))
            return
        session_id = session_for(who.name, context_id)
        waiting = TaskState.Name(task.status.state) if task is not None else None
        try:
            if waiting == "TASK_STATE_INPUT_REQUIRED":
                result = await self._answer(updater, session_id, incoming)
            elif waiting == "TASK_STATE_AUTH_REQUIRED" and task is not None:
                result = await self._recheck(updater, session_id, task)
            else:
                result = await self._start(updater, context.message, incoming, session_id, who)
        except (ApprovalError, InterruptError) as exc:
            # a new task in a conversation whose run waits: it goes on on the waiting task
            await updater.reject(
                _say(
                    updater,
                    "this conversation's run waits (for a person's approval, or for an answer "
                    "to a question); send messages on the task that waits (its taskId), or "
                    f"start a new conversation with a new contextId. {exc}",
                )
            )
            return
        except (BatonError, ValueError) as exc:
            await updater.reject(_say(updater, str(exc)))
            return
        if result is not None:
            await self._publish(updater, result)

    async def _start(
        self,
        updater: TaskUpdater,
        message: Message,
        incoming: Incoming,
        session_id: str,
        who: Principal,
    ) -> RunResult | None:
        """Run a new request, publishing its progress: `working` as agents take the baton,
        the reply's text as chunks of the answer artifact (of the run itself, not of the
        workers a supervisor asks)."""
        text = clean_text(incoming.text)
        if blank(text) and incoming.payload is None:
            await updater.reject(
                _say(
                    updater,
                    "the message has no text and no hand-off: send the user's words as a text "
                    f"part (and a hand-off as a data part of media type {HANDOFF_MEDIA_TYPE})",
                )
            )
            return None
        request_id = request_for(message.message_id)
        await updater.update_status(
            TaskState.TASK_STATE_WORKING,
            metadata={_META: {"session_id": session_id, "request_id": request_id}},
        )
        result: RunResult | None = None
        chunks = 0
        async for item in self.team.stream(
            received_text(text, incoming.payload),
            session_id,
            who.run_user(None),
            request_id=request_id,
            trace_id=incoming.trace_id,
        ):
            if isinstance(item, RunResult):
                result = item
            elif isinstance(item, TextDelta) and item.text and item.parent_run_id is None:
                await updater.add_artifact(
                    [Part(text=item.text)],
                    artifact_id=ANSWER_ARTIFACT,
                    name=ANSWER_ARTIFACT,
                    append=chunks > 0,
                )
                chunks += 1
            elif isinstance(item, AgentStarted) and item.agent:
                await updater.start_work(_say(updater, f"{item.agent} is working on it"))
            elif isinstance(item, Handoff):
                await updater.start_work(
                    _say(
                        updater,
                        f"handed over from {item.payload.source} to {item.payload.target}",
                    )
                )
        return result

    async def _answer(
        self, updater: TaskUpdater, session_id: str, incoming: Incoming
    ) -> RunResult | None:
        """The message answers the interrupt the run waits for: its text, else its data (a
        message with neither leaves the task waiting)."""
        value: Any = clean_text(incoming.text)
        if blank(value):
            if not incoming.data:
                await updater.requires_input(
                    _say(updater, "the task waits for an answer: send it as a text part")
                )
                return None
            value = incoming.data[0]
        return await self.team.answer_interrupt(session_id, value)

    async def _recheck(self, updater: TaskUpdater, session_id: str, task: Task) -> RunResult | None:
        """A message on a task waiting for approval: the run's result once an approver decided
        (the run resumed, here or in another process), else the task stays `auth-required`.
        The message itself is never read: no decision comes from a conversation."""
        request_id = str(_task_meta(task).get("request_id") or "")
        store = self.team.store
        cp = await store.get_checkpoint(session_id)
        ours = cp is not None and cp.meta.get("request_id") == request_id
        if ours and cp is not None and cp.status == "awaiting_approval":
            await updater.requires_auth(_say(updater, _waits(cp.meta.get("approval") or {})))
            return None
        record = await store.get_session(session_id)
        if ours or (record is not None and request_id in record.requests):
            # the same request id: its recorded result, or its run continued; nothing new runs
            return await self.team.run(_RECHECK, session_id, request_id=request_id)
        await updater.reject(
            _say(
                updater,
                "the run that waited for approval is gone (discarded on the server); send the "
                "request again as a new message",
            )
        )
        return None

    async def _publish(self, updater: TaskUpdater, result: RunResult) -> None:
        status = result.status
        if status in ("completed", "escalated"):
            text = result.output or ""
            if status == "escalated" and not text and result.escalation is not None:
                text = result.escalation.last_reply or "A person will take over this request."
            artifact = result_artifact(text, outcome_of(result), artifact_id=ANSWER_ARTIFACT)
            await updater.add_artifact(
                list(artifact.parts),
                artifact_id=ANSWER_ARTIFACT,
                name=ANSWER_ARTIFACT,
                append=False,
                last_chunk=True,
            )
            await updater.complete()
        elif status == "interrupted":
            value = result.interrupt.value if result.interrupt is not None else None
            question = value if isinstance(value, str) else json.dumps(value, default=str)
            await updater.requires_input(
                _say(updater, question or "the run waits for an answer", value, result)
            )
        elif status == "awaiting_approval":
            asked = result.approval.model_dump(mode="json") if result.approval else {}
            waits = {k: asked.get(k) for k in ("id", "tool", "target", "required_roles", "reason")}
            await updater.requires_auth(_say(updater, _waits(asked), {"approval": waits}, result))
        elif status == "blocked":
            why = result.output or result.error or "blocked by a guardrail"
            await updater.reject(_say(updater, why, None, result))
        elif status == "cancelled":
            await updater.cancel(_say(updater, result.error or "cancelled", None, result))
        else:
            await updater.failed(_say(updater, result.error or "the run failed", None, result))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the session's run (`team.cancel`) and mark the task canceled."""
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        session_id = session_for(principal_of(context).name, context.context_id or "")
        result = await self.team.cancel(session_id, reason="cancelled by the A2A client")
        why = result.error if result is not None and result.error else "cancelled by the client"
        await updater.cancel(_say(updater, why))


def _task_meta(task: Task) -> dict[str, Any]:
    kept = metadata_of(task).get(_META)
    return kept if isinstance(kept, dict) else {}


def _waits(card: dict[str, Any]) -> str:
    tool = card.get("tool") or card.get("name") or "a call"
    roles = ", ".join(card.get("required_roles") or []) or "an approver"
    return (
        f"approval {card.get('id', '?')} waits for a person: {tool} needs a sign-off by "
        f"{roles} on this server. Approvers decide it through Baton (`baton approvals`, the "
        "dashboard or the API server), never through this conversation; send any message on "
        "this task afterwards to get the result"
    )


def _say(
    updater: TaskUpdater, text: str, data: Any = None, result: RunResult | None = None
) -> Message:
    """An agent message of the task: `text`, with `data` and the run's outcome as data."""
    parts = [Part(text=text)]
    if data is not None and not isinstance(data, str):
        parts.append(Part(data=to_value(json.loads(json.dumps(data, default=str)))))
    if result is not None:
        parts.append(Part(data=to_value(outcome_of(result)), media_type=RESULT_MEDIA_TYPE))
    return updater.new_agent_message(parts)


def build_app(
    team: Team,
    *,
    url: str,
    name: str = "baton",
    description: str | None = None,
    auth: AuthConfig | None = None,
    push_client: httpx.AsyncClient | None = None,
) -> ASGIApp:
    """The A2A app of a bound `team`: the Agent Card at `/.well-known/agent-card.json` and
    JSON-RPC at `/` (`url` is where clients reach it, for the card), behind the token check
    with `auth`. Push notifications go out with `push_client` (a new client by default)."""
    card = build_card(team, name=name, url=url, description=description, authenticated=bool(auth))
    configs = InMemoryPushNotificationConfigStore()
    pusher = push_client or httpx.AsyncClient(timeout=10.0)
    handler = DefaultRequestHandler(
        agent_executor=TeamExecutor(team),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=configs,
        push_sender=BasePushNotificationSender(pusher, configs),
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/", context_builder=CallContextBuilder(auth)),
    ]

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await handler.aclose()
            if push_client is None:
                await pusher.aclose()

    app = Starlette(routes=routes, lifespan=lifespan)
    if auth is not None:
        return TokenGate(app, auth, [AGENT_CARD_WELL_KNOWN_PATH])
    return app


__all__ = [
    "ANSWER_ARTIFACT",
    "TeamExecutor",
    "build_app",
    "outcome_of",
    "received_text",
    "request_for",
    "session_for",
]
