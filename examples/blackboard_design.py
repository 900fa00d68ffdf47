"""The seed 000 §2.3 blackboard: an architect publishes a data schema, a frontend and a database
agent react to it at once and write back.

    python examples/blackboard_design.py "Design a small shop: customers place orders."
    baton run examples.blackboard_design:team "Design a small shop: customers place orders."

A `Blackboard` of three agents. The architect subscribes to `request` (the user's message)
and posts `schema`; the frontend and database agents subscribe to `schema`, so they run in
parallel once it appears: each writes its own key (`frontend`, `database`) and appends one line
to the shared `decisions` list. The run is done when schema, frontend and database are on the
board.

The example's store plants a concurrent write (seed 000 §4, optimistic locking): the first
time an agent writes `decisions`, another writer — a linter process — appends to it between
the agent's read and its write. The agent's compare-and-set write fails, its post reads the
list again and re-applies its append, and the board keeps every line; the `board_written`
event (and `baton_board_conflicts_total` in the metrics) counts the conflict. `baton run` puts
its own SQLite store in place of the example's, so there only real contention shows.

The agents' brain is the embedded local model unless `BATON_MODEL` names another one; the value
`scripted` selects a deterministic policy (`design_policy`) for tests and replays.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from baton import Agent, ConsoleSink, EventSink, MemoryStore, ScriptedModel
from baton.backends import BoardEntry
from baton.core.events import BoardWritten
from baton.models import ModelRequest, Step
from baton.topologies.blackboard import Blackboard

REQUEST = "Design a small shop: customers place orders of products."
"""The message `python examples/blackboard_design.py` sends when given none."""

LINTER_NOTE = "linter: table and column names are snake_case"
"""What the planted writer appends to `decisions`."""


class ContendedStore(MemoryStore):
    """A memory store in which another writer (a linter process) appends to `decisions` at
    the moment the first agent writes it: after that agent read the list, before its write."""

    def __init__(self) -> None:
        super().__init__()
        self.planted = False

    async def write_entry(
        self, board: str, key: str, value: Any, expected_version: int, *, writer: str = ""
    ) -> BoardEntry:
        if key == "decisions" and not self.planted:
            self.planted = True
            held = await self.read_entry(board, key)
            items = [] if held is None else list(held.value)
            version = 0 if held is None else held.version
            await super().write_entry(board, key, [*items, LINTER_NOTE], version, writer="linter")
        return await super().write_entry(board, key, value, expected_version, writer=writer)


def build_blackboard(model: Any = "local", sinks: Sequence[EventSink] = ()) -> Blackboard:
    """The design board on `model` ("scripted" for `design_policy`) over a `ContendedStore`."""
    if model == "scripted":
        model = ScriptedModel(design_policy)
    architect = Agent(
        name="architect",
        max_iterations=3,
        instructions=(
            "You are the architect. Design the data schema for the request: call "
            'post_to_board with key "schema", mode "set" and as value an object that maps each '
            "table name to the list of its column names (at most 3 tables). Then answer: posted."
        ),
    )
    frontend = Agent(
        name="frontend",
        max_iterations=4,
        instructions=(
            "You are the frontend developer. Read the schema on the board and make two calls, "
            'one at a time. 1: post_to_board with key "frontend", mode "set" and as value the '
            'list of UI screen names, one per table. 2: post_to_board with key "decisions", '
            'mode "append" and as value one sentence of at most 12 words about the UI. After '
            "both calls, answer: done."
        ),
    )
    database = Agent(
        name="database",
        max_iterations=4,
        instructions=(
            "You are the database engineer. Read the schema on the board and make two calls, "
            'one at a time. 1: post_to_board with key "database", mode "set" and as value the '
            "list of SQL CREATE TABLE statements, one per table. 2: post_to_board with key "
            '"decisions", mode "append" and as value one sentence of at most 12 words about '
            "the database. After both calls, answer: done."
        ),
    )
    return Blackboard(
        [architect, frontend, database],
        {"architect": ["request"], "frontend": ["schema"], "database": ["schema"]},
        done=lambda values: all(k in values for k in ("schema", "frontend", "database")),
        answer=summary,
        max_rounds=4,
        keys=["frontend", "database", "decisions"],  # written, not subscribed to
        model=model,
        store=ContendedStore(),
        sinks=sinks,
        name="design_board",
    )


def summary(values: dict[str, Any]) -> str:
    """The run's answer: what each agent put on the board."""
    lines = [f"{key}: {_text(values.get(key))}" for key in ("schema", "frontend", "database")]
    lines.append("decisions:")
    decisions = values.get("decisions")
    lines += [f"- {_text(d)}" for d in (decisions if isinstance(decisions, list) else [])]
    return "\n".join(lines)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# --- a deterministic policy for tests and replays ----------------------------------------
SCHEMA = {
    "customers": ["id", "name", "email"],
    "products": ["id", "title", "price"],
    "orders": ["id", "customer_id", "product_id", "quantity"],
}


def design_policy(request: ModelRequest) -> Step:
    """What each agent of the board does, scripted (not a language model): it reads the
    schema from the board it is shown and posts its part, one call at a time."""
    posted = sum(1 for m in request.messages if m.role == "tool")
    asked = next((m.content or "" for m in request.messages if m.role == "user"), "")
    agent = request.agent
    if agent == "architect":
        if posted == 0:
            return ScriptedModel.call("post_to_board", key="schema", value=SCHEMA)
        return ScriptedModel.say("posted")
    tables = list(_board(asked).get("schema") or {})
    if agent == "frontend":
        if posted == 0:
            screens = [f"{t} list" for t in tables]
            return ScriptedModel.call("post_to_board", key="frontend", value=screens)
        if posted == 1:
            note = "frontend: one list screen per table, orders filtered by customer"
            return ScriptedModel.call("post_to_board", key="decisions", value=note, mode="append")
        return ScriptedModel.say("done")
    if agent == "database":
        if posted == 0:
            sql = [f"CREATE TABLE {t} ({', '.join(SCHEMA.get(t, ['id']))})" for t in tables]
            return ScriptedModel.call("post_to_board", key="database", value=sql)
        if posted == 1:
            note = "database: orders reference customers and products by foreign keys"
            return ScriptedModel.call("post_to_board", key="decisions", value=note, mode="append")
        return ScriptedModel.say("done")
    return ScriptedModel.say("")


def _board(question: str) -> dict[str, Any]:
    """The board's values, as the question shows them (the JSON object it quotes)."""
    start, end = question.find("{"), question.find("\n\nChanged since")
    try:
        data = json.loads(question[start:end])
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _model() -> Any:
    return os.environ.get("BATON_MODEL") or "local"


team = build_blackboard(_model())
"""The design board on `BATON_MODEL` (default: the embedded model)."""


def main(argv: Sequence[str]) -> int:
    """Run one request on a fresh board, print the events, the answer and the conflicts."""
    board = build_blackboard(_model(), sinks=[ConsoleSink()])
    started = time.perf_counter()
    result = board.run_sync(" ".join(argv) or REQUEST, session_id="design")
    seconds = time.perf_counter() - started
    writes = [e for e in result.events if isinstance(e, BoardWritten)]
    conflicts = sum(e.conflicts for e in writes)
    said = f"{conflicts} conflict{'' if conflicts == 1 else 's'}"
    print(f"\n{result.status} in {seconds:.1f} s: {len(writes)} board writes, {said}")
    print(result.output or result.error or "")
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
