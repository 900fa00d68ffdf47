"""A remote agent's connection: one HTTP client and its Agent Card, opened on first use.

`RemoteLink` resolves the card once (`<url>/.well-known/agent-card.json`), builds the
`a2a-sdk` client the card asks for (streaming when the card says the agent streams), sends a
message and reads the task back as a `wire.Reply`, forwarding the text of streamed artifact
chunks as they come. Every way the exchange can go wrong (the agent is down, answers HTTP
errors, answers something that is not A2A, takes too long) is raised as `RemoteAgentError`,
whose message names the agent, its URL and what to do. The connection belongs to the event
loop that opened it: used from another loop (a second `asyncio.run`), it opens a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    SendMessageRequest,
    Task,
)
from a2a.utils.errors import A2AError
from google.protobuf.message import Error as ProtobufError

from baton.a2a.wire import STATES, Reply, WireError, read_reply_message, read_task
from baton.core.errors import BatonError

if TYPE_CHECKING:
    from a2a.client import Client
    from a2a.types import AgentCard, TaskArtifactUpdateEvent

CANCEL_WAIT_S = 2.0
"""How long cancelling a remote task may take (best effort: a run being cancelled waits no
longer)."""


class RemoteAgentError(BatonError):
    """A remote agent could not be reached or answered something unreadable; the message
    names the agent, its URL and what to do."""


class RemoteLink:
    """The HTTP client and Agent Card of one remote agent, opened lazily per event loop."""

    def __init__(
        self,
        name: str,
        url: str,
        headers: Mapping[str, str],
        timeout_s: float,
        streaming: bool | None,
    ) -> None:
        self.name = name
        self.url = url.rstrip("/")
        self.headers = dict(headers)
        self.timeout_s = timeout_s
        self.streaming = streaming
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._http: httpx.AsyncClient | None = None
        self._client: Client | None = None
        self.card: AgentCard | None = None
        """The agent's card, once read."""

    def _who(self) -> str:
        return f"remote agent {self.name!r} at {self.url}"

    async def client(self) -> Client:
        """The SDK client, made on first use in this event loop (reading the card once)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new loop: the old one's connection cannot be used here
            self._loop, self._lock = loop, asyncio.Lock()
            self._http = self._client = self.card = None
        assert self._lock is not None
        async with self._lock:
            if self._client is not None:
                return self._client
            http = httpx.AsyncClient(
                headers=self.headers, timeout=httpx.Timeout(self.timeout_s + 5.0)
            )
            try:
                card = await A2ACardResolver(http, self.url).get_agent_card()
                config = ClientConfig(
                    httpx_client=http,
                    streaming=self.streaming if self.streaming is not None else True,
                )
                client = ClientFactory(config).create(card)
            except (A2AError, httpx.HTTPError, ValueError, ProtobufError) as exc:
                await http.aclose()
                raise RemoteAgentError(
                    f"could not read the Agent Card of {self._who()} "
                    f"({self.url}/.well-known/agent-card.json): {_why(exc)}. Check that the "
                    "agent runs and the URL (and headers, for an agent behind auth) are right"
                ) from None
            self._http, self._client, self.card = http, client, card
            return client

    async def exchange(
        self, message: Message, on_text: Callable[[str], None], seen: list[str]
    ) -> Reply:
        """Send `message` and read the task (or message) the agent answers with. Text parts
        of streamed artifact chunks go to `on_text` as they arrive; the task's id goes into
        `seen` as soon as it is known (so a cancelled exchange can cancel it)."""
        client = await self.client()
        task: Task | None = None
        try:
            async for event in client.send_message(SendMessageRequest(message=message)):
                kind = event.WhichOneof("payload")
                if kind == "message":
                    return read_reply_message(event.message)
                if kind == "task":
                    task = Task()
                    task.CopyFrom(event.task)
                elif kind == "status_update":
                    update = event.status_update
                    task = task or Task(id=update.task_id, context_id=update.context_id)
                    task.status.CopyFrom(update.status)
                elif kind == "artifact_update":
                    chunk = event.artifact_update
                    task = task or Task(id=chunk.task_id, context_id=chunk.context_id)
                    _append(task, chunk)
                    for part in chunk.artifact.parts:
                        if part.WhichOneof("content") == "text" and part.text:
                            on_text(part.text)
                if task is not None and task.id and not seen:
                    seen.append(task.id)
        except (A2AError, httpx.HTTPError, ValueError, ProtobufError, WireError) as exc:
            raise RemoteAgentError(f"{self._who()} failed to answer: {_why(exc)}") from None
        if task is None:
            raise RemoteAgentError(
                f"{self._who()} answered with neither a task nor a message; it does not "
                "speak A2A as expected"
            )
        return read_task(task)

    async def cancel(self, message: Message, seen: list[str]) -> None:
        """Ask the agent to cancel the task `message` started or continues (best effort,
        within `CANCEL_WAIT_S`): the task's id when the exchange saw it (`seen`) or the
        message named it, else the conversation's task that holds the message (or, from an
        agent that keeps no history, its unfinished one)."""
        client = self._client
        if client is None or self._loop is not asyncio.get_running_loop():
            return
        with contextlib.suppress(Exception):  # the run is stopping anyway: never in its way
            await asyncio.wait_for(_cancel(client, message, seen), CANCEL_WAIT_S)

    async def aclose(self) -> None:
        """Close the connection (it opens again if used again)."""
        http, loop = self._http, self._loop
        self._http = self._client = self.card = None
        self._loop = self._lock = None
        if http is not None and loop is asyncio.get_running_loop():
            await http.aclose()


async def _cancel(client: Client, message: Message, seen: list[str]) -> None:
    """Cancel the task `message` started or continues (`RemoteLink.cancel`)."""
    ids = seen[:1] or ([message.task_id] if message.task_id else [])
    if not ids:  # a blocking send that never answered: find the task it began
        listed = await client.list_tasks(
            ListTasksRequest(context_id=message.context_id, history_length=10)
        )
        ids = [
            t.id for t in listed.tasks if any(m.message_id == message.message_id for m in t.history)
        ] or [  # an agent that keeps no history: the conversation's unfinished
            # task (a session sends one request at a time)
            t.id
            for t in listed.tasks
            if not t.history and STATES.get(t.status.state) in ("submitted", "working")
        ]
    for task_id in ids:
        await client.cancel_task(CancelTaskRequest(id=task_id))


def _append(task: Task, chunk: TaskArtifactUpdateEvent) -> None:
    """Add a streamed artifact chunk to `task` (a new artifact, or more parts of one)."""
    new = chunk.artifact
    for artifact in task.artifacts:
        if artifact.artifact_id == new.artifact_id:
            if chunk.append:
                for part in new.parts:
                    last = artifact.parts[-1] if artifact.parts else None
                    if _is_text(part) and last is not None and _is_text(last):
                        last.text += part.text  # pieces of one text, as they were streamed
                    else:
                        artifact.parts.append(part)
            else:
                artifact.CopyFrom(new)
            return
    task.artifacts.append(new)


def _why(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_text(part: Part) -> bool:
    return bool(part.WhichOneof("content") == "text")
