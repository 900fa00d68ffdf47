"""`baton audit archive` and `baton audit verify --archive`: on SQLite, PostgreSQL and Redis,
after `baton store gc`, the old audit records go to a file, the store and its archives verify
as one chain, a second archive continues the first, and an edited archive line is named."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.backends.sealing_kit import PLACES, Place
from tests.cli.test_cli_checkpoints import url_of
from typer.testing import CliRunner

from baton.backends.audit import KEY_ENV
from baton.cli.app import app
from baton.testing.retention import DAY, fill


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
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


async def sessions(place: Place, old: int, new: int) -> None:
    """`old` sessions 40 days old and `new` of today, 3 messages and 3 events each."""
    store = place.open()
    for i in range(old):
        await fill(store, f"old-{i}-{time.time_ns()}", 3, time.time() - 40 * DAY)
    for i in range(new):
        await fill(store, f"new-{i}-{time.time_ns()}", 3, time.time())
    await store.close()


def said(output: str) -> str:
    return " ".join(output.split())


def test_archive_after_gc_verifies_with_the_store_and_continues(
    runner: CliRunner, place: Place, tmp_path: Path
) -> None:
    url = url_of(place)
    asyncio.run(sessions(place, 2, 1))  # records 1-6 old, 7-9 new
    a1, a2 = tmp_path / "a1.jsonl", tmp_path / "a2.jsonl"

    held = runner.invoke(app, ["audit", "archive", url, "--to", str(a1), "--before", "30d"])
    assert held.exit_code == 0, held.output
    assert "nothing to archive" in held.output and "record 1 vouches" in said(held.output)
    assert not a1.exists()

    gc = runner.invoke(app, ["store", "gc", url, "--max-age", "30d"])
    assert gc.exit_code == 0 and "baton audit archive" in said(gc.output), gc.output
    dry = runner.invoke(
        app, ["audit", "archive", url, "--to", str(a1), "--before", "30d", "--dry-run"]
    )
    assert dry.exit_code == 0, dry.output
    assert "would archive 6 records (1 to 6)" in dry.output and not a1.exists()

    done = runner.invoke(app, ["audit", "archive", url, "--to", str(a1), "--before", "30d"])
    assert done.exit_code == 0, done.output
    assert f"archived 6 records (1 to 6) to {a1}" in said(done.output)
    assert re.search(r"anchor: 6:[0-9a-f]{64}", done.output), done.output
    assert re.search(r"sha256 of the archive: [0-9a-f]{64}", done.output), done.output
    assert re.search(r"size: [\d,]+ bytes before, [\d,]+ bytes after", done.output)
    assert len(a1.read_text().splitlines()) == 6

    alone = runner.invoke(app, ["audit", "verify", "--store", url])
    assert alone.exit_code == 0, alone.output
    assert "records 1 to 6 are archived" in said(alone.output)
    both = runner.invoke(app, ["audit", "verify", "--store", url, "--archive", str(a1)])
    assert both.exit_code == 0, both.output
    assert "chain intact: 11 records" in both.output  # 6 archived, 3 new, 2 of gc's
    offline = runner.invoke(app, ["audit", "verify", "--archive", str(a1), "--archive-only"])
    assert offline.exit_code == 0 and "records 1 to 6 form one chain" in offline.output

    gc = runner.invoke(app, ["store", "gc", url, "--keep-messages", "0", "--keep-events", "0"])
    assert gc.exit_code == 0, gc.output
    second = runner.invoke(app, ["audit", "archive", url, "--to", str(a2), "--keep", "1"])
    assert second.exit_code == 0, second.output
    assert "archived 5 records (7 to 11)" in said(second.output)
    assert (
        json.loads(a2.read_text().splitlines()[0])["prev_hash"]
        == json.loads(a1.read_text().splitlines()[-1])["hash"]
    )
    asyncio.run(sessions(place, 0, 1))  # a run after the trim appends to the chain
    chain = ["audit", "verify", "--store", url, "--archive", str(a1), "--archive", str(a2)]
    whole = runner.invoke(app, chain)
    assert whole.exit_code == 0, whole.output
    assert "chain intact: 15 records" in whole.output, whole.output

    lines = a1.read_text().splitlines()
    record = json.loads(lines[2])
    record["session_id"] = "someone-else"
    a1.write_text("\n".join([*lines[:2], json.dumps(record), *lines[3:]]) + "\n")
    broken = runner.invoke(app, chain)
    assert broken.exit_code == 1, broken.output
    assert "chain broken: record 3 edited" in said(broken.output)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "give --to FILE"),
        (["--to", "{tmp}/a.jsonl"], "give --before AGE and/or --keep N"),
        (["--to", "{tmp}/a.jsonl", "--before", "3x"], "--before: bad age '3x'"),
        (["--to", "{tmp}/a.jsonl", "--keep", "-1"], "Invalid value for '--keep'"),
        (["--to", "{tmp}/baton.db", "--keep", "1"], "the file exists; an audit archive is never"),
        (["--to", "{tmp}/no/a.jsonl", "--keep", "1"], "--to {tmp}/no/a.jsonl: the directory"),
    ],
)
def test_bad_input_exits_2_naming_the_flag(
    runner: CliRunner, tmp_path: Path, args: list[str], says: str
) -> None:
    made = Place("sqlite", tmp_path)
    url = url_of(made)
    asyncio.run(sessions(made, 1, 0))
    ran = runner.invoke(app, ["audit", "archive", url, *(a.format(tmp=tmp_path) for a in args)])
    assert ran.exit_code == 2, ran.output
    assert says.format(tmp=tmp_path) in said(ran.output), ran.output
    assert "Traceback" not in ran.output


def test_a_store_without_an_audit_chain_exits_1(runner: CliRunner, tmp_path: Path) -> None:
    ran = runner.invoke(
        app, ["audit", "archive", "memory://", "--to", str(tmp_path / "a.jsonl"), "--keep", "1"]
    )
    assert ran.exit_code == 1 and "keeps no audit chain" in said(ran.output), ran.output


def test_verify_names_a_missing_archive_file(runner: CliRunner, tmp_path: Path) -> None:
    ran = runner.invoke(app, ["audit", "verify", "--archive", str(tmp_path / "x.jsonl")])
    assert ran.exit_code == 2 and "--archive" in ran.output and "no such file" in ran.output
    only = runner.invoke(app, ["audit", "verify", "--archive-only"])
    assert only.exit_code == 2 and "needs at least one --archive FILE" in said(only.output)
