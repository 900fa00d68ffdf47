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
def crossed(k: Kernel, r: RunState, source: str, target: str) -> None:
    """The baton crosses the edge source -> target: the edge's rules join the set in force."""
    book = k.cfg.guardrails
    if book is not None and r.parent is None:
        _join(r, book.edges.get((source, target), ()))


def received(k: Kernel, r: RunState) -> None:
    """The user's message, as the transcript keeps it until the input rules let it through
    (`arrive`): withheld, so that a run stopped before the check (cancelled, failed, sent to a
    person) never stores text no rule has read, for a later view to show to a model."""
    book = k.cfg.guardrails
    if book is not None and book.inputs and r.parent is None:
        _withhold(r, UNCHECKED)


def _join(r: RunState, names: Sequence[str]) -> None:
    grew = False
    for name in names:
        if name not in r.guardrails:
            r.guardrails.append(name)
            grew = True
    if grew:  # kept with the session (committed with the run): the next message starts here
        r.session.control[GUARDRAILS] = list(r.guardrails)


async def arrive(k: Kernel, r: RunState, t: TurnState) -> Blocked | None:
    """The holder takes the baton: the team's rules, those the baton carried and its own join
    the set in force, and every input rule in force that has not checked the user's message
    yet checks it now. None: the holder may answer; else how the run ends."""
    book = k.cfg.guardrails
    if r.parent is not None or (book is None and not r.guardrails):
        return None
    kept = r.session.control.get(GUARDRAILS)
    if t.index == 0 and t.agent == r.session.holder and isinstance(kept, list):
        _join(r, [str(name) for name in kept])  # the baton stayed: so do its rules
    if book is not None:
        _join(r, book.team)
        if t.incoming is not None:
            _join(r, book.carried(t.incoming, t.agent))
        _join(r, book.own.get(t.agent, ()))
    for name in list(r.guardrails):
        if name in r.screened:
            continue
        rule = book.rules.get(name) if book is not None else None
        if rule is None:
            return _unknown(k, r, t.agent, name, "input")
        if rule.stage != "input":
            continue
        verdict = await _decide(k, r, rule, r.message, t.agent)
        if isinstance(verdict, Blocked):
            return verdict
        r.screened.append(name)  # after the check: a run resumed mid-check checks again
    _reveal(r)
    return None


async def screen_reply(k: Kernel, r: RunState, outcome: Answered) -> Answered | Cleared | Blocked:
    """The output rules in force check the reply as the user will read it (every answer of a
    run that served several needs, together). `Cleared` with the text the user reads, or the
    `Blocked` ending; `outcome` itself when no output rule is in force."""
    book = k.cfg.guardrails
    t = r.turn
    assert t is not None
    if r.parent is not None or (book is None and not r.guardrails):
        return outcome
    rules: list[Guardrail] = []
    for name in r.guardrails:
        rule = book.rules.get(name) if book is not None else None
        if rule is None:
            return _unknown(k, r, t.agent, name, "output")
        if rule.stage == "output":
            rules.append(rule)
    held = r.listener if isinstance(r.listener, HeldStream) else None
    if not rules:
        if held is not None:
            held.release(r, t.agent, None)
        return outcome
    several = r.card is None and _served_several(r)
    shown = k.answers(r, outcome.text) if several else outcome.text
    text = shown
    try:
        for rule in rules:
            verdict = await _decide(k, r, rule, text, t.agent)
            if isinstance(verdict, Blocked):
                return verdict
            if verdict.action == "rewrite" and verdict.text is not None:
                text = clean_text(verdict.text)
                k.emit(
                    r,
                    GuardrailRewrote(
                        **r.base(t.agent), guardrail=rule.name, reason=clean_text(verdict.reason)
                    ),
                )
    except BaseException:  # cancelled mid-check: the reply no rule cleared is not kept
        _drop_answer(r)
        raise
    if text != shown:
        _replace_answers(r, text, t.agent, every=several)
        r.last_reply = text
        _retype(k, r, t.agent, text)
    if held is not None:
        held.release(r, t.agent, text)
    return Cleared(text)


# ------------------------------------------------------------------ one rule's verdict
async def _decide(
    k: Kernel, r: RunState, rule: Guardrail, text: str, agent: str
) -> Verdict | Blocked:
    """The rule's verdict, with a failed check turned into a block (fail closed) or, by
    `on_error="allow"`, into an allow that the trace records; a block ends the run here."""
    out = await judge(k, r, rule, text, agent)
    what = "the user's message" if rule.stage == "input" else "the reply"
    if isinstance(out, str):
        if rule.on_error == "allow":
            k.trip(
                r,
                agent,
                "guardrail_error",
                f"guardrail {rule.name!r} could not check {what}: {out}; let through "
                "(on_error='allow')",
            )
            return Verdict.allow()
        return _blocked(k, r, agent, rule, f"the check failed: {out}", failed=True)
    if out.action == "block":
        return _blocked(k, r, agent, rule, clean_text(out.reason) or "blocked by the rule")
    return out


# ------------------------------------------------------------------ a blocked run
def _blocked(
    k: Kernel, r: RunState, agent: str, rule: Guardrail, reason: str, failed: bool = False
) -> Blocked:
    book = k.cfg.guardrails
    message = rule.message or (book.message if book is not None else DEFAULT_MESSAGE)
    return _block(k, r, agent, rule.name, rule.stage, reason, message, failed)


def _unknown(k: Kernel, r: RunState, agent: str, name: str, stage: str) -> Blocked:
    """A rule in force that the team no longer has (it changed since the run began)."""
    book = k.cfg.guardrails
    reason = (
        f"guardrail {name!r} is in force for this run but the team has no rule of that name "
        "(the team changed since the run began); the run is blocked rather than going on "
        "unchecked: add the rule back, or start a new run"
    )
    message = book.message if book is not None else DEFAULT_MESSAGE
    return _block(k, r, agent, name, stage, reason, message, True)


def _block(
    k: Kernel,
    r: RunState,
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
    k.emit(
        r,
        GuardrailTripped(
            **r.base(agent), guardrail=name, stage=stage, reason=reason, failed=failed
        ),
    )
    if stage == "input":
        _withhold(r, WITHHELD.format(name=name))
        _drop_needs(k, r, agent)
    _replace_answers(r, message, agent, every=True)
    r.last_reply, r.final = message, None
    return Blocked(name, stage, reason, message)


def _withhold(r: RunState, placeholder: str) -> None:
    """The user message as the transcript keeps it, withheld: no later view (a `recent` or
    `full` policy, the router's judge) shows a blocked or unchecked text to a model."""
    for i in range(r.saved_messages, len(r.messages)):
        m = r.messages[i]
        if m.id == r.user_msg_id:
            r.messages[i] = replace(m, content=placeholder)
            return


def _reveal(r: RunState) -> None:
    """The input rules in force let the message through: the holder and the transcript get
    it (a part already committed withheld, by a cancelled run resumed since, stays so)."""
    for i, m in enumerate(r.messages):
        if m.id == r.user_msg_id:
            if m.content == UNCHECKED:
                r.messages[i] = replace(m, content=r.message)
            return


def _drop_answer(r: RunState) -> None:
    """Forget the holder's unchecked answer: a resumed run asks it again, and checks that."""
    if len(r.messages) > r.saved_messages and _is_answer(r.messages[-1]):
        del r.messages[-1]


def _drop_needs(k: Kernel, r: RunState, agent: str) -> None:
    """The other needs the router found in a blocked message are dropped with it."""
    from baton.runtime.pending import set_pending  # pending imports the hand-off steps

    if PENDING not in r.session.control:
        return
    if any(
        isinstance(e, StateUpdated) and e.run_id == r.run_id and e.source == "router"
        for e in r.events
    ):
        set_pending(k, r, [], agent, "guardrail")


def _served_several(r: RunState) -> bool:
    """The run handed the baton on to the user's other needs (`Runner.answers` joins)."""
    from baton.runtime.pending import REASON  # pending imports the hand-off steps

    return any([p.reason == REASON for p in r.handoffs])


def _is_answer(m: Message) -> bool:
    return m.role == "assistant" and not m.tool_calls and bool(m.content)


def _replace_answers(r: RunState, text: str, agent: str, every: bool) -> None:
    """The run's final reply in the transcript becomes `text` (`every`: each earlier answer of
    the run not committed yet is dropped, `text` standing for all of them)."""
    parts = [i for i in range(r.saved_messages, len(r.messages)) if _is_answer(r.messages[i])]
    if not every:
        parts = parts[-1:]
    if not parts:
        r.record(Message(role="assistant", content=text, agent=agent, run_id=r.run_id))
        return
    last = parts[-1]
    r.messages[last] = replace(r.messages[last], content=text)
    for i in reversed(parts[:-1]):
        del r.messages[i]


def _retype(k: Kernel, r: RunState, agent: str, text: str) -> None:
    """A typed answer that was rewritten: its value is the rewritten JSON's (None when that no
    longer validates), never the value before the rewrite."""
    plan = k.plans.get(agent)
    if r.final is None or plan is None or plan.output is None:
        return
    typed = plan.output.check(text)
    r.final = typed.data if isinstance(typed, Typed) else None
