"""The open mode keeps web pages of other sites out: a `Host` that is not the server's own is
421 (DNS rebinding), a state-changing request without the dashboard's `Origin` or the local
token is 403 and changes nothing. With a token file, any Host and no Origin are fine."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.server.server_kit import (
    OPERATOR,
    REFUNDED,
    bearer,
    client_for,
    desk,
    local_headers,
    served,
)

from baton.core.errors import ConfigError
from baton.server import create_app
from baton.server.guard import LOCAL_TOKEN_HEADER
from baton.server.hosts import LocalAddress, same_origin, split_host
from baton.server.ops import LOCAL_TOKEN_META

PORT = 8000
ORIGIN = f"http://127.0.0.1:{PORT}"


def _bound(**kw: Any) -> Any:
    return create_app(desk(), host="127.0.0.1", port=PORT, **kw)


async def _paused(client: httpx.AsyncClient, app: Any) -> dict[str, Any]:
    reply = await client.post(
        "/runs", json={"message": "refund ORD-77"}, headers=local_headers(app)
    )
    out: dict[str, Any] = reply.json()
    assert out["status"] == "awaiting_approval"
    return out


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:8000",  # a rebinding page keeps its own name
        "evil.example",
        "127.0.0.1:8001",  # another port
        "127.0.0.1",  # port 80
        "localhost.evil.example:8000",
        "127.0.0.1.nip.io:8000",
        "[::1]:8000",  # bound to 127.0.0.1: not an address of this server
        "127.0.0.1:8000:1",
        "localhost:08000x",
        "",
    ],
)
async def test_a_host_that_is_not_the_servers_is_421_for_every_request(host: str) -> None:
    app = _bound()
    async with client_for(app, local_token=False) as client:
        for method, path in (("GET", "/sessions"), ("GET", "/"), ("POST", "/runs")):
            reply = await client.request(
                method,
                path,
                headers={"Host": host, "Origin": f"http://{host}"},
                json={"message": "hi"} if method == "POST" else None,
            )
            assert reply.status_code == 421, (host, method, path)
            detail = reply.json()["detail"]
            assert "127.0.0.1:8000" in detail and "localhost:8000" in detail
            assert "DNS" in detail
    assert await app.state.baton.team.store.list_sessions() == []


async def test_the_servers_own_addresses_are_served() -> None:
    app = _bound()
    async with client_for(app, local_token=False) as client:
        for host in ("127.0.0.1:8000", "localhost:8000", "LOCALHOST:8000"):
            assert (await client.get("/me", headers={"Host": host})).status_code == 200, host
    v6 = create_app(desk(), host="::1", port=9000)
    async with client_for(v6, local_token=False) as client:
        assert (await client.get("/me", headers={"Host": "[::1]:9000"})).status_code == 200
        assert (await client.get("/me", headers={"Host": "127.0.0.1:9000"})).status_code == 421
    named = create_app(desk(), host="localhost", port=80)
    async with client_for(named, local_token=False) as client:
        for host in ("localhost", "localhost:80", "127.0.0.1", "[::1]"):
            assert (await client.get("/me", headers={"Host": host})).status_code == 200, host
    anywhere = create_app(desk())  # not told where it listens: any loopback name, any port
    async with client_for(anywhere, local_token=False) as client:
        for host in ("127.0.0.1:1234", "localhost", "[::1]:5"):
            assert (await client.get("/me", headers={"Host": host})).status_code == 200, host
        assert (await client.get("/me", headers={"Host": "evil.example"})).status_code == 421


async def test_a_post_of_another_site_is_403_and_changes_nothing() -> None:
    REFUNDED.clear()
    app = _bound()
    async with client_for(app, local_token=False) as client:
        paused = await _paused(client, app)
        card = paused["approval"]
        bad_origins: list[dict[str, str]] = [
            {},  # no Origin at all (a script without the token)
            {"Origin": "http://127.0.0.1:9999"},  # another port is another site
            {"Origin": "http://evil.example"},
            {"Origin": "null"},  # a sandboxed frame, a file:// page
            {"Origin": "https://127.0.0.1:8000"},  # another scheme
            {"Origin": "http://127.0.0.1:8000/path"},
            {"Origin": "http://user@127.0.0.1:8000"},
            {"Origin": "http://evil.example", LOCAL_TOKEN_HEADER: "guess"},  # a wrong token
            {LOCAL_TOKEN_HEADER: ""},
        ]
        steps = [
            (f"/approvals/{card['id']}/approve", None),
            (f"/approvals/{card['id']}/reject", {"reason": "x"}),
            ("/runs", {"message": "invoice ORD-1"}),
            ("/runs/stream", {"message": "invoice ORD-1"}),
            ("/tickets/1/claim", None),
            ("/interrupts/i1/answer", {"value": 1}),
        ]
        for headers in bad_origins:
            for path, body in steps:
                reply = await client.post(path, json=body, headers=headers)
                assert reply.status_code == 403, (headers, path)
                detail = reply.json()["detail"]
                assert LOCAL_TOKEN_HEADER in detail and "another site" in detail
            for method in ("PUT", "PATCH", "DELETE"):
                reply = await client.request(method, "/runs", headers=headers)
                assert reply.status_code == 403, (headers, method)
        # nothing changed: the card still waits, nothing was refunded, no session was added
        assert [c["id"] for c in (await client.get("/approvals")).json()] == [card["id"]]
        assert REFUNDED == []
        sessions = (await client.get("/sessions")).json()
        assert [s["session_id"] for s in sessions] == [paused["session_id"]]
        # the dashboard's own page (same Origin) and a script with the token may
        same = await client.post(f"/approvals/{card['id']}/approve", headers={"Origin": ORIGIN})
        assert same.status_code == 200 and same.json()["output"] == "Refunded ORD-77."
        scripted = await client.post("/runs", json={"message": "hi"}, headers=local_headers(app))
        assert scripted.status_code == 200
        localhost = await client.post(
            "/runs",
            json={"message": "hi"},
            headers={"Host": "localhost:8000", "Origin": "http://localhost:8000"},
        )
        assert localhost.status_code == 200


async def test_the_local_token_is_new_at_every_start_and_only_its_own_counts() -> None:
    first, second = _bound(), _bound()
    assert first.state.local_token != second.state.local_token
    assert len(first.state.local_token) >= 32
    async with client_for(second, local_token=False) as client:
        stale = await client.post("/runs", json={"message": "hi"}, headers=local_headers(first))
        assert stale.status_code == 403
        fresh = await client.post("/runs", json={"message": "hi"}, headers=local_headers(second))
        assert fresh.status_code == 200


async def test_the_dashboard_page_holds_the_local_token_and_cannot_be_framed() -> None:
    app = _bound()
    async with client_for(app, local_token=False) as client:
        page = await client.get("/")
    assert page.status_code == 200
    token = app.state.local_token
    assert f'<meta name="baton-local-token" content="{token}">' in page.text
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    async with served() as client:  # with a token file the page holds no token
        page = await client.get("/")
    assert LOCAL_TOKEN_META in page.text


async def test_with_a_token_file_any_host_and_no_origin_are_fine() -> None:
    async with served() as client:
        h = bearer(OPERATOR)
        for host in ("baton.example.com", "10.0.0.5:8443", "evil.example"):
            reply = await client.post("/runs", json={"message": "hi"}, headers={**h, "Host": host})
            assert reply.status_code == 200, host
        cross = await client.post(
            "/runs", json={"message": "hi"}, headers={**h, "Origin": "http://evil.example"}
        )
        assert cross.status_code == 200  # a page of another site has no token to send
        assert (await client.post("/runs", json={"message": "hi"})).status_code == 401


def test_an_open_mode_app_is_refused_on_an_address_of_other_machines() -> None:
    for host in ("0.0.0.0", "::", "10.0.0.5", "example.com"):
        with pytest.raises(ConfigError, match="loopback"):
            create_app(desk(), host=host, port=PORT)
    with pytest.raises(ConfigError, match="not a TCP port"):
        create_app(desk(), host="127.0.0.1", port=70000)


def test_host_values_are_split_strictly() -> None:
    assert split_host("127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert split_host("[::1]:8000") == ("::1", 8000)
    assert split_host("LocalHost") == ("localhost", None)
    for bad in ("", ":80", "[::1", "[::1]x", "::1", "a:b", "a:", "a:１２", "a:123456"):
        assert split_host(bad) is None, bad


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_no_other_host_value_passes(value: str) -> None:
    """Only the exact forms of the bound address pass, whatever the header holds."""
    local = LocalAddress.of("127.0.0.1", PORT)
    allowed = {"127.0.0.1:8000", "localhost:8000"}
    assert local.allows(value, "http") == (value.strip().lower() in allowed)


ORIGIN_PARTS = st.tuples(
    st.sampled_from(["http", "https", "HTTP", "ftp", "", "javascript"]),
    st.one_of(
        st.sampled_from(["127.0.0.1", "localhost", "[::1]", "evil.example", "127.0.0.2"]),
        st.text(alphabet="abcLOCALHOST0127.-é中", max_size=12),
    ),
    st.one_of(st.none(), st.integers(min_value=0, max_value=70000)),
    st.sampled_from(["", "/", "/x", "?a", "#f"]),
)


@settings(max_examples=400, deadline=None)
@given(ORIGIN_PARTS, st.sampled_from(["127.0.0.1:8000", "localhost:8000", "localhost"]))
def test_only_the_servers_own_origin_is_same_origin(parts: Any, host: str) -> None:
    scheme, name, port, tail = parts
    origin = f"{scheme}://{name}{'' if port is None else f':{port}'}{tail}"
    want_name, _, want_port = host.partition(":")
    expected = (
        scheme.lower() == "http"
        and name.lower() == want_name
        and (80 if port is None else port) == int(want_port or 80)
        and tail == ""
    )
    assert same_origin(origin, host, "http") == expected, origin


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_random_origin_text_is_never_same_origin(value: str) -> None:
    assert same_origin(value, "127.0.0.1:8000", "http") == (value.lower() == ORIGIN)
