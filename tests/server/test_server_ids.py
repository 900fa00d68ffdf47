"""Ids are checked where they enter the server: a path, a query or a body field that is no
id of its kind is a clear 422, and nothing runs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.server.server_kit import client_for, desk

from baton.server import create_app
from baton.server.ids import SESSION_ID, USER_ID

NOT_IDS = [
    "victim/trace",
    "victim%2Ftrace",
    "a b",
    "line\nbreak",
    "trailing\n",
    "zero\u200bwidth",
    "rtl\u202eeman",
    "会话1",
    "x" * 129,
    "",
]


@pytest.fixture
def app() -> Any:
    return create_app(desk())


async def test_a_session_id_in_the_path_that_is_no_id_is_422(app: Any) -> None:
    async with client_for(app) as client:
        await client.post("/runs", json={"message": "invoice ORD-1", "session_id": "victim"})
        for bad in ("victim%2Ftrace", "victim%20x", "x" * 129, "%E4%BC%9A%E8%AF%9D", "a%0Ab"):
            for tail in ("", "/trace", "/events?follow=false"):
                reply = await client.get(f"/sessions/{bad}{tail}")
                assert reply.status_code == 422, (bad, tail)
                problem = reply.json()["errors"][0]
                if "%2F" in bad:  # refused before routing: the router would split it
                    assert problem["loc"] == ["path"] and "encoded slash" in problem["msg"]
                else:
                    assert problem["loc"] == ["path", "session_id"]
                    assert "pattern" in problem["msg"]
        # the encoded slash is not the session `victim` followed by /trace
        assert (await client.get("/sessions/victim%2Ftrace")).status_code == 422
        assert (await client.get("/sessions/victim/trace")).status_code == 200
        for ok in ("victim", "s_0123abcd", "tenant:42.a-b_c", "x" * 128):
            reply = await client.get(f"/sessions/{ok}")
            assert reply.status_code in (200, 404), ok


@pytest.mark.parametrize("bad", NOT_IDS)
async def test_ids_in_a_body_that_are_no_ids_are_422_and_nothing_runs(app: Any, bad: str) -> None:
    async with client_for(app) as client:
        for field in ("session_id", "request_id", "user_id"):
            reply = await client.post("/runs", json={"message": "invoice ORD-1", field: bad})
            assert reply.status_code == 422, (field, bad)
            assert reply.json()["errors"][0]["loc"] == ["body", field]
            stream = await client.post(
                "/runs/stream", json={"message": "invoice ORD-1", field: bad}
            )
            assert stream.status_code == 422, (field, bad)
        for path in ("/approvals/a1/approve", "/approvals/a1/reject"):
            reply = await client.post(path, json={"session_id": bad})
            assert reply.status_code == 422, (path, bad)
        reply = await client.post("/interrupts/i1/answer", json={"value": 1, "session_id": bad})
        assert reply.status_code == 422
    assert await app.state.baton.team.store.list_sessions() == []


async def test_card_and_request_ids_in_the_path_are_checked(app: Any) -> None:
    async with client_for(app) as client:
        for path in (
            "/approvals/a%2Fb/approve",
            "/approvals/a%20b/reject",
            "/interrupts/%E2%80%8B/answer",
        ):
            reply = await client.post(path, json={"value": 1} if "interrupts" in path else None)
            assert reply.status_code == 422, path
        assert (await client.get("/runs/req%2F1")).status_code == 422
        assert (await client.get(f"/runs/{'r' * 129}")).status_code == 422
        assert (await client.get("/runs/req_1?session_id=s1")).status_code == 404  # no bus


async def test_user_ids_may_be_e_mail_addresses(app: Any) -> None:
    async with client_for(app) as client:
        reply = await client.post(
            "/runs", json={"message": "invoice ORD-3", "user_id": "li.wei+desk@example.cn"}
        )
        assert reply.status_code == 200
        (listed,) = (await client.get("/sessions")).json()
        assert listed["user_id"] == "li.wei+desk@example.cn"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=140))
def test_an_id_is_exactly_the_documented_alphabet(value: str) -> None:
    """The id patterns mean what the docs say (pydantic's regex engine, as the server uses)."""
    from typing import Annotated

    from pydantic import TypeAdapter, ValidationError
    from pydantic.types import StringConstraints

    for pattern, extra in ((SESSION_ID, "._:-"), (USER_ID, "._:@+-")):
        allowed = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789" + extra)
        expected = 1 <= len(value) <= 128 and set(value) <= allowed
        adapter = TypeAdapter(Annotated[str, StringConstraints(pattern=pattern)])
        try:
            adapter.validate_python(value)
            valid = True
        except ValidationError:
            valid = False
        assert valid == expected, (pattern, value)
