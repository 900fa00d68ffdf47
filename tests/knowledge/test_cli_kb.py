"""`baton kb ingest | search | stats | remove` through the real command line app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.knowledge.test_kb import corpus
from typer.testing import CliRunner

from baton.cli.app import app

ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def test_kb_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    corpus(tmp_path)
    (tmp_path / "docs" / "empty.md").write_bytes(b"")
    runner = CliRunner(env=ENV)

    done = runner.invoke(app, ["kb", "ingest", "docs", "--kb", "policies", "--no-progress"])
    assert done.exit_code == 0, done.output
    assert "5 added" in done.output and "1 skipped" in done.output
    assert "docs/empty.md is empty" in done.output
    assert (tmp_path / ".baton/kb/policies/manifest.sqlite3").is_file()

    found = runner.invoke(app, ["kb", "search", "policies", "ORD-202607-99", "-k", "2"])
    assert found.exit_code == 0, found.output
    first = found.output.split("\n2. ")[0]
    assert "1. docs/refunds.md > Refund policy > Manual refunds" in first
    assert "ORD-202607-99 was refunded by hand" in first

    as_json = runner.invoke(
        app, ["kb", "search", "policies", "礼品卡", "--mode", "lexical", "--json", "-k", "1"]
    )
    assert as_json.exit_code == 0, as_json.output
    hit = json.loads(as_json.output.splitlines()[0])
    assert hit["source"] == "docs/zh.md" and hit["heading"] == ["退款政策"]

    again = runner.invoke(app, ["kb", "ingest", "docs", "--kb", "policies"])  # with progress
    assert again.exit_code == 0 and "5 unchanged" in again.output, again.output

    stats = runner.invoke(app, ["kb", "stats", "policies"])
    assert json.loads(stats.output)["files"] == 5

    gone = runner.invoke(app, ["kb", "remove", "policies", "docs/zh.md"])
    assert gone.exit_code == 0 and "chunks of docs/zh.md removed" in gone.output

    missing = runner.invoke(app, ["kb", "search", "nope", "refund"])
    assert missing.exit_code == 1
    assert "no knowledge base 'nope'" in missing.output and "Traceback" not in missing.output

    bad_mode = runner.invoke(app, ["kb", "search", "policies", "x", "--mode", "fuzzy"])
    assert bad_mode.exit_code == 1 and "unknown search mode" in bad_mode.output


def test_ingesting_only_a_refused_file_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scan.md").write_bytes(b"\x00\x01binary")
    done = CliRunner(env=ENV).invoke(app, ["kb", "ingest", "scan.md", "--kb", "x", "--no-progress"])
    assert done.exit_code == 1 and "scan.md is not text" in done.output
    missing = CliRunner(env=ENV).invoke(app, ["kb", "ingest", "nothere", "--kb", "x"])
    assert missing.exit_code == 1 and "nothere does not exist" in missing.output
