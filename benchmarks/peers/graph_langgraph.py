"""LangGraph side of the graph benchmark: `StateGraph` with `InMemorySaver` or `AsyncSqliteSaver`.

Run with the LangGraph venv's python (`pip install langgraph langgraph-checkpoint-sqlite`).
The state is a `TypedDict` with an `operator.add` reducer (LangGraph's usual form). Runs use
`ainvoke` with the default durability, "async": a checkpoint per super-step, saved while the
next step runs (`--durability sync` waits for each save, as Baton does).

`AsyncSqliteSaver` opens its file in WAL mode; its connection gets `synchronous=NORMAL`, as
Baton's `SQLiteStore` (`--sqlite-synchronous FULL`: SQLite's default, which
`AsyncSqliteSaver.from_conn_string` keeps, an fsync per commit).
"""

from __future__ import annotations

import operator
from argparse import ArgumentParser, Namespace
from importlib.metadata import version
from typing import Annotated, Any, TypedDict

import aiosqlite
from graph_common import (
    INPUT,
    Close,
    Run,
    check_update,
    main,
    plan_update,
    route,
    work_update,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    items: Annotated[list[str], operator.add]
    n: int


async def plan(state: State) -> dict[str, Any]:
    return plan_update()


async def work(state: State) -> dict[str, Any]:
    return work_update(state["n"])


async def check(state: State) -> dict[str, Any]:
    return check_update(state["n"])


def after_check(state: State) -> str:
    return route(state["n"])


def build() -> StateGraph:
    g = StateGraph(State)
    g.add_node("plan", plan)
    g.add_node("work", work)
    g.add_node("check", check)
    g.add_edge(START, "plan")
    g.add_edge("plan", "work")
    g.add_edge("work", "check")
    g.add_conditional_edges("check", after_check, {"again": "work", "done": END})
    return g


def add_args(ap: ArgumentParser) -> None:
    ap.add_argument(
        "--durability",
        choices=["async", "sync", "exit"],
        default="async",
        help='when checkpoints are saved ("async", the default: while the next step runs)',
    )


async def make_graph(checkpointer: str, db: str, args: Namespace) -> tuple[Run, Close]:
    conn = None
    if checkpointer == "memory":
        saver: Any = InMemorySaver()
    else:  # as AsyncSqliteSaver.from_conn_string(db), with the synchronous setting chosen
        conn = await aiosqlite.connect(db)
        saver = AsyncSqliteSaver(conn)
        await saver.setup()  # WAL journal
        await conn.execute(f"PRAGMA synchronous = {args.sqlite_synchronous}")
    app = build().compile(checkpointer=saver)

    async def run(thread_id: str) -> dict[str, Any]:
        config: Any = {"configurable": {"thread_id": thread_id}}
        out = await app.ainvoke(dict(INPUT), config, durability=args.durability)
        return {"items": out["items"], "n": out["n"]}

    async def close() -> None:
        if conn is not None:
            await conn.close()

    return run, close


if __name__ == "__main__":
    main("LangGraph", version("langgraph"), make_graph, add_args)
