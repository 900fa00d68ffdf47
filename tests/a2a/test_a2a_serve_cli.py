"""`baton a2a serve`'s refusals before it serves, and the card URL it publishes."""

from __future__ import annotations

import sys

import pytest
from a2a_kit import HERE, TEAM
from typer.testing import CliRunner

from baton.cli.a2a_serve import card_url
from baton.cli.app import app
from baton.cli.common import CLIError

ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


@pytest.fixture
def in_tests(monkeypatch: pytest.MonkeyPatch, tmp_path) -> str:
    """Run from this folder (the team's module is here); the store in a temporary folder."""
    monkeypatch.chdir(HERE)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI puts the folder on the path
    return f"sqlite:///{tmp_path}/b.db"


def test_refusals_name_what_to_do(in_tests, tmp_path):
    runner = CliRunner(env=ENV)
    wide_open = runner.invoke(app, ["a2a", "serve", TEAM, "--host", "0.0.0.0"])
    assert wide_open.exit_code == 2
    assert "refusing to serve on 0.0.0.0 without --auth" in wide_open.output

    missing = runner.invoke(app, ["a2a", "serve", "no_such_module:team", "--store", in_tests])
    assert missing.exit_code == 2
    assert "cannot import module 'no_such_module'" in missing.output

    not_a_team = runner.invoke(app, ["a2a", "serve", "a2a_server_team:desk"])
    assert not_a_team.exit_code == 2
    assert "not a baton Team" in not_a_team.output

    bad_tokens = tmp_path / "bad.json"
    bad_tokens.write_text('{"tokens": {"short": {"name": "a", "roles": ["viewer"]}}}')
    refused = runner.invoke(app, ["a2a", "serve", TEAM, "--auth", str(bad_tokens)])
    assert refused.exit_code == 2
    assert "short" in refused.output or "token" in refused.output

    bad_url = runner.invoke(app, ["a2a", "serve", TEAM, "--public-url", "desk.example.com"])
    assert bad_url.exit_code == 2
    assert "--public-url must be an http:// or https:// URL" in bad_url.output


def test_the_card_url_is_where_clients_reach_the_server():
    assert card_url("127.0.0.1", 8780, None) == "http://127.0.0.1:8780/"
    assert card_url("0.0.0.0", 9000, None) == "http://127.0.0.1:9000/"
    assert card_url("::1", 9000, None) == "http://[::1]:9000/"
    assert card_url("0.0.0.0", 9000, "https://desk.example.com/a2a") == (
        "https://desk.example.com/a2a/"
    )
    with pytest.raises(CLIError, match="--public-url"):
        card_url("127.0.0.1", 1, "ftp://x")
