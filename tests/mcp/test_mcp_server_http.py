"""`baton mcp serve --transport http` with the API server's token file, driven by the `mcp`
SDK's streamable-HTTP client on 127.0.0.1: who may run, read and decide approvals."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_server_kit import free_port, http_session, read_json, start_http, stop, structured, text

from baton.backends import open_store
from baton.core.events import ApprovalDecided

OPERATOR = "op-3f9a1b7c6d5e4f30a2b1"  # an operator bound to the end user u-1
GATEWAY = "gw-8a7b6c5d4e3f2a1b0c9d"  # an operator that runs for any end user
FINANCE = "fi-5e2d7c1b9a8f4e3d2c1b"  # an approver for the role finance
OPS = "ap-1a2b3c4d5e6f7a8b9c0d"  # an approver for the role ops only

TOKENS = {
    "tokens": {
        OPERATOR: {"name": "web", "roles": ["operator"], "user_id": "u-1"},
        GATEWAY: {"name": "gateway", "roles": ["operator", "act_for_users"]},
        FINANCE: {"name": "fiona", "roles": ["approver:finance"]},
        OPS: {"name": "oscar", "roles": ["approver:ops"]},
    }
}

REFUND = "please refund 42.5 for order ORD-1"


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[str, str]]:
    """The MCP endpoint of a server with the token file above, and its store."""
    folder = tmp_path_factory.mktemp("mcp-http")
    tokens = folder / "tokens.json"
    tokens.write_text(json.dumps(TOKENS), encoding="utf-8")
    port = free_port()
    store = f"sqlite:///{folder}/mcp.db"
    proc = start_http(store, port, "--auth", str(tokens))
    try:
        yield f"http://127.0.0.1:{port}/mcp", store
    finally:
        stop(proc)


@pytest.fixture
def url(served) -> str:
    return served[0]


async def test_a_request_without_a_known_token_is_refused(url):
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient() as http:
        for auth in ({}, {"Authorization": "Bearer not-a-token-of-the-file"}):
            answer = await http.post(url, json=init, headers={**headers, **auth})
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"] == "Bearer"
            assert "bearer token" in answer.json()["error"]
    # the SDK's own client cannot even start a session
    with pytest.raises(Exception) as failed:  # an exception group (a backport's on 3.10)
        async with http_session(url):
            pass
    assert failed.group_contains(MCPError, match="error response", depth=2)


async def test_ask_pauses_and_a_finance_approver_approves(served):
    url, store = served
    async with http_session(url, OPERATOR) as web:
        tools = {t.name for t in (await web.list_tools()).tools}
        assert tools == {"ask", "approvals_list", "approve", "reject"}
        paused = structured(await web.call_tool("ask", {"message": REFUND}))
        assert paused["status"] == "awaiting_approval"
        sid, card = paused["session_id"], paused["approval"]
        assert card["required_roles"] == ["finance"]

        # an operator is no approver
        listed = await web.call_tool("approvals_list", {})
        assert listed.is_error
        assert "has no approver role" in text(listed)
        approved = await web.call_tool("approve", {"approval_id": card["id"]})
        assert approved.is_error
        assert "has no approver role" in text(approved)

    async with http_session(url, OPS) as oscar:
        mine = structured(await oscar.call_tool("approvals_list", {}))
        assert card["id"] not in json.dumps(mine)  # not a card ops may decide
        refused = await oscar.call_tool("approve", {"approval_id": card["id"]})
        assert refused.is_error
        assert "needs an approver for one of the roles finance" in text(refused)
        asked = await oscar.call_tool("ask", {"message": "hello"})
        assert asked.is_error
        assert "needs the role operator" in text(asked)

    async with http_session(url, FINANCE) as fiona:
        waiting = structured(await fiona.call_tool("approvals_list", {}))["result"]
        assert [c["id"] for c in waiting if c["session_id"] == sid] == [card["id"]]
        done = structured(await fiona.call_tool("approve", {"approval_id": card["id"]}))
        assert done["status"] == "completed"
        assert done["session_id"] == sid
        assert done["output"] == "Refunded 42.5 for ORD-1."
        again = await fiona.call_tool("approve", {"approval_id": card["id"]})
        assert again.is_error
        assert "was decided meanwhile" in text(again)

    async with http_session(url, OPERATOR) as web:
        session = await read_json(web, f"baton://sessions/{sid}")
        assert session["status"] == "idle"
        assert session["user_id"] == "u-1"
        assert session["messages"][-1]["content"] == "Refunded 42.5 for ORD-1."
        trace = await read_json(web, f"baton://traces/{sid}")
        assert [run["status"] for run in trace["runs"]] == ["completed"]
        steps = [st["detail"] for turn in trace["runs"][0]["turns"] for st in turn["steps"]]
        assert "refund ok" in steps

    # the decision is recorded as the token's user, in the card's role, authenticated
    opened = open_store(store)
    try:
        events = await opened.get_events(session_id=sid)
    finally:
        await opened.close()
    decided = [e for e in events if isinstance(e, ApprovalDecided)]
    assert [(e.decision, e.by, e.role, e.authenticated) for e in decided] == [
        ("approved", "fiona", "finance", True)
    ]


async def test_a_rejected_refund_is_not_made(url):
    async with http_session(url, GATEWAY) as gateway:
        paused = structured(await gateway.call_tool("ask", {"message": REFUND, "user_id": "u-9"}))
        assert paused["status"] == "awaiting_approval"
    async with http_session(url, FINANCE) as fiona:
        done = structured(
            await fiona.call_tool(
                "reject", {"approval_id": paused["approval"]["id"], "reason": "no receipt"}
            )
        )
        assert done["status"] == "completed"
        assert done["output"].startswith("The refund was not made")
        assert "no receipt" in done["output"]


async def test_sessions_of_another_end_user_stay_closed(url):
    async with http_session(url, GATEWAY) as gateway:
        theirs = structured(
            await gateway.call_tool("ask", {"message": "where is ORD-5", "user_id": "u-2"})
        )
        sid = theirs["session_id"]
    async with http_session(url, OPERATOR) as web:
        mine = structured(await web.call_tool("ask", {"message": "where is ORD-6"}))
        assert mine["status"] == "completed"
        # the token serves u-1 only: not u-2's session, not another user id
        other = await web.call_tool("ask", {"message": "where is ORD-5", "session_id": sid})
        assert other.is_error
        assert "belongs to another user" in text(other)
        named = await web.call_tool("ask", {"message": "hello", "user_id": "u-2"})
        assert named.is_error
        assert "runs for the end user 'u-1' only" in text(named)
        listed = await read_json(web, "baton://sessions")
        assert sid not in {s["session_id"] for s in listed}
        assert mine["session_id"] in {s["session_id"] for s in listed}
        assert {s["user_id"] for s in listed} == {"u-1"}
        with pytest.raises(MCPError, match=f"no session '{sid}'"):
            await web.read_resource(f"baton://sessions/{sid}")
        with pytest.raises(MCPError, match=f"no session '{sid}'"):
            await web.read_resource(f"baton://traces/{sid}")
    async with http_session(url, GATEWAY) as gateway:
        # the gateway runs for any user and reads every session
        listed = await read_json(gateway, "baton://sessions")
        assert {sid, mine["session_id"]} <= {s["session_id"] for s in listed}
