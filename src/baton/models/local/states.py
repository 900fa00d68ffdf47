"""Saved prompt states of the embedded engine: the model's KV cache after a run of tokens.

Every call of an agent starts with the same tokens (its tool catalogue and instructions). The
engine reads them once, saves the model state after them here, and restores that state for the
agent's later calls, which then read only what follows (the payload, known facts, the
conversation). A state is the KV cells of llama.cpp's sequence 0 for exactly its tokens
(`llama_state_seq_get_data`): about 28 KB per token for Qwen2.5-1.5B, so a 600-token agent
prefix is ~17 MB. No logits are kept: the engine always reads at least one token after a
restore, so the next-token distribution is computed fresh.

States are keyed by their tokens, so two agents never share one unless their prompts really
start with the same tokens, and a changed instruction is simply a different key (its old state
ages out). RAM is bounded by `capacity_bytes` (least recently used first out). With a
`directory`, states are also written to disk (one file each, checked by sha256 on load) so
that the next process starts warm; the directory is named for the weights and llama.cpp
version, because a state is only valid for the model that produced it.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import time
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

_MAGIC = b"BATONKV1"
_HEADER = struct.Struct("<8sIQ32s")  # magic, token count, payload bytes, sha256 of payload


def default_states_dir() -> Path | None:
    """Where `baton demo` keeps prompt states between runs: `BATON_PROMPT_STATES` (a folder,
    or `off` for none), else `prompt-states` beside the joined weights (~/.cache/baton)."""
    from baton.models.local.weights import cache_dir

    chosen = os.environ.get("BATON_PROMPT_STATES", "").strip()
    if chosen.lower() in ("off", "none", "0", "false"):
        return None
    return Path(chosen) if chosen else cache_dir().parent / "prompt-states"


def token_key(tokens: Sequence[int]) -> str:
    """A state's name: the sha256 of its tokens."""
    return hashlib.sha256(array("i", tokens).tobytes()).hexdigest()


@dataclass(frozen=True, slots=True)
class SavedState:
    """The model state after `tokens`: `data` restores it into an empty context."""

    tokens: tuple[int, ...]
    data: bytearray

    @property
    def nbytes(self) -> int:
        return len(self.data) + 4 * len(self.tokens)


@dataclass(slots=True)
class StateStats:
    """What the store did since it was made."""

    hits: int = 0
    """Lookups answered from RAM or disk."""
    misses: int = 0
    saved: int = 0
    loaded_from_disk: int = 0
    evicted: int = 0


@dataclass
class PromptStates:
    """An LRU of `SavedState`s bounded by bytes, optionally mirrored on disk."""

    capacity_bytes: int
    directory: Path | None = None
    disk_bytes: int = 1 << 30
    """The most the directory may hold; the oldest files go first."""
    stats: StateStats = field(default_factory=StateStats)
    _states: OrderedDict[str, SavedState] = field(default_factory=OrderedDict)
    _bytes: int = 0

    @property
    def nbytes(self) -> int:
        """Bytes the states in RAM hold now (never above `capacity_bytes`)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, tokens: Sequence[int]) -> bool:
        """Whether RAM holds the state after exactly `tokens` (no lookup counted)."""
        return token_key(tokens) in self._states

    def get(self, tokens: Sequence[int]) -> SavedState | None:
        """The state after exactly `tokens`, from RAM or else from disk; None if none."""
        key = token_key(tokens)
        state = self._states.get(key)
        if state is not None:
            self._states.move_to_end(key)
        else:
            state = self._read(key, tokens)
            if state is not None:
                self.stats.loaded_from_disk += 1
                self._keep(key, state)
        if state is None:
            self.stats.misses += 1
        else:
            self.stats.hits += 1
        return state

    def longest(self, tokens: Sequence[int]) -> SavedState | None:
        """Of the states in RAM whose tokens all begin `tokens`, the longest."""
        best: SavedState | None = None
        for state in self._states.values():
            n = len(state.tokens)
            longer = best is None or n > len(best.tokens)
            if n <= len(tokens) and longer and tuple(tokens[:n]) == state.tokens:
                best = state
        return best

    def put(self, state: SavedState) -> None:
        """Keep `state` (and write it to disk when the store has a directory)."""
        key = token_key(state.tokens)
        self.stats.saved += 1
        self._keep(key, state)
        if self.directory is not None:
            self._write(key, state)

    def _keep(self, key: str, state: SavedState) -> None:
        old = self._states.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        if state.nbytes > self.capacity_bytes:
            return
        self._states[key] = state
        self._bytes += state.nbytes
        while self._bytes > self.capacity_bytes:
            _, gone = self._states.popitem(last=False)
            self._bytes -= gone.nbytes
            self.stats.evicted += 1

    def _path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{key}.kv"

    def _read(self, key: str, tokens: Sequence[int]) -> SavedState | None:
        """A state from disk, or None when absent, damaged or not for these tokens."""
        if self.directory is None:
            return None
        try:
            with open(self._path(key), "rb") as f:
                magic, count, size, digest = _HEADER.unpack(f.read(_HEADER.size))
                saved = array("i")
                saved.frombytes(f.read(4 * count))
                data = bytearray(f.read(size))
        except (OSError, struct.error, ValueError):
            return None
        if (
            magic != _MAGIC
            or len(data) != size
            or hashlib.sha256(data).digest() != digest
            or tuple(saved) != tuple(tokens)
        ):
            return None  # damaged, truncated (a killed writer) or another prefix: read it again
        os.utime(self._path(key))  # recently used: pruned last
        return SavedState(tuple(saved), data)

    def _write(self, key: str, state: SavedState) -> None:
        """Write atomically (a temporary file renamed), then prune the directory to its bound.
        A directory that cannot be written costs the next process its warm start, nothing
        else."""
        assert self.directory is not None
        header = _HEADER.pack(
            _MAGIC, len(state.tokens), len(state.data), hashlib.sha256(state.data).digest()
        )
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(array("i", state.tokens).tobytes())
                f.write(state.data)
            os.replace(tmp, self._path(key))
            self._prune()
        except OSError:
            return

    def _prune(self) -> None:
        assert self.directory is not None
        for tmp in self.directory.glob("*.tmp"):  # left by a killed writer
            try:
                if time.time() - tmp.stat().st_mtime > 3600:
                    tmp.unlink()
            except OSError:
                pass
        files = sorted(self.directory.glob("*.kv"), key=lambda p: p.stat().st_mtime)
        total = sum(p.stat().st_size for p in files)
        while files and total > self.disk_bytes:
            gone = files.pop(0)
            total -= gone.stat().st_size
            gone.unlink(missing_ok=True)
