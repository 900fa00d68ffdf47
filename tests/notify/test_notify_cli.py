"""`baton notify run|list|show` as processes: a deliverer killed (SIGKILL) mid-delivery, and
the next one sends the card again with the same idempotency key once the lease ends."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.notify.notify_kit import Receiver, approval, failed

from baton.backends import SessionRecord
from baton.backends.sqlite import SQLiteStore

SCRIPT = Path(sys.executable).parent / "baton"


def baton_cmd(*args: str) -> list[str]:
    return [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "baton.cli.app"]


def env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    path = os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "200"}  # tables unwrapped


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*baton_cmd(), *args], capture_output=True, text=True, env=env(), timeout=timeout
    )


async def test_a_killed_deliverer_loses_nothing_and_the_key_stays(
    tmp_path: Path, receiver: Receiver
) -> None:
    url = f"sqlite:///{tmp_path}/n.db"
    store = SQLiteStore(url)
    ev = approval()
    await store.commit_run(SessionRecord("S1"), [], [ev])
    cfg = tmp_path / "notify.json"
    hook = {"type": "webhook", "name": "ops", "url": f"{receiver.url}/h", "secret": "k"}
    cfg.write_text(json.dumps({"channels": [hook], "lease_s": 3, "timeout_s": 2}))
    receiver.hold = threading.Event()  # the POST arrives; the answer waits

    args = ["notify", "run", "--store", url, "--config", str(cfg), "--poll", "0.1"]
    proc = subprocess.Popen([*baton_cmd(), *args], env=env(), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not receiver.received and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            await asyncio.sleep(0.05)
        assert receiver.received, "the deliverer never posted"
    finally:
        proc.kill()  # SIGKILL mid-delivery: no settle, no cleanup
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    receiver.hold.set()
    held = await store.get_outbox(ev.id)
    assert held is not None and held.status == "pending" and held.owner is not None

    await asyncio.sleep(3.2)  # the dead deliverer's lease ends
    done = await asyncio.to_thread(
        cli, "notify", "run", "--once", "--store", url, "--config", str(cfg)
    )
    assert done.returncode == 0, done.stderr
    assert "1 notification(s) handled" in done.stdout
    item = await store.get_outbox(ev.id)
    await store.close()
    assert item is not None and item.status == "delivered"
    assert [(d.attempt, d.status_code) for d in item.deliveries] == [(1, 200)]
    assert receiver.keys() == [f"{ev.id}:ops"] * 2  # resent once, under the same key
    assert len({r.headers["Idempotency-Key"] for r in receiver.received}) == 1

    shown = await asyncio.to_thread(cli, "notify", "show", ev.id, "--store", url)
    assert shown.returncode == 0 and "ops 200 ok" in shown.stdout, shown.stdout
    listed = await asyncio.to_thread(cli, "notify", "list", "--status", "delivered", "--store", url)
    assert ev.id in listed.stdout


def test_cli_errors_are_clear(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.json"
    cfg.write_text("{}")
    url = f"sqlite:///{tmp_path}/x.db"
    bad = cli("notify", "run", "--once", "--store", url, "--config", str(cfg))
    assert bad.returncode == 1 and "notification config" in bad.stderr and "channels" in bad.stderr
    missing = cli("notify", "show", "nope", "--store", url)
    assert missing.returncode == 1 and "no notification 'nope'" in missing.stderr


async def test_retry_sends_a_dead_letter_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/n.db"
    store = SQLiteStore(url)
    ev = failed()
    await store.commit_run(SessionRecord("S1"), [], [ev])
    await store.claim_outbox("a", lease_s=5)
    await store.settle_outbox(ev.id, "a", "dead", [])
    done = await asyncio.to_thread(cli, "notify", "retry", ev.id, "--store", url)
    assert done.returncode == 0 and "pending again" in done.stdout, done.stderr
    item = await store.get_outbox(ev.id)
    await store.close()
    assert item is not None and (item.status, item.attempts) == ("pending", 0)
    again = await asyncio.to_thread(cli, "notify", "retry", ev.id, "--store", url)
    assert again.returncode == 1 and "no dead notification" in again.stderr
