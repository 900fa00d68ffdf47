"""Property: whatever path the baton takes through a team whose agents and edges carry
different rules, every rule of every holder and of every crossed edge reads the user's message
(input) or the final reply (output), once each, in the order the rules joined."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from baton import Agent, Guardrail, GuardrailContext, Guards, ScriptedModel, Team, Verdict

S = ScriptedModel
N = 4
NAMES = [f"a{i}" for i in range(N)]


def _tagger(name: str) -> Guardrail:
    def rewrite(text: str, ctx: GuardrailContext) -> Verdict:
        return Verdict.rewrite(f"{text} <{name}>")

    return Guardrail(name, "output", rewrite)


def _screen(name: str, seen: list[tuple[str, str]]) -> Guardrail:
    def screen(text: str, ctx: GuardrailContext) -> Verdict:
        seen.append((name, ctx.agent))
        return Verdict.allow()

    return Guardrail(name, "input", screen)


def _team(path: list[str], seen: list[tuple[str, str]]) -> Team:
    agents = [
        Agent(
            name=a,
            handoffs=[b for b in NAMES if b != a],
            guardrails=[_tagger(f"out_{a}"), _screen(f"in_{a}", seen)],
            # every other edge carries a rule of its own
            handoff_guardrails={
                b: [_tagger(f"edge_{a}_{b}")] for j, b in enumerate(NAMES) if b != a and j % 2
            },
        )
        for a in NAMES
    ]
    script = [S.call(f"transfer_to_{b}", reason="next", objective="go on") for b in path[1:]] + [
        S.say("done")
    ]
    guards = Guards(
        max_hops=20, max_visits=20, ping_pong=False, lock_window_s=0, reroute_after_refusals=0
    )
    return Team(
        agents,
        entry=path[0],
        model=S(script),
        guards=guards,
        guardrails=[_tagger("team")],
    )


def _expected(path: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The output rules in the order they join (the team's, then along the path each crossed
    edge's and the receiver's own), and each holder's input check on its first arrival."""
    joined: list[str] = ["team"]
    for i, agent in enumerate(path):
        if i and NAMES.index(agent) % 2:
            joined.append(f"edge_{path[i - 1]}_{agent}")
        joined.append(f"out_{agent}")
    screens = list(dict.fromkeys((f"in_{a}", a) for a in path))
    return list(dict.fromkeys(joined)), screens


paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=7).map(
    lambda xs: [x for i, x in enumerate(xs) if i == 0 or xs[i - 1] != x]
)


@given(paths)
@settings(max_examples=60, deadline=None)
def test_every_rule_of_every_holder_and_crossed_edge_is_applied(path: list[str]) -> None:
    seen: list[tuple[str, str]] = []
    team = _team(path, seen)

    result = asyncio.run(team.run("hello", session_id="S"))

    assert result.status == "completed", result.error
    assert result.path == path
    order, screens = _expected(path)
    assert result.output == "done" + "".join(f" <{n}>" for n in order)
    assert seen == screens  # each holder's input rule read the message once, on arrival
