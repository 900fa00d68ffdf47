"""`/health`, `/ready`, `/metrics`, `/team`, and the dashboard's files at `/` and `/static`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.server.server_kit import OPERATOR, VIEWER, auth, bearer, client_for, desk, served

from baton import Agent, MemoryStore, ScriptedModel, SQLiteStore
from baton.core.errors import StoreError
from baton.server import create_app, ops
from baton.topologies.pipeline import Pipeline


class _DownStore(MemoryStore):
    async def list_sessions(self, limit: int = 100) -> Any:
        raise StoreError("PostgreSQL store: connection refused (is the database up?)")


async def test_ready_says_whether_the_store_answers() -> None:
    async with served() as client:
        ready = await client.get("/ready")
        assert ready.status_code == 200
        assert ready.json() == {"status": "ready", "store": "memory", "detail": None}
    async with served(desk(store=_DownStore())) as client:
        down = await client.get("/ready")
        assert down.status_code == 503
        assert down.json() == {
            "status": "unavailable",
            "store": "memory",
            "detail": "PostgreSQL store: connection refused (is the database up?)",
        }
        assert (await client.get("/health")).json() == {"status": "ok"}
        # the same failure behind any other endpoint is a 503 with its detail
        listed = await client.get("/sessions", headers=bearer(VIEWER))
        assert listed.status_code == 503 and "connection refused" in listed.json()["detail"]


async def test_metrics_count_the_runs_and_the_requests() -> None:
    async with served() as client:
        await client.post("/runs", json={"message": "invoice ORD-1"}, headers=bearer(OPERATOR))
        await client.get("/sessions/nope", headers=bearer(VIEWER))
        reply = await client.get("/metrics", headers=bearer(VIEWER))
    assert reply.status_code == 200
    assert reply.headers["content-type"] == ops.PROMETHEUS_TEXT
    text = reply.text
    assert 'baton_runs_total{status="completed"} 1.0' in text
    assert 'baton_handoffs_total{source="triage",target="billing"} 1.0' in text
    assert (
        'baton_http_requests_total{method="GET",route="/sessions/{session_id}",status="404"} 1.0'
        in text
    )
    assert 'baton_http_requests_total{method="POST",route="/runs",status="200"} 1.0' in text


async def test_the_team_is_described_for_the_hand_off_graph() -> None:
    async with served() as client:
        team = (await client.get("/team", headers=bearer(VIEWER))).json()
    assert team["entry"] == "triage" and team["fallback"] == "human"
    assert team["agents"]["triage"]["handoffs"] == ["billing", "human"]
    assert team["agents"]["billing"]["tools"] == ["query_invoice", "issue_refund"]
    assert team["mermaid"].startswith("flowchart")
    assert team["agents"]["triage"]["conductor_rounds"] is None


async def test_a_conductor_is_described_as_one_with_its_round_budget() -> None:
    pipe = Pipeline([Agent(name="draft"), Agent(name="review")], model=ScriptedModel([]))
    async with served(pipe) as client:
        team = (await client.get("/team", headers=bearer(VIEWER))).json()
    # each of the two stages with its one retry, and the answer
    assert team["agents"]["pipeline"]["conductor_rounds"] == 5
    assert team["agents"]["draft"]["conductor_rounds"] is None


async def test_the_dashboard_is_served_when_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with client_for(create_app(desk())) as client:
        monkeypatch.setattr(ops, "STATIC_DIR", tmp_path / "missing")
        placeholder = await client.get("/")
        assert placeholder.status_code == 200 and "/docs" in placeholder.text
    (tmp_path / "index.html").write_text("<html>dashboard</html>", encoding="utf-8")
    (tmp_path / "app.js").write_text("console.log('hi')", encoding="utf-8")
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "sessions.js").write_text("export const x = 1;", encoding="utf-8")
    monkeypatch.setattr(ops, "STATIC_DIR", tmp_path)
    async with client_for(create_app(desk())) as client:
        page = await client.get("/?session=S1")
        assert page.text == "<html>dashboard</html>"
        assert page.headers["content-type"].startswith("text/html")
        script = await client.get("/static/app.js")
        assert script.status_code == 200 and script.text == "console.log('hi')"
        view = await client.get("/static/views/sessions.js")
        assert view.status_code == 200 and view.text == "export const x = 1;"
        assert "javascript" in view.headers["content-type"]
        assert (await client.get("/static/nope.js")).status_code == 404
        unknown = await client.get("/nowhere")
        assert unknown.json() == {"detail": "no endpoint /nowhere; the API is listed at /docs"}
        wrong_method = await client.delete("/sessions")
        assert (
            wrong_method.status_code == 405
            and "DELETE is not allowed" in wrong_method.json()["detail"]
        )
        bad_query = await client.get("/sessions?limt=5")
        assert bad_query.status_code == 422
        assert bad_query.json()["errors"][0]["loc"] == ["query", "limt"]
        assert "this endpoint takes: limit" in bad_query.json()["detail"]


class _Recorder:
    def __init__(self) -> None:
        self.types: list[str] = []

    def emit(self, event: Any) -> None:
        self.types.append(event.type)


async def test_the_app_serves_a_binding_and_leaves_the_team_as_it_was(tmp_path: Path) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path}/s.db")
    seen = _Recorder()
    team = desk(store=store, sinks=[seen])
    app = create_app(team, auth=auth())
    binding = app.state.baton.team
    assert binding is not team and binding.store is store
    async with app.router.lifespan_context(app), client_for(app) as client:
        body = {"message": "invoice ORD-1", "session_id": "H1"}
        ran = await client.post("/runs", json=body, headers=bearer(OPERATOR))
        assert ran.status_code == 200 and ran.json()["status"] == "completed"
        assert team.sinks == [seen]  # the server's live and metrics sinks are the binding's
    assert "run_finished" in seen.types  # the team's own sinks are served too
    assert team.sinks == [seen]
    assert (await team.session("H1")) is not None  # its store, shared and left open

    closing = create_app(team, auth=auth(), close_team=True)
    async with closing.router.lifespan_context(closing):
        pass
    with pytest.raises(StoreError):  # close_team: the team's store is closed at shutdown
        await store.list_sessions()
