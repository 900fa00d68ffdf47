"""`baton checkpoints rekey` and the key column of `baton resume --list`: a key rotation
while a run waits for approval, from the command line, on SQLite, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.backends.conftest import POSTGRES_URL, REDIS_URL
from tests.backends.sealing_kit import K1, K2, PLACES, Place
from typer.testing import CliRunner

from baton.backends.sealing import KEY_ENV, sealed_key_id
from baton.cli.app import app

HERE = Path(__file__).resolve().parent
TEAM = "approval_team:team"
REFUND = "please refund 42.5 for order ORD-1"
OLD = f"k1:{base64.b64encode(K1[1]).decode()}"
NEW = f"k2:{base64.b64encode(K2[1]).decode()}"


@pytest.fixture(autouse=True)
def _in_tests(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(HERE)  # where approval_team lives
    monkeypatch.delenv(KEY_ENV, raising=False)
    yield


@pytest.fixture(params=PLACES)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    """A store's place (the CLI runs its own event loops, so this fixture is not async)."""
    made = Place(request.param, tmp_path)
    made.open()  # skips when the service is down
    try:
        yield made
    finally:
        asyncio.run(made.close())


def url_of(place: Place) -> str:
    if place.kind == "sqlite":
        return f"sqlite:///{place.db}"
    if place.kind == "postgres":
        return f"{POSTGRES_URL}?schema={place.ns}"
    return f"{REDIS_URL}?prefix={place.ns}:"


def baton(runner: CliRunner, args: list[str], key: str | None) -> object:
    env = {KEY_ENV: key} if key is not None else {KEY_ENV: ""}
    return runner.invoke(app, args, env=env)


def paused(runner: CliRunner, url: str, key: str | None) -> tuple[str, str]:
    """Run a refund until it waits for approval: (session, approval id)."""
    ran = baton(runner, ["run", TEAM, REFUND, "--store", url], key)
    assert ran.exit_code == 0, ran.output  # type: ignore[attr-defined]
    m = re.search(r"^approve: baton approvals approve (\S+) (\S+) ", ran.output, re.M)  # type: ignore[attr-defined]
    assert m, ran.output  # type: ignore[attr-defined]
    return m.group(1), m.group(2)


def test_a_rotation_from_the_command_line_while_a_run_waits(
    runner: CliRunner, place: Place
) -> None:
    url = url_of(place)
    sid, apr = paused(runner, url, OLD)
    assert sealed_key_id(asyncio.run(place.raw_data(sid))) == "k1"

    listed = baton(runner, ["resume", "--list", "--store", url], None)  # no key: still listed
    assert listed.exit_code == 0, listed.output  # type: ignore[attr-defined]
    assert sid in listed.output and "k1 (cannot open)" in listed.output  # type: ignore[attr-defined]

    rekeyed = baton(runner, ["checkpoints", "rekey", "--store", url], f"{NEW},{OLD}")
    assert rekeyed.exit_code == 0, rekeyed.output  # type: ignore[attr-defined]
    assert "sealed 1 checkpoint with key 'k2'" in rekeyed.output  # type: ignore[attr-defined]
    assert "the older keys may be dropped" in rekeyed.output  # type: ignore[attr-defined]
    assert sealed_key_id(asyncio.run(place.raw_data(sid))) == "k2"

    decide = ["approvals", "approve", sid, apr, "--by", "ana", "--role", "finance"]
    done = baton(runner, [*decide, "--team", TEAM, "--store", url], NEW)  # k1 dropped
    assert done.exit_code == 0, done.output  # type: ignore[attr-defined]
    assert "status: completed" in done.output  # type: ignore[attr-defined]


def test_rekey_names_what_it_cannot_open_and_exits_1(runner: CliRunner, store_url: str) -> None:
    paused(runner, store_url, OLD)
    ran = baton(runner, ["checkpoints", "rekey", "--store", store_url], NEW)  # k1 is gone
    assert ran.exit_code == 1, ran.output  # type: ignore[attr-defined]
    assert "sealed 0 checkpoints with key 'k2'" in ran.stdout  # type: ignore[attr-defined]
    err = ran.stderr  # type: ignore[attr-defined]
    assert "encrypted with checkpoint key 'k1'" in err and "keep the older keys" in err
    assert "1 checkpoint not sealed with key 'k2'" in err
    assert "Traceback" not in ran.output  # type: ignore[attr-defined]


def test_a_decision_without_the_key_is_one_clear_error(runner: CliRunner, store_url: str) -> None:
    sid, apr = paused(runner, store_url, OLD)
    decide = ["approvals", "approve", sid, apr, "--by", "ana", "--role", "finance"]
    ran = baton(runner, [*decide, "--team", TEAM, "--store", store_url], None)
    assert ran.exit_code == 1, ran.output  # type: ignore[attr-defined]
    assert "encrypted with checkpoint key 'k1'" in ran.output  # type: ignore[attr-defined]
    assert KEY_ENV in ran.output and "Traceback" not in ran.output  # type: ignore[attr-defined]
    listed = baton(runner, ["resume", "--list", "--store", store_url], OLD)
    assert sid in listed.output and "k1 (cannot open)" not in listed.output  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("key", "url", "code", "says"),
    [
        (None, "sqlite:///{tmp}/b.db", 2, f"no checkpoint keys: set {KEY_ENV}"),
        (NEW, "memory://", 2, "keeps its checkpoints in process memory"),
        ("k2:nope!", "sqlite:///{tmp}/b.db", 2, f"${KEY_ENV}: checkpoint key 'k2' is not base64"),
        (NEW, "sqlite:///{tmp}/none.db", 1, "no store at"),
    ],
)
def test_rekey_refuses_clearly(
    runner: CliRunner, tmp_path: Path, key: str | None, url: str, code: int, says: str
) -> None:
    target = url.format(tmp=tmp_path)
    if "b.db" in target:
        paused(runner, target, OLD)
    ran = baton(runner, ["checkpoints", "rekey", "--store", target], key)
    assert ran.exit_code == code, ran.output  # type: ignore[attr-defined]
    assert says in ran.stderr and ran.stderr.startswith("error: ")  # type: ignore[attr-defined]
