"""The kernel's fast paths give the same results as the plain way of computing them.

Entity extraction skips extractors whose slot is set and texts without their key words,
remembers finds per message; redaction skips texts it checked before; timeouts share timer
handles; ids come from a pool of random bytes; the memory store prunes its locks lazily.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.backends.memory import MemoryStore
from baton.core.events import RouteDecided, ToolCalled
from baton.core.ids import new_id, new_trace_id
from baton.runtime import timeouts
from baton.runtime.entities import (
    AMOUNTS,
    DEFAULT_EXTRACTORS,
    SERVER_IDS,
    EntityMemo,
    RegexExtractor,
    extract,
    missing_entities,
)
from baton.runtime.redact import Redactor
from baton.runtime.timeouts import with_timeout

# Pieces of text that each default extractor finds something in, in several letter cases,
# plus glue; hypothesis joins them into messages.
FRAGMENTS = [
    "order", "ORD-202607-99", "#12345", "W2378156", "server 12", "srv-01", "WEB-03", "prod-DB-2",
    "eu-west-Web-01", "Api-2", "K8S-3", "i-0abc1234def5", "Host: 7", "INSTANCE: x-9", "vm12",
    "li@x.com", "13800138000@163.com", "138 0013 8000", "+1 415 555 2671", "(415) 555-2671",
    "$12.50", "¥300", "￥1,200", "300元", "300块钱", "5英镑", "10港币", "人民币300", "usd 20",
    "20 Dollars", "20 EUROS", "Eur 5", "3 bucks", "9 YUAN", "C$ 5", "HK$20", "£5", "€20",
    "订单号：", "服务器", "主机 7", "实例 web-2", "节点编号3", "is", "number", "the", "12", "2024",
    " ", "-", "#", ":", "，", "order 300", "010-12345678", "api-2", "W12345678", "x",
]  # fmt: skip
texts = st.lists(st.sampled_from(FRAGMENTS), max_size=10).map("".join)
SLOTS = ["order_id", "server_id", "email", "phone", "amount", "other"]
VALUES = ["ORD-202607-99", "12345", "#12345", "srv-01", "li@x.com", "13800138000", "$12.50", ""]
states = st.dictionaries(st.sampled_from(SLOTS), st.sampled_from([*VALUES, None]), max_size=4)


def reference(said: Sequence[str], state: Mapping[str, Any]) -> dict[str, str]:
    """`missing_entities` the plain way: every extractor on every text, then the function's own
    filter applied to each slot's latest value alone (through an extractor that finds the
    whole value), so only the extraction side is compared."""
    latest: dict[str, str] = {}
    for text in said:
        for e in extract(text):
            latest[e.slot] = e.value
    out: dict[str, str] = {}
    for slot, value in latest.items():
        whole = RegexExtractor(name=slot, slot=slot, patterns=(r"(?s).+",))
        out.update(missing_entities([value], state, [whole]))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, max_size=3), states)
def test_missing_entities_equals_extracting_everything(
    said: list[str], state: dict[str, Any]
) -> None:
    assert missing_entities(said, state) == reference(said, state)


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, max_size=3), states)
def test_a_memo_changes_nothing(said: list[str], state: dict[str, Any]) -> None:
    memo = EntityMemo(max_texts=2)
    keyed = {f"msg_{i}": text for i, text in enumerate(said)}
    first = missing_entities(keyed, state, memo=memo)
    again = missing_entities(keyed, state, memo=memo)
    assert first == again == missing_entities(said, state)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_key_words_only_skip_texts_without_entities(text: str) -> None:
    for ex in (SERVER_IDS, AMOUNTS):
        assert isinstance(ex, RegexExtractor)
        plain = dataclasses.replace(ex, words=())
        assert ex.extract(text) == plain.extract(text)


def test_key_words_skip_a_plain_request() -> None:
    text = "please check the invoice for order ORD-202607-99"
    assert not any(w in text.lower() for w in (*SERVER_IDS.words, *AMOUNTS.words))
    assert [e.kind for e in extract(text)] == ["order"]


def test_an_extractor_whose_slot_is_set_still_hides_overlapping_finds() -> None:
    # the phone extractor finds the order number as a mobile number; the order extractor (its
    # slot already set) must still run on this text so that its find hides the phone number
    said = ["order 13800138000"]
    assert [e.kind for e in extract(said[0])] == ["order"]
    assert [e.kind for e in extract(said[0], [DEFAULT_EXTRACTORS[3]])] == ["phone"]
    assert missing_entities(said, {"order_id": "ORD-1"}) == {}
    assert missing_entities(said, {}) == {"order_id": "13800138000"}


def test_the_memo_is_keyed_by_message_and_checks_the_text() -> None:
    calls: list[str] = []

    @dataclasses.dataclass(frozen=True)
    class Counting:
        name: str = "counting"

        def extract(self, text: str) -> list[Any]:
            calls.append(text)
            return extract(text)

    memo = EntityMemo(max_texts=2)
    exs = [Counting()]
    missing_entities({"m1": "order 12345"}, {}, exs, memo)
    missing_entities({"m1": "order 12345"}, {}, exs, memo)
    assert calls == ["order 12345"]  # found once, remembered
    assert missing_entities({"m1": "order 67890"}, {}, exs, memo) == {"order_id": "67890"}
    missing_entities({"m2": "a", "m3": "b"}, {}, exs, memo)  # evicts m1 (two at most)
    missing_entities({"m1": "order 67890"}, {}, exs, memo)
    assert calls == ["order 12345", "order 67890", "a", "b", "order 67890"]
    missing_entities({"m3": "b"}, {}, DEFAULT_EXTRACTORS, memo)  # other extractors: forgets
    assert missing_entities({"m3": "b"}, {}, exs, memo) == {}
    assert calls[-1] == "b"


def test_redaction_skips_checked_texts_but_never_a_sensitive_key() -> None:
    red = Redactor()
    event = ToolCalled(
        trace_id="t", session_id="s", run_id="r", tool="login", call_id="c", ok=True,
        arguments={"user": "hunter2x", "note": "hunter2x"},
    )  # fmt: skip
    assert red.redact_event(event) is event  # nothing sensitive: the same object
    secret = dataclasses.replace(event, arguments={"note": "hunter2x", "password": "hunter2x"})
    out = red.redact_event(secret)
    assert out.arguments == {"note": "hunter2x", "password": "[REDACTED:password]"}


def test_an_event_without_text_fields_is_returned_as_is() -> None:
    red = Redactor()
    event = RouteDecided(trace_id="t", session_id="s", run_id="r", target="billing", tier="entry")
    assert red.redact_event(event) is event
    assert red.redact_event(event) is event


async def test_waiting_calls_share_timer_handles() -> None:
    loop = asyncio.get_running_loop()
    before = len(loop._scheduled)  # type: ignore[attr-defined]

    async def slow(i: int) -> int:
        await asyncio.sleep(0.05)
        return i

    async def one(i: int) -> int:
        return await with_timeout(slow(i), 120.0)

    tasks = [asyncio.ensure_future(one(i)) for i in range(200)]
    await asyncio.sleep(0.01)
    slots = timeouts._slots(loop)
    handles = len(slots.handles)
    # 200 sleeps plus a few slot handles, not 200 more timer handles
    assert 1 <= handles <= 3
    assert len(loop._scheduled) - before <= 200 + handles  # type: ignore[attr-defined]
    assert await asyncio.gather(*tasks) == list(range(200))
    assert not slots.slots and not slots.handles  # all disarmed


async def test_a_shared_slot_still_times_out_each_call_on_time() -> None:
    async def forever() -> None:
        await asyncio.sleep(3600)

    loop = asyncio.get_running_loop()
    t = loop.time()
    results = await asyncio.gather(
        *(with_timeout(forever(), 0.05) for _ in range(20)), return_exceptions=True
    )
    waited = loop.time() - t
    assert all(isinstance(r, TimeoutError) for r in results)
    assert 0.049 <= waited < 0.5  # late by at most 1/64 of the limit, plus scheduling


def test_ids_from_the_pool_are_unique_across_threads() -> None:
    seen: list[list[str]] = []

    def take() -> None:
        seen.append([new_id("ev_") for _ in range(3000)])

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [i for batch in seen for i in batch]
    assert len(set(ids)) == len(ids) == 12000
    assert all(len(i) == 19 and int(i[3:], 16) >= 0 for i in ids)
    trace = new_trace_id()
    assert len(trace) == 32 and int(trace, 16) > 0


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork")
def test_a_forked_child_never_repeats_the_parents_ids() -> None:
    new_id()  # fill the pool
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, " ".join(new_id() for _ in range(50)).encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 100_000).decode().split()
    os.waitpid(pid, 0)
    parent = [new_id() for _ in range(50)]
    assert len(child) == 50 and not set(child) & set(parent)


async def test_the_memory_store_prunes_its_leases_lazily() -> None:
    store = MemoryStore()
    for i in range(10_001):
        assert await store.acquire_lease(f"live-{i}", "worker-a", 30)
    # all still live: the next prune waits until the table has doubled, so leases stay O(1)
    assert store._lease_prune_at == 20_002
    for i in range(10_001):
        await store.acquire_lease(f"gone-{i}", "worker-a", 0.0)
    assert await store.acquire_lease("one-more", "worker-a", 30)  # this one prunes the expired
    assert len(store._leases) == 10_002
    assert not await store.acquire_lease("live-5", "worker-b", 30)


KERNEL = {
    "trace_id": "0" * 32,
    "session_id": "s1",
    "user_id": None,
    "source": "triage",
    "target": "billing",
    "path": ["triage"],
    "history_ref": "h1",
    "hop": 1,
}


@settings(max_examples=60, deadline=None)
@given(
    st.fixed_dictionaries(
        {"reason": st.text(max_size=20), "objective": st.text(max_size=20)},
        optional={
            "state": st.dictionaries(st.sampled_from(["order_id", "email"]), st.text(max_size=8)),
            "completed_steps": st.lists(st.text(max_size=8), max_size=3),
            "priority": st.sampled_from(["low", "normal", "high", "urgent", "asap"]),
            "reply_to_user": st.none() | st.text(max_size=8),
            "extra_key": st.integers(),
        },
    )
)
def test_a_payload_validated_once_equals_the_two_step_way(args: dict[str, Any]) -> None:
    from pydantic import ValidationError

    from baton.core.payload import HandoffArgs, HandoffPayload
    from baton.runtime.handoffs import _payload

    try:
        expected = HandoffPayload(**HandoffArgs.model_validate(args).model_dump(), **KERNEL)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as got:
            _payload(dict(args), **KERNEL)
        assert str(got.value) == str(exc)
        return
    payload = _payload(dict(args), **KERNEL)
    assert payload.model_dump(exclude={"created_at"}) == expected.model_dump(exclude={"created_at"})
    assert payload.model_fields_set == expected.model_fields_set


def test_payloads_never_share_their_default_containers() -> None:
    from baton.runtime.handoffs import _payload

    first = _payload({"reason": "r", "objective": "o"}, **KERNEL)
    first.state["order_id"] = "ORD-1"
    first.completed_steps.append("looked up")
    second = _payload({"reason": "r", "objective": "o"}, **KERNEL)
    assert second.state == {} and second.completed_steps == []


@pytest.mark.parametrize(
    ("replacement", "ascii_json"),
    [("[REDACTED:{name}]", False), ("[已隐藏:{name}]", True), ('<"{name}">', False)],
)
def test_a_mask_in_a_models_arguments_is_found_whatever_the_json_looks_like(
    replacement: str, ascii_json: bool
) -> None:
    import json

    from baton.core.messages import ToolCall
    from baton.runtime.at_rest import lost_arguments
    from baton.runtime.state import PendingCall

    red = Redactor(replacement=replacement)
    mask = replacement.format(name="password")
    args = {"user": "li", "password": mask, "note": f"the old one was {mask}"}
    text = json.dumps(args, ensure_ascii=ascii_json)  # a mask JSON may write escaped
    pc = PendingCall(ToolCall(id="c", name="reset", arguments=text), args, None, key="k")
    assert lost_arguments(red, pc) == ["password"]
    clean = {"user": "li", "password": "Zq7-hunter"}
    pc = PendingCall(
        ToolCall(id="c", name="reset", arguments=json.dumps(clean)), clean, None, key="k"
    )
    assert lost_arguments(red, pc) == []
