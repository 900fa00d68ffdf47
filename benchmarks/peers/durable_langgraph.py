"""LangGraph side of the durable benchmark: the graph of `graph_langgraph.py` and the
langgraph-swarm conversation of `langgraph_side.py`, compiled with `InMemorySaver`,
`AsyncSqliteSaver` (WAL, `synchronous=NORMAL` as Baton's store) or `AsyncPostgresSaver` (as
`from_conn_string`: psycopg, autocommit, in a schema of its own per instance, dropped on close).

Run with the LangGraph venv's python (`pip install langgraph langgraph-checkpoint-sqlite
langgraph-checkpoint-postgres langgraph-swarm 'psycopg[binary]'`). `--durability sync` (the
default here) saves each checkpoint before the next step starts, as Baton does; `async`,
LangGraph's own default, saves it while the next step runs.
"""

from __future__ import annotations

import uuid
import warnings
from argparse import Namespace
from importlib.metadata import version
from typing import Any

import aiosqlite
from durable_common import CONVERSATION_STEPS, Close, Counted, Run, SqlTrace, main, psql
from graph_common import INPUT, SUPER_STEPS
from graph_langgraph import build
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from psycopg import AsyncConnection
from psycopg.rows import dict_row

warnings.filterwarnings("ignore")  # create_react_agent deprecation notice in langgraph 1.x

from common import ANSWER, USER  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402
from langgraph_side import ScriptedChatModel, query_invoice  # noqa: E402
from langgraph_swarm import create_handoff_tool, create_swarm  # noqa: E402


async def saver_for(
    store: str, where: str, args: Namespace, counts: Counted | None
) -> tuple[Any, Close]:
    if store == "memory":

        async def nothing() -> None:
            return None

        return InMemorySaver(), nothing
    if store == "sqlite":  # as AsyncSqliteSaver.from_conn_string, with the synchronous setting
        conn = await aiosqlite.connect(where)
        saver: Any = AsyncSqliteSaver(conn)
        await saver.setup()  # WAL journal
        await conn.execute("PRAGMA synchronous = NORMAL")
        if counts is not None:
            await conn.set_trace_callback(SqlTrace(counts))
        return saver, conn.close
    schema = f"bench_lg_{uuid.uuid4().hex[:10]}"
    psql(args.postgres, f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in where else "?"
    pg = await AsyncConnection.connect(
        f"{where}{sep}options=-csearch_path%3D{schema}",
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
    )
    saver = AsyncPostgresSaver(pg)  # as AsyncPostgresSaver.from_conn_string(...)
    await saver.setup()

    async def close() -> None:
        await pg.close()
        psql(args.postgres, f"DROP SCHEMA {schema} CASCADE")

    return saver, close


def swarm() -> Any:
    triage = create_react_agent(
        ScriptedChatModel(agent="triage"),
        tools=[create_handoff_tool(agent_name="billing")],
        prompt="Route the user.",
        name="triage",
    )
    billing = create_react_agent(
        ScriptedChatModel(agent="billing"), tools=[query_invoice], prompt="Billing.", name="billing"
    )
    return create_swarm([triage, billing], default_active_agent="triage")


async def make(
    workload: str, store: str, where: str, args: Namespace, counts: Counted | None
) -> tuple[Run, Close, int]:
    saver, close = await saver_for(store, where, args, counts)
    if workload == "graph":
        graph = build().compile(checkpointer=saver)

        async def run_graph(thread_id: str) -> Any:
            config: Any = {"configurable": {"thread_id": thread_id}}
            out = await graph.ainvoke(dict(INPUT), config, durability=args.durability)
            return {"items": out["items"], "n": out["n"]}

        return run_graph, close, SUPER_STEPS

    app = swarm().compile(checkpointer=saver)

    async def run_conversation(thread_id: str) -> Any:
        config: Any = {"configurable": {"thread_id": thread_id}}
        out = await app.ainvoke({"messages": [("user", USER)]}, config, durability=args.durability)
        last = out["messages"][-1]
        if out.get("active_agent") != "billing" or last.content != ANSWER:
            raise SystemExit(f"langgraph conversation went wrong: {out.get('active_agent')} {last}")
        return {"agent": out["active_agent"], "answer": last.content}

    return run_conversation, close, CONVERSATION_STEPS


if __name__ == "__main__":
    main("LangGraph", version("langgraph"), make)
