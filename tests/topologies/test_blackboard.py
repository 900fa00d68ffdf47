"""Blackboard: agents triggered by keys or predicates (in parallel, never by their own writes),
`post_to_board` with set/append/merge, conflicts retried and counted, how a run ends, and
resumption without asking an agent that answered again."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from baton import Agent, ConfigError, Guards, MemoryStore, ScriptedModel
from baton.backends import BoardEntry, SQLiteStore
from baton.core.events import BoardWritten, Event
from baton.models.base import ModelRequest, ModelResponse
from baton.observe import MetricsSink
from baton.topologies.blackboard import Blackboard

S = ScriptedModel
SCHEMA = {"客户": ["编号", "姓名"], "订单": ["编号", "客户编号", "金额"]}
DESIGN = {
    "architect": [("schema", SCHEMA, "set")],
    "frontend": [
        ("frontend", ["客户列表", "订单列表"], "set"),
        ("decisions", "前端：每表一屏", "append"),
    ],
    "database": [
        ("database", "CREATE TABLE 订单 (...)", "set"),
        ("decisions", "数据库：外键", "append"),
    ],
}
HAS_ALL = ("schema", "frontend", "database")


class Desk(ScriptedModel):
    """Each agent posts its steps one call at a time, then answers; records who was asked."""

    def __init__(self, steps: dict[str, list[tuple[str, Any, str]]]) -> None:
        super().__init__(self.respond)
        self.steps = steps
        self.asked: list[tuple[str, str]] = []
        self.gates: dict[str, asyncio.Event] = {}
        """Agent -> an event its first model call waits for (a worker that hangs)."""
        self.meet: asyncio.Barrier | None = None
        """Frontend and database wait here on their first call: only parallel runs pass."""

    def respond(self, request: ModelRequest) -> Any:
        done = sum(1 for m in request.messages if m.role == "tool")
        steps = self.steps.get(request.agent or "", [])
        if done < len(steps):
            key, value, mode = steps[done]
            return S.call("post_to_board", key=key, value=value, mode=mode)
        return S.say(f"{request.agent} done")

    async def generate(self, request: ModelRequest) -> ModelResponse:
        agent = request.agent or ""
        if not any(m.role == "tool" for m in request.messages):
            self.asked.append((agent, request.messages[-1].content or ""))
            gate = self.gates.get(agent)
            if gate is not None:
                await gate.wait()
            if self.meet is not None and agent in ("frontend", "database"):
                await asyncio.wait_for(self.meet.wait(), 2)
        return await super().generate(request)

    def count(self) -> Counter[str]:
        return Counter(agent for agent, _ in self.asked)


def board(model: Desk, subs: dict[str, Any] | None = None, **kw: Any) -> Blackboard:
    names = list(subs or {}) or ["architect", "frontend", "database"]
    kw.setdefault("done", lambda values: all(k in values for k in HAS_ALL))
    return Blackboard(
        [Agent(name=n) for n in names],
        subs or {"architect": ["request"], "frontend": "schema", "database": ["schema"]},
        model=model,
        **kw,
    )


def writes(events: list[Event]) -> list[BoardWritten]:
    return [e for e in events if isinstance(e, BoardWritten)]


async def test_agents_subscribed_to_a_key_react_to_it_in_parallel() -> None:
    desk = Desk(DESIGN)
    desk.meet = asyncio.Barrier(2)  # frontend and database must be running at the same time
    bb = board(desk)
    result = await bb.run("设计一个订单系统", session_id="S")
    assert result.status == "completed", result.error
    values = json.loads(result.output or "{}")
    assert values["request"] == "设计一个订单系统" and values["schema"] == SCHEMA
    assert sorted(values["decisions"]) == ["前端：每表一屏", "数据库：外键"]
    assert desk.count() == {"architect": 1, "frontend": 1, "database": 1}
    asks = [e for e in result.events if e.type == "tool_called" and e.tool.startswith("ask_")]
    rounds = {e.tool: e.call_id.split(":")[1] for e in asks}
    assert rounds == {"ask_architect": "1", "ask_frontend": "2", "ask_database": "2"}
    # the agent's view: the board quoted as JSON, and what changed
    frontend_view = dict(desk.asked)["frontend"]
    assert '"客户"' in frontend_view and "Changed since the last round: schema." in frontend_view
    stored = await bb.read("S")
    assert stored["schema"].writer == "architect" and stored["decisions"].version == 2
    assert {e.key: e.agent for e in writes(result.events)}["request"] == "blackboard"


async def test_a_predicate_subscription_wakes_its_agent_when_it_holds() -> None:
    def both_sides(values: dict[str, Any], changed: set[str]) -> bool:
        return {"frontend", "database"} <= values.keys() and bool(changed & values.keys())

    desk = Desk({**DESIGN, "reviewer": [("review", {"通过": True}, "set")]})
    subs = {"architect": "request", "frontend": "schema", "database": "schema"}
    bb = board(desk, {**subs, "reviewer": both_sides}, done=lambda v: "review" in v)
    result = await bb.run("设计", session_id="S")
    assert result.status == "completed", result.error
    assert desk.count()["reviewer"] == 1
    reviewed = [e for e in result.events if e.type == "tool_called" and e.tool == "ask_reviewer"]
    assert reviewed[0].call_id.startswith("round:3:")
    assert "both_sides" in bb.to_mermaid()


async def test_an_agents_own_writes_never_wake_it_again() -> None:
    desk = Desk({"notes": [("notes", "第一版", "set")], "echo": [("echo", "收到", "set")]})
    bb = board(desk, {"notes": ["request", "notes"], "echo": ["notes"]}, done=None)
    result = await bb.run("记下来", session_id="S")
    assert result.status == "completed", result.error  # no `done`: it answers once quiet
    assert desk.count() == {"notes": 1, "echo": 1}
    assert json.loads(result.output or "{}")["echo"] == "收到"


class Race(MemoryStore):
    """The first two reads of `decisions` wait for each other: both writers hold the same
    version, so one of the two compare-and-set writes must fail."""

    def __init__(self) -> None:
        super().__init__()
        self.meet = asyncio.Barrier(2)
        self.reads = 0

    async def read_entry(self, board: str, key: str) -> BoardEntry | None:
        entry = await super().read_entry(board, key)
        if key == "decisions" and self.reads < 2:
            self.reads += 1
            await asyncio.wait_for(self.meet.wait(), 2)
        return entry


async def test_a_concurrent_write_is_retried_and_counted_without_losing_an_update() -> None:
    metrics = MetricsSink()
    bb = board(Desk(DESIGN), store=Race(), sinks=[metrics])
    result = await bb.run("设计", session_id="S")
    assert result.status == "completed", result.error
    decided = [e for e in writes(result.events) if e.key == "decisions"]
    assert sorted(e.conflicts for e in decided) == [0, 1]
    assert sorted(e.version for e in decided) == [1, 2]
    entry = (await bb.read("S"))["decisions"]
    assert sorted(entry.value) == ["前端：每表一屏", "数据库：外键"]  # both appends kept
    text = metrics.render()
    # "decisions" is a key only the agents' models chose: no subscription names it
    assert 'baton_board_conflicts_total{key="other"} 1.0' in text
    declared = MetricsSink()
    bb = board(Desk(DESIGN), store=Race(), sinks=[declared], keys=["decisions"])
    assert (await bb.run("设计", session_id="S")).status == "completed"
    assert 'baton_board_conflicts_total{key="decisions"} 1.0' in declared.render()
    assert 'baton_board_writes_total{writer="frontend"} 2.0' in text


async def test_set_append_and_merge_and_posts_that_do_not_fit() -> None:
    steps = [
        ("profile", {"名字": "张三"}, "set"),
        ("profile", {"城市": "北京"}, "merge"),
        ("log", "第一步", "append"),
        ("log", "第二步", "append"),
        ("log", "第二步", "append"),  # the same post again in this turn: lands once
        ("log", {"x": 1}, "merge"),  # a list: nothing merges into it
        ("profile", "文本", "append"),  # an object: nothing appends to it
        ("profile", {"名字": "张三"}, "merge"),  # changes nothing: not written
    ]
    desk = Desk({"clerk": steps})
    clerk = Agent(name="clerk", max_iterations=len(steps) + 1)
    bb = Blackboard([clerk], {"clerk": "request"}, model=desk)
    result = await bb.run("整理资料", session_id="S")
    assert result.status == "completed", result.error
    values = json.loads(result.output or "{}")
    assert values["profile"] == {"名字": "张三", "城市": "北京"}
    assert values["log"] == ["第一步", "第二步"]
    results = [
        json.loads(m.content or "{}") for m in desk.requests[-1].messages if m.role == "tool"
    ]
    assert results[4] == {"ok": True, "key": "log", "unchanged": True, "note": "posted already"}
    assert "not an object" in results[5]["error"] and "not a list" in results[6]["error"]
    assert results[7] == {"ok": True, "key": "profile", "unchanged": True, "version": 2, "seq": 3}
    assert [e.version for e in writes(result.events) if e.key == "profile"] == [1, 2]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_post_over_the_size_cap_is_refused_with_the_reason_and_writes_nothing(
    store: str, tmp_path: Path
) -> None:
    big = "报告" * 40_000  # 240,000 bytes of UTF-8: over the 64 KiB default
    steps = [
        ("report", big, "set"),  # refused
        ("report", "摘要：增长", "set"),  # the summary instead
        ("log", "甲" * 20_000, "append"),  # 60,000 bytes: fits
        ("log", "乙" * 2_000, "append"),  # the list would pass the cap: refused
    ]
    desk = Desk({"clerk": steps})
    clerk = Agent(name="clerk", max_iterations=len(steps) + 1)
    where = MemoryStore() if store == "memory" else SQLiteStore(f"sqlite:///{tmp_path / 'b.db'}")
    bb = Blackboard([clerk], {"clerk": "request"}, model=desk, store=where)

    result = await bb.run("写报告", session_id="S")

    assert result.status == "completed", result.error
    results = [
        json.loads(m.content or "{}") for m in desk.requests[-1].messages if m.role == "tool"
    ]
    assert [r["ok"] for r in results] == [False, True, True, False]
    for refused in (results[0], results[3]):
        assert "Guards.max_board_value_bytes" in refused["error"]
        assert "nothing was written" in refused["error"]
    assert "240,002 bytes" in results[0]["error"]
    stored = await bb.read("S")
    assert stored["report"].value == "摘要：增长" and stored["report"].version == 1
    assert stored["log"].value == ["甲" * 20_000] and stored["log"].version == 1
    await bb.aclose()


async def test_the_board_cap_is_a_guard_and_a_request_over_it_fails_clearly() -> None:
    desk = Desk({"clerk": [("report", "报告" * 40_000, "set")]})
    bb = Blackboard(
        [Agent(name="clerk")],
        {"clerk": "request"},
        model=desk,
        guards=Guards(max_board_value_bytes=0),  # 0: no cap
        done=lambda values: "report" in values,
    )
    assert (await bb.run("写报告", session_id="S")).status == "completed"

    small = Blackboard(
        [Agent(name="clerk")],
        {"clerk": "request"},
        model=Desk({}),
        guards=Guards(max_board_value_bytes=1_000),
    )
    result = await small.run("长" * 1_000, session_id="S")
    assert result.status == "failed"
    assert "could not be posted" in (result.error or "")
    assert "Guards.max_board_value_bytes" in (result.error or "")


async def test_a_quiet_board_that_is_not_done_escalates() -> None:
    desk = Desk({"architect": [("schema", SCHEMA, "set")]})
    bb = board(desk, {"architect": "request"})
    result = await bb.run("设计", session_id="S")
    assert result.status == "escalated"
    [trip] = [e for e in result.events if e.type == "guard_tripped"]
    assert trip.guard == "board_quiet" and "not done" in trip.detail
    [ticket] = await bb.tickets.list()
    assert "board_quiet" in ticket.card.reasons[0]


async def test_a_board_still_not_done_after_max_rounds_escalates() -> None:
    turns = itertools.count()

    def respond(request: ModelRequest) -> Any:  # each writes a new value every time
        if any(m.role == "tool" for m in request.messages):
            return S.say("ok")
        return S.call("post_to_board", key=request.agent or "", value=f"第{next(turns)}轮")

    bb = Blackboard(
        [Agent(name="ping"), Agent(name="pong")],
        {"ping": ["request", "pong"], "pong": ["ping"]},
        done=lambda values: False,
        max_rounds=3,
        model=S(respond),
    )
    result = await bb.run("开始", session_id="S")
    assert result.status == "escalated"
    assert [e.guard for e in result.events if e.type == "guard_tripped"] == ["max_rounds"]
    asks = [e.tool for e in result.events if e.type == "tool_called" and e.tool.startswith("ask_")]
    assert asks == ["ask_ping", "ask_pong", "ask_ping"]


async def test_a_killed_run_resumes_without_asking_an_agent_that_answered(
    tmp_path: Path, dies_when_cancelled: None
) -> None:
    url = f"sqlite:///{tmp_path / 'board.db'}"
    desk = Desk(DESIGN)
    desk.gates["database"] = asyncio.Event()  # never set: the process dies while it hangs
    bb = board(desk, store=url)
    task = asyncio.ensure_future(bb.run("设计", session_id="S"))
    for _ in range(300):
        if "database" in desk.count() and (await bb.read("S")).get("decisions"):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # the frontend's answer is checkpointed
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    again = Desk(DESIGN)
    fresh = board(again, store=url)  # another process
    result = await fresh.resume("S")
    assert result.status == "completed", result.error
    assert again.count() == {"database": 1}  # neither the architect nor frontend again
    stored = await fresh.store.get_events("S")
    assert Counter(e.key for e in writes(stored)) == {
        "request": 1,
        "schema": 1,
        "frontend": 1,
        "database": 1,
        "decisions": 2,
    }
    assert (await fresh.read("S"))["frontend"].version == 1
    await bb.aclose()
    await fresh.aclose()


class NoBoard(MemoryStore):
    """A store without the Blackboard capability."""

    read_board = None  # type: ignore[assignment]


def test_configuration_mistakes_are_refused() -> None:
    a = Agent(name="a", model=S([]))
    with pytest.raises(ConfigError, match="lacks it: use MemoryStore"):
        Blackboard([a], {"a": "request"}, store=NoBoard())
    with pytest.raises(ConfigError, match="unknown agents"):
        Blackboard([a], {"a": "request", "b": "x"})
    with pytest.raises(ConfigError, match="subscribe to nothing"):
        Blackboard([a, Agent(name="b", model=S([]))], {"a": "request"})
    with pytest.raises(ConfigError, match="non-empty list of keys"):
        Blackboard([a], {"a": []})
    with pytest.raises(ConfigError, match="handoffs"):
        Blackboard([Agent(name="b", handoffs=["a"]), a], {"a": "x", "b": "y"})
    with pytest.raises(ConfigError, match="at least 1"):
        Blackboard([a], {"a": "request"}, max_rounds=0)
    for keys in ("decisions", ["ok", ""], [None]):
        with pytest.raises(ConfigError, match="keys must be a list of non-empty key names"):
            Blackboard([a], {"a": "request"}, keys=keys)  # type: ignore[arg-type]
    bb = Blackboard([a], {"a": "request"})
    with pytest.raises(ConfigError, match="lacks it"):
        bb.use_store(NoBoard())


def test_the_mermaid_shows_the_keys_each_agent_subscribes_to() -> None:
    text = board(Desk({})).to_mermaid()
    assert '("board.schema")' in text and '|"changed"|' in text
    assert text.count('|"post_to_board"|') == 3


class DiesAfterWriting(SQLiteStore):
    """The process dies right after the first append to `decisions` is stored, before the
    post's result is recorded."""

    async def write_entry(
        self, board: str, key: str, value: Any, expected_version: int, *, writer: str = ""
    ) -> BoardEntry:
        entry = await super().write_entry(board, key, value, expected_version, writer=writer)
        if key == "decisions":
            raise asyncio.CancelledError
        return entry


async def test_a_post_interrupted_after_its_write_is_not_appended_again_on_resume(
    tmp_path: Path, dies_when_cancelled: None
) -> None:
    url = f"sqlite:///{tmp_path / 'board.db'}"
    dying = board(Desk(DESIGN), store=DiesAfterWriting(url))
    with pytest.raises(asyncio.CancelledError):
        await dying.run("设计", session_id="S")
    fresh = board(Desk(DESIGN), store=url)  # another process
    result = await fresh.resume("S")
    assert result.status == "completed", result.error
    decisions = (await fresh.read("S"))["decisions"].value
    assert sorted(decisions) == ["前端：每表一屏", "数据库：外键"]  # each once
    await dying.aclose()
    await fresh.aclose()
