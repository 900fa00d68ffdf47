"""Graph: nodes, edges, conditional edges, cycles, reducers, validation, max_steps."""

from __future__ import annotations

import asyncio
import json
import operator
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from baton import END, START, Agent, ConfigError, Graph, Guards, ScriptedModel
from baton.models.base import ModelRequest
from baton.topologies.graph_steps import json_bytes
from baton.topologies.reducers import append, maximum, merge

S = ScriptedModel


class State(BaseModel):
    items: Annotated[list[str], append] = []
    notes: Annotated[dict[str, Any], merge] = {}
    best: Annotated[int, maximum] = 0
    total: Annotated[int, operator.add] = 0
    n: int = 0
    text: str = ""


def writes(**update: Any) -> Any:
    async def node(state: State) -> dict[str, Any]:
        return dict(update)

    return node


async def test_a_linear_graph_runs_in_order_and_returns_the_typed_state() -> None:
    seen: list[int] = []

    async def first(state: State) -> dict[str, Any]:
        seen.append(state.n)
        return {"n": state.n + 1, "items": ["first"]}

    def second(state: State) -> dict[str, Any]:  # a plain function runs in a thread
        seen.append(state.n)
        return {"n": state.n * 10, "items": "second", "text": "完成了"}

    g = Graph(State).add_node("first", first).add_node("second", second)
    g.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    result = await g.compile().invoke({"n": 1}, thread_id="t")
    assert result.status == "completed", result.error
    assert seen == [1, 2]
    assert isinstance(result.final, State)
    assert result.final.n == 20 and result.final.items == ["first", "second"]
    assert result.final.text == "完成了"
    assert '"完成了"' in (result.output or "")  # the output is the state as JSON
    called = [e.tool for e in result.events if e.type == "tool_called"]
    assert called == ["first", "second"]


async def test_fan_out_runs_nodes_in_parallel_and_merges_through_reducers() -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()

    async def a(state: State) -> dict[str, Any]:
        a_started.set()
        await asyncio.wait_for(b_started.wait(), 5)  # only returns if b runs meanwhile
        return {"items": ["a"], "notes": {"a": 1}, "best": 3, "total": 2}

    async def b(state: State) -> dict[str, Any]:
        b_started.set()
        await asyncio.wait_for(a_started.wait(), 5)
        return {"items": ["b1", "b2"], "notes": {"b": 2}, "best": 7, "total": 5}

    g = Graph(State).add_node("start", writes(items=["s"])).add_node("a", a).add_node("b", b)
    g.add_node("join", writes(text="joined"))
    g.add_edge(START, "start").add_edge("start", "a").add_edge("start", "b")
    g.add_edge(["a", "b"], "join").add_edge("join", END)
    result = await g.compile().invoke({}, thread_id="t")
    assert result.status == "completed", result.error
    final = result.final
    assert final.items == ["s", "a", "b1", "b2"]  # merged in node-name order
    assert final.notes == {"a": 1, "b": 2} and final.best == 7 and final.total == 7
    assert final.text == "joined"


async def test_a_join_waits_for_branches_of_different_lengths() -> None:
    order: list[str] = []

    def node(name: str) -> Any:
        async def run(state: State) -> dict[str, Any]:
            order.append(name)
            return {"items": [name]}

        return run

    g = Graph(State)
    for name in ("fork", "short", "long1", "long2", "join"):
        g.add_node(name, node(name))
    g.add_edge(START, "fork").add_edge("fork", "short").add_edge("fork", "long1")
    g.add_edge("long1", "long2").add_edge(["short", "long2"], "join").add_edge("join", END)
    result = await g.compile().invoke({}, thread_id="t")
    assert result.status == "completed", result.error
    assert order[-1] == "join" and order.count("join") == 1
    assert order.index("join") > order.index("long2")


async def test_two_nodes_writing_one_plain_key_in_one_step_fail_clearly() -> None:
    g = Graph(State).add_node("a", writes(text="a")).add_node("b", writes(text="b"))
    g.add_edge(START, "a").add_edge(START, "b")
    result = await g.compile().invoke({}, thread_id="t")
    assert result.status == "failed"
    assert "'a' and 'b' both wrote 'text'" in (result.error or "")
    assert "reducer" in (result.error or "")


async def test_a_node_writing_an_unknown_key_or_a_bad_value_fails_naming_it() -> None:
    g = Graph(State).add_node("a", writes(colour="red"))
    g.add_edge(START, "a")
    result = await g.compile().invoke({}, thread_id="t")
    assert result.status == "failed" and "unknown state key 'colour'" in (result.error or "")
    g2 = Graph(State).add_node("a", writes(n="not a number"))
    g2.add_edge(START, "a")
    result2 = await g2.compile().invoke({}, thread_id="t")
    assert result2.status == "failed"
    assert "the state written by a is invalid: n:" in (result2.error or "")


async def test_a_node_that_raises_fails_the_run_naming_the_node() -> None:
    async def broken(state: State) -> dict[str, Any]:
        raise RuntimeError("the index is down")

    g = Graph(State).add_node("lookup", broken)
    g.add_edge(START, "lookup")
    result = await g.compile().invoke({}, thread_id="t")
    assert result.status == "failed"
    assert "node 'lookup' failed" in (result.error or "")
    assert "the index is down" in (result.error or "")


@pytest.mark.parametrize("kind", ["async", "thread"])
async def test_a_node_that_raises_cancelled_error_itself_fails_the_run_not_cancels_it(
    kind: str,
) -> None:
    def sync_node(state: State) -> dict[str, Any]:
        raise asyncio.CancelledError("the index client gave up")

    async def async_node(state: State) -> dict[str, Any]:
        raise asyncio.CancelledError("the index client gave up")

    g = Graph(State).add_node("lookup", async_node if kind == "async" else sync_node)
    g.add_edge(START, "lookup")
    result = await g.compile().invoke({}, thread_id="t")  # returns: never raises
    assert result.status == "failed"
    assert "node 'lookup' raised CancelledError" in (result.error or "")
    assert "the index client gave up" in (result.error or "")


async def test_conditional_edges_route_through_their_mapping() -> None:
    def route(state: State) -> str:
        return "big" if state.n > 5 else "small"

    g = Graph(State).add_node("check", writes(items=["check"]))
    g.add_node("big_one", writes(text="big")).add_node("small_one", writes(text="small"))
    g.add_edge(START, "check")
    g.add_conditional_edges("check", route, {"big": "big_one", "small": "small_one"})
    compiled = g.compile()
    assert (await compiled.invoke({"n": 9}, thread_id="a")).final.text == "big"
    assert (await compiled.invoke({"n": 1}, thread_id="b")).final.text == "small"
    chart = compiled.to_mermaid()
    assert '-.->|"big"|' in chart and '-.->|"small"|' in chart


async def test_a_conditional_edge_returning_an_unmapped_value_fails_at_run_time() -> None:
    g = Graph(State).add_node("check", writes())
    g.add_node("yes", writes())
    g.add_edge(START, "check")
    g.add_conditional_edges("check", lambda s: "maybe", {"yes": "yes", "no": END})
    result = await g.compile().invoke({}, thread_id="t")
    assert result.status == "failed"
    assert "returned 'maybe', which its mapping does not name" in (result.error or "")


async def test_a_conditional_edge_without_mapping_names_nodes_or_end() -> None:
    g = Graph(State).add_node("a", writes(items=["a"])).add_node("b", writes(items=["b"]))
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: ["b"] if len(s.items) < 2 else END)
    g.add_edge("b", "a")
    result = await g.compile().invoke({}, thread_id="t")
    assert result.status == "completed" and result.final.items == ["a", "b", "a"]
    g2 = Graph(State).add_node("a", writes())
    g2.add_edge(START, "a").add_conditional_edges("a", lambda s: "nowhere")
    bad = await g2.compile().invoke({}, thread_id="t")
    assert bad.status == "failed" and "'nowhere', which is not a node" in (bad.error or "")


async def test_max_steps_ends_an_endless_cycle_as_escalated_with_the_path() -> None:
    g = Graph(State).add_node("ping", writes(total=1)).add_node("pong", writes(total=1))
    g.add_edge(START, "ping").add_edge("ping", "pong").add_edge("pong", "ping")
    result = await g.compile(max_steps=6).invoke({}, thread_id="t")
    assert result.status == "escalated"
    trips = [e for e in result.events if e.type == "guard_tripped"]
    assert trips and trips[0].guard == "max_steps"
    assert "ping → pong → ping → pong → ping → pong" in trips[0].detail
    # the swarm's loop guards did not fire for this intended cycle
    assert {t.guard for t in trips} == {"max_steps"}


def test_compile_refuses_graphs_that_cannot_run() -> None:
    with pytest.raises(ConfigError, match="no entry"):
        Graph(State).add_node("a", writes()).compile()
    g = Graph(State).add_node("a", writes())
    g.add_edge(START, "a").add_edge("a", "ghost")
    with pytest.raises(ConfigError, match="unknown node 'ghost'"):
        g.compile()
    g = Graph(State).add_node("a", writes()).add_node("island", writes())
    g.add_edge(START, "a")
    with pytest.raises(ConfigError, match=r"\['island'\] cannot be reached"):
        g.compile()
    g = Graph(State).add_node("a", writes())
    g.add_edge(START, "a").add_conditional_edges("a", lambda s: "x", {"x": "ghost"})
    with pytest.raises(ConfigError, match="maps 'x' to unknown node 'ghost'"):
        g.compile()
    with pytest.raises(ConfigError, match="reserved"):
        Graph(State).add_node(START, writes())
    with pytest.raises(ConfigError, match="already exists"):
        Graph(State).add_node("a", writes()).add_node("a", writes())
    with pytest.raises(ConfigError, match="BaseModel"):
        Graph(dict)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="which state key"):
        Graph(State).add_node("writer", Agent(name="writer"))
    with pytest.raises(ConfigError, match="max_steps"):
        Graph(State).add_node("a", writes()).add_edge(START, "a").compile(max_steps=0)


async def test_invalid_input_is_refused_before_anything_runs() -> None:
    g = Graph(State).add_node("a", writes())
    g.add_edge(START, "a")
    compiled = g.compile()
    with pytest.raises(ValueError, match="unknown state key 'nope'"):
        await compiled.invoke({"nope": 1}, thread_id="t")
    with pytest.raises(ValueError, match="JSON object of state keys"):
        await compiled.run("plain text", session_id="t")
    assert await compiled.get_state("t") is None


def growing(chunk_chars: int, steps: int, **compile_kw: Any) -> Any:
    """A cycle whose node appends a chunk of Chinese text to the state each super-step."""

    def grow(state: State) -> dict[str, Any]:
        return {"items": ["状态" * (chunk_chars // 2)], "n": state.n + 1}

    g = Graph(State).add_node("grow", grow).add_edge(START, "grow")
    g.add_conditional_edges("grow", lambda s: END if s.n >= steps else "grow")
    return g.compile(max_steps=steps + 1, **compile_kw)


async def snapshot_bytes(graph: Any, thread: str) -> int:
    return sum(len(json.dumps(h.values.model_dump()).encode()) for h in await graph.history(thread))


async def test_a_graph_state_growing_past_its_cap_fails_clearly_and_stays_bounded(
    tmp_path: Path,
) -> None:
    cap = 100_000
    graph = growing(
        10_000, 50, store=f"sqlite:///{tmp_path / 'g.db'}", guards=Guards(max_state_bytes=cap)
    )
    result = await graph.invoke({}, thread_id="T")

    assert result.status == "failed"
    error = result.error or ""
    assert "Guards.max_state_bytes" in error and "after grow wrote" in error
    assert f"over the limit of {cap:,}" in error
    latest = await graph.get_state("T")
    assert latest is not None and 0 < json_bytes(latest.values.model_dump(mode="json")) <= cap
    history = await graph.history("T")
    assert len(history) < 50 and all(
        json_bytes(h.values.model_dump(mode="json")) <= cap for h in history
    )
    await graph.aclose()


async def test_one_update_over_the_default_cap_is_never_stored() -> None:
    graph = growing(1_500_000, 1)  # 3 MB of UTF-8 in one update, over the 1 MiB default
    result = await graph.invoke({}, thread_id="T")

    assert result.status == "failed"
    assert "returned an update of" in (result.error or "")
    assert "Guards.max_state_bytes" in (result.error or "")
    stored = sum(len(m.content or "") for m in await graph.store.get_messages("T"))
    assert stored < 10_000  # the refused update is in no message
    assert await snapshot_bytes(graph, "T") < 1_000


async def test_an_input_or_a_fork_over_the_cap_is_refused_before_anything_runs() -> None:
    graph = growing(10, 1, guards=Guards(max_state_bytes=5_000))
    with pytest.raises(ValueError, match=r"invalid graph input: .*Guards.max_state_bytes"):
        await graph.invoke({"text": "长" * 2_000}, thread_id="T")
    assert await graph.get_state("T") is None
    assert (await graph.invoke({"text": "short"}, thread_id="T")).status == "completed"
    [*_, first] = await graph.history("T")
    with pytest.raises(ValueError, match=r"invalid update: .*Guards.max_state_bytes"):
        await graph.resume("T", from_checkpoint=first.id, update={"text": "长" * 2_000})


def nested(levels: int) -> Any:
    value: Any = "底"
    for _ in range(levels):
        value = [value]
    return value


async def test_input_or_updates_nested_thousands_deep_are_refused_not_a_recursion_error() -> None:
    def deep_node(state: State) -> dict[str, Any]:
        return {"notes": {"tree": nested(5_000)}}

    g = Graph(State).add_node("deep", deep_node).add_edge(START, "deep").add_edge("deep", END)
    graph = g.compile()
    result = await graph.invoke({}, thread_id="T")
    assert result.status == "failed"
    assert "more than 64 levels deep" in (result.error or "")
    for attempt in (
        graph.invoke({"notes": {"tree": nested(5_000)}}, thread_id="U"),
        graph.run('{"notes": ' + "[" * 100_000 + "]" * 100_000 + "}", session_id="U"),
    ):
        with pytest.raises(ValueError, match=r"invalid graph input: .*more than 64 levels"):
            await attempt
    assert await graph.get_state("U") is None
    ok = Graph(State).add_node("a", writes()).add_edge(START, "a").compile()
    await ok.invoke({}, thread_id="T")
    [first] = await ok.history("T", limit=1)
    with pytest.raises(ValueError, match=r"invalid update: .*more than 64 levels"):
        await ok.resume("T", from_checkpoint=first.id, update={"notes": nested(5_000)})


async def test_max_state_bytes_zero_turns_the_cap_off() -> None:
    graph = growing(1_500_000, 1, guards=Guards(max_state_bytes=0))
    result = await graph.invoke({}, thread_id="T")
    assert result.status == "completed" and len(result.final.items[0]) == 1_500_000


async def test_a_thread_keeps_its_state_between_runs() -> None:
    g = Graph(State).add_node("count", lambda s: {"total": 1, "items": [s.text]})
    g.add_edge(START, "count").add_edge("count", END)
    compiled = g.compile()
    await compiled.invoke({"text": "one"}, thread_id="t")
    result = await compiled.invoke({"text": "two"}, thread_id="t")
    assert result.final.total == 2 and result.final.items == ["one", "two"]
    other = await compiled.invoke({"text": "x"}, thread_id="u")
    assert other.final.total == 1


async def test_agent_nodes_see_the_state_and_write_their_answer() -> None:
    class Review(BaseModel):
        text: str
        best: int

    def respond(request: ModelRequest) -> Any:
        seen = request.messages[-1].content or ""
        if request.agent == "writer":
            assert '"n": 4' in seen
            return S.say("草稿：四")
        return S.say('{"text": "reviewed", "best": 9}')

    g = Graph(State)
    g.add_node("writer", Agent(name="any_name", instructions="Write."), output_key="items")
    g.add_node("reviewer", Agent(name="reviewer", output_type=Review))
    g.add_edge(START, "writer").add_edge("writer", "reviewer").add_edge("reviewer", END)
    result = await g.compile(model=S(respond)).invoke({"n": 4}, thread_id="t")
    assert result.status == "completed", result.error
    assert result.final.items == ["草稿：四"]
    assert result.final.text == "reviewed" and result.final.best == 9
    sub = [e for e in result.events if e.type == "agent_started" and e.parent_run_id]
    assert {e.agent for e in sub} == {"writer", "reviewer"}


def _ordered_graph(order: list[str]) -> Any:
    done = {name: asyncio.Event() for name in order}

    def node(name: str) -> Any:
        async def run(state: State) -> dict[str, Any]:
            at = order.index(name)
            if at:  # finish only after the branch before it in `order` has finished
                await asyncio.wait_for(done[order[at - 1]].wait(), 5)
            done[name].set()
            return {"items": [name], "notes": {"last": name, name: 1}, "best": len(name)}

        return run

    g = Graph(State)
    for name in sorted(order):
        g.add_node(name, node(name))
        g.add_edge(START, name)
    return g.compile()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.permutations(["alpha", "beta", "gamma", "delta"]))
def test_reducers_merge_the_same_whatever_order_branches_finish(order: list[str]) -> None:
    result = asyncio.run(_ordered_graph(list(order)).invoke({}, thread_id="t"))
    assert result.status == "completed", result.error
    assert result.final.items == ["alpha", "beta", "delta", "gamma"]  # node-name order
    assert result.final.notes["last"] == "gamma"
    finished = [e.tool for e in result.events if e.type == "tool_called"]
    assert finished == list(order)  # they did finish in that order


def test_mermaid_of_a_built_graph_labels_edges() -> None:
    g = Graph(State).add_node("plan", writes()).add_node("act", writes())
    g.add_edge(START, "plan").add_edge("plan", "act")
    g.add_conditional_edges("act", lambda s: "again", {"again": "plan", "stop": END})
    chart = g.to_mermaid()
    assert chart.startswith("flowchart LR")
    assert '-.->|"again"|' in chart and '-.->|"stop"|' in chart and "__end__" in chart


async def test_each_super_step_is_folded_once_however_long_the_run() -> None:
    """The position at a boundary is kept and advanced, not rebuilt from the run's start:
    a run of n super-steps validates the state about n times (not n²/2), and a resumed run
    (no fold kept) rebuilds the same state."""

    def count(state: State) -> dict[str, Any]:
        return {"n": state.n + 1}

    g = Graph(State).add_node("count", count)
    g.add_edge(START, "count").add_conditional_edges(
        "count", lambda s: END if s.n >= 300 else "count"
    )
    app = g.compile(max_steps=400)
    applied = 0
    apply = app.spec.apply

    def counted(state: dict[str, Any], writes: list[tuple[str, dict[str, Any]]]) -> Any:
        nonlocal applied
        applied += 1
        return apply(state, writes)

    app.spec.apply = counted  # type: ignore[method-assign]
    result = await app.invoke({"n": 0}, thread_id="long")
    assert result.status == "completed", result.error
    assert result.final is not None and result.final.n == 300
    assert applied <= 300 + 2  # each step once, and the input (n² / 2 would be 45,000)
    assert not app.spec._folds  # dropped when the run ended
    # nothing kept: the same fold from the start gives the same boundary
    app.spec._folds.clear()
    again = await app.invoke({"n": 295}, thread_id="resumed")
    assert again.final is not None and again.final.n == 300
