"""Baton side of the graph benchmark: `Graph` compiled onto `MemoryStore` or `SQLiteStore`.

Every super-step boundary is saved as a snapshot (`history`) and the run's checkpoint after
every node result, as in any Baton graph run. `SQLiteStore` keeps its file in WAL mode with
`synchronous=NORMAL`.
"""

from __future__ import annotations

import sys
from argparse import Namespace
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))  # the checkout's Baton, as the other sides

from graph_common import (  # noqa: E402
    INPUT,
    Close,
    Run,
    check_update,
    main,
    plan_update,
    route,
    work_update,
)
from pydantic import BaseModel  # noqa: E402

from baton import END, START, Graph  # noqa: E402
from baton.topologies.reducers import append  # noqa: E402


class State(BaseModel):
    items: Annotated[list[str], append] = []
    n: int = 0


async def plan(state: State) -> dict[str, Any]:
    return plan_update()


async def work(state: State) -> dict[str, Any]:
    return work_update(state.n)


async def check(state: State) -> dict[str, Any]:
    return check_update(state.n)


def after_check(state: State) -> str:
    return route(state.n)


def build() -> Graph:
    g = Graph(State)
    g.add_node("plan", plan)
    g.add_node("work", work)
    g.add_node("check", check)
    g.add_edge(START, "plan")
    g.add_edge("plan", "work")
    g.add_edge("work", "check")
    g.add_conditional_edges("check", after_check, {"again": "work", "done": END})
    return g


async def make_graph(checkpointer: str, db: str, args: Namespace) -> tuple[Run, Close]:
    if checkpointer == "sqlite" and args.sqlite_synchronous != "NORMAL":
        raise SystemExit("Baton's SQLiteStore runs with synchronous=NORMAL (WAL) only")
    store = None if checkpointer == "memory" else f"sqlite:///{db}"
    graph = build().compile(store=store)

    async def run(thread_id: str) -> dict[str, Any]:
        r = await graph.invoke(INPUT, thread_id=thread_id)
        if r.status != "completed":
            raise SystemExit(f"baton graph run went wrong: {r.status} {r.error}")
        return r.final.model_dump(mode="json")

    return run, graph.aclose


if __name__ == "__main__":
    try:
        v = version("baton-relay")
    except Exception:
        v = ""
    main("Baton", v, make_graph)
