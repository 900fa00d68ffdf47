"""`OpenAICompatible`: any server that speaks the OpenAI chat-completions API.

Works with OpenAI itself and with local servers (vLLM, llama.cpp, Ollama, LM Studio, ...)
through `base_url`. Two tool modes:

- `native`: tools go in the request's `tools` field and come back as `tool_calls`.
- `text`: for servers or models without tool calling. The tool catalogue is written into the
  system message, the model answers with one JSON object, and the kernel's shared parser
  (`baton.models.parsing.parse_text_mode`) turns it into tool calls.

`openai` is imported on first use only, so `import baton` stays fast.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import os
import random
import re
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from baton.core.errors import ConfigError, ModelError, ModelTimeout, ModelUnreachable
from baton.core.messages import ToolCall, Usage
from baton.models.base import ModelRequest, ModelResponse, estimate_tokens
from baton.models.streaming import VisibleText
from baton.models.textmode import render_text_mode

if TYPE_CHECKING:
    import openai

ToolMode = Literal["native", "text"]
Constrain = Literal["off", "auto", "json_schema", "llama.cpp", "vllm", "ollama"]
_FORMS: tuple[Constrain, ...] = ("json_schema", "llama.cpp", "vllm", "ollama")
"""The ways to ask a server for constrained decoding, in the order `auto` tries them."""
_T = TypeVar("_T")

_PLACEHOLDER_KEY = "none"
"""Key sent to servers that need none (local servers accept any key)."""

_DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAICompatible:
    """A `Model` backed by an OpenAI-compatible `/v1/chat/completions` endpoint."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        tool_mode: ToolMode = "native",
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout_s: float | None = None,
        extra_body: dict[str, Any] | None = None,
        client: openai.AsyncOpenAI | None = None,
        max_retries: int = 3,
        retry_base_s: float = 0.5,
        retry_max_s: float = 8.0,
        retry_after_max_s: float = 30.0,
        constrain: Constrain = "off",
    ) -> None:
        if not model or not model.strip():
            raise ConfigError("OpenAICompatible needs a model name, e.g. 'gpt-4o-mini'")
        if tool_mode not in ("native", "text"):
            raise ConfigError(f"tool_mode must be 'native' or 'text', got {tool_mode!r}")
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if client is None and self.api_key is None and self.base_url is None:
            raise ConfigError(
                f"model {self.name!r}: no API key and no server URL. Set OPENAI_API_KEY "
                "(or pass api_key=...) for OpenAI, or set OPENAI_BASE_URL (or pass base_url=...) "
                'for a local server, where any key like "none" works'
            )
        if constrain not in ("off", "auto", *_FORMS):
            raise ConfigError(
                "constrain must be 'off', 'auto', 'json_schema', 'llama.cpp', 'vllm' or "
                f"'ollama', got {constrain!r}"
            )
        self.tool_mode: ToolMode = tool_mode
        self.constrain: Constrain = constrain
        """How a request with tools asks the server to decode only `{"tool": ..., "arguments":
        ...}` for a real tool or `{"final": ...}` (the embedded engine's grammar, as a JSON
        schema): `off`, one server's form, or `auto` (the standard form first, the next one
        when a server refuses it; the accepted form is kept)."""
        self._form: Constrain | None = constrain if constrain in _FORMS else None
        self._form_settled = constrain != "auto"
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.extra_body = dict(extra_body) if extra_body else None
        if max_retries < 0 or retry_base_s < 0 or retry_max_s < 0 or retry_after_max_s < 0:
            raise ConfigError(
                "max_retries, retry_base_s, retry_max_s and retry_after_max_s must be >= 0 "
                f"(got {max_retries}, {retry_base_s}, {retry_max_s}, {retry_after_max_s})"
            )
        self.max_retries = max_retries
        """Retries of a call that met a transient failure (connection refused, timeout, HTTP
        408/409/429/5xx) before it fails."""
        self.retry_base_s = retry_base_s
        """The first retry waits up to this long; each next one up to twice as long."""
        self.retry_max_s = retry_max_s
        """The most one backoff waits (before its jitter)."""
        self.retry_after_max_s = retry_after_max_s
        """A server's `Retry-After` is honoured up to this many seconds."""
        self._client = client
        self._own_client = client is None
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._stream_usage: bool | None = None
        """Whether the server accepts `stream_options` (None until a stream has tried)."""

    def __repr__(self) -> str:
        """Model name, server and tool mode (never the key)."""
        return (
            f"OpenAICompatible({self.model!r}, base_url={self.endpoint!r}, "
            f"tool_mode={self.tool_mode!r})"
        )

    @property
    def native_output(self) -> bool:
        """Answers follow `ModelRequest.output_schema` through the server's structured outputs
        (`response_format`); in text mode the schema is written into the prompt instead."""
        return self.tool_mode == "native"

    @property
    def constrained_as(self) -> Constrain | None:
        """The form of constrained decoding requests with tools use now (None: none; with
        `constrain="auto"`, known once the first such request went through)."""
        return self._form

    @property
    def endpoint(self) -> str:
        """The base URL requests go to."""
        if self._client is not None and not self._own_client:
            return str(self._client.base_url)
        return self.base_url or _DEFAULT_BASE_URL

    # ------------------------------------------------------------------ client
    def _get_client(self) -> openai.AsyncOpenAI:
        """The `AsyncOpenAI` client, created on first use and reused afterwards.

        A client created here is bound to the event loop it first ran in (its connection pool
        is); when a later call runs in another loop (e.g. successive `asyncio.run` calls), a
        fresh client is made for that loop. A client passed in by the caller is always reused.
        """
        if not self._own_client:
            assert self._client is not None
            return self._client
        loop = asyncio.get_running_loop()
        current = self._client_loop() if self._client_loop is not None else None
        if self._client is None or current is not loop:
            openai = _import_openai()
            options: dict[str, Any] = {}
            if self.timeout_s is not None:
                options["timeout"] = self.timeout_s
            self._client = openai.AsyncOpenAI(
                api_key=self.api_key or _PLACEHOLDER_KEY,
                base_url=self.base_url,
                max_retries=0,  # `_retrying` retries, with this model's settings
                **options,
            )
            self._client_loop = weakref.ref(loop)
        return self._client

    async def aclose(self) -> None:
        """Close the client this model created (a client passed in is left to its owner)."""
        if self._own_client and self._client is not None:
            client, self._client, self._client_loop = self._client, None, None
            await client.close()

    # ------------------------------------------------------------------ generate
    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Send the request to the server and map its reply (errors become `ModelError`)."""
        try:
            client = self._get_client()
            completion, kwargs = await self._sent(
                request, lambda kw: client.chat.completions.create(**kw)
            )
        except Exception as exc:
            error = self._translate(exc)
            if error is None:
                raise
            raise error from exc
        return self._to_response(completion, kwargs["messages"], self._textual(request))

    async def _sent(
        self, request: ModelRequest, send: Callable[[dict[str, Any]], Awaitable[_T]]
    ) -> tuple[_T, dict[str, Any]]:
        """`send(kwargs)` with retries. With `constrain="auto"`, until a form is settled, a
        server that refuses the form tried (HTTP 400, 422, or 500 as llama-cpp-python answers
        a field it cannot validate) is asked in the next one at once; when none fits, the
        server decodes freely."""
        if self.constrain == "auto" and self._form is None and not self._form_settled:
            self._form = _FORMS[0]
        while True:
            kwargs = self._request_kwargs(request)
            probing = not self._form_settled and bool(request.tools)
            try:
                if probing:
                    answer = await send(kwargs)
                else:
                    answer = await self._retrying(functools.partial(send, kwargs))
            except Exception as exc:
                if not probing:
                    raise
                if getattr(exc, "status_code", None) in (400, 422, 500):
                    tried = self._form
                    if tried is None or tried == _FORMS[-1]:
                        self._form, self._form_settled = None, True  # none fits
                    else:
                        self._form = _FORMS[_FORMS.index(tried) + 1]
                    continue
                if not _transient(exc):
                    raise
                answer = await self._retrying(functools.partial(send, kwargs))
            if probing:
                self._form_settled = True
            return answer, kwargs

    def _textual(self, request: ModelRequest) -> bool:
        """Whether this request's reply writes its calls as JSON text (text mode, or
        constrained decoding, which renders the tools into the prompt)."""
        return self.tool_mode == "text" or (self._form is not None and bool(request.tools))

    # ------------------------------------------------------------------ stream
    async def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        """Stream the reply: text deltas as the server sends them, then the `ModelResponse`
        that `generate` would have returned for the same reply.

        Tool-call fragments are assembled by index and never shown. In `tool_mode="text"` the
        reply's JSON is not shown either: prose streams, a `{"final": "..."}` answer streams
        decoded, a tool call shows nothing (see `baton.models.streaming.VisibleText`). Usage
        comes from the server's last chunk (`stream_options.include_usage`); a server that
        rejects `stream_options` is asked again without it, and its usage is estimated.
        Errors, including one the server reports mid-stream, raise `ModelError`/`ModelTimeout`
        as `generate` does.
        """
        sent: list[dict[str, Any]] = []
        reply = _StreamedReply()
        visible: VisibleText | None = None
        async with aclosing(self._chunks(request, sent)) as chunks:
            async for chunk in chunks:
                delta = reply.add(chunk)
                if visible is None:
                    visible = VisibleText(text_mode=self._textual(request))
                if delta:
                    shown = visible.feed(delta)
                    if shown:
                        yield shown
        textual = self._textual(request)
        response = self._to_response(reply.completion(), sent[-1]["messages"], textual)
        visible = visible or VisibleText(text_mode=textual)
        rest = visible.finish(response.text, (t.name for t in request.tools))
        if rest:
            yield rest
        yield response

    async def _chunks(
        self, request: ModelRequest, sent: list[dict[str, Any]]
    ) -> AsyncGenerator[Any, None]:
        """The server's `ChatCompletionChunk`s, errors translated to `ModelError` (`sent`
        gets the request's keyword arguments as sent)."""
        started = False
        try:
            client = self._get_client()
            # only opening the stream is retried: text already shown cannot be taken back
            chunks, kwargs = await self._sent(request, lambda kw: self._open_stream(client, kw))
            sent.append(kwargs)
        except Exception as exc:
            error = self._translated(exc)
            if error is None:
                raise
            raise error from exc
        try:
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    return
                except Exception as exc:
                    error = self._translated(exc, mid_stream=started)
                    if error is None:
                        raise
                    raise error from exc
                started = True
                yield chunk
        finally:
            await chunks.close()

    async def _open_stream(self, client: openai.AsyncOpenAI, kwargs: dict[str, Any]) -> Any:
        """Start a streamed completion, asking for usage in the last chunk where the server
        accepts `stream_options`. Until one stream has gone through, a 400/422 answer may be
        the server refusing that field: it is asked once more without it, and a success then
        is remembered."""
        if self._stream_usage is False:
            return await client.chat.completions.create(**kwargs, stream=True)
        try:
            chunks = await client.chat.completions.create(
                **kwargs, stream=True, stream_options={"include_usage": True}
            )
        except Exception as exc:
            if self._stream_usage or getattr(exc, "status_code", None) not in (400, 422):
                raise
            chunks = await client.chat.completions.create(**kwargs, stream=True)
            self._stream_usage = False
            return chunks
        self._stream_usage = True
        return chunks

    async def _retrying(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        """`attempt()`, retried after a transient failure up to `max_retries` times: after the
        server's `Retry-After` (up to `retry_after_max_s`), else an exponential backoff with
        full jitter (a random wait up to `retry_base_s * 2**n`, at most `retry_max_s`)."""
        tries = 0
        while True:
            try:
                return await attempt()
            except Exception as exc:
                if tries >= self.max_retries or not _transient(exc):
                    raise
                after = _retry_after(exc)
                if after is not None:
                    wait = min(after, self.retry_after_max_s)
                else:
                    wait = random.uniform(0, min(self.retry_max_s, self.retry_base_s * 2**tries))
                tries += 1
                await asyncio.sleep(wait)

    def _translated(self, exc: Exception, *, mid_stream: bool = False) -> ModelError | None:
        """The `ModelError` for an exception met while streaming (`generate`'s, plus errors
        only a stream meets), or None for one that did not come from the client."""
        import openai

        where = f"{self.name} at {self.endpoint}"
        if mid_stream and isinstance(exc, openai.APITimeoutError):
            limit = f" for {self.timeout_s:g}s" if self.timeout_s is not None else ""
            return ModelTimeout(
                f"{where} stopped sending its reply{limit}; check the server's load, or raise "
                "timeout_s"
            )
        if mid_stream and isinstance(exc, openai.APIConnectionError):
            return ModelUnreachable(
                f"{where} dropped the connection in the middle of its reply ({exc}); check the "
                "server's logs, or retry"
            )
        if isinstance(exc, openai.APIError) and not isinstance(
            exc, (openai.APIStatusError, openai.APIConnectionError)
        ):  # an error event in the stream, sent instead of the rest of the reply
            return ModelError(
                f"{where} sent an error instead of its reply: {_server_message(exc)}; check the "
                "server's logs, or retry"
            )
        return self._translate(exc)

    # ------------------------------------------------------------------ responses
    def _request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` for this request."""
        temperature = self.temperature if self.temperature is not None else request.temperature
        kwargs: dict[str, Any] = {"model": self.model, "temperature": temperature}
        extra = dict(self.extra_body) if self.extra_body else {}
        if self._form is not None and request.tools:
            # the embedded engine's own prompt and schema (no llama.cpp needed): a small model
            # served over HTTP reads and decodes what it would read and decode embedded
            from baton.models.local.prompt import compact_prompt, reply_schema

            kwargs["messages"] = compact_prompt(request)
            grammar = reply_schema(request)
            assert grammar is not None  # a request with tools always has one
            if self._form == "json_schema":
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "reply", "schema": grammar},
                }
            elif self._form == "llama.cpp":  # llama.cpp's server and llama-cpp-python's
                kwargs["response_format"] = {"type": "json_object", "schema": grammar}
                # llama-cpp-python's server penalises repeats (1.1) unless told otherwise; the
                # embedded engine does not, and a penalised greedy decoder strays from the
                # choices it makes there (OpenAI's own semantics: no penalty by default)
                extra.setdefault("repeat_penalty", 1.0)
            elif self._form == "vllm":
                extra["guided_json"] = grammar
            else:  # ollama
                extra["format"] = grammar
        elif self.tool_mode == "native":
            kwargs["messages"] = [m.to_chat() for m in request.messages]
            if request.tools:
                kwargs["tools"] = [s.to_openai() for s in request.tools]
                kwargs["tool_choice"] = "auto"
            if request.output_schema is not None:
                kwargs["response_format"] = _json_schema_format(request)
        else:
            schema = request.output_schema if request.tools else None
            kwargs["messages"] = render_text_mode(request.messages, request.tools, schema)
            if request.output_schema is not None and not request.tools:
                kwargs["response_format"] = _json_schema_format(request)
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    def _to_response(
        self, completion: Any, sent: list[dict[str, Any]], textual: bool
    ) -> ModelResponse:
        """Map a `ChatCompletion` onto a `ModelResponse`, keeping raw tool arguments."""
        choices = getattr(completion, "choices", None)
        if not choices:
            raise ModelError(
                f"{self.name} at {self.endpoint} returned no choices "
                f"(response: {str(completion)[:300]!r}); check that the server supports "
                "/v1/chat/completions for this model"
            )
        message = choices[0].message
        text: str | None = message.content
        calls: list[ToolCall] = []
        for tc in message.tool_calls or []:
            fn = getattr(tc, "function", None)
            if fn is None or not getattr(fn, "name", None):
                continue
            args = fn.arguments
            if args is None:
                args = "{}"
            elif not isinstance(args, str):  # some servers send an object instead of text
                args = self._args_text(fn.name, args)
            if tc.id:
                calls.append(ToolCall(id=tc.id, name=fn.name, arguments=args))
            else:
                calls.append(ToolCall(name=fn.name, arguments=args))
        usage = completion.usage
        if usage is not None and (usage.prompt_tokens or usage.completion_tokens):
            details = getattr(usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) or 0
            mapped = Usage(
                input_tokens=usage.prompt_tokens or 0,
                output_tokens=usage.completion_tokens or 0,
                cached_input_tokens=min(int(cached), usage.prompt_tokens or 0),
            )
        else:
            mapped = Usage(
                input_tokens=sum(estimate_tokens(_as_text(m.get("content"))) for m in sent),
                output_tokens=estimate_tokens(text)
                + sum(estimate_tokens(c.arguments) + 4 for c in calls),
            )
        return ModelResponse(
            text=text,
            tool_calls=calls,
            usage=mapped,
            text_tool_calls=textual,
            raw=completion,
        )

    def _args_text(self, name: str, args: Any) -> str:
        """Arguments a server sent as a JSON object, as the text the kernel's parser reads
        (and refuses when they nest too deeply); `ModelError` when they nest so deeply that
        they cannot even be written back as text."""
        try:
            return json.dumps(args, ensure_ascii=False)
        except RecursionError:
            raise ModelError(
                _too_deep(f"{self.name} at {self.endpoint}", f"call of {name}")
            ) from None

    # ------------------------------------------------------------------ errors
    def _translate(self, exc: Exception) -> ModelError | None:
        """The `ModelError` (or `ModelTimeout`) saying what went wrong and what to do, or None
        for an exception that did not come from the client (it propagates unchanged)."""
        if isinstance(exc, ModelError):
            return None
        import openai

        where = f"{self.name} at {self.endpoint}"
        if isinstance(exc, openai.APITimeoutError):
            limit = f" within {self.timeout_s:g}s" if self.timeout_s is not None else ""
            return ModelTimeout(
                f"{where} did not answer{limit}; check the server's load, or raise timeout_s"
            )
        tried = f" (tried {self.max_retries + 1} times)" if self.max_retries else ""
        if isinstance(exc, openai.APIConnectionError):
            return ModelUnreachable(
                f"cannot connect to {self.endpoint} for {self.name}{tried}: {exc}; check "
                "OPENAI_BASE_URL (or base_url=...) and that the server is up"
            )
        if isinstance(exc, openai.APIStatusError):
            status, detail = exc.status_code, _server_message(exc)
            if isinstance(exc, openai.AuthenticationError):
                hint = "check OPENAI_API_KEY (or api_key=...)"
            elif isinstance(exc, openai.PermissionDeniedError):
                hint = f"the key may not use model {self.model!r}; check OPENAI_API_KEY"
            elif isinstance(exc, openai.NotFoundError):
                hint = (
                    f"check the model name {self.model!r} (GET {self.endpoint.rstrip('/')}/models "
                    "lists them) and that OPENAI_BASE_URL ends with /v1"
                )
            elif isinstance(exc, openai.RateLimitError):
                hint = "rate limit or quota reached; wait and retry, or lower concurrency"
            elif status in (400, 422):
                hint = "the server rejected the request"
                if self.tool_mode == "native":
                    hint += "; if this server or model has no tool calling, use tool_mode='text'"
            elif status >= 500:
                hint = "the server failed; check its logs, or retry later"
            else:
                hint = "unexpected status from the server"
            if _transient(exc):
                return ModelUnreachable(f"{where} answered HTTP {status}{tried}: {detail}; {hint}")
            return ModelError(f"{where} answered HTTP {status}: {detail}; {hint}")
        if isinstance(exc, openai.OpenAIError):
            return ModelError(f"{where} failed: {type(exc).__name__}: {exc}")
        if isinstance(exc, RecursionError):  # the client's JSON decoder, on a runaway reply
            return ModelError(_too_deep(where, "reply"))
        return None


class _StreamedReply:
    """The chunks of a streamed chat completion, assembled into the `ChatCompletion` the
    server would have sent unstreamed (so `_to_response` maps both the same way)."""

    def __init__(self) -> None:
        self.id = ""
        self.model = ""
        self.created = 0
        self.content: list[str] | None = None
        """Text fragments; None while the server has sent no content at all."""
        self.calls: dict[int, dict[str, Any]] = {}
        """Tool calls by index: id, name and argument fragments."""
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.has_choice = False
        self._last_call: int | None = None

    def add(self, chunk: Any) -> str:
        """Take one `ChatCompletionChunk`; return its text delta ('' for none)."""
        self.id = self.id or getattr(chunk, "id", None) or ""
        self.model = self.model or getattr(chunk, "model", None) or ""
        self.created = self.created or getattr(chunk, "created", None) or 0
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage
        text = ""
        for choice in getattr(chunk, "choices", None) or []:
            if (getattr(choice, "index", 0) or 0) != 0:
                continue  # one reply was asked for; ignore any other
            self.has_choice = True
            self.finish_reason = getattr(choice, "finish_reason", None) or self.finish_reason
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            content = getattr(delta, "content", None)
            if content is not None:
                if self.content is None:
                    self.content = []
                self.content.append(content)
                text += content
            for fragment in getattr(delta, "tool_calls", None) or []:
                self._add_call(fragment)
        return text

    def _add_call(self, fragment: Any) -> None:
        """Fold one tool-call fragment into the call at its index."""
        index = getattr(fragment, "index", None)
        fragment_id = getattr(fragment, "id", None)
        if not isinstance(index, int):  # servers that omit it: a new id starts a new call
            last = self._last_call
            same = last is not None and not (fragment_id and fragment_id != self.calls[last]["id"])
            index = last if same and last is not None else len(self.calls)
        self._last_call = index
        call = self.calls.setdefault(index, {"id": None, "name": "", "arguments": []})
        if fragment_id and not call["id"]:
            call["id"] = fragment_id
        fn = getattr(fragment, "function", None)
        if fn is None:
            return
        name = getattr(fn, "name", None)
        if name:
            call["name"] += name
        args = getattr(fn, "arguments", None)
        if args is not None and not isinstance(args, str):  # an object instead of text
            try:
                args = json.dumps(args, ensure_ascii=False)
            except RecursionError:
                raise ModelError(_too_deep("the server", "tool-call fragment")) from None
        if args is not None:
            call["arguments"].append(args)

    def completion(self) -> Any:
        """The assembled `ChatCompletion` (no choices when the server sent none)."""
        from openai.types.chat import ChatCompletion

        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.content) if self.content is not None else None,
        }
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["name"] or None,
                        "arguments": "".join(call["arguments"]) if call["arguments"] else None,
                    },
                }
                for _, call in sorted(self.calls.items())
            ]
        choices = []
        if self.has_choice:
            finish = self.finish_reason or ("tool_calls" if self.calls else "stop")
            choices.append({"index": 0, "message": message, "finish_reason": finish})
        return ChatCompletion.construct(
            id=self.id,
            object="chat.completion",
            created=self.created,
            model=self.model,
            choices=choices,
            usage=self.usage,
        )


_TRANSIENT_STATUS = frozenset({408, 409, 429})


def _transient(exc: Exception) -> bool:
    """Whether a failure may pass if the call is made again: no connection, a timeout, the
    server busy (408, 409, 429) or failing (5xx)."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # a timeout is one too
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _TRANSIENT_STATUS or exc.status_code >= 500
    return False


def _retry_after(exc: Exception) -> float | None:
    """The seconds a server asked to wait (`Retry-After` in seconds or as an HTTP date, or
    `retry-after-ms`), or None."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _too_deep(where: str, what: str) -> str:
    return (
        f"{where} sent a {what} whose JSON nests objects or lists too deeply to read "
        "(thousands of levels; Python's JSON decoder stops at about 1,000); the reply is lost. "
        "Retry; if it happens again, the model is producing runaway output: lower max_tokens "
        "or change the prompt"
    )


def _import_openai() -> Any:
    """The `openai` module, imported on first use (it is slow to import)."""
    try:
        import openai
    except ImportError as exc:
        raise ModelError(
            "the 'openai' package is needed for model='openai:...'; install it with "
            "`pip install openai`"
        ) from exc
    return openai


def _json_schema_format(request: ModelRequest) -> dict[str, Any]:
    """`response_format` asking for an answer that follows the request's output schema:
    strict (the server guarantees it) where the schema fits OpenAI's strict subset, else
    best effort."""
    schema = request.output_schema
    assert schema is not None
    name = _SCHEMA_NAME_RE.sub("_", request.output_name or "")[:64] or "answer"
    closed = strict_schema(schema)
    return {
        "type": "json_schema",
        "json_schema": {
            "name": name,
            "schema": closed if closed is not None else schema,
            "strict": closed is not None,
        },
    }


_SCHEMA_NAME_RE = re.compile(r"[^A-Za-z0-9_-]")

_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "title",
        "description",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
"""The JSON-schema keywords OpenAI's strict structured outputs accept."""


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` closed for strict structured outputs (`additionalProperties: false` on every
    object), or None when it does not fit the strict subset: the root is not an object, an
    object has optional properties or open extra keys, or a keyword is not supported there.
    Pydantic gives a model with defaults optional properties; such schemas go best effort."""

    def close(node: Any) -> Any:
        if not isinstance(node, dict) or not set(node) <= _STRICT_KEYWORDS:
            raise ValueError
        out = dict(node)
        props = node.get("properties")
        if props is not None or node.get("type") == "object":
            props = props or {}
            if node.get("additionalProperties", False) is not False:
                raise ValueError
            if set(node.get("required", ())) != set(props):
                raise ValueError
            out["properties"] = {k: close(v) for k, v in props.items()}
            out["additionalProperties"] = False
        if "items" in node:
            out["items"] = close(node["items"])
        if "anyOf" in node:
            out["anyOf"] = [close(v) for v in node["anyOf"]]
        if "$defs" in node:
            out["$defs"] = {k: close(v) for k, v in node["$defs"].items()}
        return out

    if schema.get("type") != "object":
        return None
    try:
        closed: dict[str, Any] = close(schema)
    except ValueError:
        return None
    return closed


def _server_message(exc: Any) -> str:
    """The error message the server put in its body, else the exception's own text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
    return str(getattr(exc, "message", exc))[:500]


def _as_text(content: object) -> str | None:
    if content is None or isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


# ---------------------------------------------------------------------- text mode
