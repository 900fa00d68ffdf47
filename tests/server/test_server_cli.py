"""`baton serve`: refuses an open server on a public address, reads the token file, and serves
the desk over a real socket (events streamed as they happen, the SQLite store)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest
from tests.server.server_kit import parse_sse
from typer.testing import CliRunner

from baton.cli.app import app
from baton.cli.serve import is_loopback

ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
"""These sources (before any installed copy), and the examples."""


def test_loopback_hosts_are_recognised() -> None:
    for host in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.1", "example.com", "192.168.1.2"):
        assert not is_loopback(host), host


def test_an_open_server_on_a_public_address_is_refused() -> None:
    result = CliRunner().invoke(
        app, ["serve", "examples.customer_service:team", "--host", "0.0.0.0"]
    )
    assert result.exit_code == 2
    assert "refusing to serve on 0.0.0.0 without --auth" in result.output
    assert "--auth tokens.yaml" in result.output


def test_a_wrong_token_file_stops_the_server_naming_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "tokens.json"
    bad.write_text(json.dumps({"tokens": {"short": {"name": "a", "roles": ["viewer"]}}}))
    result = CliRunner().invoke(
        app, ["serve", "examples.customer_service:team", "--host", "0.0.0.0", "--auth", str(bad)]
    )
    assert result.exit_code == 2
    assert "at least 16 characters" in result.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def server(tmp_path: Path) -> object:
    port = _free_port()
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        'tokens:\n  "op-token-0123456789abcdef": {name: otto, roles: [operator]}\n',
        encoding="utf-8",
    )
    env = {**os.environ, "BATON_MODEL": "scripted", "PYTHONPATH": PYTHONPATH}
    cmd = [
        sys.executable,
        "-m",
        "baton",
        "serve",
        "examples.customer_service:team",
        "--store",
        f"sqlite:///{tmp_path / 'baton.db'}",
        "--port",
        str(port),
        "--auth",
        str(tokens),
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.stdout.read() if proc.stdout else ""
                pytest.fail(f"baton serve did not start:\n{out}")
            time.sleep(0.1)
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_desk_is_served_over_http(server: str) -> None:
    headers = {"Authorization": "Bearer op-token-0123456789abcdef"}
    with httpx.Client(base_url=server, headers=headers, timeout=30) as client:
        assert client.get("/ready").json() == {"status": "ready", "store": "sqlite", "detail": None}
        names: list[str] = []
        body = {"message": "please check the invoice for order ORD-202607-99", "session_id": "W1"}
        with client.stream("POST", "/runs/stream", json=body) as reply:
            assert reply.status_code == 200
            text = ""
            for chunk in reply.iter_text():
                text += chunk
        messages = parse_sse(text)
        names = [n for n, _ in messages]
        assert names[0] == "run_started" and names[-1] == "result"
        assert "text_delta" in names
        result = messages[-1][1]
        assert result["path"] == ["triage", "billing"] and result["status"] == "completed"
        (listed,) = client.get("/sessions").json()
        assert listed["session_id"] == "W1" and listed["holder"] == "billing"
        trace = client.get("/sessions/W1/trace").json()
        assert trace["runs"][0]["path"] == ["triage", "billing"]
        assert client.get("/sessions").status_code == 200
        assert client.get("/sessions", headers={"Authorization": "Bearer nope"}).status_code == 401
        metrics = client.get("/metrics").text
        assert 'baton_runs_total{status="completed"} 1.0' in metrics
        assert (
            'baton_http_requests_total{method="POST",route="/runs/stream",status="200"}' in metrics
        )


def test_the_body_limit_option_is_checked() -> None:
    result = CliRunner().invoke(
        app, ["serve", "examples.customer_service:team", "--max-body-bytes", "0"]
    )
    assert result.exit_code == 2
    assert "--max-body-bytes" in result.output


@pytest.fixture
def open_server(tmp_path: Path) -> object:
    """`baton serve` without --auth on a free port: its URL and the local token it printed."""
    port = _free_port()
    env = {**os.environ, "BATON_MODEL": "scripted", "PYTHONPATH": PYTHONPATH}
    cmd = [
        sys.executable,
        "-m",
        "baton",
        "serve",
        "examples.customer_service:team",
        "--store",
        f"sqlite:///{tmp_path / 'baton.db'}",
        "--port",
        str(port),
        "--max-body-bytes",
        "4096",
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    printed: list[str] = []
    try:
        for line in proc.stdout:
            printed.append(line)
            if line.startswith("local token"):
                break
        else:
            pytest.fail(f"baton serve printed no local token:\n{''.join(printed)}")
        token = printed[-1].rsplit(": ", 1)[1].strip()
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"baton serve did not start:\n{''.join(printed)}")
            time.sleep(0.1)
        yield base, token, "".join(printed)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_open_mode_serves_its_own_address_and_the_printed_token_only(
    open_server: tuple[str, str, str],
) -> None:
    base, token, printed = open_server
    assert "X-Baton-Local-Token" in printed and len(token) >= 32
    port = base.rsplit(":", 1)[1]
    with httpx.Client(base_url=base, timeout=30) as client:
        rebound = client.get("/sessions", headers={"Host": f"rebind.example:{port}"})
        assert rebound.status_code == 421
        assert f"127.0.0.1:{port}" in rebound.json()["detail"]
        body = {"message": "please check the invoice for order ORD-202607-99"}
        assert client.post("/runs", json=body).status_code == 403
        cross = client.post("/runs", json=body, headers={"Origin": "http://127.0.0.1:1"})
        assert cross.status_code == 403
        assert client.get("/sessions").json() == []
        ran = client.post("/runs", json=body, headers={"X-Baton-Local-Token": token})
        assert ran.status_code == 200 and ran.json()["status"] == "completed"
        same = client.post("/runs", json=body, headers={"Origin": base})
        assert same.status_code == 200
        big = client.post(
            "/runs", json={"message": "x" * 5000}, headers={"X-Baton-Local-Token": token}
        )
        assert big.status_code == 413 and "4096 bytes" in big.json()["detail"]
        page = client.get("/")
        assert f'content="{token}"' in page.text


def test_an_openai_client_talks_to_baton_serve_with_the_printed_token_as_its_key(
    open_server: tuple[str, str, str],
) -> None:
    base, token, _ = open_server
    with openai.OpenAI(base_url=f"{base}/v1", api_key=token, max_retries=0) as client:
        assert [m.id for m in client.models.list().data] == ["baton"]
        ask = [{"role": "user", "content": "please check the invoice for order ORD-202607-99"}]
        done = client.chat.completions.create(model="baton", messages=ask)
        pieces = [
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(
                model="baton",
                messages=ask,
                stream=True,
            )
            if c.choices
        ]
    stranger = openai.OpenAI(base_url=f"{base}/v1", api_key="not-the-token", max_retries=0)
    with stranger, pytest.raises(openai.PermissionDeniedError):
        stranger.chat.completions.create(model="baton", messages=ask)
    run = (done.model_extra or {})["baton"]
    assert run["status"] == "completed" and run["path"] == ["triage", "billing"]
    assert "ORD-202607-99" in (done.choices[0].message.content or "")
    assert "".join(pieces) == done.choices[0].message.content


def test_the_model_id_option_is_checked() -> None:
    result = CliRunner().invoke(
        app, ["serve", "examples.customer_service:team", "--model-id", "my model"]
    )
    assert result.exit_code != 0
    assert "model_id must be 1 to 128 of the characters" in result.output
