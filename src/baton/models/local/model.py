"""`LocalModel`: the embedded chat model, run in process by llama.cpp, no key, no server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

from baton.core.errors import ModelError
from baton.core.messages import Usage
from baton.models.base import ModelRequest, ModelResponse
from baton.models.local.engine import MIN_FREE_MEMORY_GB, Completion, LlamaEngine, shared_engine
from baton.models.local.grammar import schema_key
from baton.models.local.prompt import compact_prompt, fixed_text, reply_schema
from baton.models.local.weights import DEFAULT_MODEL, card, weights_path
from baton.models.streaming import VisibleText

DEFAULT_CONTEXT = 8192
"""Context window in tokens. 4,096 overflowed in τ²-bench airline tasks, where an agent's turn
collects several tool results; the KV cache for 8,192 tokens of the 1.5B model is ~230 MB, and
every embedded model was trained on at least this length."""


class LocalModel:
    """The embedded model (`model="local"` or `"local:<name>"`), schema-constrained decoding.

    Names: `qwen2.5-coder-1.5b` (default), `qwen2.5-coder-0.5b`, `smollm2-135m`. The weights
    come from pinned packages and are checked by sha256 before loading (see `weights.py`).

    Each agent's fixed prompt prefix (its tool catalogue and instructions) is read once per
    process and its model state saved (`states.PromptStates`, 512 MB of RAM at most); later
    calls of the agent restore it and read only what follows. `prompt_states`: a directory
    where those states are also kept on disk, so that the next process starts warm
    (`default_states_dir()`; `baton demo` uses it).
    """

    native_output = True
    """An output type is decoded under a grammar, its shape written into the model's own
    protocol line (the kernel adds no shape note of its own)."""

    def __init__(
        self,
        name: str = DEFAULT_MODEL,
        *,
        n_ctx: int = DEFAULT_CONTEXT,
        n_threads: int | None = None,
        max_tokens: int = 256,
        prompt_states: str | Path | None = None,
    ) -> None:
        self.card = card(name)
        self.name = f"local:{self.card.name}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.max_tokens = max_tokens
        self.prompt_states = Path(prompt_states) if prompt_states is not None else None
        self._engine: LlamaEngine | None = None
        self._loading: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"LocalModel({self.card.name!r})"

    def load(self) -> LlamaEngine:
        """Join/verify the weights and load them (once per process); blocking."""
        if self._engine is None:
            min_free = MIN_FREE_MEMORY_GB if "1.5b" in self.card.name else 1.0
            self._engine = shared_engine(
                weights_path(self.card.name),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                min_free_gb=min_free,
                states_dir=self.prompt_states,
            )
        return self._engine

    async def _ensure_loaded(self) -> LlamaEngine:
        if self._engine is not None:
            return self._engine
        if self._loading is None:
            self._loading = asyncio.Lock()
        async with self._loading:
            return await asyncio.to_thread(self.load)

    def render(self, request: ModelRequest) -> list[dict[str, Any]]:
        """Chat messages for llama.cpp: the catalogue first (a stable, cacheable prefix); the
        same prompt `OpenAICompatible(constrain=...)` sends a server (`compact_prompt`)."""
        return compact_prompt(request)

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """One constrained completion; tool calls come back as JSON text for the shared parser."""
        engine = await self._ensure_loaded()
        messages = self.render(request)
        grammar = self._grammar(engine, request)
        try:
            out = await engine.complete(messages, grammar, self.max_tokens, fixed_text(request))
        except ValueError as exc:
            error = self._context_error(request, exc)
            if error is None:
                raise
            raise error from exc
        return self._response(request, out)

    async def score_options(
        self, request: ModelRequest, prefix: str, options: Sequence[str]
    ) -> list[float]:
        """Log-probability of each option continuing the reply `prefix` to `request` (the same
        prompt `generate` reads), computed from the model's next-token distributions: no text
        is generated. `ChoiceModel`."""
        engine = await self._ensure_loaded()
        try:
            scores, _ = await engine.score(self.render(request), prefix, options)
        except ValueError as exc:
            error = self._context_error(request, exc)
            if error is None:
                raise
            raise error from exc
        return scores

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        """The same constrained completion as `generate`, streamed: the reply's text as it is
        generated, then the `ModelResponse` `generate` returns for that output.

        With tools the model writes one JSON object (`{"tool": ...}` or `{"final": "..."}`):
        only the answer string of a `{"final": ...}` is streamed, decoded as it is generated;
        a tool call streams nothing. Without tools the text streams as it is. Closing the
        stream early, or cancelling the task iterating it, stops the generation at its next
        token and frees the model for the next call.
        """
        engine = await self._ensure_loaded()
        messages = self.render(request)
        grammar = self._grammar(engine, request)
        visible = VisibleText(text_mode=bool(request.tools))
        out: Completion | None = None
        fixed = fixed_text(request)
        async with aclosing(engine.stream(messages, grammar, self.max_tokens, fixed)) as pieces:
            while True:
                try:
                    piece = await anext(pieces)
                except StopAsyncIteration:
                    break
                except ValueError as exc:
                    error = self._context_error(request, exc)
                    if error is None:
                        raise
                    raise error from exc
                if isinstance(piece, Completion):
                    out = piece
                    continue
                shown = visible.feed(piece)
                if shown:
                    yield shown
        assert out is not None, "the engine's stream ends with its Completion"
        response = self._response(request, out)
        rest = visible.finish(response.text, (t.name for t in request.tools))
        if rest:
            yield rest
        yield response

    def _grammar(self, engine: LlamaEngine, request: ModelRequest) -> Any:
        """The compiled grammar constraining this request's output (None for free text): the
        schema `OpenAICompatible(constrain=...)` sends a server (`reply_schema`)."""
        schema = reply_schema(request)
        if schema is None:
            return None
        return engine.grammar(schema_key(schema), json.dumps(schema))

    def _context_error(self, request: ModelRequest, exc: ValueError) -> ModelError | None:
        """The `ModelError` for a prompt over the context window; None for other errors."""
        if "context window" not in str(exc):
            return None
        return ModelError(
            f"the prompt for agent {request.agent!r} does not fit {self.name}'s context "
            f"window of {self.n_ctx} tokens ({exc}); give the agent a leaner context "
            "(context='structured' or 'recent(n)'), fewer or shorter tool results, or a "
            "larger window: LocalModel(n_ctx=...)"
        )

    def _response(self, request: ModelRequest, out: Completion) -> ModelResponse:
        """The `ModelResponse` for one completion (tool calls stay JSON text for the kernel)."""
        return ModelResponse(
            text=out.text,
            usage=Usage(
                input_tokens=out.prompt_tokens,
                output_tokens=out.completion_tokens,
                cached_input_tokens=out.cached_tokens,
            ),
            text_tool_calls=bool(request.tools),
            raw={"seconds": out.seconds},
        )

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in the model's own tokenizer (loads the model)."""
        return self.load().count_tokens(text)
