"""The deliverer against a loopback receiver: retry on 500 then success, the dead letter
after N tries, no duplicate with two deliverers, the same idempotency key after a deliverer
dies mid-delivery, only the channels still owed on a retry, the guard alert rate, a real
team's approval request delivered, and secrets masked on the wire."""

from __future__ import annotations

import asyncio
import json
import random
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.notify.notify_kit import (
    Receiver,
    approval,
    dispose,
    escalated,
    failed,
    outbox_store,
    tripped,
)

from baton import Agent, ScriptedModel, Team, tool
from baton.backends import SessionRecord
from baton.backends.sqlite import SQLiteStore
from baton.core.errors import ConfigError, StoreError
from baton.notify import verify_signature
from baton.notify.deliver import Notifier, NotifyConfig, backoff_s

SECRET = "hook-secret"


def config(receiver: Receiver, **options: Any) -> NotifyConfig:
    channels = options.pop("channels", None) or [
        {"type": "webhook", "name": "ops", "url": f"{receiver.url}/hook", "secret": SECRET}
    ]
    return NotifyConfig.model_validate({"channels": channels, **options})


async def commit(store: Any, *events: Any, sid: str = "S1") -> None:
    rec = await store.get_session(sid) or SessionRecord(sid)
    await store.commit_run(rec, [], list(events))


async def test_retry_on_500_then_delivered(store: Any, receiver: Receiver) -> None:
    await commit(store, approval())
    receiver.statuses = [500]
    n = Notifier(store, config(receiver, backoff_s=5), rng=random.Random(1))
    try:
        assert await n.run_once(at=1000.0) == 1
        (item,) = await store.list_outbox()
        assert (item.status, item.attempts) == ("pending", 1)
        assert 1002.5 <= item.next_at <= 1005.0  # 5s with jitter: between half and all
        assert await n.run_once(at=1001.0) == 0  # not due yet
        assert await n.run_once(at=item.next_at) == 1
        (item,) = await store.list_outbox()
        assert item.status == "delivered"
        assert [(d.attempt, d.status_code, d.ok) for d in item.deliveries] == [
            (1, 500, False),
            (2, 200, True),
        ]
        assert receiver.keys() == [f"{item.id}:ops", f"{item.id}:ops"]
        for got in receiver.received:
            verify_signature(SECRET, got.headers, got.body)
    finally:
        await n.close()


async def test_dead_letter_after_max_attempts(store: Any, receiver: Receiver) -> None:
    await commit(store, failed())
    receiver.statuses = [500, 503, 502, 500]
    n = Notifier(store, config(receiver, max_attempts=3, backoff_s=1, max_backoff_s=1))
    try:
        t = 0.0
        for _ in range(3):
            t += 10
            assert await n.run_once(at=t) == 1
        (item,) = await store.list_outbox()
        assert item.status == "dead" and item.attempts == 3
        assert [d.status_code for d in item.deliveries] == [500, 503, 502]
        assert await n.run_once(at=t + 1000) == 0  # the dead letter is not sent again
        assert len(receiver.received) == 3
        assert [i.id for i in await store.list_outbox("dead")] == [item.id]
    finally:
        await n.close()


async def test_an_unreachable_channel_is_logged_and_retried(store: Any) -> None:
    await commit(store, failed())
    cfg = NotifyConfig.model_validate(
        {
            "channels": [{"type": "slack", "name": "s", "url": "http://127.0.0.1:9/x"}],
            "timeout_s": 2,
        }
    )
    n = Notifier(store, cfg)
    try:
        await n.run_once(at=0.0)
        (item,) = await store.list_outbox()
        (d,) = item.deliveries
        assert (item.status, d.ok, d.status_code) == ("pending", False, None)
        assert "ConnectError" in d.error
    finally:
        await n.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
async def test_two_deliverers_send_each_card_once(
    kind: str, tmp_path: Path, receiver: Receiver
) -> None:
    """Two deliverers on one shared store, each with its own connection, claim at once."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    writer = outbox_store(kind, tmp_path, schema)
    for i in range(12):
        await commit(writer, approval(session_id=f"S{i}"), sid=f"S{i}")
    stores = [outbox_store(kind, tmp_path, schema), outbox_store(kind, tmp_path, schema)]
    notifiers = [
        Notifier(s, config(receiver, batch=4), owner=f"d{i}") for i, s in enumerate(stores)
    ]
    try:
        for _ in range(4):
            await asyncio.gather(*(n.run_once() for n in notifiers))
        keys = receiver.keys()
        assert len(keys) == 12 and len(set(keys)) == 12
        assert all(i.status == "delivered" for i in await writer.list_outbox())
    finally:
        for n in notifiers:
            await n.close()
        for s in stores:
            await s.close()
        await dispose(writer)


async def test_same_idempotency_key_after_a_deliverer_dies_mid_delivery(
    store: Any, receiver: Receiver
) -> None:
    import threading

    await commit(store, escalated())
    receiver.hold = threading.Event()  # the receiver got the POST, the answer never comes back
    cfg = config(receiver, lease_s=30, timeout_s=5)
    first = Notifier(store, cfg, owner="first")
    second = Notifier(store, cfg, owner="second")
    try:
        task = asyncio.create_task(first.run_once(at=100.0))
        for _ in range(200):
            if receiver.received:
                break
            await asyncio.sleep(0.01)
        task.cancel()  # killed mid-delivery: nothing settled
        with pytest.raises(asyncio.CancelledError):
            await task
        receiver.hold.set()
        assert await second.run_once(at=110.0) == 0  # the dead one's lease still holds
        assert await second.run_once(at=131.0) == 1
        (item,) = await store.list_outbox()
        assert item.status == "delivered"
        assert [(d.attempt, d.ok) for d in item.deliveries] == [(1, True)]
        k1, k2 = receiver.keys()
        assert k1 == k2 == f"{item.id}:ops"  # the receiver dedupes on it
        b1, b2 = (json.loads(r.body) for r in receiver.received)
        assert b1["id"] == b2["id"] and b1["card"] == b2["card"]
    finally:
        await first.close()
        await second.close()


async def test_a_retry_goes_only_to_channels_still_owed(store: Any, receiver: Receiver) -> None:
    await commit(store, approval())
    channels = [
        {"type": "slack", "name": "slack", "url": f"{receiver.url}/slack"},
        {"type": "wecom", "name": "wecom", "url": f"{receiver.url}/wecom"},
    ]
    receiver.statuses = [200, 500]
    n = Notifier(store, config(receiver, channels=channels))
    try:
        await n.run_once(at=0.0)
        await n.run_once(at=10_000.0)
        assert [r.path for r in receiver.received] == ["/slack", "/wecom", "/wecom"]
        (item,) = await store.list_outbox()
        assert item.status == "delivered" and item.delivered_to() == {"slack", "wecom"}
    finally:
        await n.close()


async def test_a_2xx_with_an_errcode_is_a_failure(store: Any) -> None:
    """WeCom and DingTalk answer 200 with a non-zero errcode (a bad sign, a banned word)."""
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"errcode": 310000, "errmsg": "sign not match"})

    await commit(store, failed())
    cfg = NotifyConfig.model_validate(
        {"channels": [{"type": "dingtalk", "name": "dd", "url": "http://dd/robot", "secret": "S"}]}
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    n = Notifier(store, cfg, client=client)
    await n.run_once(at=0.0)
    await client.aclose()
    (item,) = await store.list_outbox()
    assert item.status == "pending" and item.deliveries[0].error == "errcode 310000: sign not match"


async def test_an_unexpected_error_on_one_item_does_not_stop_the_others(store: Any) -> None:
    import httpx

    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.headers["Idempotency-Key"])
        if len(calls) == 1:
            raise RuntimeError("a bug in a transport")
        return httpx.Response(200)

    await commit(store, failed(), escalated())
    hook = {"type": "webhook", "name": "ops", "url": "http://hooks/", "secret": "k"}
    cfg = NotifyConfig.model_validate({"channels": [hook], "lease_s": 30})
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    n = Notifier(store, cfg, client=client)
    try:
        assert await n.run_once(at=0.0) == 2
        statuses = {i.id: i.status for i in await store.list_outbox()}
        assert sorted(statuses.values()) == ["delivered", "pending"]
        assert await n.run_once(at=10.0) == 0  # the failed one stays leased
        assert await n.run_once(at=31.0) == 1  # then it is tried again
        assert {i.status for i in await store.list_outbox()} == {"delivered"}
        assert calls[0] == calls[2]  # the same key on the try after the failure
    finally:
        await client.aclose()


async def test_retry_after_of_a_429_is_honoured(store: Any, receiver: Receiver) -> None:
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "120"}, text="slow down")

    await commit(store, failed())
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    n = Notifier(store, config(receiver, backoff_s=1), client=client)
    await n.run_once(at=0.0)
    await client.aclose()
    (item,) = await store.list_outbox()
    assert item.next_at >= 120.0 and item.deliveries[0].status_code == 429


async def test_guard_trips_alert_at_the_rate(store: Any, receiver: Receiver) -> None:
    trips = [tripped(ts=t) for t in (10.0, 20.0, 30.0, 40.0, 700.0)]
    await commit(store, *trips, tripped("max_visits", ts=35.0))
    n = Notifier(store, config(receiver, guard_rate={"trips": 3, "window_s": 60}))
    try:
        while await n.run_once(at=1000.0):
            pass
        bodies = [json.loads(r.body) for r in receiver.received]
        assert [b["card"]["event_id"] for b in bodies] == [trips[2].id]  # the 3rd in 60s
        assert bodies[0]["card"]["title"] == "Guard max_hops tripped 3 times in 60s"
        statuses = [i.status for i in await store.list_outbox()]
        assert statuses == ["skipped", "skipped", "delivered", "skipped", "skipped", "skipped"]
    finally:
        await n.close()


async def test_a_kind_no_channel_takes_is_skipped(store: Any, receiver: Receiver) -> None:
    await commit(store, failed())
    channels = [{"type": "slack", "name": "s", "url": receiver.url, "kinds": ["approval"]}]
    n = Notifier(store, config(receiver, channels=channels))
    await n.run_once(at=0.0)
    await n.close()
    assert receiver.received == []
    assert [i.status for i in await store.list_outbox()] == ["skipped"]


async def test_a_real_runs_approval_request_reaches_the_webhook(
    tmp_path: Path, receiver: Receiver
) -> None:
    @tool(requires_approval=True, approver_roles=["finance"])
    async def refund(order_id: str, amount: int, api_key: str) -> str:
        """Refund an order.

        Args:
            order_id: The order.
            amount: Amount in yuan.
            api_key: The payment provider's key.
        """
        return "refunded"

    model = ScriptedModel(
        [
            ScriptedModel.call(
                "refund", order_id="ORD-1", amount=120, api_key="sk-abcdef0123456789XYZ"
            )
        ]
    )
    store = SQLiteStore(f"sqlite:///{tmp_path}/run.db")
    team = Team(
        [Agent(name="billing", instructions="Refunds.", tools=[refund])],
        entry="billing",
        model=model,
        store=store,
    )
    # the key is in the user's message: ids a call uses must come from the conversation
    result = await team.run(
        "请给订单 ORD-1 退款 120 元，密钥 sk-abcdef0123456789XYZ", session_id="S1"
    )
    assert result.status == "awaiting_approval", result.error
    n = Notifier(store, config(receiver))
    try:
        assert await n.run_once() == 1
    finally:
        await n.close()
        await store.close()
    (got,) = receiver.received
    verify_signature(SECRET, got.headers, got.body)
    card = json.loads(got.body)["card"]
    assert card["kind"] == "approval" and card["required_roles"] == ["finance"]
    assert card["session_id"] == "S1" and card["approval_id"]
    assert b"sk-abcdef0123456789XYZ" not in got.body and b"ORD-1" in got.body


async def test_an_event_no_card_can_be_made_of_is_dead_at_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A row this Baton cannot read (written by another version, or edited) would fail on
    every try: it is the dead letter at once, and the deliverer goes on."""
    import sqlite3

    store = SQLiteStore(f"sqlite:///{tmp_path}/n.db")
    await commit(store, failed(), escalated())
    raw = sqlite3.connect(tmp_path / "n.db")
    raw.execute("UPDATE outbox SET event = replace(event, 'run_finished', 'no_such_event')")
    raw.commit()
    raw.close()
    n = Notifier(store, config(receiver))
    try:
        assert await n.run_once() == 2
    finally:
        await n.close()
    bad, good = await store.list_outbox()
    await store.close()
    assert bad.status == "dead" and "no card can be made of it" in bad.deliveries[0].error
    assert good.status == "delivered" and len(receiver.received) == 1


async def test_a_receiver_that_never_answers_is_a_failed_try(
    store: Any, receiver: Receiver
) -> None:
    import threading

    await commit(store, failed())
    receiver.hold = threading.Event()
    n = Notifier(store, config(receiver, timeout_s=0.3, lease_s=5))
    try:
        await n.run_once(at=0.0)
    finally:
        receiver.hold.set()
        await n.close()
    (item,) = await store.list_outbox()
    assert item.status == "pending" and item.deliveries[0].status_code is None
    assert "Timeout" in item.deliveries[0].error


async def test_run_prunes_old_settled_items_and_outlives_a_failing_store(
    store: Any, receiver: Receiver
) -> None:
    await commit(store, tripped(ts=1.0), failed())
    old, pending = await store.list_outbox()
    await store.claim_outbox("x", lease_s=5, limit=1)
    await store.settle_outbox(old.id, "x", "skipped", [])
    n = Notifier(store, config(receiver, keep_s=60))
    calls = 0
    real = store.claim_outbox

    async def flaky(*args: Any, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise StoreError("database is locked")
        return await real(*args, **kw)

    store.claim_outbox = flaky
    stop = asyncio.Event()
    task = asyncio.create_task(n.run(poll_s=0.02, stop=stop))
    try:
        for _ in range(300):
            if receiver.received:
                break
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await task
        await n.close()
    assert calls >= 2  # the failure was logged and the loop went on
    assert [i.id for i in await store.list_outbox()] == [pending.id]  # the old one pruned
    assert len(receiver.received) == 1


def test_backoff_doubles_up_to_the_cap_with_jitter() -> None:
    rng = random.Random(7)
    for attempt, full in [(1, 2.0), (2, 4.0), (3, 8.0), (10, 60.0)]:
        d = backoff_s(attempt, 2.0, 60.0, rng)
        assert full / 2 <= d <= full


def test_config_errors_say_what_to_fix(tmp_path: Path) -> None:
    hook = {"type": "webhook", "name": "a", "url": "http://x/", "secret": "k"}
    with pytest.raises(ValueError, match="channel names must be unique"):
        NotifyConfig.model_validate({"channels": [hook, hook]})
    with pytest.raises(ValueError, match=r"lease_s .* must exceed timeout_s x channels"):
        NotifyConfig.model_validate({"channels": [hook], "lease_s": 5, "timeout_s": 10})
    bad = tmp_path / "n.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        NotifyConfig.load(bad)
    bad.write_text(json.dumps({"channels": [{"type": "fax", "name": "f", "url": "http://x"}]}))
    with pytest.raises(ConfigError, match="is wrong"):
        NotifyConfig.load(bad)
    with pytest.raises(ConfigError, match="has no outbox"):
        Notifier(object(), NotifyConfig.model_validate({"channels": [hook]}))


def test_the_documented_config_file_loads(tmp_path: Path) -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "notifications.md"
    (block,) = re.findall(r"```json\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    path = tmp_path / "notify.json"
    path.write_text(block, encoding="utf-8")
    cfg = NotifyConfig.load(path)
    assert [c.type for c in cfg.channels] == ["webhook", "slack", "wecom", "dingtalk"]
    assert cfg.links is not None and cfg.keep_s == 604800
