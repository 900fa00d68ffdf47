"""deploy/compose.yaml parses, starts the whole topology, and every command in it is one the
CLI accepts as written (options, team, bus and store URLs)."""

from __future__ import annotations

from pathlib import Path

import typer.main
import yaml

from baton.backends import open_store
from baton.bus import open_bus
from baton.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "deploy" / "compose.yaml"


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def test_the_compose_file_starts_redis_postgres_and_workers() -> None:
    spec = compose()
    services = spec["services"]
    assert {"redis", "postgres", "worker", "submit"} <= set(services)
    assert "--appendonly" in services["redis"]["command"]  # queued turns survive a restart
    worker = services["worker"]
    assert worker["deploy"]["replicas"] >= 2
    assert set(worker["depends_on"]) == {"redis", "postgres"}
    assert all(d["condition"] == "service_healthy" for d in worker["depends_on"].values())
    build = worker["build"]
    assert (COMPOSE.parent / build["context"] / build["dockerfile"]).is_file()
    assert set(spec["volumes"]) == {"redis-data", "postgres-data"}


def test_every_command_in_the_compose_file_is_accepted_by_the_cli() -> None:
    services = compose()["services"]
    cli = typer.main.get_command(app)
    assert hasattr(cli, "commands")  # a command group
    worker_args = services["worker"]["command"]
    command = cli.commands[worker_args[0]]
    ctx = command.make_context(worker_args[0], list(worker_args[1:]))
    assert ctx.params["target"] == "examples.customer_service:team"
    assert ctx.params["concurrency"] == 64
    # the URLs are ones Baton opens (nothing connects until first use)
    assert type(open_bus(ctx.params["bus"])).__name__ == "RedisStreamsBus"
    assert type(open_store(ctx.params["store"])).__name__ == "PostgresStore"
    entry = services["submit"]["entrypoint"]
    assert entry[:2] == ["baton", "submit"]
    submit = cli.commands["submit"].make_context(
        "submit", [*entry[2:], "hello", "--session", "s1", "--wait", "5"]
    )
    assert submit.params["bus"] == ctx.params["bus"]
    assert (ROOT / "examples" / "customer_service.py").is_file()
