"""Accepting a hand-off: one short function over named steps.

permitted -> within size -> validated -> grounded -> secret handles resolved -> proven ->
entities merged -> refusal / re-route -> loop guards -> approved -> duplicate lock -> summary
-> redaction -> recorded. The kernel's own hand-on to the user's next need
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
    from baton.runtime.kernel import Kernel
    from baton.runtime.plan import AgentPlan, CallEntry


class Refused(Exception):
    """A step refused the hand-off; the message is what the model reads."""


async def hand_off(
    k: Kernel,
    r: RunState,
    plan: AgentPlan,
    t: TurnState,
    pc: PendingCall,
    entry: CallEntry,
    shown: Shown,
) -> Handled:
    """`transfer_to_<target>`."""
    assert entry.target is not None
    return await accept(k, r, plan, t, pc, entry.target, shown, back=False)


async def hand_back(
    k: Kernel,
    r: RunState,
    plan: AgentPlan,
    t: TurnState,
    pc: PendingCall,
    entry: CallEntry,
    shown: Shown,
) -> Handled:
    """`transfer_back`: to whoever handed the baton over (whatever `handoffs` says)."""
    source = t.incoming.source if t.incoming is not None else None
    if source is None or source not in k.plans:
        reason = (
            "transfer_back: no agent handed you the baton in this conversation; answer the "
            "user or hand off to a named agent"
        )
        k.emit(r, HandoffRefused(**r.base(t.agent), target=TRANSFER_BACK, reason=reason))
        return error_content(reason), None
    return await accept(k, r, plan, t, pc, source, shown, back=True)


async def accept(
    k: Kernel,
    r: RunState,
    plan: AgentPlan,
    t: TurnState,
    pc: PendingCall,
    target: str,
    shown: Shown,
    back: bool,
    kernel: str | None = None,
) -> Handled:
    """Run the acceptance steps; see the module docstring. `kernel`: the hand-off is the
    kernel's own (its note says what stopping it leaves undone): a refusal then ends the turn
    as a trip, since no model is there to read it and try again."""
    source = t.agent
    try:
        permitted(plan, target, back)
        within_size(k, pc)
        payload = validated(r, source, target, pc.args or {})
        if target == HUMAN:
            why = f"{source} asked for a human: {payload.reason}"
            return error_content(why), ToHuman(why)
        payload = grounded(k, r, source, payload, shown)
        payload = with_secrets(k, r, plan, payload)
        payload, sources = proven(k, r, t, payload)
        payload, added = with_entities(k, r, payload)
        if kernel is None:
            rerouted = await refusal(k, r, t, pc, payload)
            if isinstance(rerouted, Tripped):
                return error_content(rerouted.reason), rerouted
            payload = rerouted
        trip = loop_guards(k, r, source, payload, kernel)
        if trip is not None:
            return error_content(trip.reason), trip
        gate = approved(k, r, plan, t, pc, payload)  # a person approves the final target
        if gate is not None:
            return gate
        await duplicate_lock(k, r, source, pc, payload)
        payload = await summarised(k, r, plan, t, payload)
    except Refused as why:
        k.emit(r, HandoffRefused(**r.base(source), target=target, reason=str(why)))
        content = error_content(f"hand-off to {target!r} refused: {why}")
        if kernel is None:
            return content, None
        detail = f"handoff_refused: {why} ({kernel})"
        k.trip(r, source, "handoff_refused", detail)
        return content, Tripped(detail)
    payload = recorded(k, r, source, payload, added, sources)
    return f'{{"ok": true, "handed_to": "{payload.target}"}}', HandedOff(payload)


def permitted(plan: AgentPlan, target: str, back: bool) -> None:
    """The target is one of the holder's hand-offs (or `transfer_back`'s source)."""
    if not back and not plan.may_hand_to(target):
        allowed = ", ".join(sorted(plan.handoff_targets)) or "none"
        raise Refused(f"{plan.agent.name} may not hand off to {target!r} (allowed: {allowed})")


def within_size(k: Kernel, pc: PendingCall) -> None:
    """The payload is no larger than `Guards.max_payload_bytes` (what crosses a hand-off is a
    brief, not a document)."""
    cap = k.cfg.guards.max_payload_bytes
    if not cap or len(pc.call.arguments) * 4 <= cap:  # 4 bytes a character at the most
        return
    size = len(pc.call.arguments.encode("utf-8", "surrogatepass"))
    if size > cap:
        raise Refused(
            f"the payload is {size:,} bytes, over the {cap:,} a hand-off may carry "
            "(Guards.max_payload_bytes); pass ids, state slots and a short objective, not "
            "documents: the receiver can call fetch_history"
        )


def validated(r: RunState, source: str, target: str, args: dict[str, Any]) -> HandoffPayload:
    """The model's arguments plus the kernel's fields, validated."""
    try:
        return _payload(
            args,
            trace_id=r.trace_id,
            session_id=r.session.session_id,
            user_id=r.user_id,
            source=source,
            target=target,
            hop=r.hop + 1,
            path=list(r.path),
            history_ref=r.session.session_id,
        )
    except ValidationError as exc:
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}" for e in exc.errors()
        )
        raise Refused(f"invalid payload ({detail}); reason and objective are required") from None


def with_secrets(
    k: Kernel, r: RunState, plan: AgentPlan, payload: HandoffPayload
) -> HandoffPayload:
    """State slots written as secret handles (`[secret:password]`) carry the session's value
    (a slot the holder may see), so the receiver's tool can use it; a handle that resolves to
    nothing refuses the hand-off with what to do."""
    if not payload.state:
        return payload
    state = r.session.state
    try:
        visible = lambda: visible_state(plan.agent, state)  # noqa: E731
        carried = resolve(k.cfg.redactor, payload.state, state, visible)
    except Unresolved as exc:
        raise Refused(str(exc)) from None
    return payload if carried is payload.state else payload.model_copy(update={"state": carried})


def approved(
    k: Kernel, r: RunState, plan: AgentPlan, t: TurnState, pc: PendingCall, payload: HandoffPayload
) -> Handled | None:
    """None when the hand-off may go on; a pause (or the rejection) when it needs sign-off.
    The policy reads the hand-off's fields (the source's claims too) and the session's
    verified slots only (`baton.runtime.control.verified_state`)."""
    policy = plan.agent.handoff_approval(payload.target)
    if policy is None or pc.approved:
        return None
    if pc.rejection is not None:
        raise Refused(f"{pc.rejection}; tell the user, do not retry it")
    fields = payload.model_dump(include=set(HandoffArgs.model_fields))
    if payload.unverified:  # the approver judges all the source asked for, its claims too
        fields["state"] = {**fields["state"], **payload.unverified}
    needed, why = policy.needs(fields, verified_state(r.session))
    if not needed:
        return None
    paused: Paused = request_approval(
        k, r, t, pc, policy, "handoff", fields, target=payload.target, note=why
    )
    return paused


def grounded(
    k: Kernel, r: RunState, source: str, payload: HandoffPayload, shown: Shown
) -> HandoffPayload:
    """State slots with ids the holder was never shown are dropped (never invented ids)."""
    if not (k.cfg.guards.grounded_ids and payload.state):
        return payload
    bad = ungrounded(payload.state, shown())
    if not bad:
        return payload
    listed = ", ".join(f"{key}={v!r}" for key, v in bad)
    k.trip(
        r, source, "ungrounded_id", f"dropped from the hand-off state (never mentioned): {listed}"
    )
    dropped = {key for key, _ in bad}
    kept = {key: v for key, v in payload.state.items() if key not in dropped}
    return payload.model_copy(update={"state": kept})


def proven(
    k: Kernel, r: RunState, t: TurnState, payload: HandoffPayload
) -> tuple[HandoffPayload, dict[str, SlotSource]]:
    """Where each state slot's value came from (`baton.runtime.provenance`); slots whose
    values neither the user nor a tool produced, and that were not already known, become the
    source's claims (`unverified`): shown to the receiver as such, never known facts, never
    session state (`Guards.slot_provenance`; off, every slot passes, none verified)."""
    if not (k.cfg.guards.slot_provenance and payload.state):
        return payload, {}
    sources = provenance(r.session)
    known = [(r.session.state, sources)]
    if t.incoming is not None:
        known.append((t.incoming.state, sources))
    returned = _tool_result(k)
    results = [m.content for m in r.history if m.role == "tool" and m.content and returned(m)]
    found, claims = Provenance(r.said_by_user(), results, known).sources(payload.state)
    if not claims:
        return payload, found
    k.trip(
        r,
        t.agent,
        "unverified_slot",
        f"passed on as {t.agent}'s claims, not known facts (neither the user nor a tool gave "
        f"their values): {', '.join(claims)}",
    )
    unverified = {key: payload.state[key] for key in claims}
    kept = {key: v for key, v in payload.state.items() if key not in unverified}
    return payload.model_copy(update={"state": kept, "unverified": unverified}), found


def _tool_result(k: Kernel) -> Callable[[Message], bool]:
    """Whether a tool message is a result one of the team's tools returned: not a hand-off's
    or a built-in's answer, nor an error (a kernel refusal quotes the model's arguments)."""
    plans = k.plans

    def returned(m: Message) -> bool:
        plan = plans.get(m.agent) if m.agent is not None else None
        return (
            plan is not None and m.name in plan.tools and not (m.content or "").startswith(_FAILED)
        )

    return returned


_FAILED = error_content("")[: len('{"ok": false')]
"""How every failed call's content starts (`error_content`)."""


def with_entities(
    k: Kernel, r: RunState, payload: HandoffPayload
) -> tuple[HandoffPayload, dict[str, Any]]:
    """Ids and entities the user gave that the payload and the session state both lack."""
    if not k.cfg.guards.entity_guard:
        return payload, {}
    child = r.parent is not None  # a sub-run's question is its delegating model's words
    said = {
        m.id: m.content
        for m in r.history
        if m.role == "user" and m.content and not (child and m.id == r.user_msg_id)
    }
    known = {**r.session.state, **payload.state}
    added = missing_entities(said, known, k.cfg.extractors, k.entity_memo)
    if not added:
        return payload, {}
    return payload.model_copy(update={"state": {**payload.state, **added}}), added


async def refusal(
    k: Kernel, r: RunState, t: TurnState, pc: PendingCall, payload: HandoffPayload
) -> HandoffPayload | Tripped:
    """A receiver that hands the request straight back ("not mine") counts as a refusal; after
    `reroute_after_refusals` of them the router picks an agent that has not held it."""
    incoming, guards = t.incoming, k.cfg.guards
    if not (
        incoming is not None
        and incoming.trace_id == r.trace_id
        and payload.target == incoming.source
        and t.tools_called == 0
    ):
        return payload
    if pc.key not in r.refused:
        r.refused.append(pc.key)
    router = k.policy.router
    # without a router a loop guard that trips anyway names the problem better
    plain = router is None and check_handoff(guards, r.path, payload.target, payload.hop)
    if not guards.reroute_after_refusals or r.refusals < guards.reroute_after_refusals or plain:
        return payload
    return await _reroute(k, r, t.agent, payload)


async def _reroute(
    k: Kernel, r: RunState, source: str, payload: HandoffPayload
) -> HandoffPayload | Tripped:
    tried = set(r.path)
    why = f"{r.refusals} receivers handed the request straight back ({' -> '.join(r.path)})"
    target: str | None = None
    router = k.policy.router
    if router is not None:
        context = {"state": dict(r.session.state)}
        decision = await router.route(r.message, r.earlier, context)
        options = [decision.target, *decision.candidates]
        target = next((o for o in options if o in k.plans and o not in tried), None)
        k.emit(
            r,
            RouteDecided(
                **r.base(source),
                target=target or k.policy.fallback,
                tier=f"reroute:{decision.tier}",
                score=decision.score,
                candidates=tuple(decision.candidates),
                latency_ms=decision.latency_ms,
                verdicts=(*[v.summary() for v in decision.verdicts], f"re-route: {why}"),
            ),
        )
    if target is None:
        detail = f"refusals: {why}; no other agent owns it"
        k.trip(r, source, "refusals", detail)
        return Tripped(detail)
    return payload.model_copy(
        update={"target": target, "reason": f"re-routed after refusals: {payload.reason}"}
    )


def loop_guards(
    k: Kernel, r: RunState, source: str, payload: HandoffPayload, note: str | None = None
) -> Tripped | None:
    """Hop limit, visits, ping-pong and cycles (`baton.runtime.guards`); `note` adds what a
    trip leaves undone."""
    guard = check_handoff(k.cfg.guards, r.path, payload.target, payload.hop)
    if guard is None:
        return None
    detail = guard if note is None else f"{guard} ({note})"
    k.trip(r, source, guard.split(":", 1)[0], detail)
    return Tripped(detail)


async def duplicate_lock(
    k: Kernel, r: RunState, source: str, pc: PendingCall, payload: HandoffPayload
) -> None:
    """The same hand-off twice in one run is dropped (two workers resuming one run, a model
    repeating itself); the same call retried after a crash keeps its claim (its key)."""
    window = k.cfg.guards.lock_window_s
    if window <= 0:
        return
    lock = f"handoff|{r.run_id}|{payload.target}|{payload.fingerprint()}"
    if await k.cfg.store.acquire_lease(lock, pc.key, window):
        return
    detail = (
        f"duplicate_handoff: the same hand-off to {payload.target} was already made in this "
        f"run less than {window:g}s ago; dropped"
    )
    k.emit(r, GuardTripped(**r.base(source), guard="duplicate_handoff", detail=detail))
    state = json.dumps(r.session.state, ensure_ascii=False, default=str)
    raise Refused(f"{detail}. Continue with the current state: {state}")


async def summarised(
    k: Kernel, r: RunState, plan: AgentPlan, t: TurnState, payload: HandoffPayload
) -> HandoffPayload:
    """The payload with a model-made summary when the receiver's policy is `summary`. A failed
    summary never fails the hand-off: the payload goes without one."""
    if k.policy_for(payload, payload.target).kind != "summary":
        return payload
    model = k.cfg.summariser or plan.model
    name = plan.agent.name
    started = time.perf_counter()
    response: ModelResponse | None
    try:
        out = await timed(model.generate(summary_request(r.history)), k.cfg.guards.model_timeout_s)
        response = out if isinstance(out, ModelResponse) else None
        text = (response.text or "").strip() if response is not None else ""
        error = None if text else "the summariser returned no text"
    except Exception as exc:
        response, text, error = None, "", f"summary failed: {type(exc).__name__}: {exc}"
    usage = response.usage if response is not None else Usage()
    r.usage.setdefault(name, Usage()).add(usage)
    t.usage.add(usage)
    k.emit(
        r,
        ModelCalled(
            **r.base(name),
            model=model.name,
            usage=usage,
            latency_ms=(time.perf_counter() - started) * 1000,
            text=text or None,
            error=error,
        ),
    )
    return payload.model_copy(update={"summary": text}) if text else payload


def recorded(
    k: Kernel,
    r: RunState,
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
    crossed(k, r, source, payload.target)  # the edge's guardrails join the set in force
    red = k.cfg.redactor
    if red is not None:
        facts = masked_facts(red, payload.state)  # (nothing else in it is sensitive)
        payload = red.redact_value(payload)
        if facts != payload.state:
            payload = payload.model_copy(update={"state": facts})
    r.handoffs.append(payload)
    r.path.append(payload.target)
    sent = Handoff(**r.base(source), payload=payload)
    k.emit(r, sent, redacted=True)  # its only free text is the payload, redacted above
    if added:
        k.set_state(r, added, source, "entity_guard", sent.id, origin="user")
    k.set_state(r, raw_state, source, "handoff", sent.id, origin=sources or {})
    if payload.reply_to_user:
        r.last_reply = payload.reply_to_user
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
