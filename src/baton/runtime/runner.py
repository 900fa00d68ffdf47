"""The kernel: one run = turns of the agent holding the baton, until it answers or a guard trips.

Read `Runner.run` top to bottom: take the holder, call its model, run its tool calls, pass the
baton when a valid hand-off passes the guards. Policies (context view, guards, tool execution,
escalation) live in their own functions so the loop stays this short.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from baton.backends.base import SessionRecord
from baton.core.errors import ModelError, ModelTimeout, ParseError
from baton.core.events import (
    AgentStarted,
    Escalated,
    EscalationCard,
    Event,
    GuardTripped,
    Handoff,
    HandoffRefused,
    HandoffUsage,
    ModelCalled,
    RouteDecided,
    RunFinished,
    RunStarted,
    StateUpdated,
    ToolCalled,
)
from baton.core.ids import id_factory, new_trace_id
from baton.core.messages import Message, ToolCall, Usage
from baton.core.payload import HandoffArgs, HandoffPayload
from baton.core.policies import STRUCTURED, ContextPolicy
from baton.handoff import FETCH_HISTORY, TRANSFER_BACK, handoff_target
from baton.models.base import ModelRequest, ModelResponse, estimate_tokens
from baton.models.parsing import parse_json_object, parse_text_mode
from baton.runtime.context import build_view, system_prompt
from baton.runtime.entities import EntityMemo, missing_entities
from baton.runtime.grounding import context_text, ungrounded
from baton.runtime.guards import check_handoff
from baton.runtime.history import fetch_history, parse_args
from baton.runtime.plan import HUMAN, AgentPlan, KernelConfig
from baton.runtime.result import RunResult, RunStatus
from baton.runtime.summary import summary_request
from baton.runtime.timeouts import timed
from baton.tools import error_content

_SCALAR = (str, int, float, bool)
log = logging.getLogger("baton")


@dataclass(slots=True)
class TurnOutcome:
    """How an agent's turn ended."""

    kind: Literal["answer", "handoff", "trip", "escalate", "failed"]
    text: str | None = None
    payload: HandoffPayload | None = None
    reason: str = ""


@dataclass(slots=True)
class _ParsedCall:
    call: ToolCall
    args: dict[str, Any] | None
    error: str | None = None


@dataclass(slots=True)
class _Run:
    """Mutable state of one run."""

    cfg: KernelConfig
    session: SessionRecord
    message: str
    user_id: str | None
    trace_id: str = field(default_factory=new_trace_id)
    run_id: str = field(default_factory=id_factory("run_"))
    events: list[Event] = field(default_factory=list)
    history: list[Message] = field(default_factory=list)
    """The session's recent messages, then this run's (from index `fresh` on)."""
    fresh: int = 0
    path: list[str] = field(default_factory=list)
    handoffs: list[HandoffPayload] | None = None
    """Accepted hand-offs (None until the first: at thousands of runs in flight, every
    object a run keeps across its model calls is one more for the garbage collector)."""
    usage: dict[str, Usage] = field(default_factory=dict)
    last_reply: str | None = None
    sink_failed: bool = False
    refusals: int = 0
    """Receivers that handed the request straight back in this run."""
    turn_usage: Usage = field(default_factory=Usage)
    """Model tokens of the current turn."""
    turn_tools: int = 0
    """Tool calls executed in the current turn (hand-offs not counted)."""
    handoff_usage: list[HandoffUsage] | None = None
    """Tokens per hand-off (None until the first receiver's turn ends)."""

    @property
    def hop(self) -> int:
        return len(self.handoffs) if self.handoffs is not None else 0

    def emit(self, event: Event, redacted: bool = False) -> None:
        """Record `event` and send it to the sinks, redacted first unless `redacted` says its
        free text already went through the team's redactor (redaction is idempotent)."""
        redactor = self.cfg.redactor
        if redactor is not None and not redacted:
            event = redactor.redact_event(event)
        self.events.append(event)
        for sink in self.cfg.sinks:
            try:
                sink.emit(event)
            except Exception:  # a broken sink must never break a run; say so once per run
                if not self.sink_failed:
                    self.sink_failed = True
                    log.exception("event sink %r failed; the run goes on", sink)

    def base(self, agent: str | None) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "session_id": self.session.session_id,
            "run_id": self.run_id,
            "agent": agent,
            "hop": len(self.handoffs) if self.handoffs is not None else 0,  # `hop`, inlined
        }

    def set_state(
        self,
        slots: dict[str, Any],
        agent: str,
        source: str,
        cause: str | None,
        tool: str | None = None,
    ) -> None:
        """Write slots that change the session state and record who set them and from what."""
        state = self.session.state
        changed = {k: v for k, v in slots.items() if k not in state or state[k] != v}
        if not changed:
            return
        state.update(changed)
        self.emit(
            StateUpdated(**self.base(agent), slots=changed, source=source, tool=tool, cause=cause)
        )

    def record(self, msg: Message) -> Message:
        self.history.append(msg)
        return msg


class Runner:
    """Executes runs for one team configuration."""

    def __init__(self, cfg: KernelConfig) -> None:
        self.cfg = cfg
        self._entity_memo = EntityMemo()
        """What the entity guard found in recent user messages (a hand-off late in a long
        session reads every earlier message again)."""

    async def run(self, message: str, session: SessionRecord, user_id: str | None) -> RunResult:
        """Run one user message to completion. Never raises for model or tool misbehaviour."""
        cfg = self.cfg
        r = _Run(cfg, session, message, user_id or session.user_id)
        t0 = time.perf_counter()
        if session.holder is not None:
            r.history = await cfg.store.get_messages(session.session_id, limit=200)
            r.fresh = len(r.history)
            r.last_reply = next(
                (m.content for m in reversed(r.history) if m.role == "assistant" and m.content),
                None,
            )
        r.emit(RunStarted(**r.base(None), message=message, user_id=r.user_id))
        user_msg = r.record(Message(role="user", content=message, run_id=r.run_id))

        holder, continuing, reason = await self._first_holder(r, session)
        incoming = session.incoming if continuing else None
        since = session.holder_since if continuing else user_msg.id
        status: RunStatus = "completed"
        output: str | None = None
        escalation: EscalationCard | None = None
        error: str | None = None
        if holder is None:  # the router sent the request straight to the human queue
            outcome = TurnOutcome("escalate", reason=reason)
        else:
            r.path.append(holder)
            outcome = await self._turn(r, cfg.plans[holder], incoming, since, reason)
        while outcome.kind == "handoff" and outcome.payload is not None:
            holder, incoming, since = outcome.payload.target, outcome.payload, user_msg.id
            del outcome  # not kept alive through the next turn (one object less per run)
            outcome = await self._turn(r, cfg.plans[holder], incoming, since, incoming.reason)
        if outcome.kind == "answer":
            output = outcome.text
        elif outcome.kind == "failed":
            status, error, output = "failed", outcome.reason, outcome.text
        else:
            status = "escalated"
            to_human = outcome.kind == "escalate"
            esc = await self._escalate(r, holder, [outcome.reason], user_msg.id, to_human)
            escalation, output = esc.card, esc.output
            holder, incoming, since = esc.holder, esc.incoming, user_msg.id

        session.holder = holder
        session.holder_since = since
        session.incoming = incoming
        session.user_id = r.user_id
        session.updated_at = time.time()
        r.emit(
            RunFinished(
                **r.base(holder),
                status=status,
                output=output,
                path=list(r.path),
                usage=dict(r.usage),
                latency_ms=(time.perf_counter() - t0) * 1000,
                error=error,
                handoff_usage=list(r.handoff_usage or ()),
            )
        )
        await cfg.store.commit_run(session, r.history[r.fresh :], r.events)
        return RunResult(
            status=status,
            output=output,
            path=r.path,
            handoffs=r.handoffs if r.handoffs is not None else [],
            usage=r.usage,
            usage_by_handoff=r.handoff_usage if r.handoff_usage is not None else [],
            trace_id=r.trace_id,
            session_id=session.session_id,
            run_id=r.run_id,
            events=r.events,
            escalation=escalation,
            holder=holder,
            state=dict(session.state),
            error=error,
        )

    async def _first_holder(self, r: _Run, session: SessionRecord) -> tuple[str | None, bool, str]:
        """(holder, continuing, reason): the session's holder, else the router's pick or the
        entry agent. None means the router sent the request to the human queue."""
        cfg = self.cfg
        if session.holder in cfg.plans:
            r.emit(RouteDecided(**r.base(None), target=session.holder, tier="session"))
            return session.holder, True, "continues the session"
        if cfg.router is None:
            assert cfg.entry is not None  # a Team has an entry agent or a router
            r.emit(RouteDecided(**r.base(None), target=cfg.entry, tier="entry"))
            return cfg.entry, False, "entry agent"
        decision = await cfg.router.route(r.message, context={"state": dict(session.state)})
        r.emit(
            RouteDecided(
                **r.base(None),
                target=decision.target,
                tier=decision.tier,
                score=decision.score,
                candidates=tuple(decision.candidates),
                latency_ms=decision.latency_ms,
                verdicts=tuple([v.summary() for v in decision.verdicts]),
            )
        )
        if decision.target in cfg.plans:
            return decision.target, False, f"routed by the {decision.tier} tier"
        return None, False, f"no agent owns the request (router: {decision.tier})"

    # ------------------------------------------------------------------ one turn
    async def _turn(
        self,
        r: _Run,
        plan: AgentPlan,
        incoming: HandoffPayload | None,
        since: str | None,
        reason: str,
    ) -> TurnOutcome:
        """One agent's turn: model calls and tool calls until it answers, hands off, or a guard
        ends it. (One coroutine, not a turn and a loop: at thousands of runs in flight every
        suspended frame is one more object for the garbage collector to scan.)"""
        agent, cfg = plan.agent, self.cfg
        policy = self._policy(incoming, agent.name) if incoming is not None else None
        system = Message(
            role="system",
            content=system_prompt(agent, incoming, r.session.state),
            agent=agent.name,
        )
        # The conversation part of the view is fixed for the turn (the turn only adds tool-call
        # and tool messages, which the view shows from `scratch`), so it is built once.
        view = build_view(agent, system, r.history, since, scratch=(), policy=policy)
        size = sum(estimate_tokens(m.content) for m in view)
        r.emit(
            AgentStarted(
                **r.base(agent.name),
                reason=reason,
                policy=str(policy) if policy is not None else None,
                context_tokens=size,
            )
        )
        r.turn_usage = used = Usage()
        r.turn_tools = 0
        try:
            specs = plan.specs_for(incoming is not None)
            scratch: list[Message] = []
            for _ in range(agent.max_iterations):
                request = ModelRequest(agent=agent.name, messages=[*view, *scratch], tools=specs)
                # `_call_model`, inlined: one coroutine less per run in flight
                t = time.perf_counter()
                answer: ModelResponse | Exception
                try:
                    answer = await timed(plan.model.generate(request), cfg.guards.model_timeout_s)
                except Exception as exc:
                    answer = exc
                response = self._answered(r, plan, request, answer, t)
                if isinstance(response, TurnOutcome):
                    return response
                text, calls = self._parse(response, plan)
                if any(c.error for c in calls):
                    retry = await self._reask(r, plan, request, response, calls)
                    if isinstance(retry, TurnOutcome):
                        return retry
                    text, calls = retry
                if not calls:
                    reply = text or ""
                    r.record(
                        Message(role="assistant", content=reply, agent=agent.name, run_id=r.run_id)
                    )
                    r.last_reply = reply
                    return TurnOutcome("answer", text=reply)
                scratch.append(
                    r.record(
                        Message(
                            role="assistant",
                            content=text,
                            agent=agent.name,
                            tool_calls=[c.call for c in calls],
                            run_id=r.run_id,
                        )
                    )
                )
                outcome = await self._run_calls(r, plan, calls, scratch, view, incoming)
                if outcome is not None:
                    return outcome
            detail = (
                f"max_iterations: {agent.name} made {agent.max_iterations} model calls "
                "without answering"
            )
            r.emit(GuardTripped(**r.base(agent.name), guard="max_iterations", detail=detail))
            return TurnOutcome("trip", reason=detail)
        finally:
            if incoming is not None and policy is not None and incoming.trace_id == r.trace_id:
                _handoff_usage(r, incoming, agent.name, str(policy), size, used)

    def _policy(self, incoming: HandoffPayload, receiver: str) -> ContextPolicy:
        """The source's per-target choice, else the receiver's own policy."""
        source = self.cfg.plans.get(incoming.source)
        if source is not None:
            chosen = source.agent.handoff_context.get(receiver)
            if chosen is not None:
                return chosen
        plan = self.cfg.plans.get(receiver)
        return plan.agent.context if plan is not None else STRUCTURED

    async def _call_model(
        self, r: _Run, plan: AgentPlan, request: ModelRequest
    ) -> ModelResponse | TurnOutcome:
        t = time.perf_counter()
        try:
            response = await timed(plan.model.generate(request), self.cfg.guards.model_timeout_s)
        except Exception as exc:
            return self._answered(r, plan, request, exc, t)
        return self._answered(r, plan, request, response, t)

    def _answered(
        self,
        r: _Run,
        plan: AgentPlan,
        request: ModelRequest,
        response: ModelResponse | Exception,
        t: float,
    ) -> ModelResponse | TurnOutcome:
        """A model call's response, checked and recorded, or how the turn ends (a timeout, a
        provider failure, an invalid response). `t`: when the call started."""
        name = plan.agent.name
        if isinstance(response, (TimeoutError, ModelTimeout)):
            detail = (
                f"model_timeout: {plan.model.name} did not answer {name} within "
                f"{self.cfg.guards.model_timeout_s}s"
            )
            r.emit(GuardTripped(**r.base(name), guard="model_timeout", detail=detail))
            return TurnOutcome("trip", reason=detail)
        if isinstance(response, Exception):  # provider failure: end the run cleanly
            exc = response
            msg = f"model {plan.model.name!r} failed for agent {name}: {type(exc).__name__}: {exc}"
            if not isinstance(exc, ModelError):
                msg += " (check the provider's URL, key and model name)"
            r.emit(
                ModelCalled(
                    **r.base(name),
                    model=plan.model.name,
                    usage=Usage(),
                    latency_ms=(time.perf_counter() - t) * 1000,
                    reask=request.reask,
                    error=msg,
                )
            )
            return TurnOutcome("failed", reason=msg)
        problem = _malformed(response)
        if problem is not None:
            msg = f"model {plan.model.name!r} returned an invalid response for {name}: {problem}"
            r.emit(
                ModelCalled(
                    **r.base(name),
                    model=plan.model.name,
                    usage=Usage(),
                    latency_ms=(time.perf_counter() - t) * 1000,
                    reask=request.reask,
                    error=msg,
                )
            )
            return TurnOutcome("failed", reason=msg)
        if not response.tool_calls and response.text_tool_calls:
            # text-mode providers write calls as JSON text; extract them once, here, so the
            # event and everything after it see real tool calls
            found = parse_text_mode(response.text, plan.callable_names)
            response.text, response.tool_calls = found.text, found.calls
            response.text_tool_calls = False
        usage = r.usage.get(name)
        if usage is None:
            usage = r.usage[name] = Usage()
        usage.add(response.usage)
        r.turn_usage.add(response.usage)
        r.emit(
            ModelCalled(
                **r.base(name),
                model=plan.model.name,
                usage=response.usage,
                latency_ms=(time.perf_counter() - t) * 1000,
                # a tuple of names: not tracked by the garbage collector once it has seen it
                tool_calls=tuple([c.name for c in response.tool_calls]),
                text=response.text,
                reask=request.reask,
            )
        )
        return response

    def _parse(
        self, response: ModelResponse, plan: AgentPlan
    ) -> tuple[str | None, list[_ParsedCall]]:
        text, raw_calls = response.text, response.tool_calls
        parsed: list[_ParsedCall] = []
        for call in raw_calls:
            try:
                parsed.append(_ParsedCall(call, parse_json_object(call.arguments)))
            except ParseError as exc:
                parsed.append(_ParsedCall(call, None, str(exc)))
        return text, parsed

    async def _reask(
        self,
        r: _Run,
        plan: AgentPlan,
        request: ModelRequest,
        response: ModelResponse,
        calls: list[_ParsedCall],
    ) -> tuple[str | None, list[_ParsedCall]] | TurnOutcome:
        """One re-ask quoting the exact parse error (seed 001 §6.1); what still fails is kept
        as an error and answered with an error result."""
        errors = "; ".join(f"{c.call.name}: {c.error}" for c in calls if c.error)
        bad = Message(
            role="assistant",
            content=response.text,
            agent=plan.agent.name,
            tool_calls=[c.call for c in calls],
        )
        answers = [
            Message(
                role="tool",
                tool_call_id=c.call.id,
                name=c.call.name,
                content=error_content(c.error or "not executed: another call failed to parse"),
            )
            for c in calls
        ]
        nudge = Message(
            role="user",
            content=(
                f"Your last tool call could not be parsed: {errors}. "
                "Call the tool again with the arguments as one valid JSON object."
            ),
        )
        retry = ModelRequest(
            agent=request.agent,
            messages=[*request.messages, bad, *answers, nudge],
            tools=request.tools,
            reask=True,
        )
        response2 = await self._call_model(r, plan, retry)
        if isinstance(response2, TurnOutcome):
            return response2
        return self._parse(response2, plan)

    # ------------------------------------------------------------------ tool calls
    async def _run_calls(
        self,
        r: _Run,
        plan: AgentPlan,
        calls: list[_ParsedCall],
        scratch: list[Message],
        view: list[Message],
        incoming: HandoffPayload | None = None,
    ) -> TurnOutcome | None:
        """Run the calls in order; the first accepted hand-off ends the turn."""
        name = plan.agent.name
        shown: str | None = None  # what the agent was shown, built only if an id needs checking

        def shown_text() -> str:
            nonlocal shown
            if shown is None:
                shown = context_text([*view, *scratch])
            return shown

        accepted: HandoffPayload | None = None
        trip: TurnOutcome | None = None
        for pc in calls:
            call = pc.call
            if accepted is not None or trip is not None:
                why = (
                    f"not executed: the baton already passed to {accepted.target}"
                    if accepted is not None
                    else "not executed: the run was stopped by a guard"
                )
                if handoff_target(call.name) is not None and accepted is not None:
                    r.emit(
                        HandoffRefused(
                            **r.base(name),
                            target=handoff_target(call.name) or "",
                            reason="only the first valid hand-off of a response is taken",
                        )
                    )
                content = error_content(why)
            elif pc.error is not None:
                content = error_content(f"could not parse the arguments: {pc.error}")
                r.emit(
                    ToolCalled(
                        **r.base(name), tool=call.name, call_id=call.id, ok=False, error=pc.error
                    )
                )
            elif call.name in plan.tools:
                bad = (
                    ungrounded(pc.args or {}, shown_text()) if self.cfg.guards.grounded_ids else []
                )
                if bad:
                    content = self._refuse_ungrounded(r, plan, call, pc.args or {}, bad)
                else:
                    r.turn_tools += 1
                    content = await self._call_tool(r, plan, call, pc.args or {})
            elif call.name == FETCH_HISTORY and incoming is not None and plan.agent.history_tool:
                r.turn_tools += 1
                content = await self._fetch_history(r, plan, call, pc.args or {}, incoming)
            elif (target := _handoff_name(call.name, plan, incoming, self.cfg.plans)) is not None:
                result: HandoffPayload | TurnOutcome | str
                if target == "":
                    result = self._refuse_back(r, plan)
                else:
                    back = call.name == TRANSFER_BACK
                    args = pc.args or {}
                    result = await self._try_handoff(
                        r, plan, target, args, shown_text, incoming, back=back
                    )
                if isinstance(result, HandoffPayload):
                    accepted = result
                    content = f'{{"ok": true, "handed_to": "{result.target}"}}'
                elif isinstance(result, TurnOutcome):
                    trip = result
                    content = error_content(result.reason)
                else:
                    content = result
            else:
                available = sorted(plan.tools) + sorted(
                    s.name for s in plan.specs if s.name not in plan.tools
                )
                msg = (
                    f"unknown tool {call.name!r}; available tools: {', '.join(available) or 'none'}"
                )
                r.emit(
                    ToolCalled(**r.base(name), tool=call.name, call_id=call.id, ok=False, error=msg)
                )
                content = error_content(msg)
            scratch.append(
                r.record(
                    Message(
                        role="tool",
                        content=content,
                        agent=name,
                        tool_call_id=call.id,
                        name=call.name,
                        run_id=r.run_id,
                    )
                )
            )
        if trip is not None:
            return trip
        if accepted is not None:
            return TurnOutcome("handoff", payload=accepted)
        return None

    def _refuse_ungrounded(
        self,
        r: _Run,
        plan: AgentPlan,
        call: ToolCall,
        args: dict[str, Any],
        bad: list[tuple[str, str]],
    ) -> str:
        listed = ", ".join(f"{k}={v!r}" for k, v in bad)
        msg = (
            f"not executed: {listed} appears nowhere in the conversation, the known facts or "
            "earlier tool results; use only ids you were given, or ask the user for it"
        )
        name = plan.agent.name
        r.emit(GuardTripped(**r.base(name), guard="ungrounded_id", detail=f"{call.name}: {listed}"))
        r.emit(
            ToolCalled(
                **r.base(name), tool=call.name, call_id=call.id, arguments=args, ok=False, error=msg
            )
        )
        return error_content(msg)

    async def _call_tool(
        self, r: _Run, plan: AgentPlan, call: ToolCall, args: dict[str, Any]
    ) -> str:
        tool = plan.tools[call.name]
        limit = self.cfg.guards.tool_timeout_s
        if tool.timeout_s is not None:
            limit = min(limit, tool.timeout_s)
        t = time.perf_counter()
        try:
            out = await timed(tool.invoke(args, self.cfg.max_result_chars), limit)
            ok, content, error, truncated, n = (
                out.ok,
                out.content,
                out.error,
                out.truncated,
                out.raw_chars,
            )
        except TimeoutError:
            ok, error, truncated, n = False, f"{call.name} timed out after {limit}s", False, 0
            content = error_content(error + "; try again later or ask the user")
            r.emit(GuardTripped(**r.base(plan.agent.name), guard="tool_timeout", detail=error))
        done = ToolCalled(
            **r.base(plan.agent.name),
            tool=call.name,
            call_id=call.id,
            arguments=args,
            ok=ok,
            error=error,
            latency_ms=(time.perf_counter() - t) * 1000,
            result_chars=n,
            truncated=truncated,
        )
        r.emit(done)
        if ok:
            slots = {k: v for k, v in args.items() if isinstance(v, _SCALAR) and v != ""}
            r.set_state(slots, plan.agent.name, "tool", done.id, tool=call.name)
        return content

    async def _fetch_history(
        self,
        r: _Run,
        plan: AgentPlan,
        call: ToolCall,
        args: dict[str, Any],
        incoming: HandoffPayload,
    ) -> str:
        t = time.perf_counter()
        parsed = parse_args(args, incoming.history_ref)
        if isinstance(parsed, str):
            ok, error, content = False, parsed, error_content(parsed)
        else:
            ok, error = True, None
            content = await fetch_history(self.cfg.store, incoming.history_ref, *parsed)
        r.emit(
            ToolCalled(
                **r.base(plan.agent.name),
                tool=call.name,
                call_id=call.id,
                arguments=args,
                ok=ok,
                error=error,
                latency_ms=(time.perf_counter() - t) * 1000,
                result_chars=len(content),
            )
        )
        return content

    def _refuse_back(self, r: _Run, plan: AgentPlan) -> str:
        reason = (
            "transfer_back: no agent handed you the baton in this conversation; answer the "
            "user or hand off to a named agent"
        )
        r.emit(HandoffRefused(**r.base(plan.agent.name), target=TRANSFER_BACK, reason=reason))
        return error_content(reason)

    async def _try_handoff(
        self,
        r: _Run,
        plan: AgentPlan,
        target: str,
        args: dict[str, Any],
        shown: Callable[[], str],
        incoming: HandoffPayload | None = None,
        back: bool = False,
    ) -> HandoffPayload | TurnOutcome | str:
        """An accepted payload, a guard trip / escalation, or the refusal text for the model.

        `back`: a `transfer_back` to the agent that handed over (allowed whatever `handoffs`
        says).
        """
        source = plan.agent.name
        cfg = self.cfg

        def refuse(reason: str) -> str:
            r.emit(HandoffRefused(**r.base(source), target=target, reason=reason))
            return error_content(f"hand-off to {target!r} refused: {reason}")

        if not back and target not in plan.handoff_targets:
            allowed = ", ".join(sorted(plan.handoff_targets)) or "none"
            return refuse(f"{source} may not hand off to {target!r} (allowed: {allowed})")
        try:
            payload = _payload(
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
                f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}"
                for e in exc.errors()
            )
            return refuse(f"invalid payload ({detail}); reason and objective are required")
        if target == HUMAN:
            why = f"{source} asked for a human: {payload.reason}"
            return TurnOutcome("escalate", reason=why, payload=payload)
        if cfg.guards.grounded_ids and payload.state:
            bad = ungrounded(payload.state, shown())
            if bad:
                listed = ", ".join(f"{k}={v!r}" for k, v in bad)
                r.emit(
                    GuardTripped(
                        **r.base(source),
                        guard="ungrounded_id",
                        detail=f"dropped from the hand-off state (never mentioned): {listed}",
                    )
                )
                dropped = {k for k, _ in bad}
                kept = {k: v for k, v in payload.state.items() if k not in dropped}
                payload = payload.model_copy(update={"state": kept})
        added: dict[str, Any] = {}
        if cfg.guards.entity_guard:
            added = self._missing_entities(r, payload)
            if added:
                payload = payload.model_copy(update={"state": {**payload.state, **added}})

        if (
            incoming is not None
            and incoming.trace_id == r.trace_id
            and target == incoming.source
            and r.turn_tools == 0
        ):  # the receiver hands the request straight back: "not mine"
            r.refusals += 1
            limit = cfg.guards.reroute_after_refusals
            # without a router a loop guard that trips anyway names the problem better
            plain = cfg.router is None and check_handoff(cfg.guards, r.path, target, payload.hop)
            if limit and r.refusals >= limit and not plain:
                rerouted = await self._reroute(r, source, payload)
                if isinstance(rerouted, TurnOutcome):
                    return rerouted
                payload, target = rerouted, rerouted.target

        guard = check_handoff(cfg.guards, r.path, target, payload.hop)
        if guard is not None:
            r.emit(GuardTripped(**r.base(source), guard=guard.split(":", 1)[0], detail=guard))
            return TurnOutcome("trip", reason=guard)
        if cfg.guards.lock_window_s > 0:
            key = f"{r.session.session_id}|{target}|{payload.fingerprint()}"
            if not await cfg.store.claim_lock(key, cfg.guards.lock_window_s):
                detail = (
                    f"duplicate_handoff: the same hand-off to {target} was made less than "
                    f"{cfg.guards.lock_window_s:g}s ago; dropped"
                )
                r.emit(GuardTripped(**r.base(source), guard="duplicate_handoff", detail=detail))
                state = json.dumps(r.session.state, ensure_ascii=False, default=str)
                return error_content(f"{detail}. Continue with the current state: {state}")
        if self._policy(payload, target).kind == "summary":
            payload = await self._summarise(r, plan, payload)
        raw_state = payload.state
        if cfg.redactor is not None:
            payload = cfg.redactor.redact_value(payload)
        if r.handoffs is None:
            r.handoffs = []
        r.handoffs.append(payload)
        r.path.append(target)
        sent = Handoff(**r.base(source), payload=payload)
        r.emit(sent, redacted=True)  # its only free text is the payload, redacted above
        if added:
            r.set_state(added, source, "entity_guard", sent.id)
        r.set_state(raw_state, source, "handoff", sent.id)
        if payload.reply_to_user:
            r.last_reply = payload.reply_to_user
        return payload

    def _missing_entities(self, r: _Run, payload: HandoffPayload) -> dict[str, Any]:
        """Entities the user gave that neither the payload nor the session state holds."""
        said = {m.id: m.content for m in r.history if m.role == "user" and m.content}
        known = {**r.session.state, **payload.state}
        return missing_entities(said, known, self.cfg.extractors, self._entity_memo)

    async def _reroute(
        self, r: _Run, source: str, payload: HandoffPayload
    ) -> HandoffPayload | TurnOutcome:
        """After repeated refusals, ask the router for an agent that has not held the baton in
        this run; with no router, or no such agent, the run goes to the fallback."""
        cfg = self.cfg
        tried = set(r.path)
        why = f"{r.refusals} receivers handed the request straight back ({' -> '.join(r.path)})"
        target: str | None = None
        if cfg.router is not None:
            decision = await cfg.router.route(r.message, context={"state": dict(r.session.state)})
            options = [decision.target, *decision.candidates]
            target = next((t for t in options if t in cfg.plans and t not in tried), None)
            r.emit(
                RouteDecided(
                    **r.base(source),
                    target=target or cfg.fallback,
                    tier=f"reroute:{decision.tier}",
                    score=decision.score,
                    candidates=tuple(decision.candidates),
                    latency_ms=decision.latency_ms,
                    verdicts=(*[v.summary() for v in decision.verdicts], f"re-route: {why}"),
                )
            )
        if target is None:
            detail = f"refusals: {why}; no other agent owns it"
            r.emit(GuardTripped(**r.base(source), guard="refusals", detail=detail))
            return TurnOutcome("trip", reason=detail)
        return payload.model_copy(
            update={"target": target, "reason": f"re-routed after refusals: {payload.reason}"}
        )

    async def _summarise(self, r: _Run, plan: AgentPlan, payload: HandoffPayload) -> HandoffPayload:
        """The payload with a model-made summary of the conversation (`summary` policy).

        A failed summary never fails the hand-off: the payload goes without one."""
        model = self.cfg.summariser or plan.model
        name = plan.agent.name
        request = summary_request(r.history)
        t = time.perf_counter()
        try:
            response = await timed(model.generate(request), self.cfg.guards.model_timeout_s)
            text = (response.text or "").strip() if isinstance(response, ModelResponse) else ""
            error = None if text else "the summariser returned no text"
        except Exception as exc:
            response, text, error = None, "", f"summary failed: {type(exc).__name__}: {exc}"
        usage = response.usage if isinstance(response, ModelResponse) else Usage()
        r.usage.setdefault(name, Usage()).add(usage)
        r.turn_usage.add(usage)
        r.emit(
            ModelCalled(
                **r.base(name),
                model=model.name,
                usage=usage,
                latency_ms=(time.perf_counter() - t) * 1000,
                text=text or None,
                error=error,
            )
        )
        return payload.model_copy(update={"summary": text}) if text else payload

    # ------------------------------------------------------------------ escalation
    async def _escalate(
        self, r: _Run, holder: str | None, reasons: list[str], since: str, to_human: bool = False
    ) -> _Escalation:
        """Build the hand-over card and give it to the fallback (an agent, else the human queue).

        `to_human`: the agent called `transfer_to_human`, so the card goes to the human queue
        whatever the team's fallback is.

        After a human escalation the next message starts again at the entry agent (the state
        slots stay); after a fallback agent answered, that agent holds the baton.
        """
        cfg = self.cfg
        card = EscalationCard(
            session_id=r.session.session_id,
            trace_id=r.trace_id,
            user_id=r.user_id,
            path=list(r.path),
            reasons=reasons,
            state=dict(r.session.state),
            last_user_message=r.message,
            last_reply=r.last_reply,
        )
        fallback = HUMAN if to_human else cfg.fallback
        r.emit(Escalated(**r.base(holder), to=fallback, card=card))
        if fallback != HUMAN and fallback in cfg.plans:
            plan = cfg.plans[fallback]
            payload = HandoffPayload(
                reason="escalation: " + "; ".join(reasons),
                objective="Take over the user's request; the automated desk could not finish it.",
                state=dict(r.session.state),
                reply_to_user=r.last_reply,
                # state travels (filtered by `accepts`) in the payload, not in the card text
                constraints=[card.render(include_state=False)],
                trace_id=r.trace_id,
                session_id=r.session.session_id,
                user_id=r.user_id,
                source=holder or "router",
                target=fallback,
                hop=r.hop + 1,
                path=list(r.path),
                history_ref=r.session.session_id,
            )
            if cfg.redactor is not None:
                payload = cfg.redactor.redact_value(payload)
            r.path.append(fallback)
            fallback_plan = AgentPlan(
                agent=plan.agent,
                model=plan.model,
                tools=plan.tools,
                specs=[s for s in plan.specs if s.name in plan.tools],
                handoff_targets=frozenset(),
            )
            outcome = await self._turn(r, fallback_plan, payload, since, payload.reason)
            if outcome.kind == "answer":
                return _Escalation(card, outcome.text or "", fallback, payload)
            card.reasons.append(f"fallback {fallback} could not finish: {outcome.reason}")
        await cfg.store.push_human(card)
        return _Escalation(card, cfg.escalation_message, cfg.entry, None)


@dataclass(slots=True)
class _Escalation:
    card: EscalationCard
    output: str
    holder: str | None
    """Who holds the baton afterwards (None: the next message is routed afresh)."""
    incoming: HandoffPayload | None


def _handoff_usage(
    r: _Run, incoming: HandoffPayload, target: str, policy: str, size: int, used: Usage
) -> None:
    """Record what the receiver's turn after a hand-off cost."""
    if r.handoff_usage is None:
        r.handoff_usage = []
    r.handoff_usage.append(
        HandoffUsage(
            hop=incoming.hop,
            source=incoming.source,
            target=target,
            policy=policy,
            context_tokens=size,
            usage=used,
        )
    )


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


def _handoff_name(
    name: str, plan: AgentPlan, incoming: HandoffPayload | None, plans: dict[str, AgentPlan]
) -> str | None:
    """The hand-off target a call names: `transfer_to_<x>` -> x; `transfer_back` (when the
    agent has it) -> who handed over, or "" when nobody did; None for other calls."""
    target = handoff_target(name)
    if target is not None:
        return target
    if name == TRANSFER_BACK and plan.agent.transfer_back:
        if incoming is not None and incoming.source in plans:
            return incoming.source
        return ""
    return None


def _malformed(response: object) -> str | None:
    """What is wrong with a custom model's response, or None (cheap shape checks)."""
    if not isinstance(response, ModelResponse):
        return f"expected a ModelResponse, got {type(response).__name__}"
    if response.text is not None and not isinstance(response.text, str):
        return f"text must be a string or None, got {type(response.text).__name__}"
    if not isinstance(response.usage, Usage):
        return f"usage must be a Usage, got {type(response.usage).__name__}"
    for call in response.tool_calls:
        if not isinstance(call, ToolCall):
            return f"tool_calls must hold ToolCall objects, got {type(call).__name__}"
        if not isinstance(call.name, str) or not isinstance(call.arguments, str):
            return "a ToolCall needs a string name and its arguments as a JSON string"
    return None


def run_sync_guard() -> None:
    """Raise a clear error when `run_sync` is called inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        "run_sync() cannot be called from inside a running event loop; use `await team.run(...)`"
    )
