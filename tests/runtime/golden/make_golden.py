"""Write a golden checkpoint: `python make_golden.py OUT.sql` runs the golden desk
(`golden_desk.py`) with the Baton on the path until it waits for approval, and dumps its SQLite
store as SQL text.

Run it with the Baton whose format the file is to pin, e.g. from a checkout of that release:
`PYTHONPATH=<checkout>/src python tests/runtime/golden/make_golden.py \
tests/runtime/golden/format1.sql`.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import golden_desk as desk

from baton.backends.sqlite import SQLiteStore


async def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "golden.db"
        store = SQLiteStore(f"sqlite:///{db}")
        ledger: list[tuple[int, str]] = []
        paused = await desk.team(store, ledger).run(desk.MESSAGE, session_id=desk.SESSION)
        assert paused.approval is not None and ledger == [], paused
        await store.close()
        con = sqlite3.connect(db)
        (version,) = con.execute("PRAGMA user_version").fetchone()  # the table layout's
        dump = "\n".join(con.iterdump())
        out.write_text(f"PRAGMA user_version = {version};\n{dump}\n", encoding="utf-8")
        con.close()
    print(f"wrote {out} ({out.stat().st_size} bytes), card {paused.approval.id}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
