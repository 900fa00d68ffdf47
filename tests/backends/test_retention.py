"""Retention (`baton.backends.retention`) beyond its conformance suite
(`baton.testing.retention`, run over every store by `test_store_conformance.py`): the policy's
own checks, and a row deleted behind the store's back, which needs a SQLite file."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from baton.backends import SQLiteStore
from baton.backends.retention import Retention, parse_age
from baton.core.errors import ConfigError
from baton.testing.retention import DAY, fill, run_gc


async def test_a_row_deleted_by_anything_but_gc_still_fails_the_audit(tmp_path: Path) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path / 'a.db'}")
    await fill(store, "a", 4, time.time() - 10 * DAY)
    await run_gc(store, Retention(keep_messages=2))
    assert (await store.verify_audit()).ok
    kept = await store.get_messages("a")
    await store.close()
    con = sqlite3.connect(tmp_path / "a.db")
    con.execute("DELETE FROM messages WHERE id = ?", (kept[0].id,))
    con.commit()
    con.close()
    store = SQLiteStore(f"sqlite:///{tmp_path / 'a.db'}")

    found = await store.verify_audit()

    assert not found.ok and found.tamper == "deleted" and found.table == "messages"
    assert kept[0].id in (found.problem or "")
    await store.close()


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"max_age_s": 0},
        {"max_age_s": -1.0},
        {"max_age_s": "30d"},
        {"max_age_s": float("inf")},
        {"keep_messages": -1},
        {"keep_snapshots": 0},
        {"keep_events": 1.5},
        {"keep_events": True},
    ],
)
def test_a_bad_policy_is_refused_naming_the_rule(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=next(iter(bad), "no rule")):
        Retention(**bad)


def test_ages_are_read_with_their_unit() -> None:
    assert parse_age("90") == 90 and parse_age("30m") == 1800 and parse_age("2w") == 14 * DAY
    assert parse_age("30d") == 30 * DAY and parse_age("1.5h") == 5400
    for bad in ("", "d", "30x", "-1d", "0", "nan", "infd"):
        with pytest.raises(ConfigError, match="bad age"):
            parse_age(bad)
