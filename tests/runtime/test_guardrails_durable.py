"""The rules in force are kernel state: a checkpoint keeps them, and a run resumed by another
process (a team built afresh on the same store) still applies every one of them."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from guardrails_kit import PHONE_NO, durable_desk, masked_phone
from tests.backends.conftest import POSTGRES_URL, REDIS_URL
from tests.services import POSTGRES, REDIS, require_service

from baton.backends import SQLiteStore, Store

KIT = Path(__file__).with_name("guardrails_kit.py")
REPO = KIT.parents[2]


def twin(kind: str, tmp_path: Path, ns: str) -> Store:
    """A store of backend `kind` on the data `ns` names: two calls give two clients of one
    store, as two processes would have."""
    if kind == "sqlite":
        return SQLiteStore(f"sqlite:///{tmp_path / 'b.db'}")
    if kind == "postgres":
        require_service("PostgreSQL", POSTGRES)
        from baton.backends.postgres import PostgresStore

        return PostgresStore(POSTGRES_URL, schema=ns)
    require_service("Redis", REDIS)
    from baton.backends.redis_store import RedisStore

    return RedisStore(REDIS_URL, prefix=f"{ns}:")


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@pytest.mark.usefixtures("dies_when_cancelled")
@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
async def test_a_resumed_run_still_applies_the_rules_in_force(kind: str, tmp_path: Path) -> None:
    ns, ledger = f"t_{uuid.uuid4().hex[:12]}", tmp_path / "ledger"
    first = durable_desk(twin(kind, tmp_path, ns), str(ledger), crash="hang")
    second = durable_desk(twin(kind, tmp_path, ns), str(ledger))
    try:
        with pytest.raises(TimeoutError):  # stopped in billing's tool, as by a crash
            await asyncio.wait_for(first.run("where is ORD-1?", session_id="S"), 0.5)
        [cp] = await second.unfinished()
        saved = json.loads(cp.state_json())
        assert saved["guardrails"] == ["mask_pii", "screened"]
        assert saved["screened"] == ["screened"]

        # billing has no output rule: the rule triage brought is in force all the same
        result = await second.resume("S")

        assert result.status == "completed"
        assert result.output == f"Found it. ORD-1: paid; the courier's phone is {masked_phone()}"
        assert lines(ledger) == ["billing"]  # its input check is not made again
        stored = [m.content or "" for m in await second.store.get_messages("S")]
        assert PHONE_NO not in stored[-1]
    finally:
        await first.aclose()
        drop = getattr(second.store, "drop", None)
        if drop is not None:
            await drop()
        await second.aclose()


@pytest.mark.usefixtures("dies_when_cancelled")
async def test_a_rule_the_resuming_team_lacks_blocks_the_run(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    db = f"sqlite:///{tmp_path / 'b.db'}"
    first = durable_desk(db, str(ledger), crash="hang")
    changed = durable_desk(db, str(ledger), rules=False)  # triage lost its output rule
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(first.run("where is ORD-1?", session_id="S"), 0.5)

        result = await changed.resume("S")

        assert result.status == "blocked"
        assert result.error is not None and "'mask_pii' is in force for this run" in result.error
        assert PHONE_NO not in (result.output or "")
    finally:
        await first.aclose()
        await changed.aclose()


def _child_env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "src"), str(REPO), str(KIT.parent), env.get("PYTHONPATH", "")]
    )
    return env


async def test_a_process_killed_mid_run_leaves_its_rules_to_the_next(tmp_path: Path) -> None:
    db, ledger = tmp_path / "b.db", tmp_path / "ledger"
    proc = subprocess.run(
        [sys.executable, str(KIT), str(db), str(ledger)],
        cwd=REPO,
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr

    team = durable_desk(f"sqlite:///{db}", str(ledger))
    try:
        result: Any = await team.resume("S")
        assert result.status == "completed"
        assert masked_phone() in (result.output or "") and PHONE_NO not in (result.output or "")
        assert lines(ledger) == ["billing"]
    finally:
        await team.aclose()
