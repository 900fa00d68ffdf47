"""Sealed checkpoints: the state of an unfinished run encrypted at rest with AES-256-GCM.

A checkpoint holds the live run: the user's real text, tool arguments, a password on its way
to the tool that resets it, possibly for days while the run waits for approval. A store given
checkpoint keys (`SQLiteStore(url, checkpoint_keys=...)`, `PostgresStore`, `RedisStore`; else
`$BATON_CHECKPOINT_KEY`) keeps the state of every checkpoint it saves as

    baton-sealed:v1:<key id>:<base64(nonce | ciphertext | tag)>

in the data field it always used (no schema change): a fresh random 96-bit nonce per save,
and the format version, key id, session id and run id as associated data, so a blob changed
by one byte, cut short, or copied into another session's (or run's) row does not open.
`meta` (agent, approval card: redacted already) stays in clear, so listings need no key.
A state saved in clear (before keys were configured) still loads, and is sealed by its next
save or by `rekey_checkpoints`.

Keys are an ordered keyring (`CheckpointKeys`): the first key seals, every key opens, so a
rotation adds the new key first, re-seals what is stored (`rekey_checkpoints`, `baton
checkpoints rekey`) and then drops the old one. `$BATON_CHECKPOINT_KEY` holds the keyring as
`id:base64,id:base64` (each key 32 random bytes, e.g. `openssl rand -base64 32`), or one bare
base64 key (id `default`). A key service plugs in through `CheckpointKeyProvider`.

A state in clear carries no proof that the kernel wrote it: someone with write access to the
database could put one in place of a sealed one (an approved call, a card without roles).
Once every stored checkpoint is sealed, `sealed_only` (`$BATON_CHECKPOINT_SEALED_ONLY=1`)
makes the store refuse clear ones, and `rekey` no longer seals them.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from baton.backends.base import Checkpoint
from baton.core.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_ENV = "BATON_CHECKPOINT_KEY"
"""The environment variable a store reads its checkpoint keys from when given none."""

SEALED_ONLY_ENV = "BATON_CHECKPOINT_SEALED_ONLY"
"""Set to 1 with `$BATON_CHECKPOINT_KEY`: refuse checkpoints stored in clear
(`CheckpointKeys.sealed_only`)."""

PREFIX = "baton-sealed:"
"""How a sealed state begins (then the format version, the key id and the blob)."""

VERSION = "v1"
"""The sealing format this Baton writes (and the only one it reads)."""

DEFAULT_KEY_ID = "default"
"""The id of a key given bare (base64 alone) in `$BATON_CHECKPOINT_KEY`."""

KEY_BYTES = 32
"""AES-256: every checkpoint key is 32 bytes."""

_NONCE_BYTES = 12
_TAG_BYTES = 16
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_DISCARD = "or discard the run (team.discard(session_id), `baton resume --discard SESSION`)"


@runtime_checkable
class CheckpointKeyProvider(Protocol):
    """Where a store gets its checkpoint keys: `CheckpointKeys`, or a key service's client
    (which may also have a `sealed_only` attribute, as `CheckpointKeys` does)."""

    def current(self) -> tuple[str, bytes]:
        """(key id, 32-byte key) that seals every new save."""
        ...

    def key(self, key_id: str) -> bytes | None:
        """The 32-byte key named `key_id`, or None when this provider has no such key."""
        ...


class CheckpointKeys:
    """An ordered keyring of AES-256 keys by id: the first seals, every one opens.

    `CheckpointKeys([("2026-07", key), ("2026-01", old_key)])`, `CheckpointKeys.parse(text)`
    (the `$BATON_CHECKPOINT_KEY` format) or `CheckpointKeys.from_env()`. `sealed_only=True`
    refuses checkpoints stored in clear (for a store whose checkpoints are all sealed). Its
    repr names the ids, never the keys.
    """

    __slots__ = ("_keys", "sealed_only")

    def __init__(self, keys: Iterable[tuple[str, bytes]], *, sealed_only: bool = False) -> None:
        found: dict[str, bytes] = {}
        for key_id, key in keys:
            check_key(key_id, key)
            if key_id in found:
                raise ConfigError(
                    f"checkpoint key id {key_id!r} is given twice; give every key its own id"
                )
            found[key_id] = bytes(key)
        if not found:
            raise ConfigError(
                "CheckpointKeys needs at least one key: give (id, 32-byte key) pairs, the "
                "first being the key that seals new checkpoints"
            )
        self._keys = found
        self.sealed_only = sealed_only
        """A checkpoint stored in clear is refused (unreadable), never loaded nor re-sealed:
        only a sealed state proves the kernel wrote it."""

    @classmethod
    def parse(cls, text: str, *, sealed_only: bool = False) -> CheckpointKeys:
        """Keys from `id:base64,id:base64,...` (first seals) or one bare base64 key (id
        `default`); spaces and newlines around entries are ignored."""
        entries = [e.strip() for e in text.replace("\n", ",").split(",")]
        entries = [e for e in entries if e]
        if not entries:
            raise ConfigError(f"no checkpoint key given: {_FORMAT}")
        pairs: list[tuple[str, bytes]] = []
        for n, entry in enumerate(entries, 1):
            key_id, sep, encoded = entry.rpartition(":")
            if not sep:
                if len(entries) > 1:
                    raise ConfigError(
                        f"checkpoint key entry {n} has no id; with several keys name each one: "
                        f"{_FORMAT}"
                    )
                key_id = DEFAULT_KEY_ID
            pairs.append((key_id.strip(), _decode_key(key_id.strip() or f"entry {n}", encoded)))
        return cls(pairs, sealed_only=sealed_only)

    @classmethod
    def from_env(cls) -> CheckpointKeys | None:
        """The keys in `$BATON_CHECKPOINT_KEY` (`sealed_only` from
        `$BATON_CHECKPOINT_SEALED_ONLY`), or None when it is unset or empty."""
        text = os.environ.get(KEY_ENV, "")
        flag = os.environ.get(SEALED_ONLY_ENV, "").strip().lower()
        if flag not in ("", "0", "1", "false", "true", "no", "yes"):
            raise ConfigError(
                f"${SEALED_ONLY_ENV}={flag!r}: give 1 (refuse clear checkpoints) or 0"
            )
        if not text.strip():
            if flag in ("1", "true", "yes"):
                raise ConfigError(
                    f"${SEALED_ONLY_ENV} is set but ${KEY_ENV} is not: give the keys too"
                )
            return None
        try:
            return cls.parse(text, sealed_only=flag in ("1", "true", "yes"))
        except ConfigError as exc:
            raise ConfigError(f"${KEY_ENV}: {exc}") from None

    @property
    def ids(self) -> tuple[str, ...]:
        """The key ids, the sealing key first."""
        return tuple(self._keys)

    def current(self) -> tuple[str, bytes]:
        """(id, key) of the first key: the one that seals."""
        key_id = next(iter(self._keys))
        return key_id, self._keys[key_id]

    def key(self, key_id: str) -> bytes | None:
        """The key named `key_id`, or None."""
        return self._keys.get(key_id)

    def __repr__(self) -> str:
        only = ", sealed_only=True" if self.sealed_only else ""
        return f"CheckpointKeys(ids={self.ids!r}{only})"


_FORMAT = (
    "use 'id:BASE64,id:BASE64' (the first key seals, every key opens; each key 32 random "
    "bytes in base64, e.g. `openssl rand -base64 32`), or one bare BASE64 key"
)


def check_key(key_id: str, key: bytes) -> None:
    """Refuse a key id that cannot be stored in the sealed prefix, or a key that is not 32
    bytes (the message never shows the key)."""
    if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
        raise ConfigError(
            f"checkpoint key id {key_id!r} is not usable: give 1 to 64 letters, digits, '.', "
            "'_' or '-', starting with a letter or digit (e.g. '2026-07')"
        )
    if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_BYTES:
        size = f"{len(key)} bytes" if isinstance(key, (bytes, bytearray)) else type(key).__name__
        raise ConfigError(
            f"checkpoint key {key_id!r} is {size}; AES-256 needs exactly {KEY_BYTES} random "
            "bytes (e.g. `openssl rand -base64 32`)"
        )


def _decode_key(key_id: str, encoded: str) -> bytes:
    text = encoded.strip().replace("-", "+").replace("_", "/")  # base64url too
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"checkpoint key {key_id!r} is not base64; {_FORMAT}") from None


def resolve_keys(
    given: CheckpointKeyProvider | str | None,
) -> CheckpointKeyProvider | None:
    """A store's checkpoint keys: `given` (a provider, or text in the `$BATON_CHECKPOINT_KEY`
    format), else the environment; None when neither names a key."""
    if given is None:
        return CheckpointKeys.from_env()
    if isinstance(given, str):
        return CheckpointKeys.parse(given)
    if not isinstance(given, CheckpointKeyProvider):
        raise ConfigError(
            f"checkpoint_keys must be CheckpointKeys, text in the ${KEY_ENV} format or an "
            f"object with current() and key(key_id), got {type(given).__name__}"
        )
    return given


# ---------------------------------------------------------------------------- the cipher
@lru_cache(maxsize=32)
def _cipher(key: bytes) -> AESGCM:
    # imported here: `import baton` must not load cryptography (see tests/test_import_cost.py)
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


def _associated(key_id: str, session_id: str, run_id: str) -> bytes:
    """What a sealed state is bound to besides its key. JSON with ASCII escapes: unambiguous
    for any ids, lone surrogates and NUL included."""
    return json.dumps(["baton-checkpoint", VERSION, key_id, session_id, run_id]).encode("ascii")


def is_sealed(data: str) -> bool:
    """Whether a stored state is sealed (else it is JSON in clear)."""
    return data.startswith(PREFIX)


def sealed_key_id(data: str) -> str | None:
    """The id of the key a stored state is sealed with; None for a state in clear."""
    if not is_sealed(data):
        return None
    return data[len(PREFIX) :].split(":", 2)[1] if data.count(":") >= 3 else ""


def _where(session_id: str, run_id: str) -> str:
    return f"the checkpoint of session {session_id!r} (run {run_id!r})"


def _current(keys: CheckpointKeyProvider) -> tuple[str, bytes]:
    try:
        key_id, key = keys.current()
    except Exception as exc:  # a key service's failure: say so, never the key
        raise StoreError(
            f"the checkpoint key provider {type(keys).__name__} failed to give the sealing key "
            f"({type(exc).__name__}: {exc}); nothing was saved. Fix the provider and retry"
        ) from exc
    try:
        check_key(key_id, key)
    except ConfigError as exc:
        raise StoreError(f"the checkpoint key provider gave a bad key: {exc}") from None
    return key_id, key


def seal(keys: CheckpointKeyProvider, session_id: str, run_id: str, plain: str) -> str:
    """`plain` (a state's JSON) sealed with the current key for this session and run."""
    key_id, key = _current(keys)
    try:
        body = plain.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StoreError(
            f"{_where(session_id, run_id)} cannot be saved: its state holds text that is not "
            f"valid Unicode ({exc.reason} at position {exc.start}, a lone surrogate); nothing "
            "was written. Clean it first (baton.core.text.clean_value)"
        ) from None
    nonce = os.urandom(_NONCE_BYTES)
    blob = nonce + _cipher(key).encrypt(nonce, body, _associated(key_id, session_id, run_id))
    return f"{PREFIX}{VERSION}:{key_id}:{base64.b64encode(blob).decode('ascii')}"


def unseal(keys: CheckpointKeyProvider | None, session_id: str, run_id: str, data: str) -> str:
    """The state's JSON from a stored `data`: as it is when in clear (unless the keys are
    `sealed_only`), else opened; raises `StoreError` (naming the key and what to do) when it
    cannot be opened."""
    if not is_sealed(data):
        if keys is not None and getattr(keys, "sealed_only", False):
            raise StoreError(
                f"{_where(session_id, run_id)} is stored in clear, and this store accepts "
                f"sealed checkpoints only (sealed_only, ${SEALED_ONLY_ENV}): it may predate "
                "the keys, or have been put there by someone with access to the database. "
                f"Nothing was run; {_DISCARD.removeprefix('or ')}, or, if you know it is "
                "genuine, resume it with a store that accepts clear checkpoints"
            )
        return data
    version, _, rest = data[len(PREFIX) :].partition(":")
    key_id, _, encoded = rest.partition(":")
    where = _where(session_id, run_id)
    if version != VERSION:
        raise StoreError(
            f"{where} is sealed in format {version!r}, which this Baton does not read (it "
            f"reads {VERSION!r}); resume it with the Baton version that saved it, {_DISCARD}"
        )
    if keys is None:
        raise StoreError(
            f"{where} is encrypted with checkpoint key {key_id!r}, and this store was given "
            f"no checkpoint keys; set ${KEY_ENV} (or the store's checkpoint_keys) to a keyring "
            f"holding key {key_id!r} to resume or decide it, {_DISCARD}"
        )
    try:
        key = keys.key(key_id)
    except Exception as exc:  # a key service's failure: say so, never the key
        raise StoreError(
            f"{where}: the checkpoint key provider {type(keys).__name__} failed to give key "
            f"{key_id!r} ({type(exc).__name__}: {exc}); fix the provider and retry"
        ) from exc
    if key is None:
        held = keys.ids if isinstance(keys, CheckpointKeys) else None
        having = f" (it holds {', '.join(map(repr, held))})" if held else ""
        raise StoreError(
            f"{where} is encrypted with checkpoint key {key_id!r}, which this store's keyring "
            f"does not hold{having}; add key {key_id!r} back (after the sealing key) to "
            f"resume or decide it, {_DISCARD}"
        )
    try:
        blob = base64.b64decode(encoded.encode("ascii"), validate=True)  # strict: no junk
        if len(blob) < _NONCE_BYTES + _TAG_BYTES:
            raise ValueError("too short")
        nonce, body = blob[:_NONCE_BYTES], blob[_NONCE_BYTES:]
        plain = _cipher(bytes(key)).decrypt(nonce, body, _associated(key_id, session_id, run_id))
        return plain.decode("utf-8")
    except Exception as exc:  # InvalidTag, bad base64, a non-ASCII edit, a wrong-size key
        raise StoreError(
            f"{where} does not open with checkpoint key {key_id!r} ({type(exc).__name__}): "
            "the stored data was changed or cut short, it was copied from another session or "
            f"run, or the key named {key_id!r} is not the one that sealed it. Nothing was "
            f"run; restore the row from a backup or give the right key, {_DISCARD}"
        ) from None


def stored_data(keys: CheckpointKeyProvider | None, cp: Checkpoint, plain: str) -> str:
    """What a store writes as a checkpoint's data: `plain` sealed when it has keys, else as
    it is."""
    return plain if keys is None else seal(keys, cp.session_id, cp.run_id, plain)


def opened(keys: CheckpointKeyProvider | None, cp: Checkpoint) -> Checkpoint:
    """`cp` as a store read it, with its `data` opened (`sealed_with` names the key), or,
    when it cannot be, without data and with `unreadable` saying why: listings still show
    it, and `state_json()` raises that `StoreError`."""
    data = cp.data
    if data is None or (not is_sealed(data) and not getattr(keys, "sealed_only", False)):
        return cp
    key_id = sealed_key_id(data)
    try:
        plain = unseal(keys, cp.session_id, cp.run_id, data)
    except StoreError as exc:
        return replace(cp, data=None, sealed_with=key_id, unreadable=str(exc))
    return replace(cp, data=plain, sealed_with=key_id)


# ---------------------------------------------------------------------------- rotation
class RawCheckpoint(NamedTuple):
    """A checkpoint row as stored: what re-sealing reads and compares."""

    session_id: str
    run_id: str
    seq: int
    data: str


@dataclass
class RekeyReport:
    """What `rekey_checkpoints` did: every stored checkpoint it could open is now sealed with
    `key_id`."""

    key_id: str
    """The sealing key (the keyring's first)."""
    resealed: list[str] = field(default_factory=list)
    """Sessions whose checkpoint was sealed anew (it was in clear, or under another key)."""
    current: list[str] = field(default_factory=list)
    """Sessions whose checkpoint was sealed with `key_id` already."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """Session -> why its checkpoint cannot be opened (left as stored)."""
    busy: list[str] = field(default_factory=list)
    """Sessions whose run saved a newer checkpoint on every try (run it again later)."""

    @property
    def complete(self) -> bool:
        """Every stored checkpoint is sealed with `key_id`: the other keys may be dropped."""
        return not self.unreadable and not self.busy


_ATTEMPTS = 3
"""Tries per checkpoint when a run saves a newer one between the read and the swap."""


async def rekey(
    keys: CheckpointKeyProvider | None,
    rows: Sequence[RawCheckpoint],
    reread: Callable[[str], Awaitable[RawCheckpoint | None]],
    swap: Callable[[RawCheckpoint, str], Awaitable[bool]],
) -> RekeyReport:
    """Re-seal every row with the current key: `swap(row, data)` writes `data` only if the
    stored row is still `row` (same run, seq and data), so a save made meanwhile is never
    overwritten; the row is then read again (`reread`) and tried anew."""
    if keys is None:
        raise StoreError(
            f"rekey needs checkpoint keys: set ${KEY_ENV} (or the store's checkpoint_keys) to "
            "the new keyring, the new key first and the old ones after it"
        )
    key_id, _ = _current(keys)
    report = RekeyReport(key_id)
    for row in rows:
        found: RawCheckpoint | None = row
        for _ in range(_ATTEMPTS):
            if found is None:
                break  # the run finished meanwhile: nothing to seal
            if sealed_key_id(found.data) == key_id:
                report.current.append(found.session_id)
                break
            try:
                plain = unseal(keys, found.session_id, found.run_id, found.data)
            except StoreError as exc:
                report.unreadable[found.session_id] = str(exc)
                break
            if await swap(found, seal(keys, found.session_id, found.run_id, plain)):
                report.resealed.append(found.session_id)
                break
            found = await reread(found.session_id)
        else:
            report.busy.append(row.session_id)
    return report


@runtime_checkable
class SealedCheckpoints(Protocol):
    """The capability of a store that encrypts checkpoint state at rest (SQLite, PostgreSQL
    and Redis stores): the kernel hands it the live state when `seals_checkpoints` is True,
    and masks the state's secrets first otherwise."""

    seals_checkpoints: bool
    """The store was given checkpoint keys: every checkpoint it saves is sealed."""

    async def rekey_checkpoints(self) -> RekeyReport:
        """Re-seal every stored checkpoint with the current key (in clear ones too)."""
        ...


class Rekeyable(Protocol):
    """What `rekey_store` needs of a persistent store: its keys, its checkpoint rows as stored
    (every one, or a session's) and a compare-and-swap of one row's data."""

    checkpoint_keys: CheckpointKeyProvider | None

    async def _raw_checkpoints(self, session_id: str | None = None) -> list[RawCheckpoint]: ...

    async def _swap_checkpoint_data(self, row: RawCheckpoint, data: str) -> bool: ...


async def rekey_store(store: Rekeyable) -> RekeyReport:
    """`Store.rekey_checkpoints` of a persistent store, from its two primitives: every stored
    checkpoint re-sealed with the current key (see `rekey`)."""

    async def reread(session_id: str) -> RawCheckpoint | None:
        found = await store._raw_checkpoints(session_id)
        return found[0] if found else None

    rows = await store._raw_checkpoints()
    return await rekey(store.checkpoint_keys, rows, reread, store._swap_checkpoint_data)
