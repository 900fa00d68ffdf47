"""The end user a run serves is bound to the token: a token with `user_id` serves that user
only, `act_for_users` serves any, any other operator token serves none (and may not speak in
an end user's session). The open mode's local operator may act for anyone."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from tests.server.server_kit import (
    GATEWAY,
    OPERATOR,
    TOKENS,
    VIEWER,
    WEB_U1,
    bearer,
    client_for,
    desk,
    parse_sse,
    served,
)

from baton.bus import MemoryBus
from baton.core.errors import ConfigError
from baton.server import AuthConfig, create_app
from baton.worker import Worker

PATHS = ("/runs", "/runs/stream")


async def _owner(client: httpx.AsyncClient, session_id: str) -> Any:
    reply = await client.get(f"/sessions/{session_id}", headers=bearer(VIEWER))
    return reply.json()["session"]["user_id"] if reply.status_code == 200 else "<none>"


async def _result(reply: httpx.Response) -> dict[str, Any]:
    if reply.headers["content-type"].startswith("text/event-stream"):
        name, data = parse_sse(reply.text)[-1]
        assert name == "result"
        out: dict[str, Any] = data
        return out
    out = reply.json()
    return out


async def test_a_token_with_a_user_id_always_serves_that_user() -> None:
    async with served() as client:
        h = bearer(WEB_U1)
        for n, path in enumerate(PATHS):
            sid = f"W{n}"
            body = {"message": "invoice ORD-4", "session_id": sid}
            out = await _result(await client.post(path, json=body, headers=h))
            assert out["status"] == "completed"
            assert await _owner(client, sid) == "u1"  # omitted: the token's user
            same = await client.post(path, json={**body, "user_id": "u1"}, headers=h)
            assert same.status_code == 200
            other = await client.post(
                path, json={**body, "session_id": f"X{n}", "user_id": "u2"}, headers=h
            )
            assert other.status_code == 403, path
            assert "for the end user 'u1' only, not for 'u2'" in other.json()["detail"]
            assert await _owner(client, f"X{n}") == "<none>"  # nothing ran
        me = (await client.get("/me", headers=h)).json()
        assert me["user_id"] == "u1" and me["name"] == "web"


async def test_an_operator_without_a_user_may_not_name_or_speak_for_one() -> None:
    async with served() as client:
        gate, otto = bearer(GATEWAY), bearer(OPERATOR)
        owned = {"message": "invoice ORD-5", "session_id": "U7", "user_id": "u7"}
        assert (await client.post("/runs", json=owned, headers=gate)).status_code == 200
        for path in PATHS:
            named = await client.post(
                path, json={"message": "hi", "user_id": "u7", "session_id": "N1"}, headers=otto
            )
            assert named.status_code == 403, path
            assert "act_for_users" in named.json()["detail"]
            assert await _owner(client, "N1") == "<none>"
            # speaking in an end user's session without naming one speaks as that user
            into = await client.post(
                path, json={"message": "refund ORD-5", "session_id": "U7"}, headers=otto
            )
            assert into.status_code == 403, path
            assert "belongs to an end user" in into.json()["detail"]
        detail = (await client.get("/sessions/U7", headers=bearer(VIEWER))).json()
        assert [m["content"] for m in detail["messages"] if m["role"] == "user"] == [
            "invoice ORD-5"
        ]
        # sessions of no user are its own to run
        free = await client.post(
            "/runs", json={"message": "invoice ORD-6", "session_id": "F1"}, headers=otto
        )
        assert free.status_code == 200 and await _owner(client, "F1") is None
        assert (
            await client.post("/runs", json={"message": "again", "session_id": "F1"}, headers=otto)
        ).status_code == 200


async def test_act_for_users_serves_any_user_but_not_in_another_users_session() -> None:
    async with served() as client:
        gate = bearer(GATEWAY)
        for n, user in enumerate(("u1", "li.wei@example.cn", "tenant:42")):
            out = await client.post(
                "/runs",
                json={"message": "hi", "user_id": user, "session_id": f"G{n}"},
                headers=gate,
            )
            assert out.status_code == 200
            assert await _owner(client, f"G{n}") == user
        stolen = await client.post(
            "/runs", json={"message": "hi", "user_id": "u2", "session_id": "G0"}, headers=gate
        )
        assert stolen.status_code == 403 and "another user" in stolen.json()["detail"]
        # a user-bound token may not continue another user's session either
        web = await client.post(
            "/runs", json={"message": "hi", "session_id": "G1"}, headers=bearer(WEB_U1)
        )
        assert web.status_code == 403 and "belongs to another user" in web.json()["detail"]


async def test_the_local_operator_may_act_for_anyone() -> None:
    async with client_for(create_app(desk())) as client:
        for user in ("u1", "u2"):
            reply = await client.post("/runs", json={"message": "hi", "user_id": user})
            assert reply.status_code == 200
        me = (await client.get("/me")).json()
        assert "act_for_users" in me["roles"] and me["user_id"] is None


async def test_a_queued_turn_carries_the_tokens_user() -> None:
    bus, team = MemoryBus(), desk()
    async with served(team, bus=bus) as client:
        queued = await client.post(
            "/runs",
            json={"message": "invoice ORD-9", "session_id": "Q1", "request_id": "q-1"},
            headers=bearer(WEB_U1),
        )
        assert queued.status_code == 202
        refused = await client.post(
            "/runs", json={"message": "hi", "user_id": "u9"}, headers=bearer(WEB_U1)
        )
        assert refused.status_code == 403
        worker = Worker(team, bus, block_s=0.05)
        serving = asyncio.create_task(worker.run())
        try:
            done = await client.get("/runs/q-1?session_id=Q1&wait_s=10", headers=bearer(VIEWER))
            assert done.json()["status"] == "completed"
        finally:
            worker.stop()
            await serving
        assert await _owner(client, "Q1") == "u1"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"roles": ["operator"], "user_id": "u 1"}, "`user_id` must be 1 to 128"),
        ({"roles": ["operator"], "user_id": "u\u200b1"}, "`user_id` must be 1 to 128"),
        ({"roles": ["operator"], "user_id": 7}, "`user_id` must be 1 to 128"),
        ({"roles": ["operator"], "user_id": ""}, "`user_id` must be 1 to 128"),
        ({"roles": ["viewer"], "user_id": "u1"}, "no operator role"),
        ({"roles": ["operator", "act_for_users"], "user_id": "u1"}, "keep one of the two"),
        ({"roles": ["act_for_users"]}, "act_for_users is a right of operators"),
    ],
)
def test_a_wrong_user_binding_in_the_token_file_is_refused(
    entry: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        AuthConfig.from_mapping({"tokens": {"t" * 20: {"name": "n", **entry}}})


def test_the_token_file_binds_users() -> None:
    config = AuthConfig.from_mapping(TOKENS)
    web = config.authenticate(WEB_U1)
    gate = config.authenticate(GATEWAY)
    assert web is not None and web.user_id == "u1" and not web.acts_for_users()
    assert gate is not None and gate.user_id is None and gate.acts_for_users()
