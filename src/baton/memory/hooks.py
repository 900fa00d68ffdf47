"""What a team's memory does in a run: recall before a turn, keep after the run, and the
audit record of `forget`.

Write policy (after a run whose commit succeeded, and only if it `completed` or was
`escalated` to a person with an answer): the run's `remember` calls, then, with
`Memory(summarise=True)`, the facts, preferences and lessons the team's summariser finds in
the run. Everything is redacted with the team's redactor before it is stored. A run without a
user id keeps nothing and recalls no user's memories.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from baton.backends.base import SessionRecord
from baton.core.errors import ConflictError
from baton.core.events import MemoryForgotten, ToolCalled
from baton.core.ids import new_id, new_trace_id
from baton.core.messages import Message
from baton.memory.records import Kind, Provenance, Who
from baton.memory.render import render
from baton.memory.tool import REMEMBER, RememberArgs, invalid
from baton.models.base import ModelRequest
from baton.models.parsing import parse_json_object
from baton.runtime.summary import transcript

if TYPE_CHECKING:
    from baton.memory.store import Memory
    from baton.runtime.kernel import Kernel
    from baton.runtime.result import RunStatus
    from baton.runtime.state import RunState

log = logging.getLogger("baton.memory")

AUDIT_SESSION = "baton-memory"
"""The session a memory's `memory_forgotten` events are stored under."""
MEMORY_AGENT = "memory"
"""`ModelRequest.agent` of the summariser's request (scripted models answer it by name)."""
KEPT: frozenset[str] = frozenset({"completed", "escalated"})
"""Run statuses after which a memory keeps what the run left to remember."""

INSTRUCTIONS = (
    "You keep the long-term memory of a service desk. From the conversation below, list what "
    "is worth remembering in later conversations with this user: facts the user gave about "
    "themself, the user's preferences, and lessons about doing the work better. Never "
    "passwords, keys, codes or card numbers. Answer with one JSON object: "
    '{"facts": [...], "preferences": [...], "lessons": [...]}, each a list of short sentences '
    "(empty lists when there is nothing)."
)
_PLURAL: dict[str, Kind] = {"facts": "fact", "preferences": "preference", "lessons": "lesson"}


async def recall(memory: Memory, run: RunState, agent: str) -> str | None:
    """The recalled block for `agent`'s turn: the user's memories relevant to the run's
    message (this user's only; none without a user id), within the token budget."""
    if not memory.serves(agent):
        return None
    try:
        found = await memory.search(run.message, user_id=run.user_id, agent=agent)
    except Exception as exc:  # memory is an aid: the turn goes on without it
        log.warning("memory at %s not recalled for %s: %s", memory.where, agent, exc)
        return None
    return render(found, memory.budget_tokens)


def remember_calls(run: RunState) -> Iterator[tuple[ToolCalled, RememberArgs]]:
    """Every `remember` call of the run the tool accepted, with its arguments: read from the
    run's `tool_called` events, which its workers' sub-runs share (a call a guard or a
    hand-off left unanswered, or the tool refused, keeps nothing)."""
    for e in run.events:
        if (
            isinstance(e, ToolCalled)
            and e.tool == REMEMBER
            and e.ok
            and invalid(e.arguments) is None
        ):
            yield e, RememberArgs.model_validate(e.arguments)


async def after_run(memory: Memory, kernel: Kernel, run: RunState, status: RunStatus) -> None:
    """Keep what a finished run leaves to remember (see the module's write policy)."""
    if status not in KEPT or not run.user_id:
        return
    try:
        await _keep(memory, kernel, run)
    except Exception as exc:  # the run is committed: a memory that fails costs the memories
        kernel.cfg.log.warning(
            "memory at %s did not keep what run %s left to remember: %s",
            memory.where,
            run.run_id,
            exc,
        )


async def _keep(memory: Memory, kernel: Kernel, run: RunState) -> None:
    redactor = kernel.cfg.redactor or memory.redactor
    user = run.user_id
    session = run.session.session_id

    async def keep(
        text: str, kind: Kind, who: Who, agent: str | None, ref: str | None, run_id: str
    ) -> None:
        await memory.remember(
            text,
            user_id=user,
            agent=agent if kind == "lesson" else None,
            kind=kind,
            provenance=Provenance(who=who, session_id=session, run_id=run_id, ref=ref, agent=agent),
            redactor=redactor,
        )

    for event, args in remember_calls(run):
        if memory.serves(event.agent or ""):
            await keep(args.text, args.kind, "agent", event.agent, event.call_id, event.run_id)
    if memory.summarise:
        holder = run.path[-1] if run.path else None
        for kind, text in await _summarised(kernel, run, holder):
            await keep(text, kind, "summariser", holder, run.user_msg_id, run.run_id)


async def _summarised(kernel: Kernel, run: RunState, holder: str | None) -> list[tuple[Kind, str]]:
    """(kind, text) of what the summariser found worth remembering in the run."""
    plan = kernel.plans.get(holder) if holder is not None else None
    model = kernel.cfg.summariser or (plan.model if plan is not None else None)
    if model is None:
        return []
    redactor = kernel.cfg.redactor
    said = transcript(run.messages)
    request = ModelRequest(
        agent=MEMORY_AGENT,
        messages=[
            Message(role="system", content=INSTRUCTIONS),
            Message(role="user", content=redactor.redact_text(said) if redactor else said),
        ],
    )
    response = await model.generate(request)
    data: dict[str, Any] = parse_json_object(response.text)
    out: list[tuple[Kind, str]] = []
    for key, kind in _PLURAL.items():
        items = data.get(key) or []
        if isinstance(items, list):
            out += [(kind, t.strip()) for t in items if isinstance(t, str) and t.strip()]
    return out


async def audit_forget(memory: Memory, user_id: str, deleted: int, by: str | None) -> None:
    """Record a `forget`: logged always; stored in `memory.audit` (its audit trail chains the
    event) when the memory has one."""
    log.info(
        "memory at %s forgot user %s: %d memories deleted (by %s)",
        memory.where,
        user_id,
        deleted,
        by,
    )
    store = memory.audit
    if store is None:
        return
    event = MemoryForgotten(
        trace_id=new_trace_id(),
        session_id=AUDIT_SESSION,
        run_id=new_id("forget_"),
        user_id=user_id,
        deleted=deleted,
        by=by,
        where=memory.where,
    )
    for _ in range(8):  # compare-and-set on the audit session: another forget may land first
        session = await store.get_session(AUDIT_SESSION) or SessionRecord(AUDIT_SESSION)
        try:
            await store.commit_run(session, [], [event])
            return
        except ConflictError:
            continue
    raise ConflictError(
        f"the memory_forgotten event of user {user_id} was not stored: the session "
        f"{AUDIT_SESSION} kept changing; the memories are deleted, record the deletion again"
    )
