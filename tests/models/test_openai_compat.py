"""`OpenAICompatible` against a real HTTP server on 127.0.0.1 speaking the OpenAI API."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from baton import Agent, Team, tool
from baton.core.errors import ConfigError, ModelError, ModelTimeout
from baton.core.messages import Message, ToolCall, ToolSpec
from baton.models import ModelRequest, OpenAICompatible, resolve_model
from baton.models.parsing import parse_text_mode
from baton.models.textmode import render_text_mode

# ---------------------------------------------------------------------- the fake server


@dataclass
class Reply:
    """One scripted HTTP answer."""

    body: Any
    status: int = 200
    delay_s: float = 0.0


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
            reply = server.next_reply()
            if reply.delay_s:
                time.sleep(reply.delay_s)
            self._send(reply.status, reply.body)

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
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


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A fake OpenAI server on an ephemeral port; the real env never leaks into the tests."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ADMIN_KEY", "OPENAI_CUSTOM_HEADERS"):
        monkeypatch.delenv(var, raising=False)
    fake = FakeOpenAI()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
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


async def test_usage_is_estimated_when_the_server_omits_it(server: FakeOpenAI) -> None:
    server.script(completion("a reply of some length", usage=None))
    response = await model(server).generate(invoice_request())
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens == (len("a reply of some length") + 3) // 4


async def test_options_are_sent(server: FakeOpenAI) -> None:
    server.script(completion("{}"))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    brain = model(server, temperature=0.7, max_tokens=64, extra_body={"top_k": 5})
    await brain.generate(invoice_request(response_format=schema))
    body = server.bodies[0]
    assert body["temperature"] == 0.7
    assert body["max_tokens"] == 64
    assert body["top_k"] == 5
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema},
    }


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


@pytest.mark.parametrize(
    "raw", ['{"order_id": "ORD-1",}', '{"order_id": "ORD-1"', "```json\n{'order_id': 'ORD-1'}\n```"]
)
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


async def test_http_500_fails_the_run_with_a_helpful_error(server: FakeOpenAI) -> None:
    server.script(Reply({"error": {"message": "CUDA out of memory", "type": "server"}}, 500))
    team, lookups = desk(model(server))

    result = await team.run("invoice ORD-1")

    assert result.status == "failed"
    assert result.error is not None
    assert "HTTP 500" in result.error
    assert "CUDA out of memory" in result.error
    assert "check its logs" in result.error
    assert lookups == []


async def test_closed_port_fails_the_run_with_a_helpful_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    brain = OpenAICompatible("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    team, _ = desk(brain)

    result = await team.run("invoice ORD-1")

    assert result.status == "failed"
    assert result.error is not None
    assert f"127.0.0.1:{port}" in result.error
    assert "OPENAI_BASE_URL" in result.error
    assert "server is up" in result.error


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
