"""The kernel: one run = turns of the agent holding the baton, until it answers or a guard trips.

Read it top to bottom, like Swarm's `core.py`: `run` opens the run and picks the first holder;
`settle` makes whatever stops it (a cancellation, a store failure, a bug) a recorded ending;
`drive` is the holder loop (a hand-off starts the receiver's turn, a trip escalates, anything
else finishes the run); `turn` is the turn loop (ask the model, run its calls, until it
answers or the turn ends). Everything the loops know lives in `RunState`/`TurnState`, saved as
a checkpoint after every model call, tool call and hand-off, so `resume` can continue a run
in any process. Policies live in their own modules: `model_call`, `calls`, `handoffs`,
`approval`, `escalation`, `pending` (the user's other needs, handed on after an answer),
`guardrails` (input and output rules that travel with the baton).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, cast

from baton.backends.base import (
    MAX_REQUESTS,
    Checkpoint,
    CheckpointStatus,
    KeptSnapshot,
    SessionRecord,
    Snapshots,
)
from baton.core.errors import BatonError, ConfigError, ConflictError, RunReleased, StoreError
from baton.core.events import (
    AgentStarted,
    Event,
    GuardTripped,
    HandoffUsage,
    RouteDecided,
    RunFinished,
    RunResumed,
    RunStarted,
    StateUpdated,
)
from baton.core.messages import Message
from baton.core.payload import HandoffPayload
from baton.core.policies import STRUCTURED, ContextPolicy
from baton.models.base import estimate_tokens
from baton.routing.intents import Intent, split_intents
from baton.runtime.at_rest import checkpoint_state, masked_messages, masked_session
from baton.runtime.calls import HANDLERS, answer, classify, run_calls
from baton.runtime.cancel import CALLER, LiveRun, answer_open_calls, consume_cancellation
from baton.runtime.context import build_view, system_prompt
from baton.runtime.control import RESERVED, SlotSource, pending_needs, provenance, record_sources
from baton.runtime.entities import EntityMemo
from baton.runtime.escalation import escalate, to_queue
from baton.runtime.guardrails import arrive, received, screen_reply
from baton.runtime.held_stream import held_stream
from baton.runtime.kernel import Kind
from baton.runtime.model_call import Reply, ask
from baton.runtime.outcomes import (
    Answered,
    Blocked,
    Cancelled,
    Cleared,
    Failed,
    HandedOff,
    Paused,
    ToHuman,
    Tripped,
    TurnOutcome,
)
from baton.runtime.pending import KIND as HAND_ON
from baton.runtime.pending import hand_on, hand_on_call, set_pending
from baton.runtime.plan import HUMAN, AgentPlan, KernelSettings, SwarmPolicy
from baton.runtime.result import RunResult, RunStatus
from baton.runtime.rolling import READ, WINDOW, note, roll
from baton.runtime.state import RunState, TurnState
from baton.tools import error_content

Listener = Callable[[Event], None]

BUILT_IN_KINDS: Mapping[str, Kind] = {
    **{name: Kind(handler) for name, handler in HANDLERS.items()},
    HAND_ON: Kind(hand_on_call),
}
"""The kernel's own call kinds: tools, hand-offs, `transfer_back`, `fetch_history`, hand-on."""


class Runner:
    """Executes and resumes runs of one set of compiled agents."""

    def __init__(
        self,
        cfg: KernelSettings,
        plans: Mapping[str, AgentPlan],
        policy: SwarmPolicy,
        kinds: Mapping[str, Kind] | None = None,
        refresh_tools: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.cfg = cfg
        self.plans = plans
        self.policy = policy
        taken = sorted(set(kinds or ()) & set(BUILT_IN_KINDS))
        if taken:
            raise ConfigError(f"call kinds {taken} are the kernel's own; name the kind otherwise")
        self.kinds: Mapping[str, Kind] = {**BUILT_IN_KINDS, **(kinds or {})}
        """Call kind -> how its calls are answered: the kernel's own (`baton.runtime.calls`,
        and its hand-on to the user's next need, `baton.runtime.pending`) and the topology's
        (declared in its blueprint), fixed when the runner is built."""
        self.parallel: Mapping[str, int] = {
            name: kind.parallel for name, kind in self.kinds.items() if kind.parallel
        }
        """Call kinds whose calls in one response run together -> how many at a time (a
        supervisor's `ask`); every other call runs in order."""
        self.fence: Callable[[str], Awaitable[None]] | None = None
        """Called with the session id before a commit to a shared store: raises
        `ConflictError` when this process no longer holds the session (its lease was taken
        over)."""
        self.fenced_save: Callable[[Checkpoint, list[KeptSnapshot]], Awaitable[None]] | None = None
        """Saves a running checkpoint to a shared store under this process's lease on its
        session (`Resumer.save`): renewed in the same write where the store can
        (`FencedCheckpoints`), else renewed first; `ConflictError` as `fence`."""
        self.entity_memo = EntityMemo()
        """What the entity guard found in recent user messages (a hand-off late in a long
        session reads every earlier message again)."""
        self.live: dict[str, LiveRun] = {}
        """Session id -> the run going on in this process (`team.cancel` stops it)."""
        self.refresh_tools = refresh_tools
        """Lists the agents' toolsets and compiles again the agents whose tools changed
        (set by a team whose agents have toolsets); awaited before every run or resume."""

    # ------------------------------------------------------------------ the holder loop
    async def run(
        self,
        message: str,
        session: SessionRecord,
        user_id: str | None,
        listener: Listener | None = None,
        start: Any = None,
        request_id: str | None = None,
        trace_id: str | None = None,
    ) -> RunResult:
        """Run one user message until it answers, escalates, fails or pauses. Never raises for
        model or tool misbehaviour. `start`: what a topology starts the run from; `request_id`:
        the request it answers (`RunState`); `trace_id`: the trace it joins (a new one if
        None)."""
        run = RunState(
            session,
            message,
            user_id or session.user_id,
            listener=held_stream(self.cfg, listener),
            start=start,
            request_id=request_id,
        )
        if trace_id is not None:
            run.trace_id = trace_id
        self.emit(run, RunStarted(**run.base(None), message=message, user_id=run.user_id))
        run.user_msg_id = run.record(Message(role="user", content=message, run_id=run.run_id)).id
        received(self, run)  # withheld from the transcript until the input guardrails pass it
        return await self.settle(run, self.start(run))

    async def start(self, run: RunState) -> RunResult:
        """Read the session's transcript, pick the first holder, and drive the run."""
        found = await self.load_earlier(run)
        run.last_reply = next(
            (m.content for m in reversed(run.earlier) if m.role == "assistant" and m.content), None
        )
        first = await self.first_turn(run)
        if first is None:  # the router sent the request straight to the human queue
            return await self.finish(run, ToHuman(run.card.reasons[0] if run.card else ""))
        run.turn = first
        if len(found) > WINDOW:  # messages left the window: the session's notes take them in
            plan = self.plans[first.agent]
            await roll(self, run, found, self.cfg.summariser or plan.model)
        return await self.drive(run)

    async def load_earlier(self, run: RunState) -> list[Message]:
        """The session's recent transcript, its last `WINDOW` messages (a new session has
        none; one whose last run ended with nobody holding the baton, an escalation, has one:
        it is routed again with it). Returns what was read (`READ` at most): also the messages
        that may have just left the window (`baton.runtime.rolling`)."""
        if run.session.holder is not None or run.saved_messages or run.session.version:
            found = await self.cfg.store.get_messages(run.session.session_id, limit=READ)
            # a paused run committed its own messages so far: they are `messages`, not earlier
            found = [m for m in found if m.run_id != run.run_id]
            run.earlier = found[-WINDOW:]
            return found
        return []

    async def resume(
        self, run: RunState, listener: Listener | None = None, why: str = ""
    ) -> RunResult:
        """Continue a run from its checkpoint (after a crash, or once its approval is decided)."""
        run.listener = held_stream(self.cfg, listener, run)
        agent = run.turn.agent if run.turn is not None else None
        self.emit(run, RunResumed(**run.base(agent), checkpoint=run.seq, reason=why))
        return await self.settle(run, self.drive(run))

    async def expired(self, run: RunState) -> RunResult:
        """A run whose approval timed out: its waiting calls are answered as not executed and
        the run escalates like any guard trip."""
        turn, card = run.turn, run.approval
        assert turn is not None and card is not None
        detail = (
            f"approval_timeout: approval {card.id} for {card.tool or card.target} got no "
            f"decision within {card.timeout_s:g}s"
        )
        for pending in turn.open_calls():
            answer(run, turn, pending, error_content("not executed: the approval timed out"))
        turn.calls, run.approval = [], None
        self.trip(run, turn.agent, "approval_timeout", detail)
        return await self.settle(run, self.drive(run, self.turn_done(run, turn, Tripped(detail))))

    async def cancel(self, run: RunState, reason: str) -> RunResult:
        """End a run that is not going on (crashed, or waiting for approval) as cancelled."""
        return await self.settle(run, self.cancelled(run, reason))

    # ------------------------------------------------------------------ how a run stops
    async def settle(self, run: RunState, work: Awaitable[RunResult]) -> RunResult:
        """Await the run's loops; whatever stops them ends in a recorded state.

        A cancellation is committed as `cancelled` (`baton.runtime.cancel`) and raised on,
        unless `team.cancel` asked for it (the run then returns its result). A store failure
        says how to continue without repeating a side effect. Any other unexpected error ends
        the run `failed`, with what it did so far committed.
        """
        sid = run.session.session_id
        live = self.live[sid] = LiveRun()
        result: RunResult | None = None
        try:
            result = await work
            return result
        except asyncio.CancelledError:
            asked = live.reason
            if live.released and run.ended is None:  # left unfinished at its last checkpoint
                if consume_cancellation():
                    raise RunReleased(
                        f"run {run.run_id} of session {sid} was released at checkpoint {run.seq} "
                        "before it finished; resume it (team.resume, or team.run with the same "
                        "request_id) in this process or another"
                    ) from None
                raise
            if run.ended is not None:  # it finished (and committed) as the cancellation landed
                result = run.ended
            else:
                result = await self.cancelled(run, asked or CALLER)
            if asked is None or not consume_cancellation():
                raise
            return result
        except ConflictError:
            raise
        except StoreError as exc:
            raise StoreError(self.stopped_by_store(run, exc)) from exc
        except BatonError:
            raise
        except Exception as exc:  # a bug in a plug-in or in Baton: the run fails, recorded
            self.cfg.log.exception("run %s failed unexpectedly", run.run_id)
            if run.ended is not None:
                raise
            answer_open_calls(run, "failed")
            result = await self.finish(run, Failed(f"internal error: {type(exc).__name__}: {exc}"))
            return result
        finally:
            if self.live.get(sid) is live:
                del self.live[sid]
            live.end(result)

    async def cancelled(self, run: RunState, reason: str) -> RunResult:
        """Record the run as cancelled: its open calls answered, what it did committed with a
        `cancelled` checkpoint (resumable until the session's next message)."""
        answer_open_calls(run, "was cancelled")
        return await self.finish(run, Cancelled(reason))

    def stopped_by_store(self, run: RunState, exc: StoreError) -> str:
        """What a store failure mid-run means for the run, and how to go on safely."""
        sid = run.session.session_id
        if run.seq == 0:
            return (
                f"{exc}. Nothing of run {run.run_id} was saved and none of its tools ran: "
                "it is safe to send the message again once the store works"
            )
        return (
            f"{exc}. Run {run.run_id} stopped; its checkpoint {run.seq} is saved: "
            f"team.resume({sid!r}) (or `baton resume {sid}`) continues it once the store works, "
            "and calls made after that checkpoint run again under the same idempotency keys. "
            "Do not send the message again: that would start the request over"
        )

    async def drive(self, run: RunState, outcome: TurnOutcome | None = None) -> RunResult:
        """Turns until one ends in something other than a hand-off (`outcome`: how the
        current turn already ended). An answer while the user's other needs wait hands the
        baton on to the next one (`pending.hand_on`)."""
        while True:
            if outcome is None:
                outcome = await self.turn(run)
            if isinstance(outcome, Answered) and run.card is None:
                # the user's other needs, if any wait: the baton passes on (`pending`)
                outcome = await hand_on(self, run, outcome)
            # the order of the cases matters: a trip before the escalation escalates; any
            # ending of the fallback agent's turn but an answer (or a pause) goes to the queue
            match outcome:
                case HandedOff(payload):
                    run.turn = self.receiver_turn(run, payload)
                case Tripped(reason) | ToHuman(reason) if run.card is None:
                    fallback = await escalate(self, run, reason, isinstance(outcome, ToHuman))
                    if fallback is None:
                        return await self.finish(run, outcome)
                    run.turn = fallback
                case Tripped() | ToHuman() | Failed() if run.card is not None:
                    # the fallback agent could not finish
                    await to_queue(self, run, outcome.reason)
                    return await self.finish(run, Tripped(outcome.reason))
                case Answered():  # the output guardrails read the reply before the user does
                    return await self.finish(run, await screen_reply(self, run, outcome))
                case _:
                    return await self.finish(run, outcome)
            outcome = None
            await self.checkpoint(run)

    # ------------------------------------------------------------------ the turn loop
    async def turn(self, run: RunState) -> TurnOutcome:
        """The holder's turn: model calls and their tool calls until it answers, hands off, or
        the turn ends (a guard, a failure, a pause)."""
        turn = run.turn
        assert turn is not None
        plan = self.plans[turn.agent]
        if turn.fallback:
            plan = plan.fallback
        if not turn.started:
            blocked = await arrive(self, run, turn)  # input guardrails new to the run check first
            if blocked is not None:
                return self.turn_done(run, turn, blocked)
            memory = self.cfg.memory
            recalled = None
            if memory is not None and plan.conductor is None:
                recalled = await memory.recall(run, turn.agent)
            self.start_turn(run, turn, plan, recalled)
        while True:
            if turn.calls:  # the latest response's calls (a resumed turn may hold some answered)
                ended = await run_calls(self, run, plan, turn)
                if isinstance(ended, Paused):
                    return ended
                if ended is not None:
                    return self.turn_done(run, turn, ended)
            conducted = plan.conductor
            reply: Reply | Failed | Tripped | ToHuman
            if conducted is None:
                if turn.iteration >= plan.agent.max_iterations:
                    detail = (
                        f"max_iterations: {turn.agent} made {plan.agent.max_iterations} model "
                        "calls without answering"
                    )
                    self.trip(run, turn.agent, "max_iterations", detail)
                    return self.turn_done(run, turn, Tripped(detail))
                reply = await ask(self, run, plan, turn)
            else:
                if turn.iteration >= conducted.rounds:
                    detail = (
                        f"max_rounds: the conductor {turn.agent} used its round budget "
                        f"({conducted.rounds} rounds) without answering"
                    )
                    self.trip(run, turn.agent, "max_rounds", detail)
                    return self.turn_done(run, turn, Tripped(detail))
                reply = await conducted.decide(self, run, turn)
            turn.iteration += 1
            if isinstance(reply, (Failed, Tripped, ToHuman)):  # (ToHuman: a conductor's)
                return self.turn_done(run, turn, reply)
            text, calls = reply
            if not calls:
                answer = text or ""
                run.record(
                    Message(role="assistant", content=answer, agent=turn.agent, run_id=run.run_id)
                )
                run.last_reply = answer
                return self.turn_done(run, turn, Answered(answer))
            classify(run, turn, text, calls)
            await self.checkpoint(run)

    def start_turn(
        self, run: RunState, turn: TurnState, plan: AgentPlan, recalled: str | None = None
    ) -> None:
        """Build the holder's view (fixed for the turn) and announce the turn. `recalled`: what
        the team's memory recalled for it (quoted data for the system prompt)."""
        agent = plan.agent
        policy = turn.policy
        output_note = plan.output.note if plan.output is not None else None
        system = Message(
            role="system",
            content=system_prompt(
                agent,
                turn.incoming,
                run.session.state,
                output_note,
                self.needs(run),
                self.cfg.redactor,
                self.earlier_note(run, turn, plan),
                recalled,
                run.cited_in,
            ),
            agent=agent.name,
        )
        turn.view = build_view(agent, system, run.history, turn.since, scratch=(), policy=policy)
        turn.context_tokens = sum(estimate_tokens(m.content) for m in turn.view)
        turn.started = True
        self.emit(
            run,
            AgentStarted(
                **run.base(agent.name),
                reason=turn.reason,
                policy=str(policy) if policy is not None else None,
                context_tokens=turn.context_tokens,
                conductor=plan.conductor is not None,
            ),
        )

    @staticmethod
    def earlier_note(run: RunState, turn: TurnState, plan: AgentPlan) -> str | None:
        """What the holder's view says of the session's turns before the loaded window, with
        the session's notes of them (`rolling`): none for a worker's sub-run."""
        if run.parent is not None:
            return None
        fetchable = plan.agent.history_tool and not turn.fallback and plan.conductor is None
        return note(run.session.control, fetchable)

    @staticmethod
    def needs(run: RunState) -> list[dict[str, str]]:
        """The user's needs the holder must leave to others (`pending`): none for a worker's
        sub-run."""
        return pending_needs(run.session) if run.parent is None else []

    def turn_done(self, run: RunState, turn: TurnState, outcome: TurnOutcome) -> TurnOutcome:
        """Record what the receiver's turn after a hand-off cost; pass the outcome on."""
        incoming = turn.incoming
        if turn.accounted:  # (a paused hand-on to the user's next need ends its turn again)
            return outcome
        turn.accounted = True
        if incoming is not None and turn.policy is not None and incoming.trace_id == run.trace_id:
            run.handoff_usage.append(
                HandoffUsage(
                    hop=incoming.hop,
                    source=incoming.source,
                    target=turn.agent,
                    policy=str(turn.policy),
                    context_tokens=turn.context_tokens,
                    usage=turn.usage,
                )
            )
        return outcome

    async def first_turn(self, run: RunState) -> TurnState | None:
        """The session's holder continues; else the entry agent, or the router's pick. None:
        the router sent the request to the human queue (the card is recorded)."""
        session, policy = run.session, self.policy
        if session.holder == HUMAN:  # a person answered the last ticket and kept the baton
            await escalate(self, run, "the conversation is with a person (ticket answered)", True)
            return None
        holder = session.holder
        if holder is not None and holder in self.plans:
            self.emit(run, RouteDecided(**run.base(None), target=holder, tier="session"))
            return self.new_turn(
                run, holder, session.incoming, session.holder_since, "continues the session"
            )
        if policy.router is None:
            assert policy.entry is not None  # a swarm has an entry agent or a router
            self.emit(run, RouteDecided(**run.base(None), target=policy.entry, tier="entry"))
            return self.new_turn(run, policy.entry, None, run.user_msg_id, "entry agent")
        context = {"state": dict(session.state)}
        earlier = run.earlier  # the conversation so far: the judge reads its last turns
        needs: list[Intent] = []
        if policy.multi_intent:  # a request with several needs: the first one's route
            split = await split_intents(policy.router, run.message, earlier, context)
            decision, needs = split.decision, split.pending
        else:
            decision = await policy.router.route(run.message, earlier, context)
        self.emit(
            run,
            RouteDecided(
                **run.base(None),
                target=decision.target,
                tier=decision.tier,
                score=decision.score,
                candidates=tuple(decision.candidates),
                latency_ms=decision.latency_ms,
                verdicts=tuple([v.summary() for v in decision.verdicts]),
            ),
        )
        if decision.target in self.plans:
            reason = f"routed by the {decision.tier} tier"
            routed = run.events[-1].id
            # a new conversation's needs replace any an earlier one left; only routes the
            # router has (and the team runs) become needs
            routes = {route.name for route in policy.router.routes}
            kept = [n.to_slot() for n in needs if n.route in routes and n.route in self.plans]
            set_pending(self, run, kept, None, "router", routed)
            return self.new_turn(run, decision.target, None, run.user_msg_id, reason)
        await escalate(self, run, f"no agent owns the request (router: {decision.tier})", True)
        return None

    def new_turn(
        self,
        run: RunState,
        agent: str,
        incoming: HandoffPayload | None,
        since: str | None,
        reason: str,
    ) -> TurnState:
        """The next turn of the run, held by `agent`."""
        run.path.append(agent)
        run.turns += 1
        policy = self.policy_for(incoming, agent) if incoming is not None else None
        return TurnState(
            index=run.turns - 1,
            agent=agent,
            incoming=incoming,
            since=since,
            reason=reason,
            policy=policy,
        )

    def receiver_turn(self, run: RunState, payload: HandoffPayload) -> TurnState:
        """The receiver's turn after an accepted hand-off (the path already names it)."""
        run.turns += 1
        return TurnState(
            index=run.turns - 1,
            agent=payload.target,
            incoming=payload,
            since=run.user_msg_id,
            reason=payload.reason,
            policy=self.policy_for(payload, payload.target),
        )

    def policy_for(self, incoming: HandoffPayload, receiver: str) -> ContextPolicy:
        """The source's per-target choice, else the receiver's own policy."""
        source = self.plans.get(incoming.source)
        if source is not None:
            chosen = source.agent.handoff_context.get(receiver)
            if chosen is not None:
                return chosen
        plan = self.plans.get(receiver)
        return plan.agent.context if plan is not None else STRUCTURED

    # ------------------------------------------------------------------ the end of a run
    async def finish(self, run: RunState, outcome: TurnOutcome) -> RunResult:
        """Save the session, the run's messages and events (or, paused, the checkpoint)."""
        if isinstance(outcome, Paused):
            await self.commit_so_far(run, paused=True)
            return self.result(run, self.paused_status(run), None, None)
        session, turn = run.session, run.turn
        status: RunStatus = "completed"
        output: str | None = None
        error: str | None = None
        holder = turn.agent if turn is not None else None
        incoming = turn.incoming if turn is not None else None
        since = turn.since if turn is not None else run.user_msg_id
        match outcome:
            case Answered(text) | Cleared(text) if run.card is not None:  # the fallback answered
                status, output, since = "escalated", text, run.user_msg_id
            case Answered(text):
                output = self.answers(run, text)
            case Cleared(text):  # the whole reply, as the output guardrails let it through
                output = text
            case Blocked(message=message):
                status, output, error = "blocked", message, outcome.detail
            case Failed(reason):
                status, error = "failed", reason
            case Cancelled(reason):
                status, error = "cancelled", reason
            case _:  # the human queue holds the card
                # (after the user's first need was answered, they read that answer too)
                status, output = "escalated", self.policy.escalation_message
                # a conversation a person holds stays with the person
                stays = session.holder == HUMAN and not run.path
                holder = HUMAN if stays else self.policy.entry
                incoming, since = None, run.user_msg_id
        session.holder = holder
        session.holder_since = since
        session.incoming = incoming
        session.user_id = run.user_id
        session.updated_at = time.time()
        if run.request_id is not None:  # answered: committed with the run, never run again
            answered = session.requests
            answered[run.request_id] = run.run_id
            while len(answered) > MAX_REQUESTS:
                del answered[next(iter(answered))]
        self.emit(
            run,
            RunFinished(
                **run.base(holder),
                status=status,
                output=output,
                path=list(run.path),
                usage=dict(run.usage),
                latency_ms=(time.time() - run.started_at) * 1000,
                error=error,
                handoff_usage=list(run.handoff_usage),
            ),
        )
        messages, events = run.messages[run.saved_messages :], run.events[run.saved_events :]
        # a cancelled run stays resumable (its turn goes on from here) until the next message
        kept = (
            self.resumable(run, "cancelled") if status == "cancelled" and turn is not None else None
        )
        version = session.version
        try:
            await self.commit(run, messages, events, run_id=run.run_id, checkpoint=kept)
        except ConflictError:
            # another writer committed the session since this run read it: this run gives up
            # cleanly (nothing of it is stored) and leaves no checkpoint that would conflict
            # again on every resume; the caller may run the message again on the fresh state
            await self.cfg.store.delete_checkpoint(session.session_id, run.run_id)
            raise
        except asyncio.CancelledError:
            if session.version != version:  # committed all the same: the run is over
                run.turn = None
                run.ended = self.result(run, status, output, error)
            raise
        run.turn = None
        result = run.ended = self.result(run, status, output, error)
        if self.cfg.memory is not None and run.parent is None:
            await self.cfg.memory.after_run(self, run, status)
        return result

    @staticmethod
    def answers(run: RunState, text: str) -> str:
        """The run's output: the holder's answer `text` (the run's last reply), after the
        answers given before each hand-on to the user's other needs (`pending`), so the user
        reads every one."""
        said = [
            m.content
            for m in run.messages[:-1]
            if m.role == "assistant" and not m.tool_calls and m.content
        ]
        return "\n\n".join([*said, text]) if said else text

    def result(
        self, run: RunState, status: RunStatus, output: str | None, error: str | None
    ) -> RunResult:
        """The `RunResult` of a finished or paused run."""
        paused = status in ("awaiting_approval", "interrupted")
        return RunResult(
            status=status,
            output=output,
            path=run.path,
            handoffs=run.handoffs,
            citations=run.citations,
            usage=run.usage,
            usage_by_handoff=run.handoff_usage,
            trace_id=run.trace_id,
            session_id=run.session.session_id,
            run_id=run.run_id,
            events=run.events,
            escalation=run.card,
            approval=run.approval,
            interrupt=run.interrupt,
            holder=run.turn.agent if paused and run.turn is not None else run.session.holder,
            state=self.shown_state(run),
            provenance=dict(provenance(run.session)),
            error=error,
            final=self.final_value(run) if status == "completed" else None,
        )

    def shown_state(self, run: RunState) -> dict[str, Any]:
        """The session's slots as a result shows them: secrets masked (the live run keeps the
        values, for the tools that need them)."""
        red = self.cfg.redactor
        state = run.session.state
        return dict(state) if red is None else dict(red.redact_value(state))

    def final_value(self, run: RunState) -> Any:
        """The typed answer of a run whose holder answered with an `output_type`, rebuilt
        from the JSON data the run's state keeps (so a resumed run returns it too)."""
        plan = self.plans.get(run.session.holder or "")
        if run.final is None or plan is None or plan.output is None:
            return None
        return plan.output.rebuild(run.final)

    # ------------------------------------------------------------------ recording
    async def checkpoint(self, run: RunState) -> None:
        """Save the run's state after a step (the latest checkpoint of its session).

        The store reads the state before this returns: a persistent store serialises it, a
        store in process memory keeps the live state itself (nothing is copied). That is
        sound because the kernel changes the state only between steps, after the awaits of a
        step (a call's result, a hand-off's acceptance); a step interrupted at an await has
        changed nothing that matters, and runs again on resume.
        """
        run = run.root  # a sub-run's progress is saved with the run that delegated it
        store = self.cfg.store
        if store.shared and _uncommitted(run) >= COMMIT_EVERY:
            await self._commit_long_run(run)
            return
        run.seq += 1
        snapshots, run.snapshots_due = run.snapshots_due, []
        try:
            checkpoint = self._checkpoint(run, "running", run)
            if self.fenced_save is not None and store.shared:
                # one write: renews this process's lease, saves the checkpoint and snapshots
                await self.fenced_save(checkpoint, snapshots)
            else:
                for kept in snapshots:  # (a graph's store keeps snapshots: checked at compile)
                    await cast(Snapshots, store).put_snapshot(kept.snapshot, kept.keep_last)
                await store.put_checkpoint(checkpoint)
        except StoreError:
            run.seq -= 1  # not saved: `seq` counts what the store holds
            run.snapshots_due = snapshots + run.snapshots_due
            raise

    async def _commit_long_run(self, run: RunState) -> None:
        """A long run's checkpoint as a commit of what it did so far (`COMMIT_EVERY`): its
        later checkpoints name those messages and events instead of repeating them, so a
        checkpoint grows with the steps since, not with the run. The step's graph snapshots
        are saved first (a resumed run saves them again, under the same ids)."""
        store = self.cfg.store
        while run.snapshots_due:
            kept = run.snapshots_due[0]
            await cast(Snapshots, store).put_snapshot(kept.snapshot, kept.keep_last)
            run.snapshots_due.pop(0)
        await self.commit_so_far(run, paused=False)

    async def commit_so_far(self, run: RunState, paused: bool) -> None:
        """Commit what the run did so far (its messages and events: a paused run shows in
        the transcript, the trace and the audit chain) together with its checkpoint, in one
        transaction. For a pause, and for a person's decision before its call runs."""
        if self.fence is not None and self.cfg.store.shared:
            await self.fence(run.session.session_id)
        messages, events = run.messages[run.saved_messages :], run.events[run.saved_events :]
        saved = (run.saved_messages, run.saved_events, run.seq)
        kept = self.resumable(run, self.paused_status(run) if paused else "running")
        try:
            await self.commit(run, messages, events, checkpoint=kept)
        except BaseException:
            run.saved_messages, run.saved_events, run.seq = saved
            raise

    async def commit(
        self,
        run: RunState,
        messages: list[Message],
        events: list[Event],
        *,
        run_id: str | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        """`Store.commit_run` of the run's session, with the transcript and the slots masked
        as the store keeps them (`KernelSettings.at_rest`; the run goes on with the real
        text, and a checkpoint keeps it for a resumed run)."""
        mask, session = self.cfg.at_rest, run.session
        if mask is None:
            await self.cfg.store.commit_run(
                session, messages, events, run_id=run_id, checkpoint=checkpoint
            )
            return
        stored = masked_session(mask, session)
        try:
            await self.cfg.store.commit_run(
                stored,
                masked_messages(mask, messages),
                events,
                run_id=run_id,
                checkpoint=checkpoint,
            )
        finally:
            session.version = stored.version  # the store's verdict, committed or not

    @staticmethod
    def paused_status(run: RunState) -> Literal["awaiting_approval", "interrupted"]:
        """What a paused run waits for: a person's answer to an interrupt, or a decision."""
        return "interrupted" if run.interrupt is not None else "awaiting_approval"

    def resumable(self, run: RunState, status: CheckpointStatus) -> Checkpoint:
        """The checkpoint to commit with the run's messages and events so far: a copy of the
        state as it will be once that commit succeeds (everything saved, the session's next
        version)."""
        run.seq += 1
        run.saved_messages, run.saved_events = len(run.messages), len(run.events)
        state = run.snapshot()
        state.session.version += 1  # what the store holds once this commit succeeds
        return self._checkpoint(run, status, state)

    def _checkpoint(self, run: RunState, status: CheckpointStatus, state: RunState) -> Checkpoint:
        """The checkpoint of `run` (its agent, and the approval it waits for, in `meta`), its
        state masked for a persistent store that cannot encrypt it (`at_rest`)."""
        meta: dict[str, Any] = {"agent": run.turn.agent if run.turn is not None else None}
        if run.request_id is not None:
            meta["request_id"] = run.request_id
        if run.approval is not None:
            meta["approval"] = run.approval.model_dump(mode="json")
        if run.interrupt is not None:
            meta["interrupt"] = run.interrupt.model_dump(mode="json")
        saved = checkpoint_state(self.cfg.at_rest, self.cfg.store, state, self.plans)
        # the committed transcript is masked at rest: a checkpoint names it only when it holds
        # the same text (no masking, or masked alike); a sealed one keeps the real text whole
        saved.committed_as_stored = self.cfg.at_rest is None or saved is not state
        return Checkpoint(
            session_id=run.session.session_id,
            run_id=run.run_id,
            seq=run.seq,
            status=status,
            state=saved,
            meta=meta,
        )

    def emit(self, run: RunState, event: Event, redacted: bool = False) -> None:
        """Record `event` and send it to the sinks (and the run's listener), redacted first
        unless `redacted` says its free text already went through the redactor."""
        redactor = self.cfg.redactor
        if redactor is not None and not redacted:
            event = redactor.redact_event(event)
        run.events.append(event)
        for sink in self.cfg.sinks:
            try:
                sink.emit(event)
            except Exception:  # a broken sink must never break a run; say so once per run
                if not run.sink_failed:
                    run.sink_failed = True
                    self.cfg.log.exception("event sink %r failed; the run goes on", sink)
        if run.listener is not None:
            run.listener(event)

    def trip(self, run: RunState, agent: str, guard: str, detail: str) -> None:
        """Record a guard that stopped something."""
        self.emit(run, GuardTripped(**run.base(agent), guard=guard, detail=detail))

    def set_state(
        self,
        run: RunState,
        slots: dict[str, Any],
        agent: str,
        source: str,
        cause: str | None,
        tool: str | None = None,
        origin: SlotSource | dict[str, SlotSource] | None = None,
    ) -> None:
        """Write slots that change the session state and record who set them, from what
        (`source`: the step) and where each value came from (`origin`: a `SlotSource` for all,
        or per slot; a slot without one is not verified). A slot named like a kernel control
        slot is refused: business state never passes for control state."""
        state = run.session.state
        changed = {k: v for k, v in slots.items() if k not in state or state[k] != v}
        if not changed:
            return
        if not RESERVED.isdisjoint(changed):
            taken = sorted(RESERVED.intersection(changed))
            self.trip(
                run,
                agent,
                "reserved_slot",
                f"dropped from the {source}'s state: {', '.join(taken)} (the kernel's own "
                "control slots; nothing else may write them)",
            )
            changed = {k: v for k, v in changed.items() if k not in RESERVED}
            if not changed:
                return
        state.update(changed)
        if isinstance(origin, str):
            record_sources(run.session, dict.fromkeys(changed, origin))
        else:
            record_sources(run.session, {k: (origin or {}).get(k) for k in changed})
        self.emit(
            run,
            StateUpdated(**run.base(agent), slots=changed, source=source, tool=tool, cause=cause),
        )


COMMIT_EVERY = 64
"""Messages and events a running run holds uncommitted before its next checkpoint commits
them instead (on a store other processes reach, which serialises every checkpoint): a
checkpoint then repeats at most about this many records, however long the run."""


def _uncommitted(run: RunState) -> int:
    """Messages and events of the run not committed to its session yet."""
    return len(run.messages) - run.saved_messages + len(run.events) - run.saved_events
