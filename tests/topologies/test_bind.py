"""`team.bind(store=, bus=, sinks=)`: a deployment of the same declaration with a store, bus,
sinks and runner state of its own; the team is left as it was, whatever the topology."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from tests.services import REDIS, require_service

from baton import (
    END,
    START,
    Agent,
    ApprovalError,
    ConfigError,
    Graph,
    MemoryStore,
    ScriptedModel,
    SQLiteStore,
    StoreError,
    Team,
    tool,
)
from baton.bus import BusError, MemoryBus
from baton.core.events import Event
from baton.models.base import ModelRequest
from baton.observe import MetricsSink
from baton.topologies.blackboard import Blackboard
from baton.topologies.debate import Debate
from baton.topologies.pipeline import Pipeline
from baton.topologies.plan_execute_review import PlanExecuteReview
from baton.topologies.supervisor import Supervisor

S = ScriptedModel


@tool(requires_approval=True)
async def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def desk_policy(request: ModelRequest) -> Any:
    """`refund` pauses for approval, "human" escalates to the human queue, else a greeting."""
    last = request.messages[-1]
    if last.role == "tool":
        return S.say(last.content or "")
    text = last.content or ""
    if "human" in text:
        return S.call("transfer_to_human", reason="the user asks for a person", objective="Call")
    if "refund" in text:
        return S.call("refund", order_id=text.split()[1])  # "refund ORD-n ..."
    return S.say("hello")


def desk() -> Team:
    agent = Agent(name="desk", tools=[refund], handoffs=["human"])
    return Team([agent], entry="desk", model=S(desk_policy))


class Recorder:
    """A sink that keeps what it is sent."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


async def test_two_bindings_keep_their_own_runs_sessions_approvals_and_tickets(
    tmp_path: Path,
) -> None:
    team = desk()
    own = team.store
    mem = team.bind(store=MemoryStore())
    lite = team.bind(store=f"sqlite:///{tmp_path}/b.db")
    assert isinstance(lite.store, SQLiteStore) and mem.store is not own

    paused = await mem.run("refund ORD-1 please", session_id="S")
    escalated = await lite.run("a human please", session_id="S")
    assert paused.status == "awaiting_approval" and escalated.status == "escalated"

    # each binding sees only its own store's sessions, approvals and tickets
    (card,) = await mem.approvals()
    assert await lite.approvals() == []
    assert [t.card.session_id for t in await lite.tickets.list()] == ["S"]
    assert await mem.tickets.list() == []
    assert [cp.session_id for cp in await mem.unfinished()] == ["S"]
    assert await lite.unfinished() == []
    messages = [[m.role for m in await b.store.get_messages("S")] for b in (mem, lite)]
    assert messages[0] != messages[1]  # one transcript per store
    with pytest.raises(ApprovalError):
        await lite.approve("S", card.id, by="alice")
    done = await mem.approve("S", card.id, by="alice")
    assert done.status == "completed" and done.output == "refunded ORD-1"
    assert await lite.approvals() == [] and await mem.approvals() == []

    # the team itself ran nothing and holds nothing
    assert team.store is own
    assert await own.list_sessions() == [] and await team.tickets.list() == []
    await lite.aclose()
    await mem.aclose()


async def test_each_binding_has_runs_of_its_own_and_shares_the_store_it_shares() -> None:
    gate = asyncio.Event()

    @tool
    async def slow(order_id: str) -> str:
        """Look an order up, slowly."""
        await gate.wait()
        return f"{order_id} shipped"

    def policy(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return S.say(last.content or "")
        return S.call("slow", order_id="ORD-3")

    team = Team([Agent(name="desk", tools=[slow])], entry="desk", model=S(policy))
    one, two = team.bind(store=MemoryStore()), team.bind(store=MemoryStore())
    running = asyncio.create_task(one.run("where is ORD-3", session_id="S"))
    while await one.unfinished() == []:
        await asyncio.sleep(0.01)
    # the run lives in `one`'s runner: neither the team nor the other binding can reach it
    assert await two.cancel("S") is None and await team.cancel("S") is None
    gate.set()
    result = await running
    assert result.status == "completed" and result.output == "ORD-3 shipped"

    # bindings on one store (None: the team's) see each other's sessions and approvals
    first = desk().bind()
    second = first.bind()
    assert second.store is first.store
    await first.run("refund ORD-2", session_id="R")
    (card,) = await second.approvals()
    done = await second.approve("R", card.id, by="bob")
    assert done.status == "completed"


async def test_none_inherits_the_teams_store_bus_and_sinks_and_empty_sinks_mean_none() -> None:
    seen = Recorder()
    team = Team(
        [Agent(name="desk")], entry="desk", model=S([S.say("hi")] * 5), sinks=[seen], bus=None
    )
    bound = team.bind()
    assert bound.store is team.store and bound.bus is team.bus
    assert bound.sinks == [seen] and bound.sinks is not team.sinks
    other = Recorder()
    bound.add_sink(other)
    assert team.sinks == [seen]  # adding to the binding's sinks leaves the team's alone
    await bound.run("hello", session_id="a")
    assert seen.events and other.events
    quiet = team.bind(sinks=[])
    before = len(seen.events)
    await quiet.run("hello", session_id="b")
    assert quiet.sinks == [] and len(seen.events) == before
    given = MemoryBus()
    assert team.bind(bus=given).bus is given
    assert team.bind(bus="memory://").bus is not team.bus


async def test_a_binding_closes_what_it_opened_and_never_what_it_was_given(
    tmp_path: Path,
) -> None:
    team = desk()
    theirs = SQLiteStore(f"sqlite:///{tmp_path}/theirs.db")
    given = team.bind(store=theirs)
    await given.run("hello", session_id="g")
    await given.aclose()
    assert [s.session_id for s in await theirs.list_sessions()] == ["g"]  # still open
    await theirs.close()

    opened = team.bind(store=f"sqlite:///{tmp_path}/opened.db")
    await opened.run("hello", session_id="o")
    await opened.aclose()
    with pytest.raises(StoreError):
        await opened.store.list_sessions()  # closed with the binding

    inherited = team.bind()
    await inherited.aclose()
    await team.run("hello", session_id="t")  # the team's own store is still open
    assert await team.session("t") is not None


async def test_a_binding_closes_a_bus_it_opened_and_leaves_the_teams() -> None:
    class Counted(MemoryBus):
        closed = 0

        async def close(self) -> None:
            Counted.closed += 1
            await super().close()

    team = Team([Agent(name="desk")], entry="desk", model=S([]), bus=Counted())
    shared = team.bind()
    assert shared.bus is team.bus
    await shared.aclose()
    assert Counted.closed == 0  # the team's bus: the team closes it
    await team.bind(bus=Counted()).aclose()
    assert Counted.closed == 0  # given: the caller's
    await team.aclose()
    assert Counted.closed == 1

    require_service("Redis", REDIS)
    opened = team.bind(bus=f"redis://{REDIS[0]}:{REDIS[1]}/0")
    assert await opened.bus.last_request("no-such-session") is None
    await opened.aclose()
    with pytest.raises(BusError):  # opened from its URL, closed with the binding
        await opened.bus.last_request("no-such-session")


async def test_a_closed_binding_is_let_go_by_the_teams_sinks() -> None:
    metrics = MetricsSink()  # it keeps the names of every team and binding it serves
    team = Team([Agent(name="desk")], entry="desk", model=S(lambda r: S.say("hi")), sinks=[metrics])
    bound = team.bind()
    await bound.run("hello", session_id="m")
    gone = weakref.ref(bound)
    await bound.aclose()
    del bound
    gc.collect()
    assert gone() is None
    await team.run("hello again", session_id="m")  # the team still reports to its sink
    assert metrics.registry.get_sample_value("baton_runs_total", {"status": "completed"}) == 2


def test_bad_arguments_are_refused_naming_them() -> None:
    team = desk()
    with pytest.raises(ConfigError, match="sinks must be a list of event sinks"):
        team.bind(sinks="jsonl")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"sinks must be event sinks .*\['int'\]"):
        team.bind(sinks=[1])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="bus must be a URL or a Bus object"):
        team.bind(bus=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="store must be a URL or a Store object"):
        team.bind(store=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown store URL"):
        team.bind(store="mysql://x")


# ------------------------------------------------------------------ every topology


class Count(BaseModel):
    n: int = 0


def plain(**kw: Any) -> Team:
    return Team([Agent(name="desk")], entry="desk", model=S(lambda r: S.say("hi")), **kw)


def supervisor(**kw: Any) -> Supervisor:
    def respond(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if request.agent == "lead":
            if last.role == "tool":
                return S.say(f"lead: {last.content}")
            return S.call("ask_faq", question="How long do refunds take?")
        return S.say("five days")

    return Supervisor(Agent(name="lead"), workers=[Agent(name="faq")], model=S(respond), **kw)


def pipeline(**kw: Any) -> Pipeline:
    def shout(text: str) -> str:
        """The text in capitals."""
        return text.upper()

    return Pipeline([shout, Agent(name="echo")], model=S(lambda r: S.say("said")), **kw)


def plan_execute_review(**kw: Any) -> PlanExecuteReview:
    plan = {"tasks": [{"task_id": "t1", "description": "Write it", "agent_role": "writer"}]}
    passed = {"verdict": "pass", **{d: {"ok": True} for d in ("completeness", "accuracy")}}
    passed.update({d: {"ok": True} for d in ("format", "safety")})

    def respond(request: ModelRequest) -> Any:
        if request.agent == "planner":
            return S.say(json.dumps(plan))
        if request.agent == "reviewer":
            return S.say(json.dumps(passed))
        return S.say(f"{request.agent} done")

    return PlanExecuteReview(
        planner=Agent(name="planner"),
        executors=[Agent(name="writer")],
        reviewer=Agent(name="reviewer"),
        model=S(respond),
        **kw,
    )


def blackboard(**kw: Any) -> Blackboard:
    def respond(request: ModelRequest) -> Any:
        if any(m.role == "tool" for m in request.messages):
            return S.say("posted")
        return S.call("post_to_board", key="answer", value="42", mode="set")

    return Blackboard(
        [Agent(name="solver")],
        {"solver": "request"},
        done=lambda values: "answer" in values,
        model=S(respond),
        **kw,
    )


def graph(**kw: Any) -> Team:
    g = Graph(Count).add_node("inc", lambda s: {"n": s.n + 1})
    return g.add_edge(START, "inc").add_edge("inc", END).compile(**kw)


def debate(**kw: Any) -> Debate:
    return Debate(
        [Agent(name="a"), Agent(name="b")], rounds=1, model=S(lambda r: S.say("42")), **kw
    )


async def nothing(team: Any, sid: str) -> Any:
    return None


async def board_of(team: Any, sid: str) -> Any:
    return {k: e.value for k, e in (await team.read(sid)).items() if k == "answer"}


async def state_of(team: Any, sid: str) -> Any:
    state = await team.get_state(sid)
    return state.values.n if state is not None else None


async def tasks_of(team: Any, sid: str) -> Any:
    return [t.status for t in await team.store.list_tasks(session_id=sid)] or None


TOPOLOGIES: dict[str, tuple[Callable[..., Team], str, Callable[[Any, str], Awaitable[Any]]]] = {
    "team": (plain, "hello", nothing),
    "supervisor": (supervisor, "refund time?", nothing),
    "pipeline": (pipeline, "hello", nothing),
    "plan_execute_review": (plan_execute_review, "write it", tasks_of),
    "blackboard": (blackboard, "what is 6 x 7?", board_of),
    "graph": (graph, "{}", state_of),
    "debate": (debate, "6 x 7?", nothing),
}
HAS = {"plan_execute_review": ["completed"], "blackboard": {"answer": "42"}, "graph": 1}


@pytest.mark.parametrize("name", list(TOPOLOGIES))
async def test_every_topology_bound_to_another_store_runs_there(name: str, tmp_path: Path) -> None:
    make, message, read = TOPOLOGIES[name]
    team = make()
    own = team.store
    bound = team.bind(store=f"sqlite:///{tmp_path}/{name}.db")
    assert type(bound) is type(team) and bound.agents is team.agents
    result = await bound.run(message, session_id="S")
    assert result.status == "completed", result.error
    assert await bound.session("S") is not None
    assert await read(bound, "S") == HAS.get(name)
    # the team is unchanged: its own store, untouched, and it runs there as before
    assert team.store is own and await own.get_session("S") is None
    assert await read(team, "S") in (None, {})
    again = await team.run(message, session_id="T")
    assert again.status == "completed", again.error
    assert await bound.session("T") is None
    await bound.aclose()


class NoSnapshots(MemoryStore):
    """A store without the Snapshots capability (a graph's snapshots)."""

    put_snapshot = None  # type: ignore[assignment]


class NoBoard(MemoryStore):
    """A store without the Blackboard capability."""

    write_entry = None  # type: ignore[assignment]


class NoTasks(MemoryStore):
    """A store without the Tasks capability (plan-execute-review's tasks)."""

    put_task = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("name", "store", "capability"),
    [
        ("graph", NoSnapshots, "Snapshots"),
        ("blackboard", NoBoard, "Blackboard"),
        ("plan_execute_review", NoTasks, "Tasks"),
    ],
)
def test_binding_to_a_store_without_a_needed_capability_names_it_and_the_stores_with_it(
    name: str, store: type[MemoryStore], capability: str
) -> None:
    team = TOPOLOGIES[name][0]()
    own = team.store
    with pytest.raises(ConfigError) as info:
        team.bind(store=store())
    text = str(info.value)
    topology = name.replace("_", "-")
    assert f"a {topology} needs a store with the {capability} capability" in text
    assert f"{store.__name__} (memory://) lacks it" in text
    for shipped in ("MemoryStore()", "SQLite", "PostgreSQL", "Redis"):
        assert shipped in text
    assert team.store is own
    with pytest.raises(ConfigError, match=f"{capability} capability"):
        TOPOLOGIES[name][0](store=store())  # the `Team(..., store=)` shorthand: the same check
