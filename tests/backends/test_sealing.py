"""Sealed checkpoints (`baton.backends.sealing`): AES-256-GCM of checkpoint state at rest in
the SQLite, PostgreSQL and Redis stores, keys and their rotation, and what an attacker with the
database gets: nothing that opens."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.backends.sealing_kit import K1, K2, PLACES, Place, holds, keys

from baton import CheckpointKeys, ConfigError, StoreError
from baton.backends import Checkpoint, MemoryStore, SealedCheckpoints, open_store
from baton.backends.sealing import (
    KEY_ENV,
    PREFIX,
    SEALED_ONLY_ENV,
    RawCheckpoint,
    rekey,
    seal,
    sealed_key_id,
    unseal,
)

SECRET = "Zq7Hunter长城42"
STATE = '{"message": "我的新密码是' + SECRET + '", "args": {"password": "' + SECRET + '"}}'


class State:
    """A state the kernel would give: JSON text with a secret in it."""

    def __init__(self, text: str = STATE) -> None:
        self.text = text

    def to_json(self) -> str:
        return self.text


def checkpoint(sid: str = "S1", run: str = "run_1", seq: int = 1, **kw: object) -> Checkpoint:
    meta = {"agent": "it", "approval": {"id": "apr_1", "reason": "needs sign-off"}}
    return Checkpoint(sid, run, seq, state=State(), meta=meta, **kw)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


@pytest.fixture(params=PLACES)
async def place(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Place]:
    made = Place(request.param, tmp_path)
    try:
        yield made
    finally:
        await made.close()


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


# ---------------------------------------------------------------- keys


def test_a_keyring_parses_ids_in_order_and_a_bare_key_is_default() -> None:
    ring = CheckpointKeys.parse(f" k2:{b64(K2[1])} ,\nk1:{b64(K1[1])}\n")
    assert ring.ids == ("k2", "k1") and ring.current() == K2 and ring.key("k1") == K1[1]
    assert ring.key("k3") is None
    bare = CheckpointKeys.parse(base64.urlsafe_b64encode(K1[1]).decode().rstrip("="))
    assert bare.current() == ("default", K1[1])


def test_a_keyring_never_shows_its_keys() -> None:
    ring = keys(K1, K2)
    assert repr(ring) == "CheckpointKeys(ids=('k1', 'k2'))"
    assert b64(K1[1]) not in repr(ring) and str(K1[1]) not in repr(ring)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no checkpoint key given"),
        ("k1:not base64!", "'k1' is not base64"),
        (f"k1:{b64(b'short')}", "'k1' is 5 bytes; AES-256 needs exactly 32"),
        (f"k1:{b64(K1[1])},k1:{b64(K2[1])}", "'k1' is given twice"),
        (f"{b64(K1[1])},k2:{b64(K2[1])}", "entry 1 has no id"),
        (f"bad id:{b64(K1[1])}", "'bad id' is not usable"),
        (f"密钥:{b64(K1[1])}", "'密钥' is not usable"),
    ],
)
def test_a_bad_keyring_is_a_clear_config_error_that_hides_the_key(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        CheckpointKeys.parse(text)
    assert b64(K1[1]) not in str(caught.value)


def test_the_environment_names_the_keys_and_its_mistakes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert CheckpointKeys.from_env() is None
    monkeypatch.setenv(KEY_ENV, f"k2:{b64(K2[1])},k1:{b64(K1[1])}")
    ring = CheckpointKeys.from_env()
    assert ring is not None and ring.ids == ("k2", "k1")
    monkeypatch.setenv(KEY_ENV, "k1:???")
    with pytest.raises(ConfigError, match=f"\\${KEY_ENV}: checkpoint key 'k1' is not base64"):
        CheckpointKeys.from_env()


def test_import_baton_does_not_load_cryptography() -> None:
    code = "import baton, sys; baton.CheckpointKeys; print('cryptography' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------- the cipher


def test_a_sealed_state_opens_only_for_its_session_run_and_key() -> None:
    ring = keys(K1)
    blob = seal(ring, "S1", "run_1", STATE)
    assert blob.startswith(f"{PREFIX}v1:k1:") and not holds(blob, SECRET)
    assert seal(ring, "S1", "run_1", STATE) != blob  # a fresh nonce every save
    assert unseal(ring, "S1", "run_1", blob) == STATE
    for sid, run in [("S2", "run_1"), ("S1", "run_2"), ("S\u200b1", "run_1"), ("s1", "run_1")]:
        with pytest.raises(StoreError, match="copied from another session or run"):
            unseal(ring, sid, run, blob)
    other = CheckpointKeys([("k1", K2[1])])  # the same id, another key
    with pytest.raises(StoreError, match="the key named 'k1' is not the one that sealed it"):
        unseal(other, "S1", "run_1", blob)


def test_odd_ids_bind_unambiguously() -> None:
    ring = keys(K1)
    # ids that would run together if the binding were plain concatenation
    blob = seal(ring, 'S"1', "run\x00", STATE)
    assert unseal(ring, 'S"1', "run\x00", blob) == STATE
    with pytest.raises(StoreError):
        unseal(ring, "S", '"1run\x00', blob)
    lone = seal(ring, "S\ud800", "run_1", STATE)  # a lone surrogate in an id does not crash
    assert unseal(ring, "S\ud800", "run_1", lone) == STATE


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_flipped_byte_or_cut_refuses_to_open(data: st.DataObject) -> None:
    ring = keys(K1)
    blob = seal(ring, "S1", "run_1", STATE)
    head = f"{PREFIX}v1:k1:"
    raw = bytearray(base64.b64decode(blob[len(head) :]))
    if data.draw(st.booleans(), label="cut"):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1), label="keep")]
    else:
        i = data.draw(st.integers(0, len(raw) - 1), label="byte")
        raw[i] ^= data.draw(st.integers(1, 255), label="mask")
    bad = head + base64.b64encode(bytes(raw)).decode()
    with pytest.raises(StoreError, match="does not open with checkpoint key 'k1'"):
        unseal(ring, "S1", "run_1", bad)


def test_a_mangled_prefix_is_a_store_error_not_a_crash() -> None:
    ring = keys(K1)
    blob = seal(ring, "S1", "run_1", STATE)
    with pytest.raises(StoreError, match="format 'v9'"):
        unseal(ring, "S1", "run_1", blob.replace(":v1:", ":v9:", 1))
    junk = blob[:40] + "\n" + blob[40:]  # authentic bytes, but not what was stored
    for bad in (f"{PREFIX}v1:k1:", f"{PREFIX}v1:k1:%%%", f"{PREFIX}v1:k1:é", blob[:-3], junk):
        with pytest.raises(StoreError, match="does not open with checkpoint key 'k1'"):
            unseal(ring, "S1", "run_1", bad)
    with pytest.raises(StoreError, match="key 'k9', which this store's keyring does not hold"):
        unseal(ring, "S1", "run_1", blob.replace(":k1:", ":k9:", 1))


def test_a_failing_key_provider_is_a_store_error_without_the_key() -> None:
    class Vault:
        def current(self) -> tuple[str, bytes]:
            raise TimeoutError("vault unreachable")

        def key(self, key_id: str) -> bytes | None:
            raise TimeoutError("vault unreachable")

    with pytest.raises(StoreError, match="Vault failed to give the sealing key"):
        seal(Vault(), "S1", "run_1", STATE)
    blob = seal(keys(K1), "S1", "run_1", STATE)
    with pytest.raises(StoreError, match="Vault failed to give key 'k1'"):
        unseal(Vault(), "S1", "run_1", blob)


# ---------------------------------------------------------------- the stores


async def test_a_store_with_keys_keeps_the_state_sealed_and_meta_readable(place: Place) -> None:
    store = place.open(keys(K1))
    assert isinstance(store, SealedCheckpoints) and store.seals_checkpoints
    await store.put_checkpoint(checkpoint())
    raw = await place.raw_data("S1")
    assert raw.startswith(f"{PREFIX}v1:k1:")
    dump = await place.dump()
    assert not holds(dump, SECRET) and not holds(dump, "我的新密码")
    assert "needs sign-off" in dump  # meta stays in clear for listings
    got = await place.open(keys(K1)).get_checkpoint("S1")
    assert got is not None and got.state_json() == STATE and got.sealed_with == "k1"
    assert got.meta["approval"]["id"] == "apr_1" and got.unreadable is None


async def test_without_the_key_a_sealed_checkpoint_is_listed_and_refused_clearly(
    place: Place,
) -> None:
    await place.open(keys(K1)).put_checkpoint(checkpoint())
    for store in (place.open(), place.open(keys(K2))):
        [listed] = await store.list_checkpoints()
        assert listed.session_id == "S1" and listed.meta["agent"] == "it"
        assert listed.sealed_with == "k1" and listed.data is None
        got = await store.get_checkpoint("S1")
        assert got is not None
        with pytest.raises(StoreError, match="encrypted with checkpoint key 'k1'") as caught:
            got.state_json()
        msg = str(caught.value)
        assert "discard" in msg and ("holding key 'k1'" in msg or "add key 'k1' back" in msg)
    # nothing was lost: the key opens it again
    again = await place.open(keys(K2, K1)).get_checkpoint("S1")
    assert again is not None and again.state_json() == STATE
    # and a store without the key can still discard it
    await place.open().delete_checkpoint("S1", "run_1")
    assert await place.open(keys(K1)).get_checkpoint("S1") is None


async def test_tampered_truncated_or_moved_blobs_do_not_open(place: Place) -> None:
    store = place.open(keys(K1))
    await store.put_checkpoint(checkpoint("S1", "run_1"))
    await store.put_checkpoint(checkpoint("S2", "run_2"))
    good = await place.raw_data("S1")
    flipped = good[:-6] + ("A" if good[-6] != "A" else "B") + good[-5:]
    for bad in (flipped, good[: len(good) // 2]):
        await place.set_raw_data("S1", bad)
        got = await store.get_checkpoint("S1")
        assert got is not None and got.unreadable is not None
        with pytest.raises(StoreError, match="changed or cut short"):
            got.state_json()
    await place.set_raw_data("S2", good)  # S1's blob copied into S2's row
    moved = await store.get_checkpoint("S2")
    assert moved is not None
    with pytest.raises(StoreError, match="copied from another session or run"):
        moved.state_json()
    await place.set_raw_data("S1", good)  # put back: it opens again
    back = await store.get_checkpoint("S1")
    assert back is not None and back.state_json() == STATE


async def test_a_checkpoint_in_clear_loads_with_keys_and_is_sealed_at_its_next_save(
    place: Place,
) -> None:
    await place.open().put_checkpoint(checkpoint(seq=1))  # saved before keys were configured
    assert (await place.raw_data("S1")) == STATE
    keyed = place.open(keys(K1))
    got = await keyed.get_checkpoint("S1")
    assert got is not None and got.state_json() == STATE and got.sealed_with is None
    await keyed.put_checkpoint(checkpoint(seq=2))
    assert (await place.raw_data("S1")).startswith(f"{PREFIX}v1:k1:")


async def test_a_paused_commit_seals_its_checkpoint_too(place: Place) -> None:
    from baton.backends.base import SessionRecord

    store = place.open(keys(K1))
    await store.commit_run(
        SessionRecord("S1"), [], [], checkpoint=checkpoint(status="awaiting_approval")
    )
    assert (await place.raw_data("S1")).startswith(f"{PREFIX}v1:k1:")
    got = await store.get_checkpoint("S1")
    assert got is not None and got.state_json() == STATE and got.status == "awaiting_approval"


async def test_rotation_rekeys_every_checkpoint_then_the_old_key_goes(place: Place) -> None:
    old = place.open(keys(K1))
    await old.put_checkpoint(checkpoint("S1", "run_1"))
    await old.put_checkpoint(checkpoint("S2", "run_2", status="awaiting_approval"))
    await place.open().put_checkpoint(checkpoint("S3", "run_3"))  # one in clear
    rotating = place.open(keys(K2, K1))  # the new key first, the old one still opens
    assert isinstance(rotating, SealedCheckpoints)
    report = await rotating.rekey_checkpoints()
    assert report.key_id == "k2" and sorted(report.resealed) == ["S1", "S2", "S3"]
    assert report.complete and not report.current
    for sid in ("S1", "S2", "S3"):
        assert sealed_key_id(await place.raw_data(sid)) == "k2"
    again = await rotating.rekey_checkpoints()
    assert sorted(again.current) == ["S1", "S2", "S3"] and not again.resealed
    new_only = place.open(keys(K2))  # the old key dropped
    for cp in await new_only.list_checkpoints():
        assert cp.state_json() == STATE and cp.sealed_with == "k2"


async def test_rekey_reports_what_it_cannot_open_and_keeps_it(place: Place) -> None:
    await place.open(keys(("k0", bytes(32)))).put_checkpoint(checkpoint("S1", "run_1"))
    await place.open(keys(K1)).put_checkpoint(checkpoint("S2", "run_2"))
    before = await place.raw_data("S1")
    report = await place.open(keys(K2, K1)).rekey_checkpoints()  # k0 is not in the ring
    assert report.resealed == ["S2"] and list(report.unreadable) == ["S1"]
    assert "key 'k0'" in report.unreadable["S1"] and not report.complete
    assert await place.raw_data("S1") == before


async def test_the_swap_never_overwrites_a_checkpoint_saved_meanwhile(place: Place) -> None:
    store = place.open(keys(K2, K1))
    await place.open(keys(K1)).put_checkpoint(checkpoint(seq=1))
    [row] = await store._raw_checkpoints()  # type: ignore[attr-defined]
    await store.put_checkpoint(checkpoint(seq=2))  # the run goes on
    saved = await place.raw_data("S1")
    assert not await store._swap_checkpoint_data(row, "stale")  # type: ignore[attr-defined]
    assert await place.raw_data("S1") == saved


async def test_rekey_reads_again_after_a_lost_swap() -> None:
    ring = keys(K2, K1)
    old = RawCheckpoint("S1", "run_1", 1, seal(keys(K1), "S1", "run_1", STATE))
    newer = RawCheckpoint("S1", "run_1", 2, seal(ring, "S1", "run_1", STATE))
    swaps: list[RawCheckpoint] = []

    async def reread(sid: str) -> RawCheckpoint | None:
        return newer

    async def lose(row: RawCheckpoint, data: str) -> bool:
        swaps.append(row)
        return False

    report = await rekey(ring, [old], reread, lose)
    assert swaps == [old] and report.current == ["S1"] and report.complete

    async def stale(sid: str) -> RawCheckpoint | None:
        return old

    busy = await rekey(ring, [old], stale, lose)
    assert busy.busy == ["S1"] and not busy.complete


async def test_rekey_without_keys_says_how_to_give_them(place: Place) -> None:
    store = place.open()
    assert isinstance(store, SealedCheckpoints) and not store.seals_checkpoints
    with pytest.raises(StoreError, match=f"rekey needs checkpoint keys: set \\${KEY_ENV}"):
        await store.rekey_checkpoints()


async def test_open_store_passes_the_keys_and_refuses_them_where_they_do_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    given = open_store(url, checkpoint_keys=f"k1:{b64(K1[1])}")
    assert getattr(given, "seals_checkpoints", False)
    await given.close()
    monkeypatch.setenv(KEY_ENV, f"k2:{b64(K2[1])}")
    from_env = open_store(url)
    assert from_env.checkpoint_keys.ids == ("k2",)  # type: ignore[attr-defined]
    await from_env.close()
    with pytest.raises(ConfigError, match="memory store keeps checkpoints in process memory"):
        open_store("memory://", checkpoint_keys=keys(K1))
    with pytest.raises(ConfigError, match="pass the keys to the store object's constructor"):
        open_store(MemoryStore(), checkpoint_keys=keys(K1))
    with pytest.raises(ConfigError, match="checkpoint_keys must be CheckpointKeys"):
        open_store(url, checkpoint_keys=b"raw bytes")  # type: ignore[arg-type]


async def test_a_state_that_is_not_unicode_is_refused_whole(place: Place) -> None:
    store = place.open(keys(K1))
    bad = checkpoint()
    bad.state = State('{"x": "\ud800"}')
    with pytest.raises(StoreError, match="lone surrogate"):
        await store.put_checkpoint(bad)
    assert await store.get_checkpoint("S1") is None


async def test_sealed_only_refuses_a_clear_state_put_in_place_of_a_sealed_one(
    place: Place,
) -> None:
    await place.open(keys(K1)).put_checkpoint(checkpoint())
    forged = '{"turn": {"calls": [{"approved": true}]}}'  # someone with the database
    await place.set_raw_data("S1", forged)
    strict = place.open(CheckpointKeys([K1], sealed_only=True))
    [listed] = await strict.list_checkpoints()
    assert listed.unreadable is not None and listed.data is None
    with pytest.raises(StoreError, match="stored in clear, and this store accepts sealed"):
        listed.state_json()
    report = await strict.rekey_checkpoints()  # type: ignore[attr-defined]
    assert list(report.unreadable) == ["S1"] and not report.resealed  # never laundered
    assert await place.raw_data("S1") == forged
    lenient = await place.open(keys(K1)).get_checkpoint("S1")  # the default loads it
    assert lenient is not None and lenient.state_json() == forged


def test_sealed_only_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, f"k1:{b64(K1[1])}")
    ring = CheckpointKeys.from_env()
    assert ring is not None and not ring.sealed_only
    monkeypatch.setenv(SEALED_ONLY_ENV, "1")
    ring = CheckpointKeys.from_env()
    assert ring is not None and ring.sealed_only and "sealed_only=True" in repr(ring)
    monkeypatch.setenv(SEALED_ONLY_ENV, "maybe")
    with pytest.raises(ConfigError, match="give 1"):
        CheckpointKeys.from_env()
    monkeypatch.setenv(SEALED_ONLY_ENV, "1")
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ConfigError, match="give the keys too"):
        CheckpointKeys.from_env()
