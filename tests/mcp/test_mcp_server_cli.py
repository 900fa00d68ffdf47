"""`baton mcp serve`'s refusals before it serves, and the open HTTP mode on loopback."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mcp_server_kit import (
    HERE,
    TEAM,
    free_port,
    http_session,
    server_env,
    start_http,
    stop,
    structured,
)
from typer.testing import CliRunner

from baton.cli.app import app

ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


@pytest.fixture
def in_tests(monkeypatch: pytest.MonkeyPatch, tmp_path) -> str:
    """Run from this folder (the team's module is here); the store in a temporary folder."""
    monkeypatch.chdir(HERE)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI puts the folder on the path
    return f"sqlite:///{tmp_path}/b.db"


def test_refusals_name_what_to_do(in_tests, tmp_path):
    runner = CliRunner(env=ENV)
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"tokens": {"t-0123456789abcdef": {"name": "a", "roles": ["viewer"]}}}')

    stdio_auth = runner.invoke(app, ["mcp", "serve", TEAM, "--auth", str(tokens)])
    assert stdio_auth.exit_code == 2
    assert "--auth applies to --transport http" in stdio_auth.output

    wide_open = runner.invoke(
        app, ["mcp", "serve", TEAM, "--transport", "http", "--host", "0.0.0.0"]
    )
    assert wide_open.exit_code == 2
    assert "refusing to serve on 0.0.0.0 without --auth" in wide_open.output

    missing = runner.invoke(app, ["mcp", "serve", "no_such_module:team", "--store", in_tests])
    assert missing.exit_code == 2
    assert "cannot import module 'no_such_module'" in missing.output

    not_a_team = runner.invoke(app, ["mcp", "serve", "mcp_server_team:refunds"])
    assert not_a_team.exit_code == 2
    assert "not a baton Team" in not_a_team.output

    bad_tokens = tmp_path / "bad.json"
    bad_tokens.write_text('{"tokens": {"short": {"name": "a", "roles": ["viewer"]}}}')
    refused = runner.invoke(
        app, ["mcp", "serve", TEAM, "--transport", "http", "--auth", str(bad_tokens)]
    )
    assert refused.exit_code == 2
    assert "at least 16 characters" in refused.output


async def test_open_http_on_loopback_runs_but_decides_no_approval(tmp_path):
    port = free_port()
    proc = start_http(f"sqlite:///{tmp_path}/open.db", port)
    try:
        async with http_session(f"http://127.0.0.1:{port}/mcp") as mcp:
            assert {t.name for t in (await mcp.list_tools()).tools} == {"ask"}
            paused = structured(
                await mcp.call_tool("ask", {"message": "please refund 9 for order ORD-2"})
            )
            assert paused["status"] == "awaiting_approval"
    finally:
        stop(proc)


def test_importing_baton_and_its_cli_imports_no_mcp_sdk():
    code = (
        "import sys, baton, baton.cli.app; "
        "loaded = sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')); "
        "print(loaded); assert not loaded"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=server_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
