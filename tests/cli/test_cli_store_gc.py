"""`baton store gc`: a retention policy from the command line, on SQLite, PostgreSQL and Redis,
with a run waiting for approval beside old sessions, and the audit chain still verifying."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.backends.sealing_kit import PLACES, Place
from tests.cli.test_cli_checkpoints import paused, url_of
from typer.testing import CliRunner

from baton.backends.sealing import KEY_ENV
from baton.cli.app import app
from baton.testing.retention import DAY, fill

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def _in_tests(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(HERE)  # where approval_team lives
    monkeypatch.delenv(KEY_ENV, raising=False)
    yield


@pytest.fixture(params=PLACES)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    made = Place(request.param, tmp_path)
    made.open()  # skips when the service is down
    try:
        yield made
    finally:
        asyncio.run(made.close())


async def old_sessions(place: Place, n: int) -> None:
    store = place.open()
    for i in range(n):
        await fill(store, f"old-{i}", 4, time.time() - 40 * DAY)
    await store.close()


def deleted(output: str, kind: str) -> int:
    m = re.search(rf"^\s*{kind}\s+([\d,]+)\s*$", output, re.M)
    assert m, output
    return int(m.group(1).replace(",", ""))


def test_gc_deletes_old_records_keeps_the_waiting_run_and_the_audit_verifies(
    runner: CliRunner, place: Place
) -> None:
    url = url_of(place)
    sid, apr = paused(runner, url, None)
    asyncio.run(old_sessions(place, 2))

    dry = runner.invoke(app, ["store", "gc", url, "--max-age", "30d", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would delete" in dry.output and "dry run: nothing was deleted" in dry.output
    assert deleted(dry.output, "messages") == 8 and deleted(dry.output, "events") == 8

    done = runner.invoke(app, ["store", "gc", url, "--max-age", "30d"])
    assert done.exit_code == 0, done.output
    assert deleted(done.output, "messages") == 8 and deleted(done.output, "events") == 8
    assert "1 checkpoints wait for a person and were kept" in done.output
    assert re.search(r"size: [\d,]+ bytes before, [\d,]+ bytes after", done.output), done.output

    verified = runner.invoke(app, ["audit", "verify", "--store", url])
    assert verified.exit_code == 0, verified.output

    again = runner.invoke(app, ["store", "gc", url, "--keep-messages", "0", "--keep-events", "0"])
    assert again.exit_code == 0, again.output  # the waiting run's session keeps its record
    assert deleted(again.output, "messages") == 0 and deleted(again.output, "events") == 0
    decide = ["approvals", "approve", sid, apr, "--by", "ana", "--role", "finance"]
    approved = runner.invoke(app, [*decide, "--team", "approval_team:team", "--store", url])
    assert approved.exit_code == 0, approved.output
    assert "status: completed" in approved.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "give a policy: at least one of --max-age"),
        (["--max-age", "30x"], "--max-age: bad age '30x'"),
        (["--max-age", "0d"], "--max-age: bad age '0d'"),
        (["--keep-messages", "-1"], "Invalid value for '--keep-messages'"),
        (["--keep-snapshots", "0"], "Invalid value for '--keep-snapshots'"),
    ],
)
def test_a_bad_policy_exits_2_naming_the_flag(
    runner: CliRunner, store_url: str, args: list[str], says: str
) -> None:
    ran = runner.invoke(app, ["store", "gc", store_url, *args])
    assert ran.exit_code == 2, ran.output
    assert says in " ".join(ran.output.split()), ran.output
    assert "Traceback" not in ran.output


def test_gc_of_a_missing_sqlite_store_exits_1(runner: CliRunner, store_url: str) -> None:
    ran = runner.invoke(app, ["store", "gc", store_url, "--max-age", "1d"])
    assert ran.exit_code == 1 and "no store at" in ran.output, ran.output
