"""One model-call path: ask the holder's model, check and record its answer, parse its tool
calls, and re-ask once, quoting the exact error, when the arguments do not parse or the reply
is empty. Every call is held to the run's budgets (`Guards.max_*_per_run`)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from baton.core.errors import ModelError, ModelTimeout, ModelUnreachable, ParseError
from baton.core.events import GuardTripped, ModelCalled, TextDelta
from baton.core.messages import Message, ToolCall, Usage
from baton.core.text import clean_text, clean_value
from baton.models.base import ModelRequest, ModelResponse, StreamingModel
from baton.models.parsing import parse_json_object, parse_text_mode
from baton.models.text_calls import find_text_calls
from baton.models.textmode import json_shape
from baton.runtime.context import fixed_instructions
from baton.runtime.guards import check_budget
from baton.runtime.outcomes import Failed, Tripped
from baton.runtime.output import OutputSpec, Typed
from baton.runtime.reuse import spent
from baton.runtime.rolling import earlier_turns
from baton.runtime.state import RunState, TurnState
from baton.runtime.timeouts import timed
from baton.tools import error_content

if TYPE_CHECKING:
    from baton.runtime.kernel import Kernel
    from baton.runtime.plan import AgentPlan


@dataclass(slots=True)
class Parsed:
    """A tool call with its arguments parsed (or the reason they could not be)."""

    call: ToolCall
    args: dict[str, Any] | None
    error: str | None = None


Reply = tuple[str | None, list[Parsed]]
"""The model's text and its parsed calls."""


async def ask(
    kernel: Kernel, run: RunState, plan: AgentPlan, turn: TurnState
) -> Reply | Failed | Tripped:
    """The holder's next step: one model call, and one re-ask if its calls do not parse, it
    said nothing, or its answer does not validate into the agent's output type; a reply still
    empty or invalid after that fails the turn. A typed answer comes back as its normalised
    JSON text, its data kept in `RunState.final`."""
    output = plan.output
    tools = plan.specs_for(
        turn.incoming is not None and not turn.fallback,
        earlier_turns(run) and not turn.fallback,
    )
    messages = [*turn.view, *turn.scratch]
    withheld = spent(turn.scratch) if turn.tools_called else frozenset()
    if withheld:  # a repeated call's tool, for one model call, and why (not recorded)
        tools = [t for t in tools if t.name not in withheld]
        messages.append(Message(role="user", content=repeated_note(withheld)))
    request = ModelRequest(
        agent=plan.agent.name,
        messages=messages,
        tools=tools,
        output_schema=output.schema if output is not None else None,
        output_name=output.name if output is not None else None,
        fixed_prefix=fixed_instructions(plan.agent),
    )
    response = await call(kernel, run, plan, turn, request)
    if not isinstance(response, ModelResponse):
        return response
    calls = parse(response)
    first_empty = empty(response, calls)
    typed: Typed | str | None = None  # a typed answer, validated or why it is not valid
    if any([c.error for c in calls]):  # a list: a generator costs a frame per call
        retry = await call(kernel, run, plan, turn, reask_request(request, response, calls))
        if not isinstance(retry, ModelResponse):
            return retry
        response, calls = retry, parse(retry)
    elif withheld and not calls and calls_withheld(response.text, withheld):
        # it wrote the withheld call out as text instead of answering: once more, plainly
        said = Message(role="assistant", content=response.text or "", agent=request.agent)
        nudge = Message(role="user", content=repeated_note(withheld))
        again = replace(request, messages=[*request.messages, said, nudge], reask=True)
        retry = await call(kernel, run, plan, turn, again)
        if not isinstance(retry, ModelResponse):
            return retry
        response, calls = retry, parse(retry)
    elif first_empty:
        retry = await call(kernel, run, plan, turn, empty_reask(request, response))
        if not isinstance(retry, ModelResponse):
            return retry
        response, calls = retry, parse(retry)
    elif output is not None and not calls:
        typed = output.check(response.text)
        if isinstance(typed, str):
            retry = await call(
                kernel, run, plan, turn, output_reask(request, response, typed, output)
            )
            if not isinstance(retry, ModelResponse):
                return retry
            response, calls, typed = retry, parse(retry), None
    if empty(response, calls):
        how = "twice" if first_empty else "to a re-ask"
        return Failed(
            f"model {plan.asked_model.name!r} returned an empty reply {how} for agent "
            f"{plan.agent.name} (no text, no tool call); the run stops instead of answering "
            "the user with nothing"
        )
    if output is not None and not calls:
        if typed is None:
            typed = output.check(response.text)
        if isinstance(typed, str):
            return Failed(
                f"the answer of agent {plan.agent.name} (model {plan.asked_model.name!r}) does not "
                f"match its output type after a re-ask: {typed}"
            )
        response.text, run.final = typed.text, typed.data
    if not calls and run.listener is not None and not isinstance(plan.asked_model, StreamingModel):
        _delta(run, plan.agent.name, response.text or "")  # a model that does not stream: one delta
    return response.text, calls


async def call(
    kernel: Kernel,
    run: RunState,
    plan: AgentPlan,
    turn: TurnState,
    request: ModelRequest,
    quiet: bool = False,
) -> ModelResponse | Failed | Tripped:
    """One model call, checked and recorded, or how the turn ends (a budget spent, timeout,
    provider failure, invalid response). `quiet`: its text never streams to the run's
    listener (a guard agent's verdict is not a reply)."""
    model = plan.model if plan.model is not None else plan.asked_model  # (raises: a conductor)
    spent = over_budget(kernel, run, plan, starting=True)
    if spent is not None:
        return spent
    run.model_calls += 1
    started = time.perf_counter()
    answer: ModelResponse | Exception
    try:
        if run.listener is not None and not quiet and isinstance(model, StreamingModel):
            answer = await timed(_streamed(run, plan, request), kernel.cfg.guards.model_timeout_s)
        else:
            answer = await timed(model.generate(request), kernel.cfg.guards.model_timeout_s)
    except Exception as exc:
        answer = exc
    checked = _checked(kernel, run, plan, turn, request, answer, started, model.name)
    if isinstance(checked, ModelResponse):
        if not checked.tool_calls and (checked.text or "").strip():
            return checked  # an answer already paid for reaches the user; nothing more is spent
        return over_budget(kernel, run, plan, starting=False) or checked
    return checked


def over_budget(kernel: Kernel, run: RunState, plan: AgentPlan, starting: bool) -> Tripped | None:
    """The `budget` trip when the run spent a per-run budget (before a call: up to its limit;
    after one: past it), else None."""
    guards = kernel.cfg.guards
    if (
        guards.max_model_calls_per_run is None
        and guards.max_tokens_per_run is None
        and guards.max_cost_per_run is None
    ):
        return None  # no budget set (the default): nothing to count
    tokens = sum([u.total_tokens for u in run.usage.values()])
    detail = check_budget(guards, run.model_calls, tokens, run.cost, starting)
    model = plan.asked_model.name
    if detail is None and guards.max_cost_per_run is not None and model not in guards.token_prices:
        detail = (
            f"max_cost_per_run: model {model!r} has no price in Guards.token_prices, "
            "so the run's cost cannot be counted"
        )
    if detail is None:
        return None
    kernel.trip(run, plan.agent.name, "budget", detail)
    return Tripped(detail)


async def _streamed(run: RunState, plan: AgentPlan, request: ModelRequest) -> ModelResponse:
    """Drive a streaming model: each text piece goes to the run's listener as it comes."""
    model = plan.asked_model
    assert isinstance(model, StreamingModel)
    final: ModelResponse | None = None
    stream: AsyncIterator[str | ModelResponse] = model.stream(request)
    try:
        async for piece in stream:
            if isinstance(piece, ModelResponse):
                final = piece
            elif piece:
                _delta(run, plan.agent.name, piece)
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    if final is None:
        raise ModelError(f"{model.name} streamed no final response; its stream() must end with one")
    return final


def _delta(run: RunState, agent: str, text: str) -> None:
    if run.listener is not None and text:
        run.listener(TextDelta(**run.base(agent), text=text))


def _checked(
    kernel: Kernel,
    run: RunState,
    plan: AgentPlan,
    turn: TurnState,
    request: ModelRequest,
    response: ModelResponse | Exception,
    started: float,
    model: str,
) -> ModelResponse | Failed | Tripped:
    """`response` checked (a timeout, a provider failure, an invalid response end the turn)
    and recorded as a `model_called` event of `model` (its name)."""
    name = plan.agent.name
    if isinstance(response, (TimeoutError, ModelTimeout)):
        limit = kernel.cfg.guards.model_timeout_s
        detail = f"model_timeout: {model} did not answer {name} within {limit}s"
        kernel.emit(run, GuardTripped(**run.base(name), guard="model_timeout", detail=detail))
        return Tripped(detail)
    if isinstance(response, ModelUnreachable):  # the server is down or busy: stop, resumable
        raise ModelUnreachable(unreachable(run, name, model, response)) from response
    if isinstance(response, Exception):  # provider failure: end the run cleanly
        # a provider's error text is as untrusted as its replies (a lone surrogate, ...)
        msg = clean_text(
            f"model {model!r} failed for agent {name}: {type(response).__name__}: {response}"
        )
        if not isinstance(response, ModelError):
            msg += " (check the provider's URL, key and model name)"
        return _failed(kernel, run, name, model, request, started, msg)
    problem = malformed(response)
    if problem is not None:
        msg = f"model {model!r} returned an invalid response for {name}: {problem}"
        return _failed(kernel, run, name, model, request, started, msg)
    if response.text is not None:
        response.text = clean_text(response.text)
    for i, c in enumerate(response.tool_calls):
        if clean_text(c.arguments) is not c.arguments:
            response.tool_calls[i] = ToolCall(
                id=c.id, name=c.name, arguments=clean_text(c.arguments)
            )
    if not response.tool_calls and response.text_tool_calls:
        # text-mode providers write calls as JSON text; extract them once, here, so the event
        # and everything after it see real tool calls
        structured = request.output_schema is not None
        found = parse_text_mode(response.text, plan.callable_names, structured)
        response.text, response.tool_calls = found.text, found.calls
        response.text_tool_calls = False
    elif not response.tool_calls and request.tools and response.text:
        # a model given the tools natively may still write its calls out (a fenced JSON block,
        # `<tool_call>` tags): they run as calls instead of reaching the user as the answer
        written = find_text_calls(
            response.text, plan.callable_names, known_only=request.output_schema is not None
        )
        if written is not None:
            response.text, response.tool_calls = written.text, written.calls
    run.usage.setdefault(name, Usage()).add(response.usage)
    turn.usage.add(response.usage)
    u = response.usage
    run.cost += kernel.cfg.guards.cost(model, u.input_tokens, u.output_tokens) or 0.0
    kernel.emit(
        run,
        ModelCalled(
            **run.base(name),
            model=model,
            usage=response.usage,
            latency_ms=(time.perf_counter() - started) * 1000,
            tool_calls=tuple([c.name for c in response.tool_calls]),
            text=response.text,
            reask=request.reask,
            calls=tuple(response.tool_calls),
            asked=request_lane(request),
        ),
    )
    return response


def request_lane(request: ModelRequest) -> str | None:
    """A fingerprint of the last user message of `request` (None: it has none)."""
    for m in reversed(request.messages):
        if m.role == "user":
            text = m.content or ""
            return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return None


def unreachable(run: RunState, agent: str, model: str, exc: ModelUnreachable) -> str:
    """What a model that cannot be reached means for the run, and how to go on."""
    root = run.root
    sid = root.session.session_id
    what = clean_text(f"model {model!r} cannot be reached for agent {agent}: {exc}")
    if root.seq == 0:
        return (
            f"{what}. Nothing of run {root.run_id} was saved and none of its tools ran: send "
            "the message again once the server is back"
        )
    return (
        f"{what}. Run {root.run_id} stopped at its checkpoint {root.seq}: team.resume({sid!r}) "
        f"(or `baton resume {sid}`) continues it once the server is back; tool calls already "
        "answered are not run again"
    )


def _failed(
    kernel: Kernel,
    run: RunState,
    name: str,
    model: str,
    request: ModelRequest,
    started: float,
    msg: str,
) -> Failed:
    kernel.emit(
        run,
        ModelCalled(
            **run.base(name),
            model=model,
            usage=Usage(),
            latency_ms=(time.perf_counter() - started) * 1000,
            reask=request.reask,
            error=msg,
        ),
    )
    return Failed(msg)


def parse(response: ModelResponse) -> list[Parsed]:
    """Each tool call with its JSON arguments parsed (repaired where possible)."""
    parsed: list[Parsed] = []
    for c in response.tool_calls:
        try:
            args = parse_json_object(c.arguments)
            if "\\u" in c.arguments:  # only a JSON escape can still make a lone surrogate
                args = clean_value(args)
            parsed.append(Parsed(c, args))
        except ParseError as exc:
            parsed.append(Parsed(c, None, str(exc)))
    return parsed


def reask_request(
    request: ModelRequest, response: ModelResponse, calls: list[Parsed]
) -> ModelRequest:
    """The request repeated with the failed calls answered by their errors and a nudge that
    quotes them (seed 001 §6.1)."""
    errors = "; ".join(f"{c.call.name}: {c.error}" for c in calls if c.error)
    bad = Message(
        role="assistant",
        content=response.text,
        agent=request.agent,
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
    return replace(request, messages=[*request.messages, bad, *answers, nudge], reask=True)


def repeated_note(names: frozenset[str]) -> str:
    """Why the tools `names` are not offered to this model call (`baton.runtime.reuse`)."""
    listed = ", ".join(sorted(names))
    return (
        f"You called {listed} again with the same arguments; its result is above. Do not "
        "call it again now: answer from that result (or use another tool)."
    )


def calls_withheld(text: str | None, names: frozenset[str]) -> bool:
    """Whether a reply's text is a withheld tool's call written out (JSON naming it)."""
    body = (text or "").strip()
    return body[:1] in ("{", "[", "<", "`") and any(n in body[:400] for n in names)


def empty(response: ModelResponse, calls: list[Parsed]) -> bool:
    """The reply says nothing: no tool call, and no text but whitespace."""
    return not calls and not (response.text or "").strip()


def empty_reask(request: ModelRequest, response: ModelResponse) -> ModelRequest:
    """The request repeated with the empty reply and a nudge to answer or call a tool."""
    nothing = Message(role="assistant", content=response.text or "", agent=request.agent)
    nudge = Message(
        role="user",
        content=(
            "Your last reply was empty: no text and no tool call. Answer the user, or call "
            "one of your tools."
        ),
    )
    return replace(request, messages=[*request.messages, nothing, nudge], reask=True)


def output_reask(
    request: ModelRequest, response: ModelResponse, error: str, output: OutputSpec
) -> ModelRequest:
    """The request repeated with the invalid answer and a nudge that quotes why it does not
    validate into the agent's output type."""
    bad = Message(role="assistant", content=response.text or "", agent=request.agent)
    nudge = Message(
        role="user",
        content=(
            f"Your answer does not match the required output: {error}. Reply again with only "
            f"the corrected JSON, of this shape: {json_shape(output.schema)}"
        ),
    )
    return replace(request, messages=[*request.messages, bad, nudge], reask=True)


def malformed(response: object) -> str | None:
    """What is wrong with a custom model's response, or None (cheap shape checks)."""
    if not isinstance(response, ModelResponse):
        return f"expected a ModelResponse, got {type(response).__name__}"
    if response.text is not None and not isinstance(response.text, str):
        return f"text must be a string or None, got {type(response.text).__name__}"
    if not isinstance(response.usage, Usage):
        return f"usage must be a Usage, got {type(response.usage).__name__}"
    for c in response.tool_calls:
        if not isinstance(c, ToolCall):
            return f"tool_calls must hold ToolCall objects, got {type(c).__name__}"
        if not isinstance(c.name, str) or not isinstance(c.arguments, str):
            return "a ToolCall needs a string name and its arguments as a JSON string"
    return None
