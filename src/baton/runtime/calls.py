"""A response's calls: classified first, then each dispatched through the agent's call table.

`classify` gives every call of a model response an idempotency key and records the request in
the holder's scratch; `run_calls` answers them in order, one checkpoint after each. A name's
entry in the table (built by `compile_plans`) says what it is: a tool, a hand-off, or a
built-in. The handler of each kind is a plain function in `HANDLERS`; a topology declares its
own kinds (`ask_<worker>`, `post_to_board`) in its blueprint (`baton.runtime.kernel.Kind`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from baton.core.events import HandoffRefused, ToolCalled, ToolRefused
from baton.core.interrupt import GraphInterrupt, resuming
from baton.core.messages import Message
from baton.handoff import handoff_target
from baton.runtime.approval import request_approval
from baton.runtime.arguments import finite_error, non_finite, validated
from baton.runtime.at_rest import lost_arguments, not_kept
from baton.runtime.citations import collect
from baton.runtime.compress import (
    MARK,
    Compressed,
    compressed,
    full_result,
    run_fetch_result,
)
from baton.runtime.context import visible_state
from baton.runtime.control import provenance, verified_state
from baton.runtime.grounding import context_text, id_like, ungrounded
from baton.runtime.handles import Unresolved, resolve
from baton.runtime.handoffs import hand_back, hand_off
from baton.runtime.history import fetch_history, parse_args
from baton.runtime.interrupts import request_interrupt
from baton.runtime.kernel import Call
from baton.runtime.model_call import Parsed
from baton.runtime.outcomes import Failed, HandedOff, Paused, ToHuman, Tripped
from baton.runtime.plan import CallEntry
from baton.runtime.reuse import NOTE as REUSED
from baton.runtime.reuse import reusable
from baton.runtime.rolling import earlier_turns
from baton.runtime.state import PendingCall, RunState, TurnState
from baton.runtime.timeouts import timed
from baton.tools import ToolContext, error_content

if TYPE_CHECKING:
    from baton.runtime.kernel import Handler, Kernel
    from baton.runtime.plan import AgentPlan
    from baton.runtime.redact import Redactor

Effect = HandedOff | Tripped | ToHuman | Failed | None
"""What a call does to the turn besides answering the model."""
Handled = tuple[str, Effect] | Paused
"""A handler's result: the content the model reads and its effect, or a pause for approval."""


class Shown:
    """What the holder was shown this turn, casefolded; built only when an id needs checking.

    Its view (instructions, payload, known facts, the conversation) and the results of its
    calls that succeeded; not its own words, nor an error result, which may quote the very
    id the model invented (a refused call retried would pass). A compressed result counts by
    its full text, never by the compressor's words (`baton.runtime.compress`)."""

    __slots__ = ("_text", "run", "turn")

    def __init__(self, run: RunState, turn: TurnState) -> None:
        self.run = run
        self.turn = turn
        self._text: str | None = None

    def __call__(self) -> str:
        if self._text is None:
            results = [
                self._full(m)
                for m in self.turn.scratch
                if m.role == "tool" and not (m.content or "").startswith(_FAILED)
            ]
            self._text = context_text([*self.turn.view, *results])
        return self._text

    def _full(self, m: Message) -> Message:
        if not (m.content or "").startswith(MARK) or m.tool_call_id is None:
            return m
        return Message(role="tool", content=full_result(self.run.messages, m.tool_call_id))


_FAILED = '{"ok": false'
"""How every failed call's result begins (`baton.tools.error_content`)."""


def classify(run: RunState, turn: TurnState, text: str | None, calls: list[Parsed]) -> None:
    """Make the response's calls the turn's pending calls, each with its idempotency key."""
    pending = []
    for c in calls:
        pending.append(
            PendingCall(c.call, c.args, c.error, key=f"{run.run_id}:{turn.index}:{turn.steps}")
        )
        turn.steps += 1
    turn.calls = pending
    turn.scratch.append(
        run.record(
            Message(
                role="assistant",
                content=text,
                agent=turn.agent,
                tool_calls=[c.call for c in calls],
                run_id=run.run_id,
            )
        )
    )


_HALTS: dict[type, Literal["trip", "human", "fail"]] = {
    Tripped: "trip",
    ToHuman: "human",
    Failed: "fail",
}
_ENDS: dict[str, type[Tripped | ToHuman | Failed]] = {
    "trip": Tripped,
    "human": ToHuman,
    "fail": Failed,
}


async def run_calls(
    kernel: Kernel, run: RunState, plan: AgentPlan, turn: TurnState
) -> HandedOff | Tripped | ToHuman | Failed | Paused | None:
    """Answer the turn's open calls in order; the first accepted hand-off ends the turn.
    Calls of a kind the runner runs in parallel (`Kind.parallel`: a supervisor's `ask_*`)
    run first, together.

    Returns how the turn ends (a hand-off, a trip, the human queue, a pause) or None when the
    holder's model should be asked again."""
    received = turn.incoming is not None and not turn.fallback
    earlier = earlier_turns(run) and not turn.fallback
    table = plan.table_for(received, earlier)
    shown = Shown(run, turn)
    if kernel.parallel:
        paused = await _run_parallel(kernel, run, plan, turn, table, received, shown)
        if paused is not None:
            return paused
    for pending in turn.calls:
        if pending.content is not None:
            continue  # answered before a checkpoint: never run twice
        if turn.accepted is not None or turn.halt is not None:
            content = _skipped(kernel, run, turn, pending)
        elif pending.error is not None:
            content = error_content(f"could not parse the arguments: {pending.error}")
            called(kernel, run, turn, pending, ok=False, error=pending.error)
        elif (
            not pending.kernel
            and pending.rejection is None
            and (lost := lost_arguments(_masker(kernel), pending))
        ):
            # never run with a mask for a secret
            content = _not_kept(kernel, run, turn, pending, lost)
        else:
            entry = (
                table.get(pending.call.name) or plan.entry_for(pending.call.name, received, earlier)
                if not pending.kernel
                else _kernel_entry(pending)
            )
            if entry is None:
                content = _unknown(kernel, run, plan, turn, pending)
            else:
                handled = await kernel.kinds[entry.kind].handler(
                    kernel, Call(run, plan, turn, pending, entry, shown)
                )
                if isinstance(handled, Paused):
                    return handled
                content, effect = handled
                _take(turn, effect)
        answer(run, turn, pending, content)
        if turn.accepted is None and turn.halt is None and not _decided_next(plan, turn):
            # (a call that ends the turn is followed by the hand-off's checkpoint, the
            # escalation's or the commit: nothing with side effects runs in between)
            await kernel.checkpoint(run)
    ended: HandedOff | Tripped | ToHuman | Failed | None = None
    if turn.halt is not None:
        ended = _ENDS[turn.halt](turn.halt_reason)
    elif turn.accepted is not None:
        ended = HandedOff(turn.accepted)
    turn.calls, turn.accepted, turn.halt, turn.halt_reason = [], None, None, ""
    return ended


def _kernel_entry(pending: PendingCall) -> CallEntry:
    """What a call the kernel made does (`PendingCall.kernel`): only the kernel's hand-on to
    the user's next need makes one (`baton.runtime.pending`)."""
    return CallEntry("hand_on", target=handoff_target(pending.call.name))


def _take(turn: TurnState, effect: Effect) -> None:
    """Note what a call does to the turn: the first accepted hand-off, or a halt."""
    if isinstance(effect, HandedOff):
        turn.accepted = effect.payload
    elif effect is not None:
        turn.halt = _HALTS[type(effect)]
        turn.halt_reason = effect.reason


def answer(run: RunState, turn: TurnState, pending: PendingCall, content: str) -> None:
    """Record a call's result: what the model reads back in its next call (a call the kernel
    made has no model to read it: its events are its record). A compressed result: the
    transcript records the full text, the holder's scratch the compressed view."""
    if type(content) is Compressed:
        full = content.full
        content = str(content)
    else:
        full = None
    pending.content = content
    if pending.kernel:
        return
    message = Message(
        role="tool",
        content=content if full is None else full,
        agent=turn.agent,
        tool_call_id=pending.call.id,
        name=pending.call.name,
        run_id=run.run_id,
    )
    run.record(message)
    if full is not None:  # not recorded: saved whole with the turn's checkpoint
        message = Message(
            role="tool",
            content=content,
            agent=turn.agent,
            tool_call_id=pending.call.id,
            name=pending.call.name,
            run_id=run.run_id,
        )
    turn.scratch.append(message)


def _decided_next(plan: AgentPlan, turn: TurnState) -> bool:
    """The last open call of a conductor that decides from the run's state alone was just
    answered (`Conducted.settles`): its next decision follows at once and is checkpointed
    with what it decided, so this answer is saved there, not in a write of its own (a crash
    in between runs the call again, as a crash during it would)."""
    conducted = plan.conductor
    return (
        conducted is not None
        and conducted.settles
        and all(p.content is not None for p in turn.calls)
    )


async def _run_parallel(
    kernel: Kernel,
    run: RunState,
    plan: AgentPlan,
    turn: TurnState,
    table: Mapping[str, CallEntry],
    received: bool,
    shown: Shown,
) -> Paused | None:
    """Run the open calls of the runner's parallel kinds together (at most
    `Kind.parallel` of each kind at a time), each recorded and checkpointed as it finishes, in
    whatever order they finish; the first pause is returned once all have stopped."""
    batch: list[tuple[PendingCall, CallEntry]] = []
    for pending in turn.calls:
        if pending.content is None and pending.error is None:
            if lost_arguments(_masker(kernel), pending):
                continue
            entry = table.get(pending.call.name) or plan.entry_for(pending.call.name, received)
            if entry is not None and entry.kind in kernel.parallel:
                batch.append((pending, entry))
    if len(batch) < 2 or turn.accepted is not None or turn.halt is not None:
        return None  # one such call runs in order with the others
    slots = {kind: asyncio.Semaphore(n) for kind, n in kernel.parallel.items()}
    paused: list[Paused] = []

    async def one(pending: PendingCall, entry: CallEntry) -> None:
        async with slots[entry.kind]:
            handled = await kernel.kinds[entry.kind].handler(
                kernel, Call(run, plan, turn, pending, entry, shown)
            )
        if isinstance(handled, Paused):
            paused.append(handled)
            return
        content, effect = handled
        _take(turn, effect)
        answer(run, turn, pending, content)
        await kernel.checkpoint(run)

    tasks = [asyncio.ensure_future(one(pending, entry)) for pending, entry in batch]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:  # one failed, or the run was cancelled: stop the others too
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return paused[0] if paused else None


def called(
    kernel: Kernel, run: RunState, turn: TurnState, pending: PendingCall, **fields: Any
) -> ToolCalled:
    """Record the `tool_called` event of `pending` (ok or not); returns it (its id is a cause)."""
    event = ToolCalled(
        **run.base(turn.agent), tool=pending.call.name, call_id=pending.call.id, **fields
    )
    kernel.emit(run, event)
    return event


def _skipped(kernel: Kernel, run: RunState, turn: TurnState, pending: PendingCall) -> str:
    if turn.accepted is not None:
        target = handoff_target(pending.call.name)
        if target is not None:
            kernel.emit(
                run,
                HandoffRefused(
                    **run.base(turn.agent),
                    target=target,
                    reason="only the first valid hand-off of a response is taken",
                ),
            )
        return error_content(f"not executed: the baton already passed to {turn.accepted.target}")
    return error_content("not executed: the run was stopped by a guard")


def _masker(kernel: Kernel) -> Redactor | None:
    """The redactor whose masks a call's arguments may hold (the at-rest one first)."""
    return kernel.cfg.at_rest or kernel.cfg.redactor


def _not_kept(
    kernel: Kernel, run: RunState, turn: TurnState, pending: PendingCall, lost: list[str]
) -> str:
    msg = not_kept(pending, lost)
    why = (
        "the checkpoint it was loaded from masked them, because the store has no checkpoint "
        "keys (set BATON_CHECKPOINT_KEY to keep them, encrypted)"
        if pending.masked
        else "the model gave masks it read in the masked conversation"
    )
    kernel.cfg.log.warning(
        "call %s (%s) of run %s was not run: its arguments %s hold masks, not values: %s",
        pending.call.id,
        pending.call.name,
        run.run_id,
        lost,
        why,
    )
    called(kernel, run, turn, pending, arguments=pending.args or {}, ok=False, error=msg)
    return error_content(msg)


def _unknown(
    kernel: Kernel, run: RunState, plan: AgentPlan, turn: TurnState, pending: PendingCall
) -> str:
    table = plan.table_for(
        turn.incoming is not None and not turn.fallback,
        earlier_turns(run) and not turn.fallback,
    )
    available = sorted(n for n, e in table.items() if e.kind != "back" or turn.incoming)
    msg = f"unknown tool {pending.call.name!r}; available tools: {', '.join(available) or 'none'}"
    called(kernel, run, turn, pending, ok=False, error=msg)
    return error_content(msg)


# ------------------------------------------------------------------ handlers
async def run_tool(kernel: Kernel, call: Call) -> Handled:
    """Scopes -> finite numbers -> grounded ids -> secret handles -> validated arguments ->
    approval -> run (with the call's idempotency key)."""
    run, plan, turn, pending = call.run, call.plan, call.turn, call.pending
    tool, args, name = call.entry.tool, pending.args or {}, turn.agent
    assert tool is not None
    if tool.reuse and turn.tools_called:  # (an identical call that ran is counted there)
        earlier = reusable(turn.scratch, pending.call, args)
        if earlier is not None:  # seed 003 §6.1: a repeated identical call is not run again
            first, content = earlier
            called(kernel, run, turn, pending, arguments=args, ok=True, error=None, reused=first)
            return f"{REUSED.format(first=first)}\n{content}", None
    lacking = plan.agent.missing_scopes(tool)
    if lacking:
        msg = (
            f"not executed: {name} lacks the scope(s) {', '.join(lacking)} that {tool.name} "
            "needs; use another tool or hand the request to an agent that holds them"
        )
        kernel.emit(
            run,
            ToolRefused(
                **run.base(name),
                tool=tool.name,
                call_id=pending.call.id,
                reason=msg,
                missing_scopes=lacking,
            ),
        )
        return error_content(msg), None
    where = non_finite(args)
    if where is not None:
        return _refuse(kernel, run, turn, pending, args, finite_error(where)), None
    bad = ungrounded(args, call.shown()) if kernel.cfg.guards.grounded_ids else []
    if bad:
        return _refuse_ungrounded(kernel, run, turn, pending, args, bad), None
    state = run.session.state
    try:  # `[secret:<slot>]` handles: the kernel gives the tool the session's value
        real = resolve(kernel.cfg.redactor, args, state, lambda: visible_state(plan.agent, state))
    except Unresolved as exc:
        return _refuse(kernel, run, turn, pending, args, f"not executed: {exc}"), None
    if tool.approval is not None and not pending.approved:
        if pending.rejection is not None:
            msg = f"not executed: {pending.rejection}"
            called(kernel, run, turn, pending, arguments=args, ok=False, error=msg)
            return error_content(msg + "; tell the user, do not retry it"), None
        clean = validated(tool, real)  # the policy reads typed, valid values only
        if isinstance(clean, str):
            return _refuse(kernel, run, turn, pending, args, clean), None
        needed, why = tool.approval.needs(clean, verified_state(run.session))
        if needed:
            return request_approval(
                kernel, run, turn, pending, tool.approval, "tool", args, tool=tool.name, note=why
            )
    limit = kernel.cfg.guards.tool_timeout_s
    if tool.timeout_s is not None:
        limit = min(limit, tool.timeout_s)
    context = ToolContext(
        idempotency_key=pending.key,
        run_id=run.run_id,
        session_id=run.session.session_id,
        agent=name,
        call_id=pending.call.id,
        user_id=run.user_id,
        state=dict(run.session.state),
        scopes=tuple(plan.agent.scopes),
        provenance=dict(provenance(run.session)),
        trace_id=run.trace_id,
        references=tuple(turn.incoming.citations if turn.incoming is not None else run.cited_in),
    )
    started = time.perf_counter()
    pending.started = True
    try:
        with resuming(pending.resumes):
            out = await timed(tool.invoke(real, kernel.cfg.max_result_chars, context), limit)
        ok, content, error, truncated, n = (
            out.ok,
            out.content,
            out.error,
            out.truncated,
            out.raw_chars,
        )
        fatal = out.fatal
    except TimeoutError:
        short = f"{tool.name} timed out after {limit}s"
        # says whether it may still be running, so the agent does not repeat a side effect
        ok, error, truncated, n = False, tool.timeout_error(limit), False, 0
        content, fatal = error_content(error), False
        kernel.trip(run, name, "tool_timeout", short)
    except GraphInterrupt as raised:  # the tool asks a person: it runs again with the answer
        return request_interrupt(kernel, run, turn, pending, tool.name, raised)
    red = kernel.cfg.redactor
    if not ok and red is not None and error is not None:
        # a raw exception may quote a secret (a DSN, a password): the model reads it redacted
        hidden = red.redact_text(error)
        if hidden is not error:
            same = content == error_content(error)
            content = error_content(hidden) if same else red.redact_text(content)
            error = hidden
    turn.tools_called += 1  # after the call: an interrupted call that runs again counts once
    done = called(
        kernel,
        run,
        turn,
        pending,
        arguments=args,
        ok=ok,
        error=error,
        latency_ms=(time.perf_counter() - started) * 1000,
        result_chars=n,
        truncated=truncated,
    )
    if ok:
        keep = tool.records
        slots = {
            key: v
            for key, v in args.items()
            if (key in keep if keep is not None else id_like(key, v))
            and v != ""
            and not (type(v) is str and v.startswith("[secret:"))  # (the slot has it already)
            # a secret (a password, a card number, a token) is never a state slot, so no
            # other agent is shown it in its known facts or a hand-off's state
            and (red is None or (red.key_label(key) is None and red.redact_value(v) is v))
        }
        kernel.set_state(run, slots, name, "tool", done.id, tool=tool.name, origin="tool")
        if tool.cites is not None:  # from the value the tool returned, not the model's text
            collect(run, tool, out.value)
    if fatal:
        return content, Failed(error or "")
    if ok and (plan.agent.compress_results is not None or tool.compress):
        policy = plan.agent.compression_for(tool)
        if policy is not None:
            shrunk = await compressed(kernel, run, plan, turn, pending, policy, out.value)
            if shrunk is not None:
                return shrunk, None
    return content, None


def _refuse(
    kernel: Kernel,
    run: RunState,
    turn: TurnState,
    pending: PendingCall,
    args: dict[str, Any],
    msg: str,
) -> str:
    """A call refused before its tool ran: recorded, and the model reads why."""
    called(kernel, run, turn, pending, arguments=args, ok=False, error=msg)
    return error_content(msg)


def _refuse_ungrounded(
    kernel: Kernel,
    run: RunState,
    turn: TurnState,
    pending: PendingCall,
    args: dict[str, Any],
    bad: list[tuple[str, str]],
) -> str:
    listed = ", ".join(f"{key}={v!r}" for key, v in bad)
    msg = (
        f"not executed: {listed} appears nowhere in the conversation, the known facts or "
        "earlier tool results; use only ids you were given, or ask the user for it"
    )
    kernel.trip(run, turn.agent, "ungrounded_id", f"{pending.call.name}: {listed}")
    called(kernel, run, turn, pending, arguments=args, ok=False, error=msg)
    return error_content(msg)


async def run_history(kernel: Kernel, call: Call) -> Handled:
    """`fetch_history`: earlier turns of the conversation, from the store."""
    run, turn, pending = call.run, call.turn, call.pending
    # a turn received by hand-off names the transcript in its payload; a holder's turn in a
    # session with turns before the window (`rolling`) reads its own session's
    ref = turn.incoming.history_ref if turn.incoming is not None else run.session.session_id
    args = pending.args or {}
    started = time.perf_counter()
    parsed = parse_args(args, ref)
    if isinstance(parsed, str):
        ok, error, content = False, parsed, error_content(parsed)
    else:
        ok, error = True, None
        content = await fetch_history(kernel.cfg.store, ref, *parsed)
    turn.tools_called += 1
    called(
        kernel,
        run,
        turn,
        pending,
        arguments=args,
        ok=ok,
        error=error,
        latency_ms=(time.perf_counter() - started) * 1000,
        result_chars=len(content),
    )
    return content, None


HANDLERS: dict[str, Handler] = {
    "tool": run_tool,
    "history": run_history,
    "handoff": hand_off,
    "back": hand_back,
    "result": run_fetch_result,
}
"""The handlers of the kernel's own call kinds (the runner adds a topology's kinds to them)."""
