"""One llama.cpp instance per process, fed by one worker thread.

Loading the weights takes seconds and ~2 GB, so an instance is created once per
(weights, context, threads) and shared by every agent and team in the process. llama.cpp is
not re-entrant, so calls are serialised through a single worker thread; the event loop never
blocks on inference. Saved prompt states (`states.PromptStates`) let each agent's fixed prompt
prefix (catalogue + instructions) be read once and restored for its later calls, after other
agents ran in between.

Streaming watches the same non-streamed completion token by token (`TokenWatch`), so a streamed
reply's final text and usage are exactly what `complete` returns, and a generation nobody
listens to any more stops at its next token.
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import ctypes
import functools
import math
import os
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.core.errors import ModelNotAvailable
from baton.models.local.states import PromptStates, SavedState

MIN_FREE_MEMORY_GB = 2.5
"""Refuse to load the 1.5B model when less memory than this is available."""


MAX_THREADS = 8

STATES_BYTES = 512 << 20
"""RAM for saved prompt states (`states.PromptStates`): ~30 agent prefixes of 600 tokens on
Qwen2.5-1.5B (~17 MB each), or ~18 MB per 1,000 tokens on SmolLM2-135M."""

N_BATCH = 256
"""Prompt tokens llama.cpp reads per batch. Measured with `benchmarks/local_model_limit.py
--batches` (docs/benchmarks.md): on 2 cores prefill is the same from 128 to 512 within the
run-to-run noise (63-71 tokens/s), 64 is slower; 256 reads an agent's ~400-550 token prefix
in two batches."""

MIN_PREFIX_TOKENS = 32
"""A fixed prefix shorter than this is read each time rather than saved."""

FIXED_SLACK = 2
"""Tokens at the end of a fixed prefix left out of its saved state (`_prime`)."""


@functools.cache
def default_threads(window_s: float = 0.2) -> int:
    """The cores free when the engine first loads, once per process: the cores this process
    may run on, less those other programs kept busy over `window_s` (from /proc/stat), at
    least 1 and at most `MAX_THREADS`. llama.cpp's threads each take a core and wait for each
    other: one more thread than there are free cores slows it down, one fewer leaves a core
    idle (on an idle 2-core machine 2 threads read a prompt 1.6x as fast as 1). Where
    /proc/stat cannot be read: all cores but one (1 on 2 cores or fewer)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    usable = usable or os.cpu_count() or 1
    before = _cpu_times()
    if before is None:
        return 1 if usable <= 2 else min(usable - 1, MAX_THREADS)
    time.sleep(window_s)
    after = _cpu_times() or before
    spent = after[1] - before[1]
    busy = (after[0] - before[0]) / spent * (os.cpu_count() or usable) if spent > 0 else 0.0
    return max(1, min(usable - round(busy), MAX_THREADS))


def _cpu_times() -> tuple[float, float] | None:
    """(busy, all) time of every core since boot, from /proc/stat's first line (Linux; None
    elsewhere): idle and iowait are not busy."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [float(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(fields) < 5:
        return None
    total = sum(fields)
    return total - fields[3] - fields[4], total


def available_memory_gb() -> float | None:
    """MemAvailable from /proc/meminfo in GB, or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / (1024 * 1024)
    except OSError:
        return None
    return None


def import_llama() -> Any:
    """The `llama_cpp` module, or a clear error saying how to install it."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise ModelNotAvailable(
            "the embedded local model needs llama-cpp-python, which is not installed: run "
            "`baton install-local-model` (it builds a portable llama.cpp wheel once, keeps it "
            "in ~/.cache/baton/wheels and installs the pinned weights), or `make demo` in a "
            "clone of the repository"
        ) from exc
    return llama_cpp


@dataclass
class Completion:
    """What one inference produced."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached_tokens: int = 0
    """Of `prompt_tokens`, those taken from a saved state instead of evaluated."""


class GenerationCancelled(Exception):
    """Raised inside llama.cpp's token loop to stop a generation nobody listens to any more."""


class TokenWatch:
    """Sees each token of one generation as llama.cpp samples it, on the worker thread.

    Passes the token's text to `on_text` (multi-byte characters split across tokens are held
    until complete) and raises `GenerationCancelled` once `stop` is set, which ends the
    generation at that token.
    """

    def __init__(self, llama: Any, on_text: Callable[[str], None], stop: threading.Event) -> None:
        self._llama = llama
        self._on_text = on_text
        self.stop = stop
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")

    def begin(self) -> None:
        """The generation starts (before the prompt is read)."""
        if self.stop.is_set():
            raise GenerationCancelled

    def token(self, token: int) -> None:
        """One token was sampled (end-of-generation tokens have no text)."""
        if self.stop.is_set():
            raise GenerationCancelled
        text = self._decoder.decode(self._llama.detokenize([token]))
        if text:
            self._on_text(text)


@functools.cache
def _watchable(llama_cpp: Any) -> Any:
    """A `Llama` subclass whose token loop can be watched, one call at a time (`watch`).

    `create_chat_completion` runs `Llama.generate`; while `watch` is set, every token it
    yields goes through the watch first. Either way it counts the prompt tokens it evaluated
    (`prompt_evaluated`): the others were reused.
    """

    import numpy as np

    class WatchableLlama(llama_cpp.Llama):  # type: ignore[misc]
        watch: TokenWatch | None = None
        greedy_first = True
        """Check the most likely token against the grammar before constraining them all
        (`sample`); False constrains every candidate for every token."""
        _stage: tuple[Any, Any] = (None, None)
        """(a sampler chain, its grammar stage or None), for the chain in use."""
        evaluated = 0
        """Tokens evaluated since the latest `generate` began."""
        prompt_evaluated: int | None = None
        """Of them, the prompt's: those evaluated before its first token was sampled (the
        rest of the prompt came from a saved state or the context's matching prefix)."""

        def eval(self, tokens: Sequence[int]) -> None:
            self.evaluated += len(tokens)
            super().eval(tokens)

        def sample(self, *args: Any, **kwargs: Any) -> int:
            """Greedy decoding under a grammar checks the most likely token first and
            constrains the whole vocabulary only when the grammar refuses it (llama.cpp's own
            `common_sampler` does the same). Constraining all 151,936 candidates of Qwen2.5
            for every token cost ~40 % of a generated token's time, and a model that follows
            its JSON grammar rarely has its top token refused. The token is the same either
            way: the grammar only removes tokens, so an allowed top token stays on top."""
            sampler = self._sampler
            plain = (
                not self.greedy_first
                or kwargs.get("grammar") is None
                or kwargs.get("temp", 0.8) != 0.0
                or sampler is None
                or self._greedy_grammar(sampler) is None
            )
            if plain:
                return int(super().sample(*args, **kwargs))
            idx = kwargs.get("idx")
            ridx = idx - self.n_tokens if idx is not None else -1
            logits = llama_cpp.llama_get_logits_ith(self._ctx.ctx, ridx)
            top = int(np.ctypeslib.as_array(logits, shape=(self._n_vocab,)).argmax())
            cell = llama_cpp.llama_token_data(top, logits[top], 0.0)
            one = llama_cpp.llama_token_data_array(ctypes.pointer(cell), 1, -1, False)
            llama_cpp.llama_sampler_apply(self._greedy_grammar(sampler), ctypes.byref(one))
            if cell.logit == -math.inf:  # refused: constrain every candidate
                return int(super().sample(*args, **kwargs))
            llama_cpp.llama_sampler_accept(sampler.sampler, top)
            return top

        def _greedy_grammar(self, sampler: Any) -> Any:
            """The grammar stage of a chain that is exactly penalties (neutral: the engine
            never sets any), grammar, greedy; None for any other chain."""
            if self._stage[0] is not sampler:
                chain = sampler.sampler
                names = [
                    llama_cpp.llama_sampler_name(llama_cpp.llama_sampler_chain_get(chain, i))
                    for i in range(llama_cpp.llama_sampler_chain_n(chain))
                ]
                stage = None
                # llama.cpp marks stages it cannot run on an accelerator with "?"
                names = [bytes(n).lstrip(b"?") for n in names]
                if names == [b"penalties", b"grammar", b"greedy"]:
                    stage = llama_cpp.llama_sampler_chain_get(chain, 1)
                self._stage = (sampler, stage)
            return self._stage[1]

        def generate(
            self, tokens: Sequence[int], *args: Any, **kwargs: Any
        ) -> Generator[int, Any, None]:
            inner = super().generate(tokens, *args, **kwargs)
            watch = self.watch
            self.evaluated, self.prompt_evaluated = 0, None
            try:
                if watch is not None:
                    watch.begin()
                sent = None
                while True:
                    try:
                        token = inner.send(sent)
                    except StopIteration:
                        return
                    if self.prompt_evaluated is None:
                        self.prompt_evaluated = self.evaluated
                    if watch is not None:
                        watch.token(token)
                    sent = yield token
            finally:
                inner.close()

    return WatchableLlama


class LlamaEngine:
    """A loaded model plus the single thread that runs it."""

    def __init__(
        self,
        path: Path,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        states_bytes: int = STATES_BYTES,
        states_dir: Path | None = None,
        min_free_gb: float = 0.0,
    ) -> None:
        llama_cpp = import_llama()
        free = available_memory_gb()
        if min_free_gb and free is not None and free < min_free_gb:
            raise ModelNotAvailable(
                f"only {free:.1f} GB of memory is available; the local model needs about "
                f"{min_free_gb:.1f} GB. Close other programs or use model='local:smollm2-135m'"
            )
        self.path = path
        self.n_threads = n_threads or default_threads()
        self.llama = _watchable(llama_cpp)(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads,
            n_batch=N_BATCH,
            seed=0,
            verbose=False,
        )
        self.states = PromptStates(states_bytes, states_dir)
        self._grammars: dict[str, Any] = {}
        self._formatter: Any = None  # the chat template, compiled on the first scoring
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="baton-llama")
        self._llama_cpp = llama_cpp

    def grammar(self, key: str, schema_json: str) -> Any:
        """A compiled grammar for a JSON schema, cached by key."""
        g = self._grammars.get(key)
        if g is None:
            g = self._llama_cpp.LlamaGrammar.from_json_schema(schema_json, verbose=False)
            self._grammars[key] = g
        return g

    def _complete(
        self,
        messages: list[dict[str, Any]],
        grammar: Any,
        max_tokens: int,
        watch: TokenWatch | None = None,
        fixed: str | None = None,
    ) -> Completion:
        t = time.perf_counter()
        primed = self._prime(messages, fixed) if fixed else 0
        self.llama.watch = watch
        try:
            out = self.llama.create_chat_completion(
                messages=messages,
                grammar=grammar,
                temperature=0.0,
                top_k=1,
                max_tokens=max_tokens,
            )
        finally:
            self.llama.watch = None
        usage = out.get("usage") or {}
        text = out["choices"][0]["message"].get("content") or ""
        prompt = int(usage.get("prompt_tokens", 0))
        read = self.llama.prompt_evaluated
        read = primed + (self.llama.evaluated if read is None else read)
        return Completion(
            text=text,
            prompt_tokens=prompt,
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=time.perf_counter() - t,
            cached_tokens=max(0, prompt - read),
        )

    async def complete(
        self,
        messages: list[dict[str, Any]],
        grammar: Any,
        max_tokens: int,
        fixed: str | None = None,
    ) -> Completion:
        """Run one chat completion on the worker thread. `fixed`: the leading text of the
        first message that every call of this agent repeats (`_prime`)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, self._complete, messages, grammar, max_tokens, None, fixed
        )

    async def stream(
        self,
        messages: list[dict[str, Any]],
        grammar: Any,
        max_tokens: int,
        fixed: str | None = None,
    ) -> AsyncGenerator[str | Completion, None]:
        """Run the same completion as `complete` on the worker thread, yielding its text as it
        is generated, then the `Completion` (what `complete` returns for the same output).

        Closing the generator early, or cancelling the task iterating it, stops the generation
        at its next token (a prompt still being read is read first) and frees the worker thread
        for the next call; the close itself does not wait for that.
        """
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[str | None] = asyncio.Queue()
        stop = threading.Event()

        def on_text(text: str) -> None:  # on the worker thread
            try:
                loop.call_soon_threadsafe(pieces.put_nowait, text)
            except RuntimeError:  # the event loop is closed: nobody is listening any more
                stop.set()
                raise GenerationCancelled from None

        def settled(future: asyncio.Future[Completion]) -> None:
            pieces.put_nowait(None)
            if not future.cancelled():
                future.exception()  # retrieved here, so a stopped generation logs nothing

        watch = TokenWatch(self.llama, on_text, stop)
        job = loop.run_in_executor(
            self._pool, self._complete, messages, grammar, max_tokens, watch, fixed
        )
        job.add_done_callback(settled)
        try:
            while (text := await pieces.get()) is not None:
                yield text
            yield await job
        finally:
            stop.set()

    def _chat_prompt(self, messages: list[dict[str, Any]]) -> tuple[str, bool]:
        """(the text `create_chat_completion` would read for `messages`, whether the template
        added the special tokens itself), from the model's own chat template."""
        if self._formatter is None:
            from llama_cpp import llama_chat_format

            template = self.llama.metadata.get("tokenizer.chat_template")
            if not template:
                raise ModelNotAvailable(f"{self.path.name} has no chat template to score with")

            def text_of(token: int) -> str:
                return str(self.llama._model.token_get_text(token)) if token != -1 else ""

            self._formatter = llama_chat_format.Jinja2ChatFormatter(
                template=template,
                eos_token=text_of(self.llama.token_eos()),
                bos_token=text_of(self.llama.token_bos()),
            )
        chat: Any = messages  # llama-cpp-python types them as its own TypedDicts
        result = self._formatter(messages=chat)
        return result.prompt, bool(result.added_special)

    def _tokens(self, prompt: tuple[str, bool], reply: str) -> list[int]:
        """The tokens of a rendered prompt followed by the start of the assistant's reply."""
        text, added_special = prompt
        tokens = self.llama.tokenize(
            (text + reply).encode("utf-8"), add_bos=not added_special, special=True
        )
        return list(tokens)

    def _prompt_tokens(self, messages: list[dict[str, Any]], prefix: str) -> list[int]:
        """The tokens `create_chat_completion` would read for `messages`, then `prefix`."""
        return self._tokens(self._chat_prompt(messages), prefix)

    def _logprobs_after(self, tokens: list[int]) -> Any:
        """Evaluate `tokens` (reusing the longest prefix already in the KV cache) and return
        the log-probabilities of the next token."""
        import numpy as np

        llama = self.llama
        common = llama.longest_token_prefix(llama.input_ids[: llama.n_tokens].tolist(), tokens)
        common = min(common, len(tokens) - 1)  # at least one token is read: fresh logits
        llama.n_tokens = common
        llama.eval(tokens[common:])
        logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),))
        logits = logits.astype(np.float64)
        top = logits.max()
        return logits - top - np.log(np.exp(logits - top).sum())

    def _read_prompt(self, tokens: list[int]) -> Any:
        """`_logprobs_after(tokens)` through the saved prompt states: a saved state that shares
        a longer prefix than the live context is restored first, and the state after `tokens`
        is saved, so prompts that alternate (a judge's few candidate lists) are read once."""
        llama = self.llama
        saved = self.states.longest(tokens)
        if saved is not None and len(saved.tokens) > self._live_prefix(tokens):
            self._restore(saved)
        logprobs = self._logprobs_after(tokens)
        if tokens not in self.states:
            self.states.put(self._save(tokens))
        llama._requires_eval = True
        return logprobs

    def _live_prefix(self, tokens: Sequence[int]) -> int:
        """How many leading `tokens` the live context already holds."""
        llama = self.llama
        return int(llama.longest_token_prefix(llama.input_ids[: llama.n_tokens].tolist(), tokens))

    def _prime(self, messages: list[dict[str, Any]], fixed: str) -> int:
        """Make the live context hold the state after this prompt's fixed prefix (the rendered
        prompt up to the end of `fixed`, the agent's catalogue and instructions) and return the
        prompt tokens read to get there.

        The prefix is read once per process and saved (`states`); a later call of the agent,
        after other agents ran, restores it and `create_chat_completion` reads only the rest.
        Priming never changes what is generated: the context then holds exactly the KV cells a
        full read of those tokens gives, and the rest of the prompt is read on top of them."""
        text, added = self._chat_prompt(messages)
        cut = text.find(fixed)
        if cut < 0:
            return 0
        prefix = self._tokens((text[: cut + len(fixed)], added), "")
        full = self._tokens((text, added), "")
        self._check_fits(len(full), room=1)  # said before any of it is read
        # the prefix's last tokens may merge with what follows them (a trailing space with
        # the next line break): the state ends two tokens early, so that every call of the
        # agent, whatever follows its instructions, names the same state
        n = min(int(self.llama.longest_token_prefix(prefix, full)), len(prefix) - FIXED_SLACK)
        if n < MIN_PREFIX_TOKENS or n >= len(full):
            return 0
        key = full[:n]
        live = self._live_prefix(key)
        if live >= n:  # the agent ran last: its context goes on (saved if it was not)
            if key not in self.states:
                self.states.put(self._save(key))
            return 0
        saved = self.states.get(key)
        if saved is not None:
            self._restore(saved)
            return 0
        llama = self.llama
        llama.n_tokens = live
        llama.eval(key[live:])
        llama._requires_eval = True
        self.states.put(self._save(key))
        return n - live

    def _save(self, tokens: Sequence[int]) -> SavedState:
        """The state after `tokens`, which the live context holds first: the KV cells of
        sequence 0 cut to those tokens (no logits)."""
        llama, llama_cpp = self.llama, self._llama_cpp
        ctx = llama._ctx.ctx
        n = len(tokens)
        if llama.n_tokens > n:  # the context holds more: drop the rest before copying
            llama._ctx.kv_cache_seq_rm(0, n, -1)
            llama.n_tokens = n
        size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
        data = bytearray(size)
        written = llama_cpp.llama_state_seq_get_data(
            ctx, (ctypes.c_uint8 * size).from_buffer(data), size, 0
        )
        return SavedState(tuple(tokens), data[:written] if written != size else data)

    def _restore(self, saved: SavedState) -> None:
        """Make the live context the state after `saved.tokens`. The logits are not restored:
        the next read (at least one token) computes them."""
        llama, llama_cpp = self.llama, self._llama_cpp
        llama._ctx.kv_cache_seq_rm(0, 0, -1)
        size = len(saved.data)
        done = llama_cpp.llama_state_seq_set_data(
            llama._ctx.ctx, (ctypes.c_uint8 * size).from_buffer(saved.data), size, 0
        )
        n = len(saved.tokens)
        if not done:  # not loadable (another model's state): read it all
            llama._ctx.kv_cache_seq_rm(0, 0, -1)
            llama.n_tokens = 0
        else:
            llama.input_ids[:n] = saved.tokens
            llama.n_tokens = n
        llama._requires_eval = True

    def _check_fits(self, tokens: int, room: int) -> None:
        """Raise llama-cpp-python's own context-window error (which `LocalModel` turns into a
        clear `ModelError`) when `tokens` plus `room` for generated ones exceed the window."""
        if tokens + room > self.llama.n_ctx():
            raise ValueError(
                f"Requested tokens ({tokens}) exceed context window of {self.llama.n_ctx()}"
            )

    def _score(self, messages: list[dict[str, Any]], prefix: str, options: list[str]) -> Any:
        """Log-probability of each option as the continuation of `prefix` in the reply."""
        t = time.perf_counter()
        prompt = self._chat_prompt(messages)
        base = self._tokens(prompt, prefix)
        texts = [self._tokens(prompt, prefix + option) for option in options]
        longest = max((len(full) for full in texts), default=len(base))
        self._check_fits(longest, room=0)
        # the tokens every option shares: a BPE merge can join the prefix's last characters
        # with an option's first ones, so the options are scored from where they part
        shared = min((self.llama.longest_token_prefix(base, full) for full in texts), default=0)
        scores: list[float] = []
        try:
            start = self._read_prompt(base[:shared])
            for full in texts:
                total = float(start[full[shared]])
                for i in range(shared + 1, len(full)):
                    total += float(self._logprobs_after(full[:i])[full[i]])
                scores.append(total)
        finally:
            # the logits in the context are the last option's: make the next generation read
            # at least one token again instead of sampling from them
            self.llama._requires_eval = True
        return scores, time.perf_counter() - t

    async def score(
        self, messages: list[dict[str, Any]], prefix: str, options: Sequence[str]
    ) -> tuple[list[float], float]:
        """(log-probability of each option continuing the reply `prefix`, seconds), on the
        worker thread. Each option should end with what follows it in the reply (`orders",`
        when another key comes next), so that `order` is not scored as the start of `orders`
        and no ending is scored as a token the model would not write."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._score, messages, prefix, list(options))

    def close(self) -> None:
        """Stop the worker thread and free the model."""
        self._pool.shutdown(wait=True)
        close = getattr(self.llama, "close", None)
        if callable(close):
            close()

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in this model's own tokenizer."""
        return len(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))


_ENGINES: dict[tuple[str, int, int], LlamaEngine] = {}
_LOCK = threading.Lock()


@atexit.register
def _close_all() -> None:
    """Free the models before interpreter teardown, while llama.cpp's bindings still exist
    (freeing them later prints a TypeError from llama-cpp-python's finaliser)."""
    with _LOCK:
        for engine in _ENGINES.values():
            engine.close()
        _ENGINES.clear()


def shared_engine(
    path: Path,
    *,
    n_ctx: int,
    n_threads: int | None,
    min_free_gb: float,
    states_dir: Path | None = None,
) -> LlamaEngine:
    """The process-wide engine for these weights and settings (loaded on first use).
    `states_dir`: keep its prompt states on disk there too (`states_folder`), from now on."""
    threads = n_threads or default_threads()
    key = (str(path), n_ctx, threads)
    with _LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = LlamaEngine(path, n_ctx=n_ctx, n_threads=threads, min_free_gb=min_free_gb)
            _ENGINES[key] = engine
        if states_dir is not None and engine.states.directory is None:
            engine.states.directory = states_folder(states_dir, path)
        return engine


def states_folder(root: Path, weights: Path) -> Path:
    """Where the prompt states of these weights live under `root`: a state is only valid for
    the model (and llama.cpp build) that wrote it, so each gets its own folder."""
    version = getattr(import_llama(), "__version__", "0")
    try:
        size = weights.stat().st_size
    except OSError:
        size = 0
    return Path(root) / f"{weights.stem}-{size}-llama.cpp-{version}"
