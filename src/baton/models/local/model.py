"""`LocalModel`: the embedded chat model, run in process by llama.cpp, no key, no server."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

from baton.core.errors import ModelError
from baton.core.messages import Message, ToolSpec, Usage
from baton.core.text import clean_text
from baton.models.base import ModelRequest, ModelResponse
from baton.models.local.engine import MIN_FREE_MEMORY_GB, Completion, LlamaEngine, shared_engine
from baton.models.local.grammar import (
    answer_schema,
    schema_key,
    starting_with,
    tool_call_schema,
)
from baton.models.local.weights import DEFAULT_MODEL, card, weights_path
from baton.models.streaming import VisibleText
from baton.models.textmode import json_shape, render_text_mode

_PROTOCOL = (
    "Reply with exactly one JSON object and nothing else: "
    '{"tool": "<name>", "arguments": {...}} to call a tool, or '
    '{"final": "<your answer to the user>"} to answer. '
    "Use only ids and numbers that the user wrote, that are listed as known facts, or that a "
    "tool returned; never invent them. If an id you need is missing, ask the user for it "
    "with a final answer."
)
_TYPED_PROTOCOL = (
    "Reply with exactly one JSON object and nothing else: "
    '{{"tool": "<name>", "arguments": {{...}}}} to call a tool, or '
    '{{"final": {shape}}} to answer. '
    "Use only ids and numbers that the user wrote, that are listed as known facts, or that a "
    "tool returned; never invent them."
)
"""The protocol when the agent has an output type: the answer is JSON of that shape, not a
sentence. With the shape described apart from the envelope (`{"final": <the JSON described
below>}`), a 1.5B model called the same tool again and again instead of answering."""
_TYPED_ANSWER = "Reply with exactly one JSON object of this shape and nothing else: {shape}"
"""The protocol of a typed answer without tools."""


_HANDOFF = "transfer_to_"
_HANDOFF_BOILERPLATE = re.compile(
    r"^Hand the baton to [\w.-]+\.\s*(?:It handles:\s*)?"
    r"|\s*Call it when the request belongs there\b.*$"
)
"""The generic sentences of a hand-off tool's description; only what the target handles stays."""


_SCRIPTS = (
    ("Japanese", "[\u3040-\u30ff]", "[\u3040-\u30ff\u4e00-\u9fff]"),
    ("Korean", "[\uac00-\ud7af]", "[\uac00-\ud7af]"),
    ("Chinese", "[\u4e00-\u9fff]", "[\u4e00-\u9fff]"),
)
"""(language, how to spot it, how its text may start); kana first: Japanese also uses Han."""


def user_script(messages: Sequence[Message]) -> tuple[str, str] | None:
    """(language, first-character class) of the latest user message, for scripts that name
    their language (Chinese, Japanese, Korean); None otherwise."""
    text = next((m.content or "" for m in reversed(messages) if m.role == "user"), "")
    return next(((lang, start) for lang, spot, start in _SCRIPTS if re.search(spot, text)), None)


def _signature(spec: ToolSpec) -> str:
    props = spec.parameters.get("properties", {})
    if spec.name.startswith(_HANDOFF):
        return f"{spec.name}(reason, objective, state)"
    args = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items())
    return f"{spec.name}({args})"


def catalogue(tools: Sequence[ToolSpec], output_schema: dict[str, Any] | None = None) -> str:
    """A compact tool list: signatures and descriptions; the grammar enforces the schemas.

    An agent whose only tools are hand-offs (a front desk) gets them as a list of targets by
    bare name with what each handles, and a catch-all to `human` when that is a target. With
    each target written as `transfer_to_<name>(...): Hand the baton to <name>. ...`, a 1.5B
    model routed by the sound of the names (the weather, a poem and a journalist went to
    `after_sales`, "after-sales service") and rarely chose `human`. An agent with tools of
    its own keeps hand-offs among its tools: listed apart, it stopped chaining them after its
    own tool call (after_sales no longer passed a refund on to billing).

    `output_schema`: the agent answers JSON of its output type, inside `{"final": ...}`.
    """
    if not tools or any(not s.name.startswith(_HANDOFF) for s in tools):
        lines = ["You can call these tools:"]
        for spec in tools:
            lines.append(f"- {_signature(spec)}: {' '.join(spec.description.split())}")
            for k, v in spec.parameters.get("properties", {}).items():
                if v.get("description") and not spec.name.startswith(_HANDOFF):
                    lines.append(f"    {k}: {v['description']}")
    else:
        lines = [f"You can pass the request on with {_HANDOFF}<name>(reason, objective, state) to:"]
        for spec in tools:
            desc = _HANDOFF_BOILERPLATE.sub("", " ".join(spec.description.split()))
            lines.append(f"- {spec.name[len(_HANDOFF) :]}: {desc}")
        if any(s.name == f"{_HANDOFF}human" for s in tools):
            lines.append(
                "If neither your tools nor the agents above fit the request, pass it to human."
            )
    if output_schema is None:
        lines.append(_PROTOCOL)
    else:
        lines.append(_TYPED_PROTOCOL.format(shape=json_shape(output_schema)))
    return "\n".join(lines)


DEFAULT_CONTEXT = 8192
"""Context window in tokens. 4,096 overflowed in τ²-bench airline tasks, where an agent's turn
collects several tool results; the KV cache for 8,192 tokens of the 1.5B model is ~230 MB, and
every embedded model was trained on at least this length."""


class LocalModel:
    """The embedded model (`model="local"` or `"local:<name>"`), schema-constrained decoding.

    Names: `qwen2.5-coder-1.5b` (default), `qwen2.5-coder-0.5b`, `smollm2-135m`. The weights
    come from pinned packages and are checked by sha256 before loading (see `weights.py`).
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
    ) -> None:
        self.card = card(name)
        self.name = f"local:{self.card.name}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.max_tokens = max_tokens
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
        """Chat messages for llama.cpp: the catalogue first (a stable, cacheable prefix)."""
        messages = render_text_mode(request.messages, [])
        head: str | None = None
        if request.tools:
            head = catalogue(request.tools, request.output_schema)
        elif request.output_schema is not None:
            head = _TYPED_ANSWER.format(shape=json_shape(request.output_schema))
        if head is not None:
            if messages and messages[0]["role"] == "system":
                messages[0] = {"role": "system", "content": f"{head}\n\n{messages[0]['content']}"}
            else:
                messages.insert(0, {"role": "system", "content": head})
        # llama.cpp reads UTF-8: a lone surrogate (a caller that skipped the kernel's cleaning,
        # e.g. `router.route` on raw text) would make the prompt unencodable
        return [
            {**m, "content": clean_text(m["content"])} if isinstance(m.get("content"), str) else m
            for m in messages
        ]

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """One constrained completion; tool calls come back as JSON text for the shared parser."""
        engine = await self._ensure_loaded()
        messages = self.render(request)
        grammar = self._grammar(engine, request)
        try:
            out = await engine.complete(messages, grammar, self.max_tokens)
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
        async with aclosing(engine.stream(messages, grammar, self.max_tokens)) as pieces:
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
        """The compiled grammar constraining this request's output (None for free text)."""
        output = request.output_schema
        if request.tools:
            # After a tool result (English JSON) a small model answered Chinese users in
            # English, whatever the instructions said; a note in the prompt fixed the language
            # but also made it answer instead of calling the next hand-off. Starting the answer
            # text in the user's script fixes the language and leaves that choice alone.
            script = user_script(request.messages) if output is None else None
            pattern = starting_with(script[1]) if script else None
            schema = tool_call_schema(request.tools, final_pattern=pattern, final_schema=output)
            text = json.dumps(schema)
            return engine.grammar(schema_key(schema), text)
        if output is not None:
            schema = answer_schema(output)
            return engine.grammar(schema_key(schema), json.dumps(schema))
        return None

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
            usage=Usage(input_tokens=out.prompt_tokens, output_tokens=out.completion_tokens),
            text_tool_calls=bool(request.tools),
            raw={"seconds": out.seconds},
        )

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in the model's own tokenizer (loads the model)."""
        return self.load().count_tokens(text)
