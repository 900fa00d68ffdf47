"""`OpenAICompatible` against a real HTTP server on 127.0.0.1 speaking the OpenAI API."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from baton import Agent, Team, tool
from baton.core.errors import ConfigError, ModelError, ModelTimeout, ModelUnreachable
from baton.core.messages import Message, ToolCall, ToolSpec
from baton.models import ModelRequest, ModelResponse, OpenAICompatible, resolve_model
from baton.models.base import StreamingModel
from baton.models.openai_compat import ToolMode
from baton.models.parsing import parse_text_mode
from baton.models.textmode import render_text_mode

# ---------------------------------------------------------------------- the fake server


@dataclass
class Reply:
    """One scripted HTTP answer (a `bytes` body is sent as it is)."""

    body: Any
    status: int = 200
    delay_s: float = 0.0


@dataclass
class SSE:
    """A scripted event stream, sent whatever the request asked for.

    Each event is a chunk dict (sent as `data: {...}`), a raw `data:` payload string, or a
    pause in seconds. `complete=False` drops the connection after the events (no `[DONE]`, no
    end of the chunked body), as a server that dies mid-reply does.
    """

    events: list[dict[str, Any] | str | float]
    complete: bool = True


@dataclass
class Recorded:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeOpenAI:
    """Scripted `POST /v1/chat/completions`; records every request body."""

    port: int = 0
    replies: list[Reply] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    reject_stream_options: bool = False
    """Answer 400 to requests carrying `stream_options`, as some servers do."""

    @property
    def url(self) -> str:
        """Base URL to give the client."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """JSON bodies of the chat-completions requests, in order."""
        return [r.body for r in self.requests]

    def script(self, *replies: Reply | dict[str, Any]) -> None:
        """Queue replies; a dict is a 200 response body."""
        for r in replies:
            self.replies.append(r if isinstance(r, Reply) else Reply(r))

    def next_reply(self) -> Reply:
        with self.lock:
            if not self.replies:
                return Reply(
                    {"error": {"message": "fake server: script exhausted", "type": "test"}}, 500
                )
            return self.replies.pop(0)


def _handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like real servers

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            body = json.loads(raw) if raw else {}
            server.requests.append(
                Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            if server.reject_stream_options and "stream_options" in body:
                message = "stream_options: Extra inputs are not permitted"
                self._send(400, {"error": {"message": message}})
                return
            reply = server.next_reply()
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if isinstance(reply.body, SSE):
                self._stream(reply.body)
            elif body.get("stream") and reply.status == 200:
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                self._stream(SSE(list(stream_chunks(reply.body, usage))))
            else:
                self._send(reply.status, reply.body)

        def _stream(self, sse: SSE) -> None:
            """Send server-sent events in a chunked body, flushing each one."""

            def write(data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for event in sse.events:
                    if isinstance(event, float):
                        time.sleep(event)
                        continue
                    payload = event if isinstance(event, str) else json.dumps(event)
                    write(f"data: {payload}\n\n".encode())
                if not sse.complete:
                    self.close_connection = True
                    return
                write(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
                self.close_connection = True

        def _send(self, status: int, body: Any) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeouts)
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up
            super().handle_error(request, client_address)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A fake OpenAI server on an ephemeral port; the real env never leaks into the tests."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ADMIN_KEY", "OPENAI_CUSTOM_HEADERS"):
        monkeypatch.delenv(var, raising=False)
    fake = FakeOpenAI()
    httpd = _QuietServer(("127.0.0.1", 0), _handler(fake))
    httpd.daemon_threads = True
    fake.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def completion(
    content: str | None = None,
    calls: list[tuple[str, str]] | None = None,
    usage: tuple[int, int] | None = (11, 7),
) -> dict[str, Any]:
    """An OpenAI chat-completion body; `calls` are (name, raw arguments text)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
            for i, (name, args) in enumerate(calls)
        ]
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
    }
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        }
    return body


def stream_chunks(body: dict[str, Any], include_usage: bool) -> Iterator[dict[str, Any]]:
    """A chat-completion body as the chunks a server streams: content word by word, each
    tool call's arguments in three fragments, usage in a last chunk when asked for."""
    head = {k: body[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    choice = body["choices"][0]
    message = choice["message"]
    content = message.get("content")
    yield chunk({"role": "assistant", "content": None if content is None else ""})
    for word in re.findall(r"\s*\S+\s*", content or ""):
        yield chunk({"content": word})
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        args, third = fn["arguments"], max(1, len(fn["arguments"]) // 3)
        for k in range(0, len(args), third):
            fragment = {"index": i, "function": {"arguments": args[k : k + third]}}
            yield chunk({"tool_calls": [fragment]})
    yield chunk({}, choice["finish_reason"])
    if include_usage and body.get("usage") is not None:
        yield {**head, "choices": [], "usage": body["usage"]}


def model(server: FakeOpenAI, **kwargs: Any) -> OpenAICompatible:
    """A client of the fake server with no retries, so error tests stay fast."""
    kwargs.setdefault("max_retries", 0)
    return OpenAICompatible("test-model", base_url=server.url, **kwargs)


INVOICE_SPEC = ToolSpec(
    name="query_invoice",
    description="Look up the e-invoice of an order.",
    parameters={
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
)


def invoice_request(**kwargs: Any) -> ModelRequest:
    """A billing agent's first request."""
    return ModelRequest(
        agent="billing",
        messages=[
            Message(role="system", content="You are billing."),
            Message(role="user", content="invoice for ORD-1 please"),
        ],
        tools=[INVOICE_SPEC],
        **kwargs,
    )


# ---------------------------------------------------------------------- a two-agent desk


def desk(brain: OpenAICompatible) -> tuple[Team, list[str]]:
    """Triage hands billing the baton; billing looks up invoices. Returns (team, lookups)."""
    lookups: list[str] = []

    @tool
    async def query_invoice(order_id: str) -> dict[str, Any]:
        """Look up the e-invoice of an order.

        Args:
            order_id: Order number as the user wrote it.
        """
        lookups.append(order_id)
        return {"order_id": order_id, "status": "ISSUED", "amount": 299.0}

    triage = Agent(
        name="triage",
        description="Front desk.",
        instructions="Route the user to the right specialist.",
        handoffs=("billing",),
    )
    billing = Agent(
        name="billing",
        description="Invoices, refunds, payments.",
        instructions="You are a billing specialist.",
        tools=(query_invoice,),
    )
    return Team([triage, billing], entry="triage", model=brain), lookups


HANDOFF_ARGS = json.dumps(
    {"reason": "billing question", "objective": "Find the invoice", "state": {"order_id": "ORD-1"}}
)


# ---------------------------------------------------------------------- native mode


async def test_native_tool_call_round_trip(server: FakeOpenAI) -> None:
    raw_args = '{ "order_id" :"ORD-1" }'
    server.script(completion(calls=[("query_invoice", raw_args)]))
    request = invoice_request()

    response = await model(server).generate(request)

    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer none"
    assert sent.body["model"] == "test-model"
    assert sent.body["temperature"] == 0.0
    assert sent.body["messages"] == [m.to_chat() for m in request.messages]
    assert sent.body["tools"] == [INVOICE_SPEC.to_openai()]
    assert sent.body["tools"][0]["function"]["parameters"]["required"] == ["order_id"]
    assert sent.body["tool_choice"] == "auto"
    assert "response_format" not in sent.body
    assert response.text is None
    assert response.text_tool_calls is False
    assert response.tool_calls == [ToolCall(id="call_0", name="query_invoice", arguments=raw_args)]


async def test_no_tools_means_no_tools_fields(server: FakeOpenAI) -> None:
    server.script(completion("hello"))
    request = ModelRequest(agent="a", messages=[Message(role="user", content="hi")])
    response = await model(server, api_key="sk-test").generate(request)
    body = server.bodies[0]
    assert "tools" not in body and "tool_choice" not in body
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert response.text == "hello" and response.tool_calls == []


async def test_usage_is_mapped(server: FakeOpenAI) -> None:
    server.script(completion("done", usage=(123, 45)))
    response = await model(server).generate(invoice_request())
    assert (response.usage.input_tokens, response.usage.output_tokens) == (123, 45)


async def test_cached_prompt_tokens_are_mapped(server: FakeOpenAI) -> None:
    body = completion("done", usage=(1200, 45))
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 1024}
    server.script(body)
    usage = (await model(server).generate(invoice_request())).usage
    assert (usage.input_tokens, usage.cached_input_tokens) == (1200, 1024)
    assert usage.evaluated_input_tokens == 176


async def test_usage_is_estimated_when_the_server_omits_it(server: FakeOpenAI) -> None:
    server.script(completion("a reply of some length", usage=None))
    response = await model(server).generate(invoice_request())
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens == (len("a reply of some length") + 3) // 4


async def test_options_are_sent(server: FakeOpenAI) -> None:
    server.script(completion("{}"))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    brain = model(server, temperature=0.7, max_tokens=64, extra_body={"top_k": 5})
    await brain.generate(invoice_request(output_schema=schema))
    body = server.bodies[0]
    assert body["temperature"] == 0.7
    assert body["max_tokens"] == 64
    assert body["top_k"] == 5
    assert body["response_format"] == {  # `n` is optional: not OpenAI's strict subset
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": False},
    }


class Line(BaseModel):
    sku: str
    qty: int


class Refund(BaseModel):
    order_id: str
    amount: float
    reason: Literal["damaged", "late"]
    lines: list[Line]


class Note(BaseModel):
    text: str
    urgent: bool = False


async def test_an_agent_with_an_output_type_sends_a_strict_response_format_with_tools(
    server: FakeOpenAI,
) -> None:
    answer = {"order_id": "ORD-1", "amount": 20, "reason": "late", "lines": []}
    server.script(
        completion(calls=[("query_invoice", '{"order_id": "ORD-1"}')]),
        completion(json.dumps(answer)),
    )

    @tool
    async def query_invoice(order_id: str) -> str:
        """Look up the e-invoice of an order."""
        return "ISSUED, 20 EUR"

    billing = Agent(name="billing", tools=[query_invoice], output_type=Refund)
    team = Team([billing], entry="billing", model=model(server))

    result = await team.run("refund ORD-1, it came late")

    assert result.status == "completed" and result.final == Refund(**answer)
    first, second = server.bodies
    for body in (first, second):
        assert body["tools"][0]["function"]["name"] == "query_invoice"
        assert body["tool_choice"] == "auto"
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        spec = fmt["json_schema"]
        assert (spec["name"], spec["strict"]) == ("Refund", True)
        schema = spec["schema"]
        assert schema["additionalProperties"] is False
        assert schema["$defs"]["Line"]["additionalProperties"] is False
        assert set(schema["required"]) == set(Refund.model_fields)
    # the server enforces the schema: the prompt carries no shape note
    assert "of this shape" not in first["messages"][0]["content"]


async def test_an_output_type_with_defaults_is_sent_best_effort(server: FakeOpenAI) -> None:
    server.script(completion('{"text": "call back"}'))
    request = invoice_request(output_schema=Note.model_json_schema(), output_name="Note")
    await model(server).generate(request)
    spec = server.bodies[0]["response_format"]["json_schema"]
    assert (spec["name"], spec["strict"]) == ("Note", False)
    assert spec["schema"] == Note.model_json_schema()


async def test_text_mode_with_tools_writes_the_schema_into_the_catalogue(
    server: FakeOpenAI,
) -> None:
    server.script(completion('{"final": {"text": "call back"}}'))
    brain = model(server, tool_mode="text")
    response = await brain.generate(invoice_request(output_schema=Note.model_json_schema()))
    body = server.bodies[0]
    assert "response_format" not in body and "tools" not in body
    system = body["messages"][0]["content"]
    assert '{"final": <answer JSON>}' in system
    assert "The answer JSON must follow this schema:" in system
    assert not brain.native_output and model(server).native_output
    found = parse_text_mode(response.text, {"query_invoice"}, structured=True)
    assert json.loads(found.text or "") == {"text": "call back"}


async def test_request_temperature_is_used_by_default(server: FakeOpenAI) -> None:
    server.script(completion("ok"))
    await model(server).generate(invoice_request(temperature=0.3))
    assert server.bodies[0]["temperature"] == 0.3


async def test_client_is_created_once_and_reused(server: FakeOpenAI) -> None:
    server.script(completion("one"), completion("two"))
    brain = model(server)
    await brain.generate(invoice_request())
    first = brain._client
    await brain.generate(invoice_request())
    assert first is not None and brain._client is first
    await brain.aclose()
    assert brain._client is None


async def test_a_given_client_is_used_and_left_open(server: FakeOpenAI) -> None:
    import openai

    server.script(completion("via given client"))
    client = openai.AsyncOpenAI(api_key="sk-given", base_url=server.url, max_retries=0)
    brain = OpenAICompatible("test-model", client=client)
    assert brain.endpoint == server.url + "/"
    response = await brain.generate(invoice_request())
    assert response.text == "via given client"
    assert server.requests[0].headers["authorization"] == "Bearer sk-given"
    await brain.aclose()
    assert brain._client is client and not client.is_closed()
    await client.close()


def test_successive_event_loops_work(server: FakeOpenAI) -> None:
    server.script(completion("one"), completion("two"))
    brain = model(server)
    texts = [asyncio.run(brain.generate(invoice_request())).text for _ in range(2)]
    assert texts == ["one", "two"]


# ---------------------------------------------------------------------- text mode


async def test_text_mode_request_carries_the_catalogue_and_no_tools(server: FakeOpenAI) -> None:
    reply = 'Sure.\n```json\n{"tool": "query_invoice", "arguments": {"order_id": "ORD-1"}}\n```'
    server.script(completion(reply))

    response = await model(server, tool_mode="text").generate(invoice_request())

    body = server.bodies[0]
    assert "tools" not in body and "tool_choice" not in body
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are billing.")
    assert "query_invoice: Look up the e-invoice of an order." in system["content"]
    assert '"required":["order_id"]' in system["content"]
    assert '{"tool": "<name>", "arguments": {...}}' in system["content"]
    assert '{"final": "<answer>"}' in system["content"]
    assert response.text_tool_calls is True
    assert response.tool_calls == []
    found = parse_text_mode(response.text, {"query_invoice"})
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == [
        ("query_invoice", {"order_id": "ORD-1"})
    ]


def test_text_mode_renders_tool_history_as_plain_text() -> None:
    call = ToolCall(id="c1", name="query_invoice", arguments='{"order_id": "ORD-1"}')
    messages = [
        Message(role="user", content="invoice for ORD-1"),
        Message(role="assistant", content=None, tool_calls=[call]),
        Message(role="tool", tool_call_id="c1", content='{"status": "ISSUED"}'),
        Message(role="user", content="and the amount?"),
    ]
    rendered = render_text_mode(messages, [INVOICE_SPEC])
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "user"]
    assert "query_invoice" in rendered[0]["content"]
    assert json.loads(rendered[2]["content"]) == {
        "tool": "query_invoice",
        "arguments": {"order_id": "ORD-1"},
    }
    assert rendered[3]["content"] == (
        'Tool query_invoice returned: {"status": "ISSUED"}\n\nand the amount?'
    )
    assert all(set(m) == {"role", "content"} for m in rendered)


async def test_text_mode_team_run(server: FakeOpenAI) -> None:
    server.script(
        completion(f'{{"tool": "transfer_to_billing", "arguments": {HANDOFF_ARGS}}}'),
        completion('```json\n{"tool": "query_invoice", "arguments": {"order_id": "ORD-1"}}\n```'),
        completion('{"final": "Your invoice ORD-1 is ISSUED."}'),
    )
    team, lookups = desk(model(server, tool_mode="text"))

    result = await team.run("where is the invoice for ORD-1?")

    assert result.status == "completed", result.error
    assert result.path == ["triage", "billing"]
    assert result.output == "Your invoice ORD-1 is ISSUED."
    assert lookups == ["ORD-1"]
    for body in server.bodies:
        assert "tools" not in body
        assert all(m["role"] in ("system", "user", "assistant") for m in body["messages"])
        assert all("tool_calls" not in m for m in body["messages"])
    last = server.bodies[-1]["messages"]
    assert json.loads(last[-2]["content"])["tool"] == "query_invoice"
    assert last[-1]["content"].startswith("Tool query_invoice returned: ")


# ---------------------------------------------------------------------- end to end


async def test_team_handoff_end_to_end(server: FakeOpenAI) -> None:
    server.script(
        completion(calls=[("transfer_to_billing", HANDOFF_ARGS)], usage=(50, 10)),
        completion(calls=[("query_invoice", '{"order_id": "ORD-1"}')], usage=(40, 8)),
        completion("Your invoice ORD-1 is ISSUED: 299.0.", usage=(60, 12)),
    )
    team, lookups = desk(model(server))

    result = await team.run("where is the invoice for ORD-1?")

    assert result.status == "completed", result.error
    assert result.path == ["triage", "billing"]
    assert result.output == "Your invoice ORD-1 is ISSUED: 299.0."
    assert lookups == ["ORD-1"]
    assert result.handoffs[0].state == {"order_id": "ORD-1"}
    assert result.usage["triage"].input_tokens == 50
    assert result.usage["billing"].output_tokens == 20
    triage_body, billing1, billing2 = server.bodies
    assert [t["function"]["name"] for t in triage_body["tools"]] == ["transfer_to_billing"]
    assert [t["function"]["name"] for t in billing1["tools"]] == ["query_invoice", "fetch_history"]
    assert "ORD-1" in billing1["messages"][0]["content"]  # the payload reached billing
    assistant, tool_msg = billing2["messages"][-2:]
    assert assistant["tool_calls"][0]["function"] == {
        "name": "query_invoice",
        "arguments": '{"order_id": "ORD-1"}',
    }
    assert tool_msg["role"] == "tool"
    assert tool_msg["tool_call_id"] == assistant["tool_calls"][0]["id"] == "call_0"
    assert json.loads(tool_msg["content"])["status"] == "ISSUED"


@pytest.mark.parametrize("raw", ['{"order_id": "ORD-1",}', "```json\n{'order_id': 'ORD-1'}\n```"])
async def test_malformed_arguments_are_repaired_by_the_kernel(server: FakeOpenAI, raw: str) -> None:
    server.script(
        completion(calls=[("transfer_to_billing", HANDOFF_ARGS)]),
        completion(calls=[("query_invoice", raw)]),
        completion("Found it."),
    )
    team, lookups = desk(model(server))

    result = await team.run("invoice ORD-1")

    assert result.status == "completed", result.error
    assert lookups == ["ORD-1"]
    assert len(server.requests) == 3  # repaired, no re-ask needed
    sent_back = server.bodies[2]["messages"][-2]["tool_calls"][0]["function"]["arguments"]
    assert sent_back == raw  # the raw text travels unchanged; only the kernel repairs it


async def test_unrepairable_arguments_are_reasked_over_http(server: FakeOpenAI) -> None:
    server.script(
        completion(calls=[("transfer_to_billing", HANDOFF_ARGS)]),
        completion(calls=[("query_invoice", "order number ORD-1")]),
        completion(calls=[("query_invoice", '{"order_id": "ORD-1"}')]),
        completion("Found it."),
    )
    team, lookups = desk(model(server))

    result = await team.run("invoice ORD-1")

    assert result.status == "completed", result.error
    assert lookups == ["ORD-1"]
    reask = server.bodies[2]["messages"]
    assert reask[-1]["role"] == "user"
    assert "could not be parsed" in reask[-1]["content"]
    assert reask[-2]["role"] == "tool"


async def test_http_500_stops_the_run_with_a_helpful_error(server: FakeOpenAI) -> None:
    server.script(Reply({"error": {"message": "CUDA out of memory", "type": "server"}}, 500))
    team, lookups = desk(model(server))

    with pytest.raises(ModelUnreachable) as info:
        await team.run("invoice ORD-1")

    error = str(info.value)
    assert "HTTP 500" in error
    assert "CUDA out of memory" in error
    assert "check its logs" in error
    assert "none of its tools ran: send the message again" in error
    assert lookups == []


async def test_closed_port_stops_the_run_with_a_helpful_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    brain = OpenAICompatible("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    team, _ = desk(brain)

    with pytest.raises(ModelUnreachable) as info:
        await team.run("invoice ORD-1")

    error = str(info.value)
    assert f"127.0.0.1:{port}" in error
    assert "OPENAI_BASE_URL" in error
    assert "server is up" in error


# ---------------------------------------------------------------------- errors


async def test_401_mentions_the_api_key(server: FakeOpenAI) -> None:
    server.script(Reply({"error": {"message": "Incorrect API key provided"}}, 401))
    with pytest.raises(ModelError, match="OPENAI_API_KEY") as info:
        await model(server, api_key="sk-wrong").generate(invoice_request())
    assert "Incorrect API key provided" in str(info.value)
    assert "sk-wrong" not in str(info.value)


async def test_404_mentions_the_model_name(server: FakeOpenAI) -> None:
    server.script(Reply({"error": {"message": "model 'test-model' not found"}}, 404))
    with pytest.raises(ModelError, match="check the model name 'test-model'"):
        await model(server).generate(invoice_request())


async def test_400_in_native_mode_suggests_text_mode(server: FakeOpenAI) -> None:
    server.script(Reply({"error": {"message": "tools are not supported"}}, 400))
    with pytest.raises(ModelError, match="tool_mode='text'"):
        await model(server).generate(invoice_request())


async def test_timeout_raises_model_timeout(server: FakeOpenAI) -> None:
    server.script(Reply(completion("late"), delay_s=1.0))
    with pytest.raises(ModelTimeout, match=r"did not answer within 0\.2s"):
        await model(server, timeout_s=0.2).generate(invoice_request())


async def test_empty_choices_is_a_model_error(server: FakeOpenAI) -> None:
    body = completion("x")
    body["choices"] = []
    server.script(body)
    with pytest.raises(ModelError, match="no choices"):
        await model(server).generate(invoice_request())


# ---------------------------------------------------------------------- configuration


def test_missing_key_and_url_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as info:
        OpenAICompatible("gpt-4o-mini")
    assert "OPENAI_BASE_URL" in str(info.value)


async def test_env_base_url_and_resolve_model(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    brain = resolve_model("openai:test-model")
    assert isinstance(brain, OpenAICompatible)
    assert brain.name == "openai:test-model"
    assert "sk-env" not in repr(brain)
    server.script(completion("from env"))
    response = await brain.generate(invoice_request())
    assert response.text == "from env"
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"


def test_import_baton_does_not_import_openai() -> None:
    code = (
        "import baton, baton.models, sys; "
        "print('openai' in sys.modules, 'baton.models.openai_compat' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]


# ---------------------------------------------------------------------- streaming


async def collect(
    brain: OpenAICompatible, request: ModelRequest
) -> tuple[list[str], ModelResponse]:
    """The text deltas of `brain.stream(request)` and its final response (checked last)."""
    items = [item async for item in brain.stream(request)]
    *deltas, final = items
    assert all(isinstance(d, str) and d for d in deltas), items
    assert isinstance(final, ModelResponse), items
    return [str(d) for d in deltas], final


def same_reply(a: ModelResponse, b: ModelResponse) -> None:
    """`a` and `b` carry the same reply (their raw objects differ in shape only)."""
    assert (a.text, a.tool_calls, a.usage, a.text_tool_calls) == (
        b.text,
        b.tool_calls,
        b.usage,
        b.text_tool_calls,
    )


async def test_stream_is_a_streaming_model(server: FakeOpenAI) -> None:
    assert isinstance(model(server), StreamingModel)


async def test_stream_text_reply_arrives_in_several_deltas(server: FakeOpenAI) -> None:
    text = "Your invoice ORD-1 is ISSUED: 299.0 CNY."
    server.script(completion(text, usage=(31, 9)))

    deltas, final = await collect(model(server), invoice_request())

    assert len(deltas) >= 5
    assert "".join(deltas) == text == final.text
    assert final.tool_calls == []
    assert (final.usage.input_tokens, final.usage.output_tokens) == (31, 9)
    (sent,) = server.bodies
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["tools"] == [INVOICE_SPEC.to_openai()]


async def test_stream_assembles_tool_calls_from_fragments(server: FakeOpenAI) -> None:
    raw = '{ "order_id" :"ORD-1", "note": "发票 \\u2014 please" }'
    server.script(completion(calls=[("query_invoice", raw), ("transfer_to_billing", "{}")]))

    deltas, final = await collect(model(server), invoice_request())

    assert deltas == []  # tool-call arguments are never streamed as text
    assert final.text is None
    assert final.tool_calls == [
        ToolCall(id="call_0", name="query_invoice", arguments=raw),
        ToolCall(id="call_1", name="transfer_to_billing", arguments="{}"),
    ]
    assert final.text_tool_calls is False


async def test_stream_interleaved_and_unindexed_tool_call_fragments(server: FakeOpenAI) -> None:
    head = {"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def call(index: int, **fields: Any) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": index, **fields}]})

    server.script(
        Reply(
            SSE(
                [
                    chunk({"role": "assistant", "content": "Checking."}),
                    call(1, id="c_b", type="function", function={"name": "b", "arguments": ""}),
                    call(0, id="c_a", type="function", function={"name": "a", "arguments": '{"x"'}),
                    call(1, function={"arguments": '{"y": 2}'}),
                    call(0, function={"arguments": ": 1}"}),
                    chunk({}, "tool_calls"),
                ]
            )
        ),
        Reply(
            SSE(  # a server that leaves the index out: a new id starts a new call
                [
                    chunk({"tool_calls": [{"id": "c_1", "function": {"name": "a"}}]}),
                    chunk({"tool_calls": [{"function": {"arguments": '{"x": 1}'}}]}),
                    chunk({"tool_calls": [{"id": "c_2", "function": {"name": "b"}}]}),
                    chunk({}, "tool_calls"),
                ]
            )
        ),
    )
    brain = model(server)

    deltas, final = await collect(brain, invoice_request())
    assert deltas == ["Checking."] and final.text == "Checking."
    assert final.tool_calls == [
        ToolCall(id="c_a", name="a", arguments='{"x": 1}'),
        ToolCall(id="c_b", name="b", arguments='{"y": 2}'),
    ]

    _, final = await collect(brain, invoice_request())
    assert final.tool_calls == [
        ToolCall(id="c_1", name="a", arguments='{"x": 1}'),
        ToolCall(id="c_2", name="b", arguments="{}"),
    ]


REPLIES = {
    "text": completion("Your invoice ORD-1 is ISSUED.", usage=(123, 45)),
    "calls": completion(calls=[("query_invoice", '{"order_id": "ORD-1"}')], usage=(50, 10)),
    "text and calls": completion("Let me check.", calls=[("query_invoice", '{"order_id":"1"}')]),
    "no usage": completion("an answer of some length, 中文也行", usage=None),
    "calls, no usage": completion(calls=[("query_invoice", '{"order_id": "ORD-1"}')], usage=None),
    "empty text": completion("", usage=(5, 0)),
}


@pytest.mark.parametrize("tool_mode", ["native", "text"])
@pytest.mark.parametrize("reply", list(REPLIES))
async def test_stream_final_response_equals_generate(
    server: FakeOpenAI, reply: str, tool_mode: ToolMode
) -> None:
    server.script(REPLIES[reply], REPLIES[reply])
    brain = model(server, tool_mode=tool_mode)

    generated = await brain.generate(invoice_request())
    deltas, streamed = await collect(brain, invoice_request())

    same_reply(streamed, generated)
    assert type(streamed.raw) is type(generated.raw)  # a ChatCompletion, assembled
    shown = generated.text
    if tool_mode == "text":  # what the kernel will show once it has parsed the text
        shown = parse_text_mode(generated.text, {"query_invoice"}).text
    assert "".join(deltas) == (shown or "")
    generate_body, stream_body = server.bodies
    assert {k: v for k, v in stream_body.items() if k not in ("stream", "stream_options")} == (
        generate_body
    )


async def test_stream_usage_comes_from_the_last_chunk(server: FakeOpenAI) -> None:
    server.script(completion("done", usage=(123, 45)))
    _, final = await collect(model(server), invoice_request())
    assert (final.usage.input_tokens, final.usage.output_tokens) == (123, 45)


async def test_stream_without_stream_options_support(server: FakeOpenAI) -> None:
    server.reject_stream_options = True
    server.script(completion("a reply of some length"), completion("again"))
    brain = model(server)

    deltas, final = await collect(brain, invoice_request())

    assert "".join(deltas) == "a reply of some length"
    assert final.usage.output_tokens == (len("a reply of some length") + 3) // 4  # estimated
    assert final.usage.input_tokens > 0
    first, retry = server.bodies
    assert "stream_options" in first and "stream_options" not in retry
    _, final = await collect(brain, invoice_request())  # remembered: asked once, without
    assert final.text == "again"
    assert len(server.bodies) == 3 and "stream_options" not in server.bodies[2]


async def test_stream_error_event_mid_stream_is_a_model_error(server: FakeOpenAI) -> None:
    chunks = list(stream_chunks(completion("one two three four"), include_usage=False))
    error = {"error": {"message": "CUDA out of memory", "type": "server_error"}}
    server.script(Reply(SSE([*chunks[:3], error, *chunks[3:]])))
    seen: list[str] = []

    with pytest.raises(ModelError, match="CUDA out of memory") as info:
        async for item in model(server).stream(invoice_request()):
            assert isinstance(item, str)
            seen.append(item)

    assert seen == ["one ", "two "]  # what arrived before the error was streamed
    assert "sent an error instead of its reply" in str(info.value)
    assert "check the server's logs" in str(info.value)


async def test_stream_dropped_connection_is_a_model_error(server: FakeOpenAI) -> None:
    chunks = list(stream_chunks(completion("one two three four"), include_usage=False))
    server.script(Reply(SSE(chunks[:3], complete=False)))
    seen: list[str] = []

    with pytest.raises(ModelError, match="dropped the connection in the middle of its reply"):
        async for item in model(server).stream(invoice_request()):
            seen.append(str(item))

    assert seen == ["one ", "two "]


async def test_stream_stalled_server_is_a_model_timeout(server: FakeOpenAI) -> None:
    chunks = list(stream_chunks(completion("one two"), include_usage=False))
    server.script(Reply(SSE([*chunks[:2], 1.0, *chunks[2:]])))
    with pytest.raises(ModelTimeout, match=r"stopped sending its reply for 0\.2s"):
        async for _ in model(server, timeout_s=0.2).stream(invoice_request()):
            pass


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply({"error": {"message": "Incorrect API key provided"}}, 401), "OPENAI_API_KEY"),
        (Reply({"error": {"message": "tools are not supported"}}, 400), "tool_mode='text'"),
        (Reply({"error": {"message": "CUDA out of memory"}}, 500), "check its logs"),
    ],
)
async def test_stream_http_errors_match_generate(
    server: FakeOpenAI, reply: Reply, message: str
) -> None:
    server.script(reply, reply, reply)
    brain = model(server)
    with pytest.raises(ModelError, match=re.escape(message)) as generated:
        await brain.generate(invoice_request())
    with pytest.raises(ModelError, match=re.escape(message)) as streamed:
        async for _ in brain.stream(invoice_request()):
            pass
    assert str(streamed.value) == str(generated.value)
    # a 400 may be the server refusing `stream_options`: it is asked once more without them
    retried = reply.status == 400
    assert len(server.bodies) == 3 if retried else 2
    assert ("stream_options" in server.bodies[-1]) is not retried


async def test_stream_without_choices_is_a_model_error(server: FakeOpenAI) -> None:
    server.script(Reply(SSE([{"id": "x", "object": "chat.completion.chunk", "choices": []}])))
    with pytest.raises(ModelError, match="no choices"):
        async for _ in model(server).stream(invoice_request()):
            pass


async def test_stream_closed_early_leaves_the_model_usable(server: FakeOpenAI) -> None:
    long = " ".join(f"word{i}" for i in range(200))
    server.script(completion(long), completion("next"))
    brain = model(server)
    stream = brain.stream(invoice_request())
    assert await anext(stream) == "word0 "
    await stream.aclose()
    response = await brain.generate(invoice_request())
    assert response.text == "next"


HANDOFF_JSON = f'{{"tool": "transfer_to_billing", "arguments": {HANDOFF_ARGS}}}'


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (HANDOFF_JSON, ""),
        (f"```json\n{HANDOFF_JSON}\n```", ""),
        (f"Sure, passing you on.\n```json\n{HANDOFF_JSON}\n```", "Sure, passing you on.\n"),
        (f"[{HANDOFF_JSON}]", ""),
        ('{"final": "Your invoice ORD-1 is \\"ISSUED\\".\\n发票已开具 \\ud83d\\ude00"}', None),
        ("A plain answer, no JSON at all.", None),
    ],
)
async def test_text_mode_stream_never_shows_tool_call_json(
    server: FakeOpenAI, raw: str, shown: str | None
) -> None:
    server.script(completion(raw))

    deltas, final = await collect(model(server, tool_mode="text"), invoice_request())

    assert final.text == raw and final.text_tool_calls is True  # the kernel parses it
    names = {"query_invoice", "transfer_to_billing"}
    answer = parse_text_mode(raw, names).text
    assert "".join(deltas) == (answer if shown is None else shown)
    assert not any(s in "".join(deltas) for s in ("{", "transfer_to_billing", "```"))


async def test_text_mode_stream_streams_the_final_answer_as_it_arrives(
    server: FakeOpenAI,
) -> None:
    answer = "Your invoice ORD-1 is ISSUED, amount 299.0 CNY."
    server.script(completion(json.dumps({"final": answer})))
    deltas, _ = await collect(model(server, tool_mode="text"), invoice_request())
    assert "".join(deltas) == answer
    assert len(deltas) >= 5  # decoded word by word, not held to the end


async def test_stream_retries_without_stream_options_only_while_unknown(
    server: FakeOpenAI,
) -> None:
    bad = Reply({"error": {"message": "tools are not supported"}}, 400)
    server.script(completion("fine"), bad)
    brain = model(server)
    _, final = await collect(brain, invoice_request())  # the server took stream_options
    assert final.text == "fine"
    with pytest.raises(ModelError, match="tools are not supported"):
        async for _ in brain.stream(invoice_request()):
            pass
    assert len(server.bodies) == 2  # no second try: this 400 is about something else


# ---------------------------------------------------------------------- nesting


def _deep(levels: int) -> str:
    return '{"order_id": "ORD-1", "extra": ' + "[" * levels + "]" * levels + "}"


@pytest.mark.parametrize("mode", ["native", "text", "object"])
async def test_deeply_nested_tool_arguments_are_re_asked_naming_the_limit(
    server: FakeOpenAI, mode: str
) -> None:
    """As text (native), inside a text-mode reply, or as a JSON object the server decoded
    itself (500 levels: deep enough to refuse, shallow enough for the HTTP client)."""
    if mode == "native":
        first: Any = completion(calls=[("query_invoice", _deep(5_000))])
    elif mode == "text":
        first = completion(f'{{"tool": "query_invoice", "arguments": {_deep(100_000)}}}')
    else:
        placeholder = json.dumps(completion(calls=[("query_invoice", "{}")]))
        first = Reply(placeholder.replace('"{}"', _deep(500)).encode())
    server.script(
        completion(f'{{"tool": "transfer_to_billing", "arguments": {HANDOFF_ARGS}}}')
        if mode == "text"
        else completion(calls=[("transfer_to_billing", HANDOFF_ARGS)]),
        first,
        completion('{"tool": "query_invoice", "arguments": {"order_id": "ORD-1"}}')
        if mode == "text"
        else completion(calls=[("query_invoice", '{"order_id": "ORD-1"}')]),
        completion('{"final": "ISSUED."}' if mode == "text" else "ISSUED."),
    )
    team, lookups = desk(model(server, tool_mode="text" if mode == "text" else "native"))

    result = await team.run("where is the invoice for ORD-1?")

    assert (result.status, result.output, lookups) == ("completed", "ISSUED.", ["ORD-1"])
    nudge = server.bodies[2]["messages"][-1]["content"]  # the re-ask, rendered for the server
    assert "could not be parsed" in nudge and "more than 64 levels deep" in nudge


async def test_a_reply_too_deep_for_the_http_client_is_a_clear_model_error(
    server: FakeOpenAI,
) -> None:
    placeholder = json.dumps(completion(calls=[("query_invoice", "{}")]))
    server.script(Reply(placeholder.replace('"{}"', _deep(5_000)).encode()))
    team, _ = desk(model(server))

    result = await team.run("where is the invoice for ORD-1?")

    assert result.status == "failed"
    assert "nests objects or lists too deeply to read" in (result.error or "")
    assert "RecursionError" not in (result.error or "")
