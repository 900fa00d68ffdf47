"""Write the golden checkpoints: `python make_golden.py OUT_DIR N` runs the golden desk and the
golden graph (`golden_desk.py`) with the Baton on the path until each waits for a person, and
dumps each SQLite store as SQL text: `formatN-desk.sql`, `formatN-graph.sql`.

Run it with the Baton whose format the file is to pin, e.g. from a checkout of that release:
`PYTHONPATH=<checkout>/src python tests/runtime/golden/make_golden.py tests/runtime/golden 1`.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import golden_desk as golden

from baton.backends.sqlite import SQLiteStore


async def desk(store: SQLiteStore) -> str:
    ledger: list[tuple[int, str]] = []
    paused = await golden.team(store, ledger).run(golden.MESSAGE, session_id=golden.SESSION)
    assert paused.approval is not None and ledger == [], paused
    return f"approval {paused.approval.id}"


async def graph(store: SQLiteStore) -> str:
    effects: list[str] = []
    g = golden.graph(store, effects)
    paused = await g.invoke({"order_id": "ORD-42"}, thread_id=golden.THREAD)
    assert paused.interrupt is not None and len(effects) == 2, paused
    return f"interrupt {paused.interrupt.id}"


async def main(out: Path, fmt: int) -> None:
    for name, make in (("desk", desk), ("graph", graph)):
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "golden.db"
            store = SQLiteStore(f"sqlite:///{db}")
            what = await make(store)
            await store.close()
            con = sqlite3.connect(db)
            (version,) = con.execute("PRAGMA user_version").fetchone()  # the table layout's
            dump = "\n".join(con.iterdump())
            con.close()
            path = out / f"format{fmt}-{name}.sql"
            path.write_text(f"PRAGMA user_version = {version};\n{dump}\n", encoding="utf-8")
            print(f"wrote {path} ({path.stat().st_size} bytes), {what}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
