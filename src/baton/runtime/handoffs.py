"""Accepting a hand-off: one short function over named steps.

permitted -> within size -> validated (with the run's citations) -> grounded -> secret handles
resolved -> proven -> entities merged -> refusal / re-route -> loop guards -> approved ->
duplicate lock -> summary -> redaction -> recorded. The kernel's own hand-on to the user's next need
(`baton.runtime.pending`) takes the same steps but the refusal count. The
steps before the approval gate run again when a paused hand-off resumes, so they record nothing
a second time that matters (a refusal counts once per call). Each step either passes the payload
on or ends the attempt with a refusal (the model reads why and may try again), a trip, or the
human queue. Whether an agent may hand to a target is decided in one place: `plan.may_hand_to`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from baton.core.events import GuardTripped, Handoff, HandoffRefused, ModelCalled, RouteDecided
from baton.core.messages import Message, Usage
from baton.core.payload import HandoffArgs, HandoffPayload
from baton.handoff import TRANSFER_BACK
from baton.models.base import ModelResponse
from baton.runtime.approval import request_approval
from baton.runtime.citations import merged
from baton.runtime.context import visible_state
from baton.runtime.control import SlotSource, provenance, verified_state
from baton.runtime.entities import missing_entities
from baton.runtime.grounding import ungrounded
from baton.runtime.guardrails import crossed
from baton.runtime.guards import check_handoff
from baton.runtime.handles import Unresolved, masked_facts, resolve
from baton.runtime.outcomes import HandedOff, Paused, ToHuman, Tripped
from baton.runtime.plan import HUMAN
from baton.runtime.provenance import Provenance
from baton.runtime.state import PendingCall, RunState, TurnState
from baton.runtime.summary import summary_request
from baton.runtime.timeouts import timed
from baton.tools import error_content

if TYPE_CHECKING:
    from baton.runtime.calls import Handled, Shown
    from baton.runtime.kernel import Call, Kernel
    from baton.runtime.plan import AgentPlan


class Refused(Exception):
    """A step refused the hand-off; the message is what the model reads."""


async def hand_off(kernel: Kernel, call: Call) -> Handled:
    """`transfer_to_<target>`."""
    assert call.entry.target is not None
    return await accept(kernel, call, call.entry.target, back=False)


async def hand_back(kernel: Kernel, call: Call) -> Handled:
    """`transfer_back`: to whoever handed the baton over (whatever `handoffs` says)."""
    run, turn = call.run, call.turn
    source = turn.incoming.source if turn.incoming is not None else None
    if source is None or source not in kernel.plans:
        reason = (
            "transfer_back: no agent handed you the baton in this conversation; answer the "
            "user or hand off to a named agent"
        )
        kernel.emit(
            run, HandoffRefused(**run.base(turn.agent), target=TRANSFER_BACK, reason=reason)
        )
        return error_content(reason), None
    return await accept(kernel, call, source, back=True)


async def accept(
    kernel: Kernel, call: Call, target: str, back: bool, note: str | None = None
) -> Handled:
    """Run the acceptance steps for `call`, a hand-off to `target`; see the module docstring.
    `note`: the hand-off is the kernel's own (its note says what stopping it leaves undone): a
    refusal then ends the turn as a trip, since no model is there to read it and try again."""
    run, plan, turn, pending = call.run, call.plan, call.turn, call.pending
    source = turn.agent
    try:
        permitted(plan, target, back)
        within_size(kernel, pending)
        payload = validated(run, source, target, pending.args or {})
        payload = cited(run, turn, payload)
        if target == HUMAN:
            why = f"{source} asked for a human: {payload.reason}"
            return error_content(why), ToHuman(why)
        payload = grounded(kernel, run, source, payload, call.shown)
        payload = with_secrets(kernel, run, plan, payload)
        payload, sources = proven(kernel, run, turn, payload)
        payload, added = with_entities(kernel, run, payload)
        if note is None:
            rerouted = await refusal(kernel, run, turn, pending, payload)
            if isinstance(rerouted, Tripped):
                return error_content(rerouted.reason), rerouted
            payload = rerouted
        trip = loop_guards(kernel, run, source, payload, note)
        if trip is not None:
            return error_content(trip.reason), trip
        # a person approves the final target
        gate = approved(kernel, run, plan, turn, pending, payload)
        if gate is not None:
            return gate
        await duplicate_lock(kernel, run, source, pending, payload)
        payload = await summarised(kernel, run, plan, turn, payload)
    except Refused as why:
        kernel.emit(run, HandoffRefused(**run.base(source), target=target, reason=str(why)))
        content = error_content(f"hand-off to {target!r} refused: {why}")
        if note is None:
            return content, None
        detail = f"handoff_refused: {why} ({note})"
        kernel.trip(run, source, "handoff_refused", detail)
        return content, Tripped(detail)
    payload = recorded(kernel, run, source, payload, added, sources)
    return f'{{"ok": true, "handed_to": "{payload.target}"}}', HandedOff(payload)


def permitted(plan: AgentPlan, target: str, back: bool) -> None:
    """The target is one of the holder's hand-offs (or `transfer_back`'s source)."""
    if not back and not plan.may_hand_to(target):
        allowed = ", ".join(sorted(plan.handoff_targets)) or "none"
        raise Refused(f"{plan.agent.name} may not hand off to {target!r} (allowed: {allowed})")


def within_size(kernel: Kernel, pending: PendingCall) -> None:
    """The payload is no larger than `Guards.max_payload_bytes` (what crosses a hand-off is a
    brief, not a document)."""
    cap = kernel.cfg.guards.max_payload_bytes
    if not cap or len(pending.call.arguments) * 4 <= cap:  # 4 bytes a character at the most
        return
    size = len(pending.call.arguments.encode("utf-8", "surrogatepass"))
    if size > cap:
        raise Refused(
            f"the payload is {size:,} bytes, over the {cap:,} a hand-off may carry "
            "(Guards.max_payload_bytes); pass ids, state slots and a short objective, not "
            "documents: the receiver can call fetch_history"
        )


def validated(run: RunState, source: str, target: str, args: dict[str, Any]) -> HandoffPayload:
    """The model's arguments plus the kernel's fields, validated."""
    try:
        return _payload(
            args,
            trace_id=run.trace_id,
            session_id=run.session.session_id,
            user_id=run.user_id,
            source=source,
            target=target,
            hop=run.hop + 1,
            path=list(run.path),
            history_ref=run.session.session_id,
        )
    except ValidationError as exc:
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}" for e in exc.errors()
        )
        raise Refused(f"invalid payload ({detail}); reason and objective are required") from None


def cited(run: RunState, turn: TurnState, payload: HandoffPayload) -> HandoffPayload:
    """The citations the source received and those its run's citing tools returned
    (`baton.runtime.citations`): the kernel's, never the model's."""
    held = turn.incoming.citations if turn.incoming is not None else []
    found = merged(held, run.citations)
    return payload.model_copy(update={"citations": found}) if found else payload


def with_secrets(
    kernel: Kernel, run: RunState, plan: AgentPlan, payload: HandoffPayload
) -> HandoffPayload:
    """State slots written as secret handles (`[secret:password]`) carry the session's value
    (a slot the holder may see), so the receiver's tool can use it; a handle that resolves to
    nothing refuses the hand-off with what to do."""
    if not payload.state:
        return payload
    state = run.session.state
    try:
        visible = lambda: visible_state(plan.agent, state)  # noqa: E731
        carried = resolve(kernel.cfg.redactor, payload.state, state, visible)
    except Unresolved as exc:
        raise Refused(str(exc)) from None
    return payload if carried is payload.state else payload.model_copy(update={"state": carried})


def approved(
    kernel: Kernel,
    run: RunState,
    plan: AgentPlan,
    turn: TurnState,
    pending: PendingCall,
    payload: HandoffPayload,
) -> Handled | None:
    """None when the hand-off may go on; a pause (or the rejection) when it needs sign-off.
    The policy reads the hand-off's fields (the source's claims too) and the session's
    verified slots only (`baton.runtime.control.verified_state`)."""
    policy = plan.agent.handoff_approval(payload.target)
    if policy is None or pending.approved:
        return None
    if pending.rejection is not None:
        raise Refused(f"{pending.rejection}; tell the user, do not retry it")
    fields = payload.model_dump(include=set(HandoffArgs.model_fields))
    if payload.unverified:  # the approver judges all the source asked for, its claims too
        fields["state"] = {**fields["state"], **payload.unverified}
    needed, why = policy.needs(fields, verified_state(run.session))
    if not needed:
        return None
    paused: Paused = request_approval(
        kernel, run, turn, pending, policy, "handoff", fields, target=payload.target, note=why
    )
    return paused


def grounded(
    kernel: Kernel, run: RunState, source: str, payload: HandoffPayload, shown: Shown
) -> HandoffPayload:
    """State slots with ids the holder was never shown are dropped (never invented ids)."""
    if not (kernel.cfg.guards.grounded_ids and payload.state):
        return payload
    bad = ungrounded(payload.state, shown())
    if not bad:
        return payload
    listed = ", ".join(f"{key}={v!r}" for key, v in bad)
    kernel.trip(
        run, source, "ungrounded_id", f"dropped from the hand-off state (never mentioned): {listed}"
    )
    dropped = {key for key, _ in bad}
    kept = {key: v for key, v in payload.state.items() if key not in dropped}
    return payload.model_copy(update={"state": kept})


def proven(
    kernel: Kernel, run: RunState, turn: TurnState, payload: HandoffPayload
) -> tuple[HandoffPayload, dict[str, SlotSource]]:
    """Where each state slot's value came from (`baton.runtime.provenance`); slots whose
    values neither the user nor a tool produced, and that were not already known, become the
    source's claims (`unverified`): shown to the receiver as such, never known facts, never
    session state (`Guards.slot_provenance`; off, every slot passes, none verified)."""
    if not (kernel.cfg.guards.slot_provenance and payload.state):
        return payload, {}
    sources = provenance(run.session)
    known = [(run.session.state, sources)]
    if turn.incoming is not None:
        known.append((turn.incoming.state, sources))
    returned = _tool_result(kernel)
    results = [m.content for m in run.history if m.role == "tool" and m.content and returned(m)]
    found, claims = Provenance(run.said_by_user(), results, known).sources(payload.state)
    if not claims:
        return payload, found
    kernel.trip(
        run,
        turn.agent,
        "unverified_slot",
        f"passed on as {turn.agent}'s claims, not known facts (neither the user nor a tool gave "
        f"their values): {', '.join(claims)}",
    )
    unverified = {key: payload.state[key] for key in claims}
    kept = {key: v for key, v in payload.state.items() if key not in unverified}
    return payload.model_copy(update={"state": kept, "unverified": unverified}), found


def _tool_result(kernel: Kernel) -> Callable[[Message], bool]:
    """Whether a tool message is a result one of the team's tools returned: not a hand-off's
    or a built-in's answer, nor an error (a kernel refusal quotes the model's arguments), nor
    a `quoted` tool's (a retrieved passage or fetched page)."""
    plans = kernel.plans

    def returned(message: Message) -> bool:
        plan = plans.get(message.agent) if message.agent is not None else None
        tool = plan.tools.get(message.name or "") if plan is not None else None
        return (
            tool is not None
            and not tool.quoted  # retrieved text is quoted data: it proves nothing
            and not (message.content or "").startswith(_FAILED)
        )

    return returned


_FAILED = error_content("")[: len('{"ok": false')]
"""How every failed call's content starts (`error_content`)."""


def with_entities(
    kernel: Kernel, run: RunState, payload: HandoffPayload
) -> tuple[HandoffPayload, dict[str, Any]]:
    """Ids and entities the user gave that the payload and the session state both lack."""
    if not kernel.cfg.guards.entity_guard:
        return payload, {}
    child = run.parent is not None  # a sub-run's question is its delegating model's words
    said = {
        m.id: m.content
        for m in run.history
        if m.role == "user" and m.content and not (child and m.id == run.user_msg_id)
    }
    known = {**run.session.state, **payload.state}
    added = missing_entities(said, known, kernel.cfg.extractors, kernel.entity_memo)
    if not added:
        return payload, {}
    return payload.model_copy(update={"state": {**payload.state, **added}}), added


async def refusal(
    kernel: Kernel, run: RunState, turn: TurnState, pending: PendingCall, payload: HandoffPayload
) -> HandoffPayload | Tripped:
    """A receiver that hands the request straight back ("not mine") counts as a refusal; after
    `reroute_after_refusals` of them the router picks an agent that has not held it."""
    incoming, guards = turn.incoming, kernel.cfg.guards
    if not (
        incoming is not None
        and incoming.trace_id == run.trace_id
        and payload.target == incoming.source
        and turn.tools_called == 0
    ):
        return payload
    if pending.key not in run.refused:
        run.refused.append(pending.key)
    router = kernel.policy.router
    # without a router a loop guard that trips anyway names the problem better
    plain = router is None and check_handoff(guards, run.path, payload.target, payload.hop)
    if not guards.reroute_after_refusals or run.refusals < guards.reroute_after_refusals or plain:
        return payload
    return await _reroute(kernel, run, turn.agent, payload)


async def _reroute(
    kernel: Kernel, run: RunState, source: str, payload: HandoffPayload
) -> HandoffPayload | Tripped:
    tried = set(run.path)
    why = f"{run.refusals} receivers handed the request straight back ({' -> '.join(run.path)})"
    target: str | None = None
    router = kernel.policy.router
    if router is not None:
        context = {"state": dict(run.session.state)}
        decision = await router.route(run.message, run.earlier, context)
        options = [decision.target, *decision.candidates]
        target = next((o for o in options if o in kernel.plans and o not in tried), None)
        kernel.emit(
            run,
            RouteDecided(
                **run.base(source),
                target=target or kernel.policy.fallback,
                tier=f"reroute:{decision.tier}",
                score=decision.score,
                candidates=tuple(decision.candidates),
                latency_ms=decision.latency_ms,
                verdicts=(*[v.summary() for v in decision.verdicts], f"re-route: {why}"),
            ),
        )
    if target is None:
        detail = f"refusals: {why}; no other agent owns it"
        kernel.trip(run, source, "refusals", detail)
        return Tripped(detail)
    return payload.model_copy(
        update={"target": target, "reason": f"re-routed after refusals: {payload.reason}"}
    )


def loop_guards(
    kernel: Kernel, run: RunState, source: str, payload: HandoffPayload, note: str | None = None
) -> Tripped | None:
    """Hop limit, visits, ping-pong and cycles (`baton.runtime.guards`); `note` adds what a
    trip leaves undone."""
    guard = check_handoff(kernel.cfg.guards, run.path, payload.target, payload.hop)
    if guard is None:
        return None
    detail = guard if note is None else f"{guard} ({note})"
    kernel.trip(run, source, guard.split(":", 1)[0], detail)
    return Tripped(detail)


async def duplicate_lock(
    kernel: Kernel, run: RunState, source: str, pending: PendingCall, payload: HandoffPayload
) -> None:
    """The same hand-off twice in one run is dropped (two workers resuming one run, a model
    repeating itself); the same call retried after a crash keeps its claim (its key)."""
    window = kernel.cfg.guards.lock_window_s
    if window <= 0:
        return
    lock = f"handoff|{run.run_id}|{payload.target}|{payload.fingerprint()}"
    if await kernel.cfg.store.acquire_lease(lock, pending.key, window):
        return
    detail = (
        f"duplicate_handoff: the same hand-off to {payload.target} was already made in this "
        f"run less than {window:g}s ago; dropped"
    )
    kernel.emit(run, GuardTripped(**run.base(source), guard="duplicate_handoff", detail=detail))
    state = json.dumps(run.session.state, ensure_ascii=False, default=str)
    raise Refused(f"{detail}. Continue with the current state: {state}")


async def summarised(
    kernel: Kernel, run: RunState, plan: AgentPlan, turn: TurnState, payload: HandoffPayload
) -> HandoffPayload:
    """The payload with a model-made summary when the receiver's policy is `summary`. A failed
    summary never fails the hand-off: the payload goes without one."""
    if kernel.policy_for(payload, payload.target).kind != "summary":
        return payload
    model = kernel.cfg.summariser or plan.model
    if model is None:  # a conductor has no model to write one with
        return payload
    name = plan.agent.name
    started = time.perf_counter()
    response: ModelResponse | None
    try:
        out = await timed(
            model.generate(summary_request(run.history)), kernel.cfg.guards.model_timeout_s
        )
        response = out if isinstance(out, ModelResponse) else None
        text = (response.text or "").strip() if response is not None else ""
        error = None if text else "the summariser returned no text"
    except Exception as exc:
        response, text, error = None, "", f"summary failed: {type(exc).__name__}: {exc}"
    usage = response.usage if response is not None else Usage()
    run.usage.setdefault(name, Usage()).add(usage)
    turn.usage.add(usage)
    kernel.emit(
        run,
        ModelCalled(
            **run.base(name),
            model=model.name,
            usage=usage,
            latency_ms=(time.perf_counter() - started) * 1000,
            text=text or None,
            error=error,
            purpose="summary",
        ),
    )
    return payload.model_copy(update={"summary": text}) if text else payload


def recorded(
    kernel: Kernel,
    run: RunState,
    source: str,
    payload: HandoffPayload,
    added: dict[str, Any],
    sources: dict[str, SlotSource] | None = None,
) -> HandoffPayload:
    """Redact, then record: the run's hand-offs and path, the event, the state slots (with
    where each value came from: `sources`; the entity guard's from the user). The receiver
    gets the redacted payload, its secret slots as handles (the session keeps the values for
    the tools that need them, `baton.runtime.handles`)."""
    raw_state = payload.state
    crossed(kernel, run, source, payload.target)  # the edge's guardrails join the set in force
    red = kernel.cfg.redactor
    if red is not None:
        facts = masked_facts(red, payload.state)  # (nothing else in it is sensitive)
        payload = red.redact_value(payload)
        if facts != payload.state:
            payload = payload.model_copy(update={"state": facts})
    run.handoffs.append(payload)
    run.path.append(payload.target)
    sent = Handoff(**run.base(source), payload=payload)
    kernel.emit(run, sent, redacted=True)  # its only free text is the payload, redacted above
    if added:
        kernel.set_state(run, added, source, "entity_guard", sent.id, origin="user")
    kernel.set_state(run, raw_state, source, "handoff", sent.id, origin=sources or {})
    if payload.reply_to_user:
        run.last_reply = payload.reply_to_user
    return payload


_ARG_FIELDS = frozenset(HandoffArgs.model_fields)
_ARG_DEFAULTS = {
    n: f.get_default(call_default_factory=True)
    for n, f in HandoffArgs.model_fields.items()
    if not f.is_required()
}
"""`HandoffArgs`'s defaults, taken once: `get_default` per call cost more than the validation
saved. Sharing the empty containers is safe, since validation builds new ones."""


def _payload(args: dict[str, Any], **kernel: Any) -> HandoffPayload:
    """`HandoffPayload(**HandoffArgs.model_validate(args).model_dump(), **kernel)`.

    A payload validates the model's arguments with the same fields and validators as
    `HandoffArgs`, so arguments that name only those fields are validated once, by the payload,
    with every argument field given (as `model_dump` would), which keeps `model_fields_set`
    the same. Anything else, and every invalid payload, takes the two steps, so that errors
    read as they always did.
    """
    if args.keys() <= _ARG_FIELDS:
        fields = {**_ARG_DEFAULTS, **args, **kernel}  # every argument field given
        try:
            return HandoffPayload.model_validate(fields)
        except ValidationError:
            pass
    clean = HandoffArgs.model_validate(args)
    return HandoffPayload(**clean.model_dump(), **kernel)
