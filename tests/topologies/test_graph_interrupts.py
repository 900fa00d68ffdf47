"""Graph interrupts, approvals, crashes, history, forks and retention."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from baton import (
    END,
    START,
    Agent,
    ApprovalError,
    Graph,
    InterruptError,
    NodeContext,
    ScriptedModel,
    Team,
    interrupt,
    tool,
)
from baton.models.base import ModelRequest
from baton.topologies.reducers import append

S = ScriptedModel
CHILD = Path(__file__).with_name("graph_child.py")


class State(BaseModel):
    log: Annotated[list[str], append] = []
    answer: str = ""
    order_id: str = ""
    n: int = 0


async def test_an_interrupted_node_resumes_without_repeating_its_steps() -> None:
    effects: list[str] = []

    def charge(amount: int) -> str:
        """A side effect."""
        effects.append(f"charge {amount}")
        return "charged"

    async def ask(state: State, ctx: NodeContext) -> dict[str, Any]:
        done = await ctx.call(charge, amount=5)
        first = interrupt({"question": "继续吗？"})
        second = interrupt("and the colour?")
        return {"log": [done, str(first), str(second)]}

    g = Graph(State).add_node("before", lambda s: {"log": ["before"]}).add_node("ask", ask)
    g.add_edge(START, "before").add_edge("before", "ask").add_edge("ask", END)
    graph = g.compile()
    result = await graph.invoke({}, thread_id="t")
    assert result.status == "interrupted"
    assert result.interrupt is not None and result.interrupt.value == {"question": "继续吗？"}
    assert result.interrupt.name == "ask" and result.interrupt.index == 0
    assert [c.id for c in await graph.interrupts()] == [result.interrupt.id]
    second = await graph.resume("t", "是的")
    assert second.status == "interrupted" and second.interrupt is not None
    assert second.interrupt.value == "and the colour?" and second.interrupt.index == 1
    done = await graph.resume("t", "blue")
    assert done.status == "completed", done.error
    assert done.final.log == ["before", "charged", "是的", "blue"]
    assert effects == ["charge 5"]  # the step before the interrupt ran once
    assert await graph.interrupts() == []
    kinds = [e.type for e in done.events]
    assert "interrupt_resumed" in kinds and "run_resumed" in kinds


async def test_a_node_that_calls_another_step_where_one_was_recorded_fails_clearly() -> None:
    effects: list[str] = []
    changed = False

    def charge(amount: int) -> str:
        """A side effect."""
        effects.append(f"charge {amount}")
        return "charged"

    def refund(amount: int) -> str:
        """Another side effect."""
        effects.append(f"refund {amount}")
        return "refunded"

    async def ask(state: State, ctx: NodeContext) -> dict[str, Any]:
        done = await ctx.call(refund if changed else charge, amount=5)
        said = interrupt("go on?")
        return {"log": [done, str(said)]}

    g = Graph(State).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    graph = g.compile()
    first = await graph.invoke({}, thread_id="t")
    assert first.status == "interrupted"
    changed = True  # the node's code changed before the run resumed

    result = await graph.resume("t", "yes")

    assert result.status == "failed"
    assert result.error is not None
    assert "node 'ask' ran step 1 as 'charge'" in result.error
    assert "now calls 'refund' there" in result.error
    assert effects == ["charge 5"]  # neither step ran again, and the recorded one was not reused


async def test_a_tool_of_an_agent_node_interrupts_and_only_that_call_runs_again() -> None:
    effects: list[str] = []

    @tool
    async def look_up(order_id: str) -> str:
        """Look the order up."""
        effects.append(f"look_up {order_id}")
        return "order ORD-1: 3 items"

    @tool
    async def confirm(order_id: str) -> str:
        """Ask a person to confirm."""
        effects.append(f"confirm {order_id}")
        said = interrupt(f"refund {order_id}?")
        return f"person said {said}"

    asked: list[str] = []

    def respond(request: ModelRequest) -> Any:
        asked.append(request.agent)
        last = request.messages[-1]
        if last.role != "tool":
            return S.calls(S.call("look_up", order_id="ORD-1"), S.call("confirm", order_id="ORD-1"))
        return S.say("done: " + (last.content or ""))

    g = Graph(State).add_node(
        "clerk", Agent(name="clerk", tools=[look_up, confirm]), output_key="answer"
    )
    g.add_edge(START, "clerk").add_edge("clerk", END)
    graph = g.compile(model=S(respond))
    result = await graph.invoke({"order_id": "ORD-1"}, thread_id="t")
    assert result.status == "interrupted", result.error
    assert result.interrupt is not None and result.interrupt.name == "confirm"
    assert result.interrupt.value == "refund ORD-1?"
    done = await graph.resume("t", "yes")
    assert done.status == "completed", done.error
    assert done.final.answer == "done: person said yes"
    # the finished call was not repeated, the model was not asked again for the calls
    assert effects == ["look_up ORD-1", "confirm ORD-1", "confirm ORD-1"]
    assert asked == ["clerk", "clerk"]


async def test_interrupts_refuse_what_would_lose_or_misplace_an_answer() -> None:
    async def ask(state: State) -> dict[str, Any]:
        return {"answer": str(interrupt("ok?"))}

    g = Graph(State).add_node("ask", ask)
    g.add_edge(START, "ask")
    graph = g.compile()
    with pytest.raises(InterruptError, match="no run waiting"):
        await graph.resume("t", "yes")
    result = await graph.invoke({}, thread_id="t")
    assert result.status == "interrupted" and result.interrupt is not None
    with pytest.raises(InterruptError, match="waits for an answer to interrupt"):
        await graph.invoke({}, thread_id="t")  # a new run would drop the question
    with pytest.raises(InterruptError, match="must be JSON"):
        await graph.resume("t", {1, 2})
    deep: list[Any] = []
    for _ in range(5_000):  # a person's answer nested far too deep: refused, not a crash
        deep = [deep]
    with pytest.raises(InterruptError, match="more than 64 levels"):
        await graph.resume("t", deep)
    with pytest.raises(InterruptError, match="more than 64 levels"):
        await graph.resume(
            "t",
            {
                "a": [
                    [
                        [
                            [
                                [
                                    [
                                        [
                                            [
                                                [
                                                    [
                                                        [
                                                            [
                                                                [
                                                                    [
                                                                        [
                                                                            [
                                                                                [
                                                                                    [
                                                                                        [
                                                                                            [
                                                                                                [
                                                                                                    [
                                                                                                        [
                                                                                                            [
                                                                                                                [
                                                                                                                    [
                                                                                                                        [
                                                                                                                            [
                                                                                                                                [
                                                                                                                                    [
                                                                                                                                        [
                                                                                                                                            [
                                                                                                                                                [
                                                                                                                                                    [
                                                                                                                                                        [
                                                                                                                                                            [
                                                                                                                                                                [
                                                                                                                                                                    [
                                                                                                                                                                        [
                                                                                                                                                                            [
                                                                                                                                                                                [
                                                                                                                                                                                    [
                                                                                                                                                                                        [
                                                                                                                                                                                            [
                                                                                                                                                                                                [
                                                                                                                                                                                                    [
                                                                                                                                                                                                        [
                                                                                                                                                                                                            [
                                                                                                                                                                                                                [
                                                                                                                                                                                                                    [
                                                                                                                                                                                                                        [
                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                                                                            1
                                                                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                ]
                                                                                                                                                                                                            ]
                                                                                                                                                                                                        ]
                                                                                                                                                                                                    ]
                                                                                                                                                                                                ]
                                                                                                                                                                                            ]
                                                                                                                                                                                        ]
                                                                                                                                                                                    ]
                                                                                                                                                                                ]
                                                                                                                                                                            ]
                                                                                                                                                                        ]
                                                                                                                                                                    ]
                                                                                                                                                                ]
                                                                                                                                                            ]
                                                                                                                                                        ]
                                                                                                                                                    ]
                                                                                                                                                ]
                                                                                                                                            ]
                                                                                                                                        ]
                                                                                                                                    ]
                                                                                                                                ]
                                                                                                                            ]
                                                                                                                        ]
                                                                                                                    ]
                                                                                                                ]
                                                                                                            ]
                                                                                                        ]
                                                                                                    ]
                                                                                                ]
                                                                                            ]
                                                                                        ]
                                                                                    ]
                                                                                ]
                                                                            ]
                                                                        ]
                                                                    ]
                                                                ]
                                                            ]
                                                        ]
                                                    ]
                                                ]
                                            ]
                                        ]
                                    ]
                                ]
                            ]
                        ]
                    ]
                ]
            },
        )
    with pytest.raises(InterruptError, match="not 'int_other'"):
        await graph.answer_interrupt("t", "x", interrupt_id="int_other")
    assert (await graph.resume("t")).status == "interrupted"  # no answer: still waiting
    done = await graph.answer_interrupt("t", "yes", interrupt_id=result.interrupt.id)
    assert done.status == "completed" and done.final.answer == "yes"


async def test_interrupt_outside_a_run_says_where_it_belongs() -> None:
    with pytest.raises(RuntimeError, match="inside a graph node's function or a tool"):
        interrupt("hello")


async def test_a_plain_team_tool_can_interrupt_too() -> None:
    @tool
    async def transfer(amount: int) -> str:
        """Move money."""
        ok = interrupt({"amount": amount})
        return "moved" if ok else "kept"

    model = S([S.call("transfer", amount=30), S.say("finished")])
    team = Team([Agent(name="bank", tools=[transfer])], entry="bank", model=model)
    result = await team.run("move 30", session_id="s")
    assert result.status == "interrupted" and result.interrupt is not None
    done = await team.answer_interrupt("s", True)
    assert done.status == "completed" and done.output == "finished"
    results = [m for m in done.events if m.type == "tool_called" and m.tool == "transfer"]
    assert len(results) == 1 and results[0].ok


async def test_a_cancelled_interrupted_run_is_cancelled() -> None:
    async def ask(state: State) -> dict[str, Any]:
        return {"answer": str(interrupt("ok?"))}

    g = Graph(State).add_node("ask", ask)
    g.add_edge(START, "ask")
    graph = g.compile()
    assert (await graph.invoke({}, thread_id="t")).status == "interrupted"
    cancelled = await graph.cancel("t", reason="the customer left")
    assert cancelled is not None and cancelled.status == "cancelled"
    assert await graph.interrupts() == []


async def test_an_approval_gate_inside_an_agent_node_works_unchanged() -> None:
    paid: list[str] = []

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        paid.append(order_id)
        return "refunded"

    def respond(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return S.say("refund done")
        return S.call("refund", order_id="ORD-9")

    g = Graph(State).add_node("billing", Agent(name="billing", tools=[refund]), output_key="answer")
    g.add_edge(START, "billing")
    graph = g.compile(model=S(respond))
    result = await graph.invoke({"order_id": "ORD-9"}, thread_id="t")
    assert result.status == "awaiting_approval" and result.approval is not None
    assert paid == []
    with pytest.raises(ApprovalError):
        await graph.invoke({}, thread_id="t")
    done = await graph.approve("t", result.approval.id, by="alice")
    assert done.status == "completed" and done.final.answer == "refund done"
    assert paid == ["ORD-9"]


def _run_child(db: Path, ledger: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHILD.parent), *sys.path])}
    out = subprocess.run(
        [sys.executable, str(CHILD), str(db), str(ledger), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return data


def test_interrupt_in_one_process_and_resume_in_another(tmp_path: Path) -> None:
    db, ledger = tmp_path / "graph.db", tmp_path / "ledger"
    first = _run_child(db, ledger, "start")
    assert first["status"] == "interrupted"
    assert first["interrupt"]["value"]["question"] == "退款 12.5 元，批准吗？"
    done = _run_child(db, ledger, "answer", "yes")
    assert done["status"] == "completed"
    assert done["final"]["log"] == ["reserve:ORD-7", "pay:ORD-7"]
    effects = ledger.read_text(encoding="utf-8").splitlines()
    assert [e.split()[0] for e in effects] == ["reserve", "pay"]  # each exactly once
    assert len({e.split()[2] for e in effects}) == 2  # each with its own idempotency key


def test_kill_9_after_a_paid_step_resumes_in_another_process_without_paying_twice(
    tmp_path: Path,
) -> None:
    db, ledger = tmp_path / "graph.db", tmp_path / "ledger"
    assert _run_child(db, ledger, "start")["status"] == "interrupted"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHILD.parent), *sys.path])}
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(ledger), "answer", "yes", "hang"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if ledger.exists() and "pay" in ledger.read_text(encoding="utf-8"):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.3)  # the step's checkpoint follows its result
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    done = _run_child(db, ledger, "resume")
    assert done["status"] == "completed", done
    assert done["final"]["log"] == ["reserve:ORD-7", "pay:ORD-7"]
    effects = ledger.read_text(encoding="utf-8").splitlines()
    assert [e.split()[0] for e in effects] == ["reserve", "pay"]  # paid once


async def test_concurrent_runs_on_one_thread_take_turns_and_lose_no_write() -> None:
    g = Graph(State).add_node("inc", lambda s: {"n": s.n + 1, "log": [f"n={s.n + 1}"]})
    g.add_edge(START, "inc")
    graph = g.compile()
    results = await asyncio.gather(*[graph.invoke({}, thread_id="T") for _ in range(5)])
    assert all(r.status == "completed" for r in results)
    assert sorted(r.final.n for r in results) == [1, 2, 3, 4, 5]
    assert (await graph.get_state("T")).values.log == [f"n={i}" for i in range(1, 6)]


async def test_lone_surrogates_in_node_output_and_answers_are_stored_cleaned(
    tmp_path: Path,
) -> None:
    async def ask(state: State) -> dict[str, Any]:
        said = interrupt("名字？\ud800")
        return {"answer": f"{said}", "log": ["x\udfff"]}

    g = Graph(State).add_node("ask", ask)
    g.add_edge(START, "ask")
    graph = g.compile(store=f"sqlite:///{tmp_path / 's.db'}")
    first = await graph.invoke({}, thread_id="T")
    assert first.status == "interrupted" and first.interrupt is not None
    assert first.interrupt.value == "名字？\ufffd"
    done = await graph.resume("T", "张\udc00三")
    assert done.status == "completed", done.error
    assert done.final.answer == "张\ufffd三" and done.final.log == ["x\ufffd"]
    await graph.aclose()


async def test_a_crashed_graph_resumes_without_rerunning_finished_nodes(
    tmp_path: Path, dies_when_cancelled: None
) -> None:
    ran: list[str] = []
    gate = asyncio.Event()

    def step() -> str:
        """A side effect of the slow node."""
        ran.append("slow step")
        return "ok"

    async def fast(state: State) -> dict[str, Any]:
        ran.append("fast")
        return {"log": ["fast"]}

    async def slow(state: State, ctx: NodeContext) -> dict[str, Any]:
        ran.append("slow")
        await ctx.call(step)
        if ran.count("slow") == 1:
            await gate.wait()  # the process dies here the first time
        return {"log": ["slow"]}

    def build() -> Any:
        g = Graph(State).add_node("fast", fast).add_node("slow", slow)
        g.add_node("after", lambda s: {"log": ["after"]})
        g.add_edge(START, "fast").add_edge(START, "slow").add_edge(["fast", "slow"], "after")
        return g.compile(store=f"sqlite:///{tmp_path / 'g.db'}")

    graph = build()
    task = asyncio.ensure_future(graph.invoke({}, thread_id="T"))
    for _ in range(300):
        if "slow step" in ran and "fast" in ran:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    again = build()
    result = await again.resume("T")
    assert result.status == "completed", result.error
    assert result.final.log == ["fast", "slow", "after"]
    assert ran == ["fast", "slow", "slow step", "slow"]  # fast and the step ran once
    await graph.aclose()
    await again.aclose()


async def _counting_graph(**compile: Any) -> Any:
    g = Graph(State).add_node("inc", lambda s: {"n": s.n + 1, "log": [f"n={s.n + 1}"]})
    g.add_edge(START, "inc")
    g.add_conditional_edges(
        "inc", lambda s: "again" if s.n < 4 else "stop", {"again": "inc", "stop": END}
    )
    return g.compile(**compile)


async def test_history_lists_every_super_step_and_a_fork_leaves_the_newer_branch(
    tmp_path: Path,
) -> None:
    graph = await _counting_graph(store=f"sqlite:///{tmp_path / 'h.db'}", keep_last=None)
    result = await graph.invoke({}, thread_id="T")
    assert result.final.n == 4
    history = await graph.history("T")
    assert [h.step for h in history] == [4, 3, 2, 1, 0]  # newest first
    assert history[0].next == [] and history[-1].next == ["inc"]
    assert [h.values.n for h in history] == [4, 3, 2, 1, 0]
    assert all(h.parent_id == nxt.id for h, nxt in itertools.pairwise(history))
    before = {h.id: h.values for h in history}
    older = history[3]  # after the first increment (n == 1)
    forked = await graph.resume("T", from_checkpoint=older.id, update={"log": ["forked"]})
    assert forked.status == "completed", forked.error
    assert forked.final.n == 4
    assert forked.final.log == ["n=1", "forked", "n=2", "n=3", "n=4"]
    after = await graph.history("T")
    assert {h.id: h.values for h in after if h.id in before} == before  # untouched
    new = [h for h in after if h.id not in before]
    assert min(new, key=lambda h: h.step).parent_id == older.id
    assert (await graph.get_state("T")).values.log[1] == "forked"  # the latest is the fork's
    await graph.aclose()


async def test_a_fork_from_an_unknown_or_dropped_snapshot_says_so() -> None:
    graph = await _counting_graph(keep_last=2)
    await graph.invoke({}, thread_id="T")
    history = await graph.history("T")
    assert len(history) == 2  # retention: the newest two of five
    with pytest.raises(Exception, match="no snapshot 'nope'"):
        await graph.resume("T", from_checkpoint="nope")
    with pytest.raises(ValueError, match="update= goes with from_checkpoint"):
        await graph.resume("T", update={"n": 1})


async def test_retention_bounds_snapshots_per_thread_over_many_runs() -> None:
    graph = await _counting_graph(keep_last=3)
    for _ in range(5):
        await graph.invoke({"n": 0}, thread_id="T")
    assert len(await graph.history("T")) == 3
    await graph.invoke({"n": 0}, thread_id="U")
    assert len(await graph.history("U")) == 3 and len(await graph.history("T")) == 3


async def test_forking_discards_an_interrupted_run_of_the_newer_branch() -> None:
    async def ask(state: State) -> dict[str, Any]:
        return {"answer": str(interrupt("ok?"))}

    g = Graph(State).add_node("first", lambda s: {"log": ["first"]}).add_node("ask", ask)
    g.add_edge(START, "first").add_edge("first", "ask")
    graph = g.compile()
    assert (await graph.invoke({}, thread_id="T")).status == "interrupted"
    start = (await graph.history("T"))[-1]
    again = await graph.resume("T", from_checkpoint=start.id)
    assert again.status == "interrupted"  # the fork asks again, on its own branch
    done = await graph.resume("T", "yes")
    assert done.status == "completed" and done.final.log == ["first"]
