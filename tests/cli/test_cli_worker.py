"""`baton worker module:team --bus URL --store URL` in a process of its own, as it is deployed:
it runs a binding of the imported team on `--store` (the team's own store never sees the
turns), answers what `baton submit` queues, and stops cleanly on SIGTERM, closing the store it
opened."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from tests.services import REDIS, require_service
from typer.testing import CliRunner

from baton import SQLiteStore
from baton.cli.app import app

REPO = Path(__file__).resolve().parents[2]
REDIS_URL = f"redis://{REDIS[0]}:{REDIS[1]}/0"


async def _sessions(url: str) -> list[str]:
    store = SQLiteStore(url)
    try:
        return [s.session_id for s in await store.list_sessions()]
    finally:
        await store.close()


async def _drop(prefix: str) -> None:
    from baton.bus.redis_streams import RedisStreamsBus

    bus = RedisStreamsBus(REDIS_URL, prefix=prefix)
    try:
        await bus.drop()
    finally:
        await bus.close()


def test_the_worker_runs_the_team_on_its_store_and_stops_on_sigterm(
    runner: CliRunner, tmp_path: Path
) -> None:
    require_service("Redis", REDIS)
    prefix = f"t_{uuid.uuid4().hex[:12]}"
    bus = f"{REDIS_URL}?prefix={prefix}"
    served, own = f"sqlite:///{tmp_path}/served.db", f"sqlite:///{tmp_path}/own.db"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "BATON_TEST_STORE": own}
    args = ["worker", "approval_team:team", "--bus", bus, "--store", served, "--drain-s", "1"]
    worker = subprocess.Popen(
        [sys.executable, "-m", "baton", *args, "--no-tune-gc"],
        cwd=REPO / "tests" / "cli",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        sent = ["submit", "where is ORD-7", "--bus", bus, "--session", "W1", "--wait", "60"]
        answered = runner.invoke(app, sent)
        assert answered.exit_code == 0, answered.output
        assert "Order ORD-7 is SHIPPED." in answered.output
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
        asyncio.run(_drop(prefix))
    assert worker.returncode == 0, err
    assert "1 answered (0 errors)" in err
    assert asyncio.run(_sessions(served)) == ["W1"]
    assert not (tmp_path / "own.db").exists() or asyncio.run(_sessions(own)) == []
