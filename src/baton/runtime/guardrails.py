"""Guardrails in a run: the rules in force travel with the baton and only ever grow.

The set in force (`RunState.guardrails`, names, so a checkpoint keeps it) starts with the team's
rules and the first holder's own; every hand-off adds the rules of the edge it crosses
(`crossed`, from `handoffs.recorded`) and the receiver's own (`arrive`). A receiver can drop
nothing an earlier holder or edge brought. A run that continues the session with its holder
starts with the rules in force when the session's last run ended (the session's control slot
`guardrails`, `baton.runtime.control`), and those the baton carried to it: every holder and
edge on the path of the hand-off that gave it the baton (`SessionRecord.incoming`). So a rule
an edge brought in one message still holds two messages later, after more hand-offs.

When the baton arrives, every input rule in force that has not checked the user's message yet
checks it, before the holder's first model call (`arrive`). When the run answers, every output
rule in force checks the reply as the user will read it, in the order the rules joined, each
one reading what the one before let through or rewrote (`screen_reply`). A block ends the run
`blocked` (`Blocked`): a `guardrail_tripped` event, the rule's message to the user, and the
transcript keeps neither the blocked user message (it is withheld, so no later view shows it)
nor the blocked reply. Under output rules a stream's `text_delta`s wait for the check
(`held_stream`).

The team's rules are compiled once (`rulebook`); one rule's verdict comes from `verdicts` (a
guard agent's call is a model call like any other: `model_called`, usage under the guard's
name, the run's budgets). A check that raises, times out or gives no verdict fails closed by
default (`Guardrail.on_error`). Sub-runs (a supervisor's workers) answer the lead, not the
user: rules do not apply there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from baton.core.events import GuardrailRewrote, GuardrailTripped, StateUpdated
from baton.core.messages import Message
from baton.core.text import clean_text
from baton.guardrails import Guardrail, Verdict
from baton.runtime.control import GUARDRAILS, PENDING
from baton.runtime.held_stream import HeldStream
from baton.runtime.outcomes import Answered, Blocked, Cleared
from baton.runtime.output import Typed
from baton.runtime.rulebook import DEFAULT_MESSAGE
from baton.runtime.state import RunState, TurnState
from baton.runtime.verdicts import judge

if TYPE_CHECKING:
    from baton.runtime.kernel import Kernel

WITHHELD = "[withheld: this message was blocked by guardrail {name!r}]"
"""What the stored transcript keeps of a user message an input rule blocked."""

UNCHECKED = "[withheld: this message was not checked by the guardrails]"
"""What it keeps of a user message of a run that stopped before the input rules read it."""


# ------------------------------------------------------------------ the set in force
def crossed(kernel: Kernel, run: RunState, source: str, target: str) -> None:
    """The baton crosses the edge source -> target: the edge's rules join the set in force."""
    book = kernel.cfg.guardrails
    if book is not None and run.parent is None:
        _join(run, book.edges.get((source, target), ()))


def received(kernel: Kernel, run: RunState) -> None:
    """The user's message, as the transcript keeps it until the input rules let it through
    (`arrive`): withheld, so that a run stopped before the check (cancelled, failed, sent to a
    person) never stores text no rule has read, for a later view to show to a model."""
    book = kernel.cfg.guardrails
    if book is not None and book.inputs and run.parent is None:
        _withhold(run, UNCHECKED)


def _join(run: RunState, names: Sequence[str]) -> None:
    grew = False
    for name in names:
        if name not in run.guardrails:
            run.guardrails.append(name)
            grew = True
    if grew:  # kept with the session (committed with the run): the next message starts here
        run.session.control[GUARDRAILS] = list(run.guardrails)


async def arrive(kernel: Kernel, run: RunState, turn: TurnState) -> Blocked | None:
    """The holder takes the baton: the team's rules, those the baton carried and its own join
    the set in force, and every input rule in force that has not checked the user's message
    yet checks it now. None: the holder may answer; else how the run ends."""
    book = kernel.cfg.guardrails
    if run.parent is not None or (book is None and not run.guardrails):
        return None
    kept = run.session.control.get(GUARDRAILS)
    if turn.index == 0 and turn.agent == run.session.holder and isinstance(kept, list):
        _join(run, [str(name) for name in kept])  # the baton stayed: so do its rules
    if book is not None:
        _join(run, book.team)
        if turn.incoming is not None:
            _join(run, book.carried(turn.incoming, turn.agent))
        _join(run, book.own.get(turn.agent, ()))
    for name in list(run.guardrails):
        if name in run.screened:
            continue
        rule = book.rules.get(name) if book is not None else None
        if rule is None:
            return _unknown(kernel, run, turn.agent, name, "input")
        if rule.stage != "input":
            continue
        verdict = await _decide(kernel, run, rule, run.message, turn.agent)
        if isinstance(verdict, Blocked):
            return verdict
        run.screened.append(name)  # after the check: a run resumed mid-check checks again
    _reveal(run)
    return None


async def screen_reply(
    kernel: Kernel, run: RunState, outcome: Answered
) -> Answered | Cleared | Blocked:
    """The output rules in force check the reply as the user will read it (every answer of a
    run that served several needs, together). `Cleared` with the text the user reads, or the
    `Blocked` ending; `outcome` itself when no output rule is in force."""
    book = kernel.cfg.guardrails
    turn = run.turn
    assert turn is not None
    if run.parent is not None or (book is None and not run.guardrails):
        return outcome
    rules: list[Guardrail] = []
    for name in run.guardrails:
        rule = book.rules.get(name) if book is not None else None
        if rule is None:
            return _unknown(kernel, run, turn.agent, name, "output")
        if rule.stage == "output":
            rules.append(rule)
    held = run.listener if isinstance(run.listener, HeldStream) else None
    if not rules:
        if held is not None:
            held.release(run, turn.agent, None)
        return outcome
    several = run.card is None and _served_several(run)
    shown = kernel.answers(run, outcome.text) if several else outcome.text
    text = shown
    try:
        for rule in rules:
            verdict = await _decide(kernel, run, rule, text, turn.agent)
            if isinstance(verdict, Blocked):
                return verdict
            if verdict.action == "rewrite" and verdict.text is not None:
                text = clean_text(verdict.text)
                kernel.emit(
                    run,
                    GuardrailRewrote(
                        **run.base(turn.agent),
                        guardrail=rule.name,
                        reason=clean_text(verdict.reason),
                    ),
                )
    except BaseException:  # cancelled mid-check: the reply no rule cleared is not kept
        _drop_answer(run)
        raise
    if text != shown:
        _replace_answers(run, text, turn.agent, every=several)
        run.last_reply = text
        _retype(kernel, run, turn.agent, text)
    if held is not None:
        held.release(run, turn.agent, text)
    return Cleared(text)


# ------------------------------------------------------------------ one rule's verdict
async def _decide(
    kernel: Kernel, run: RunState, rule: Guardrail, text: str, agent: str
) -> Verdict | Blocked:
    """The rule's verdict, with a failed check turned into a block (fail closed) or, by
    `on_error="allow"`, into an allow that the trace records; a block ends the run here."""
    out = await judge(kernel, run, rule, text, agent)
    what = "the user's message" if rule.stage == "input" else "the reply"
    if isinstance(out, str):
        if rule.on_error == "allow":
            kernel.trip(
                run,
                agent,
                "guardrail_error",
                f"guardrail {rule.name!r} could not check {what}: {out}; let through "
                "(on_error='allow')",
            )
            return Verdict.allow()
        return _blocked(kernel, run, agent, rule, f"the check failed: {out}", failed=True)
    if out.action == "block":
        return _blocked(kernel, run, agent, rule, clean_text(out.reason) or "blocked by the rule")
    return out


# ------------------------------------------------------------------ a blocked run
def _blocked(
    kernel: Kernel, run: RunState, agent: str, rule: Guardrail, reason: str, failed: bool = False
) -> Blocked:
    book = kernel.cfg.guardrails
    message = rule.message or (book.message if book is not None else DEFAULT_MESSAGE)
    return _block(kernel, run, agent, rule.name, rule.stage, reason, message, failed)


def _unknown(kernel: Kernel, run: RunState, agent: str, name: str, stage: str) -> Blocked:
    """A rule in force that the team no longer has (it changed since the run began)."""
    book = kernel.cfg.guardrails
    reason = (
        f"guardrail {name!r} is in force for this run but the team has no rule of that name "
        "(the team changed since the run began); the run is blocked rather than going on "
        "unchecked: add the rule back, or start a new run"
    )
    message = book.message if book is not None else DEFAULT_MESSAGE
    return _block(kernel, run, agent, name, stage, reason, message, True)


def _block(
    kernel: Kernel,
    run: RunState,
    agent: str,
    name: str,
    stage: str,
    reason: str,
    message: str,
    failed: bool,
) -> Blocked:
    """Record the trip; the transcript keeps the message the user reads in place of every
    reply of this run, and withholds the user's message an input rule blocked."""
    message = clean_text(message)  # a configured text too must be storable
    kernel.emit(
        run,
        GuardrailTripped(
            **run.base(agent), guardrail=name, stage=stage, reason=reason, failed=failed
        ),
    )
    if stage == "input":
        _withhold(run, WITHHELD.format(name=name))
        _drop_needs(kernel, run, agent)
    _replace_answers(run, message, agent, every=True)
    run.last_reply, run.final = message, None
    return Blocked(name, stage, reason, message)


def _withhold(run: RunState, placeholder: str) -> None:
    """The user message as the transcript keeps it, withheld: no later view (a `recent` or
    `full` policy, the router's judge) shows a blocked or unchecked text to a model."""
    for i in range(run.saved_messages, len(run.messages)):
        m = run.messages[i]
        if m.id == run.user_msg_id:
            run.messages[i] = replace(m, content=placeholder)
            return


def _reveal(run: RunState) -> None:
    """The input rules in force let the message through: the holder and the transcript get
    it (a part already committed withheld, by a cancelled run resumed since, stays so)."""
    for i, m in enumerate(run.messages):
        if m.id == run.user_msg_id:
            if m.content == UNCHECKED:
                run.messages[i] = replace(m, content=run.message)
            return


def _drop_answer(run: RunState) -> None:
    """Forget the holder's unchecked answer: a resumed run asks it again, and checks that."""
    if len(run.messages) > run.saved_messages and _is_answer(run.messages[-1]):
        del run.messages[-1]


def _drop_needs(kernel: Kernel, run: RunState, agent: str) -> None:
    """The other needs the router found in a blocked message are dropped with it."""
    from baton.runtime.pending import set_pending  # pending imports the hand-off steps

    if PENDING not in run.session.control:
        return
    if any(
        isinstance(e, StateUpdated) and e.run_id == run.run_id and e.source == "router"
        for e in run.events
    ):
        set_pending(kernel, run, [], agent, "guardrail")


def _served_several(run: RunState) -> bool:
    """The run handed the baton on to the user's other needs (`Runner.answers` joins)."""
    from baton.runtime.pending import REASON  # pending imports the hand-off steps

    return any([p.reason == REASON for p in run.handoffs])


def _is_answer(message: Message) -> bool:
    return message.role == "assistant" and not message.tool_calls and bool(message.content)


def _replace_answers(run: RunState, text: str, agent: str, every: bool) -> None:
    """The run's final reply in the transcript becomes `text` (`every`: each earlier answer of
    the run not committed yet is dropped, `text` standing for all of them)."""
    parts = [i for i in range(run.saved_messages, len(run.messages)) if _is_answer(run.messages[i])]
    if not every:
        parts = parts[-1:]
    if not parts:
        run.record(Message(role="assistant", content=text, agent=agent, run_id=run.run_id))
        return
    last = parts[-1]
    run.messages[last] = replace(run.messages[last], content=text)
    for i in reversed(parts[:-1]):
        del run.messages[i]


def _retype(kernel: Kernel, run: RunState, agent: str, text: str) -> None:
    """A typed answer that was rewritten: its value is the rewritten JSON's (None when that no
    longer validates), never the value before the rewrite."""
    plan = kernel.plans.get(agent)
    if run.final is None or plan is None or plan.output is None:
        return
    typed = plan.output.check(text)
    run.final = typed.data if isinstance(typed, Typed) else None
