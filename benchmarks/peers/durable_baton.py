"""Baton side of the durable benchmark: the graph of `graph_baton.py` and the conversation of
`benchmarks/overhead.py`, on `MemoryStore`, `SQLiteStore` (WAL, `synchronous=NORMAL`) and
`PostgresStore` (a schema of its own per instance, dropped on close).

Every graph super-step and every conversation step is checkpointed before the next starts
(Baton has no deferred saves), so this side is the same with `--durability sync` or `async`.
"""

from __future__ import annotations

import sys
import uuid
from argparse import Namespace
from importlib.metadata import version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))  # the checkout's Baton, as the other sides
sys.path.insert(0, str(HERE.parent))  # benchmarks/, for overhead.py

from durable_common import CONVERSATION_STEPS, Close, Counted, Run, SqlTrace, main  # noqa: E402
from graph_baton import build  # noqa: E402
from graph_common import INPUT, SUPER_STEPS  # noqa: E402
from overhead import build_team  # noqa: E402

from baton.backends import open_store  # noqa: E402
from baton.backends.sqlite import SQLiteStore  # noqa: E402

USER = "please check the invoice for order ORD-202607-99"


def store_url(store: str, where: str) -> str | None:
    if store == "memory":
        return None
    if store == "sqlite":
        return f"sqlite:///{where}"
    sep = "&" if "?" in where else "?"
    return f"{where}{sep}schema=bench_{uuid.uuid4().hex[:10]}"


def trace(store: Any, counts: Counted | None) -> None:
    """Count the SQLite store's statements from now on."""
    if counts is not None and isinstance(store, SQLiteStore):
        store._db().set_trace_callback(SqlTrace(counts))


async def make(
    workload: str, store: str, where: str, args: Namespace, counts: Counted | None
) -> tuple[Run, Close, int]:
    url = store_url(store, where)
    backend = open_store(url) if url else None

    async def close_store() -> None:
        if backend is not None and store == "postgres":
            await backend.drop()

    if workload == "graph":
        graph = build().compile(store=backend)
        trace(backend, counts)

        async def run_graph(thread_id: str) -> Any:
            r = await graph.invoke(INPUT, thread_id=thread_id)
            if r.status != "completed":
                raise SystemExit(f"baton graph run went wrong: {r.status} {r.error}")
            return r.final.model_dump(mode="json")

        async def close_graph() -> None:
            await close_store()
            await graph.aclose()

        return run_graph, close_graph, SUPER_STEPS

    team = build_team(None)
    if backend is not None:
        team.use_store(backend)
    trace(backend, counts)

    async def run_conversation(thread_id: str) -> Any:
        r = await team.run(USER, session_id=thread_id)
        if r.status != "completed" or r.path != ["triage", "billing"]:
            raise SystemExit(f"baton conversation went wrong: {r.status} {r.path} {r.error}")
        return {"agent": r.path[-1], "answer": r.output}

    async def close_team() -> None:
        await close_store()
        await team.aclose()

    return run_conversation, close_team, CONVERSATION_STEPS


if __name__ == "__main__":
    try:
        v = version("baton-relay")
    except Exception:
        v = ""
    main("Baton", v, make)
