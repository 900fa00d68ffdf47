"""Saved prompt-prefix states of the embedded engine (`baton.models.local.states`), on
SmolLM2-135M, the tests' plumbing model: a restored state gives the next-token distribution a
fresh reading gives, two agents' states never mix, a changed instruction is read (and saved)
again, RAM stays within its bound, and states on disk start the next engine warm."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from baton.core.messages import Message
from baton.models.base import ModelRequest
from baton.models.local import LocalModel
from baton.models.local.engine import LlamaEngine
from baton.models.local.prompt import compact_prompt, fixed_text
from baton.models.local.states import PromptStates, SavedState, token_key
from baton.models.local.weights import weights_path
from local_model_kit import require_local_model

pytestmark = pytest.mark.local_model

SMALL = "smollm2-135m"
BILLING = (
    "You are billing, the desk for invoices, refunds and payments. Look the invoice up "
    "before you answer and never promise a refund you have not checked. " * 3
)
ORDERS = (
    "You are orders, the desk that tracks shop orders: where a parcel is, its courier and "
    "when it will arrive. Look the order up before you answer. " * 3
)


def request(instructions: str, question: str, facts: str = "") -> ModelRequest:
    system = instructions + (f"\n\nKnown facts: {facts}" if facts else "")
    return ModelRequest(
        agent="agent",
        messages=[Message(role="system", content=system), Message(role="user", content=question)],
        fixed_prefix=instructions,
    )


@pytest.fixture(scope="module")
def engine() -> Any:
    require_local_model(SMALL)
    engine = LlamaEngine(weights_path(SMALL), n_ctx=2048, n_threads=2)
    yield engine
    engine.close()


def empty(engine: LlamaEngine) -> None:
    engine.llama.n_tokens = 0
    engine.llama._ctx.kv_cache_seq_rm(0, 0, -1)


def fresh_logprobs(engine: LlamaEngine, req: ModelRequest) -> Any:
    """The next-token log-probabilities after `req`'s prompt, read from an empty context
    (which is left empty)."""
    empty(engine)
    logprobs = engine._logprobs_after(tokens_of(engine, req))
    empty(engine)
    return logprobs


def tokens_of(engine: LlamaEngine, req: ModelRequest) -> list[int]:
    return engine._prompt_tokens(compact_prompt(req), "")


def primed_logprobs(engine: LlamaEngine, req: ModelRequest) -> tuple[int, Any]:
    """(tokens read to prime, the next-token log-probabilities read on top of the primed
    context): what `complete` does before it samples."""
    fixed = fixed_text(req)
    assert fixed
    read = engine._prime(compact_prompt(req), fixed)
    return read, engine._logprobs_after(tokens_of(engine, req))


def assert_same_distribution(a: Any, b: Any) -> None:
    assert int(np.argmax(a)) == int(np.argmax(b))
    assert list(np.argsort(a)[-10:]) == list(np.argsort(b)[-10:])
    # a prefix read in another batch split differs only by float rounding
    assert float(np.max(np.abs(np.exp(a) - np.exp(b)))) < 2e-3


def test_a_restored_prefix_gives_the_distribution_of_a_fresh_reading(engine: Any) -> None:
    req = request(BILLING, "Where is my refund for ORD-7?", facts="order_id=ORD-7")
    fresh = fresh_logprobs(engine, req)
    read, first = primed_logprobs(engine, req)  # reads the prefix and saves it
    assert read > 80
    assert_same_distribution(first, fresh)
    fresh_logprobs(engine, request(ORDERS, "where is ORD-9?"))  # another prompt in between
    hits = engine.states.stats.hits
    read, restored = primed_logprobs(engine, req)
    assert read == 0 and engine.states.stats.hits == hits + 1
    assert_same_distribution(restored, fresh)


def test_two_agents_states_never_mix(engine: Any) -> None:
    billing = request(BILLING, "我的发票金额不对。")
    orders = request(ORDERS, "我的订单到哪了？")
    want_billing, want_orders = fresh_logprobs(engine, billing), fresh_logprobs(engine, orders)
    for _ in range(2):  # alternate: each restores its own state
        _, got = primed_logprobs(engine, billing)
        assert_same_distribution(got, want_billing)
        _, got = primed_logprobs(engine, orders)
        assert_same_distribution(got, want_orders)
    keys = {token_key(tokens_of(engine, r)[:5]) for r in (billing, orders)}
    assert len(keys) == 1  # the two prompts do share a start (the chat template) ...
    saved = [s.tokens for s in engine.states._states.values()]
    billing_fixed = engine._prompt_tokens(compact_prompt(billing), "")
    orders_fixed = engine._prompt_tokens(compact_prompt(orders), "")
    mine = [t for t in saved if tuple(billing_fixed[: len(t)]) == t]
    theirs = [t for t in saved if tuple(orders_fixed[: len(t)]) == t]
    assert mine and theirs and not set(mine) & set(theirs)  # ... but no state is shared


def test_a_changed_instruction_is_read_again(engine: Any) -> None:
    before = request(BILLING, "Is my invoice paid?")
    primed_logprobs(engine, before)
    changed = request(BILLING.replace("refunds", "credits"), "Is my invoice paid?")
    misses, saved = engine.states.stats.misses, engine.states.stats.saved
    read, got = primed_logprobs(engine, changed)
    assert engine.states.stats.misses == misses + 1 and engine.states.stats.saved == saved + 1
    assert read > 0  # read from where the instructions changed, not taken from the old state
    assert_same_distribution(got, fresh_logprobs(engine, changed))


def test_states_stay_within_their_ram_bound(engine: Any) -> None:
    req = request(BILLING, "hello")
    primed_logprobs(engine, req)
    one = max(s.nbytes for s in engine.states._states.values())
    store = PromptStates(capacity_bytes=3 * one)
    for i in range(8):
        store.put(SavedState(tuple(range(i, i + 50)), bytearray(one - 200)))
        assert store.nbytes <= 3 * one
    assert len(store) == 3 and store.stats.evicted == 5
    assert store.get(range(7, 57)) is not None and store.get(range(0, 50)) is None
    store.put(SavedState((1, 2, 3), bytearray(4 * one)))  # larger than the whole bound
    assert store.nbytes <= 3 * one


def test_states_on_disk_start_the_next_engine_warm(tmp_path: Path) -> None:
    require_local_model(SMALL)
    req = request(ORDERS, "When will ORD-3 arrive?")
    first = LlamaEngine(weights_path(SMALL), n_ctx=2048, n_threads=2, states_dir=tmp_path)
    try:
        read, _ = primed_logprobs(first, req)
        assert read > 80 and len(list(tmp_path.glob("*.kv"))) == 1
    finally:
        first.close()
    second = LlamaEngine(weights_path(SMALL), n_ctx=2048, n_threads=2, states_dir=tmp_path)
    try:
        read, got = primed_logprobs(second, req)
        assert read == 0 and second.states.stats.loaded_from_disk == 1
        assert_same_distribution(got, fresh_logprobs(second, req))
        (prefix,) = [s.tokens for s in second.states._states.values()]
    finally:
        second.close()
    # a damaged file (a writer killed mid-write, a full disk) is read again, never loaded
    (path,) = tmp_path.glob("*.kv")
    path.write_bytes(path.read_bytes()[:-100])
    assert PromptStates(1 << 30, tmp_path).get(prefix) is None
    path.write_bytes(b"")
    assert PromptStates(1 << 30, tmp_path).get(prefix) is None


async def test_a_local_model_reads_each_agents_prefix_once() -> None:
    require_local_model(SMALL)
    model = LocalModel(SMALL, max_tokens=4)
    asks = [
        request(BILLING, "Where is my refund?"),
        request(ORDERS, "Where is my parcel?"),
        request(BILLING, "My invoice is wrong.", facts="order_id=ORD-1"),
        request(ORDERS, "我的快递呢？"),
    ]
    usages = [(await model.generate(r)).usage for r in asks]
    for usage in usages[2:]:  # the agent's instructions came from its saved state
        assert usage.cached_input_tokens > 80
        assert usage.evaluated_input_tokens < 0.35 * usage.input_tokens


def test_where_the_demo_keeps_its_states(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from baton.models.local.states import default_states_dir

    monkeypatch.setenv("BATON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("BATON_PROMPT_STATES", raising=False)
    assert default_states_dir() == tmp_path / "cache" / "prompt-states"
    monkeypatch.setenv("BATON_PROMPT_STATES", str(tmp_path / "mine"))
    assert default_states_dir() == tmp_path / "mine"
    monkeypatch.setenv("BATON_PROMPT_STATES", "off")
    assert default_states_dir() is None


def test_a_file_of_other_tokens_is_never_loaded_and_the_disk_is_bounded(tmp_path: Path) -> None:
    store = PromptStates(1 << 20, tmp_path)
    store.put(SavedState((1, 2, 3), bytearray(b"kv")))
    (saved,) = tmp_path.glob("*.kv")
    # a file renamed to another prefix's name is refused: its tokens are checked
    saved.rename(tmp_path / f"{token_key((4, 5, 6))}.kv")
    fresh = PromptStates(1 << 20, tmp_path)
    assert fresh.get((4, 5, 6)) is None and fresh.get((1, 2, 3)) is None
    # the disk stays within its bound, oldest first out
    small = PromptStates(1 << 20, tmp_path, disk_bytes=300)
    for i in range(5):
        small.put(SavedState((i, i + 1), bytearray(100)))
    assert sum(p.stat().st_size for p in tmp_path.glob("*.kv")) <= 300
