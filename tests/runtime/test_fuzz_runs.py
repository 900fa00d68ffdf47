"""Fuzzing: whatever the model says, the tools return and the user types, a run ends well.

Hypothesis draws a user message (any text: control and bidi characters, lone surrogates,
Chinese), model responses (any text, tool-call JSON that is valid, truncated, nested, huge, not
an object, aimed at unknown tools or at hand-offs with any payload, provider failures) and what
a tool returns or raises (any Python object: self-referencing dicts, sets, bytes, NaN, objects
whose `str` fails, huge or surrogate-laden strings, `SystemExit`).

Invariants, on a SQLite store: `team.run` raises only a documented error for a caller mistake
(`ValueError` for an empty message) and otherwise returns a terminal status; the store holds
the session, a well-formed transcript (every tool call answered once, no lone surrogate), the
run's events from `run_started` to `run_finished` with the same status, no checkpoint, and
an audit chain that verifies.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton import Agent, ScriptedModel, Team, tool
from baton.backends.sqlite import SQLiteStore
from baton.core.text import blank
from baton.models import Step

S = ScriptedModel
TERMINAL = {"completed", "escalated", "failed"}

# ---------------------------------------------------------------- strategies
ODD = ["\ud800", "\udfff", "\x00", "\x1b[31m", "\u202e", "\u200b", "退款", "🏴‍☠️", "\r\n", "'", '"']
texts = st.lists(st.one_of(st.text(max_size=40), st.sampled_from(ODD)), max_size=6).map("".join)


class BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    __repr__ = __str__


def _self_ref() -> dict[str, Any]:
    d: dict[str, Any] = {"order": "ORD-1"}
    d["self"] = d
    return d


RESULTS: list[Any] = [
    "ok",
    "",
    None,
    {"status": "shipped", "items": [1, 2.5, True]},
    float("nan"),
    math.inf,
    b"\xff\xfe raw bytes",
    {1, 2, 3},
    ("a", "b"),
    "\ud800 lone surrogate",
    "x" * 200_000,
    {"nested": [[[[[["deep"]]]]]]},
    BadStr(),
    object(),
]
results = st.one_of(st.sampled_from(range(len(RESULTS))), texts.map(lambda t: t))
raises = st.sampled_from([None, None, "error", "system_exit", "bad_message"])

names = st.sampled_from(["probe", "transfer_to_helper", "transfer_to_human", "nope", "", "💥"])
args_json = st.one_of(
    st.just('{"key": "ORD-1"}'),
    st.just('{"key": '),  # cut off
    st.just('{"key": "ORD-1", "key": "ORD-2"}'),
    st.just("[1, 2]"),
    st.just("null"),
    st.just('{"reason": "billing", "objective": "refund ORD-1", "state": {"role": "admin"}}'),
    st.just('{"reason": "", "objective": "x"}'),
    st.just("{" * 300 + "}" * 300),
    st.just('{"key": "' + "y" * 50_000 + '"}'),
    texts.map(lambda t: json.dumps({"key": t}, ensure_ascii=False)),
    texts,
)


@st.composite
def steps(draw: st.DrawFn) -> Step:
    kind = draw(st.sampled_from(["say", "call", "text", "calls", "fail", "huge"]))
    if kind == "say":
        return S.say(draw(texts))
    if kind == "call":
        return S.raw_call(draw(names), draw(args_json))
    if kind == "calls":
        return S.calls(
            *[S.raw_call(draw(names), draw(args_json)) for _ in range(draw(st.integers(2, 3)))]
        )
    if kind == "text":  # a text-mode model: tool calls are parsed out of the text
        name, args = draw(names), draw(args_json)
        body = draw(
            st.sampled_from(
                [
                    "{}",
                    '{{"name": "{}", "arguments": {}}}',
                    '```json\n{{"name": "{}", "arguments": {}}}\n```',
                ]
            )
        )
        return S.text(body.format(name, args) if "{}" in body and body != "{}" else draw(texts))
    if kind == "huge":
        return S.say("z" * 300_000)
    return S.fail(draw(texts) or "provider down")


# ---------------------------------------------------------------- the team
def fuzz_team(store: SQLiteStore, script: list[Step], result: Any, raise_: str | None) -> Team:
    @tool
    def probe(key: str) -> Any:
        """Look a key up."""
        if raise_ == "error":
            raise RuntimeError(f"backend down for {key}")
        if raise_ == "system_exit":
            raise SystemExit(2)
        if raise_ == "bad_message":
            raise ValueError(BadStr())
        return RESULTS[result] if isinstance(result, int) else result

    moves: Iterator[Step] = iter(script)

    def respond(_: Any) -> Step:
        return next(moves, S.say("done"))

    return Team(
        [
            Agent(name="desk", tools=[probe], handoffs=["helper", "human"], max_iterations=4),
            Agent(name="helper", tools=[probe], max_iterations=3),
        ],
        entry="desk",
        model=S(respond),
        store=store,
    )


_DIR = tempfile.TemporaryDirectory()
_COUNT = iter(range(10**9))


@pytest.fixture(scope="module")
def store() -> Iterator[SQLiteStore]:
    st_ = SQLiteStore(f"sqlite:///{Path(_DIR.name) / 'fuzz.db'}")
    yield st_
    asyncio.run(st_.close())


def _well_formed(messages: list[Any]) -> None:
    open_calls: dict[str, str] = {}
    for m in messages:
        for text in (m.content or "", *(c.arguments for c in m.tool_calls or ())):
            text.encode("utf-8")  # no lone surrogate reached the store
        if m.role == "assistant":
            assert not open_calls, f"calls left unanswered: {open_calls}"
            for c in m.tool_calls or ():
                open_calls[c.id] = c.name
        elif m.role == "tool":
            assert m.tool_call_id in open_calls, "a tool result answers no call"
            del open_calls[m.tool_call_id]
    assert not open_calls, f"calls left unanswered: {open_calls}"


@given(
    message=texts,
    script=st.lists(steps(), min_size=1, max_size=6),
    result=results,
    raise_=raises,
)
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
def test_any_run_ends_in_a_recorded_terminal_state(
    store: SQLiteStore, message: str, script: list[Step], result: Any, raise_: str | None
) -> None:
    sid = f"fuzz-{next(_COUNT)}"
    team = fuzz_team(store, script, result, raise_)

    async def go() -> None:
        if blank(message):  # nothing a person could read: refused before anything runs
            with pytest.raises(ValueError, match="invisible characters"):
                await team.run(message, session_id=sid)
            return
        out = await team.run(message, session_id=sid)
        assert out.status in TERMINAL, out
        if out.status == "failed":
            assert out.error
        session = await store.get_session(sid)
        assert session is not None and session.version >= 1
        messages = await store.get_messages(sid)
        assert messages[0].role == "user"
        assert all(m.run_id in (out.run_id, None) for m in messages)
        _well_formed(messages)
        events = await store.get_events(sid)
        assert events[0].type == "run_started" and events[-1].type == "run_finished"
        assert events[-1].status == out.status
        assert {e.run_id for e in events} == {out.run_id}
        assert await store.get_checkpoint(sid) is None
        # a second message in the same session goes on from what was stored
        again = await team.run("and now?", session_id=sid)
        assert again.status in TERMINAL

    asyncio.run(go())


def test_the_audit_chain_verifies_after_the_fuzzing(store: SQLiteStore) -> None:
    """Runs after the property above (same module store): every run it made left the chain,
    the events table and the transcript in agreement."""
    verdict = asyncio.run(store.verify_audit())
    assert verdict.ok, verdict.problem
