"""Bearer tokens and roles: 401 without a valid token, 403 without the role, the token file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.server.server_kit import (
    FINANCE,
    LEGAL,
    OPERATOR,
    VIEWER,
    bearer,
    client_for,
    desk,
    served,
)

from baton.core.errors import ConfigError
from baton.server import AuthConfig, Principal, create_app

GETS = [
    "/sessions",
    "/sessions/S1",
    "/sessions/S1/trace",
    "/sessions/S1/events",
    "/approvals",
    "/interrupts",
    "/tickets",
    "/team",
    "/metrics",
    "/runs/req_1",
]
OPERATOR_POSTS = [
    ("/runs", {"message": "hi"}),
    ("/runs/stream", {"message": "hi"}),
    ("/tickets/1/claim", None),
    ("/tickets/1/answer", {"reply": "hi"}),
    ("/tickets/1/close", None),
    ("/interrupts/i1/answer", {"value": 1}),
]
APPROVER_POSTS = [("/approvals/a1/approve", None), ("/approvals/a1/reject", None)]


async def test_no_token_a_malformed_header_or_an_unknown_token_is_401() -> None:
    async with served() as client:
        for path in [*GETS, "/me"]:
            reply = await client.get(path)
            assert reply.status_code == 401, path
            assert reply.headers["www-authenticate"] == "Bearer"
            assert "Authorization: Bearer" in reply.json()["detail"]
        for path, body in OPERATOR_POSTS + APPROVER_POSTS:
            assert (await client.post(path, json=body)).status_code == 401, path
        for header in ("Basic dXNlcjpwYXNz", "Bearer", "Bearer ", VIEWER, "Token " + VIEWER):
            reply = await client.get("/sessions", headers={"Authorization": header})
            assert reply.status_code == 401, header
        wrong = await client.get("/sessions", headers=bearer("x" * 30))
        assert wrong.status_code == 401
        assert wrong.headers["www-authenticate"] == 'Bearer error="invalid_token"'
        assert wrong.json()["detail"].startswith("unknown token")
        # the open endpoints
        assert (await client.get("/health")).json() == {"status": "ok"}
        assert (await client.get("/ready")).status_code == 200
        assert (await client.get("/openapi.json")).status_code == 200
        assert (await client.get("/")).status_code == 200


async def test_a_token_without_the_role_is_403() -> None:
    only_approves = AuthConfig.from_mapping(
        {"tokens": {"approver-only-0123456789": {"name": "ann", "roles": ["approver:x"]}}}
    )
    nobody = AuthConfig({"no-roles-token-0123456789": Principal("nemo")})
    async with served(auth=nobody) as client:
        for path in GETS:
            reply = await client.get(path, headers=bearer("no-roles-token-0123456789"))
            assert reply.status_code == 403, path
            assert "needs the role viewer" in reply.json()["detail"]
        me = await client.get("/me", headers=bearer("no-roles-token-0123456789"))
        assert me.json() == {"name": "nemo", "roles": [], "user_id": None, "auth": True}
    async with served() as client:
        for path, body in OPERATOR_POSTS:
            for token in (VIEWER, FINANCE):
                reply = await client.post(path, json=body, headers=bearer(token))
                assert reply.status_code == 403, (path, token)
                assert "needs the role operator" in reply.json()["detail"]
        for path, body in APPROVER_POSTS:
            for token in (VIEWER, OPERATOR):
                reply = await client.post(path, json=body, headers=bearer(token))
                assert reply.status_code == 403, (path, token)
                assert "approver:<role>" in reply.json()["detail"]
        # approvers and operators may read
        for token in (FINANCE, OPERATOR, LEGAL):
            assert (await client.get("/approvals", headers=bearer(token))).status_code == 200
        me = (await client.get("/me", headers=bearer(LEGAL))).json()
        assert me == {
            "name": "lena",
            "roles": ["approver:legal", "operator"],
            "user_id": None,
            "auth": True,
        }
    async with served(auth=only_approves) as client:
        reply = await client.get("/sessions", headers=bearer("approver-only-0123456789"))
        assert reply.status_code == 200


async def test_the_open_mode_acts_as_the_local_user_with_every_role() -> None:
    async with client_for(create_app(desk())) as client:
        me = (await client.get("/me")).json()
        assert me == {
            "name": "local",
            "roles": ["act_for_users", "approver:*", "operator", "viewer"],
            "user_id": None,
            "auth": False,
        }
        paused = (await client.post("/runs", json={"message": "refund ORD-4"})).json()
        card = paused["approval"]
        done = await client.post(f"/approvals/{card['id']}/approve")
        assert done.status_code == 200 and done.json()["output"] == "Refunded ORD-4."


def test_the_token_file_reads_yaml_and_json(tmp_path: Path) -> None:
    yaml_file = tmp_path / "tokens.yaml"
    yaml_file.write_text(
        "tokens:\n"
        '  "o-3f9a1b7c6d5e4f30a2b1": {name: otto, roles: [operator]}\n'
        '  "a-c0ffee5eed1234567890": {name: alice, roles: ["approver:finance", viewer]}\n',
        encoding="utf-8",
    )
    auth = AuthConfig.from_file(yaml_file)
    assert len(auth) == 2
    alice = auth.authenticate("a-c0ffee5eed1234567890")
    assert alice == Principal("alice", frozenset({"approver:finance", "viewer"}))
    assert alice.approver_roles == {"finance"}
    assert auth.authenticate("a-c0ffee5eed1234567891") is None
    json_file = tmp_path / "tokens.json"
    json_file.write_text(
        json.dumps({"o-3f9a1b7c6d5e4f30a2b1": {"name": "otto", "roles": "operator"}}),
        encoding="utf-8",
    )
    otto = AuthConfig.from_file(json_file).authenticate("o-3f9a1b7c6d5e4f30a2b1")
    assert otto is not None and otto.can_operate() and otto.can_view()


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        ({}, "no tokens"),
        ({"short": {"name": "a", "roles": ["viewer"]}}, "at least 16 characters"),
        ({"x" * 20: {"roles": ["viewer"]}}, "`name` must be a non-empty string"),
        ({"x" * 20: {"name": "a", "roles": []}}, "`roles` must be a non-empty list"),
        ({"x" * 20: {"name": "a", "roles": ["admin"]}}, "unknown role 'admin'"),
        ({"x" * 20: {"name": "a", "roles": ["approver:"]}}, "unknown role 'approver:'"),
        ({"x" * 20: "viewer"}, "expected {name: ..., roles: [...]}"),
    ],
)
def test_a_wrong_token_file_is_refused_naming_the_problem(
    tokens: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("{", r"\{")):
        AuthConfig.from_mapping({"tokens": tokens})


def test_unreadable_token_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the token file"):
        AuthConfig.from_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid JSON"):
        AuthConfig.from_file(bad)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("tokens: [unclosed", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        AuthConfig.from_file(bad_yaml)


def test_approver_roles_pick_the_role_a_card_accepts() -> None:
    bob = Principal("bob", frozenset({"approver:finance", "approver:legal"}))
    assert bob.approver_role_for(["legal"], None) == "legal"
    assert bob.approver_role_for(["finance", "legal"], "legal") == "legal"
    assert bob.approver_role_for([], None) is None
    assert bob.approver_role_for([], "finance") == "finance"
    with pytest.raises(PermissionError, match="needs an approver for one of the roles ops"):
        bob.approver_role_for(["ops"], None)
    with pytest.raises(PermissionError, match="not an approver for role 'ops'"):
        bob.approver_role_for(["ops"], "ops")
    with pytest.raises(PermissionError, match="needs one of the roles ops"):
        bob.approver_role_for(["ops"], "legal")
    anyone = Principal("root", frozenset({"approver:*"}))
    assert anyone.approver_role_for(["ops"], None) == "ops"
    assert anyone.approver_role_for(["ops"], "ops") == "ops"
    with pytest.raises(PermissionError, match="has no approver role"):
        Principal("vera", frozenset({"viewer"})).approver_role_for([], None)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("tokens.yaml", 'tokens:\n  "o-3f9a1b7c6d5e4f30a2b1": {name: 张三, roles: [operator]}\n'),
        ("tokens.json", '{"o-3f9a1b7c6d5e4f30a2b1": {"name": "张三", "roles": ["operator"]}}'),
    ],
)
@pytest.mark.parametrize("encoding", ["gbk", "utf-16", "latin-1"])
def test_a_token_file_that_is_not_utf8_is_a_config_error_naming_it(
    tmp_path: Path, name: str, raw: str, encoding: str
) -> None:
    path = tmp_path / name
    try:
        path.write_bytes(raw.encode(encoding))
    except UnicodeEncodeError:
        path.write_bytes(raw.replace("张三", "Zoë").encode(encoding))
    with pytest.raises(ConfigError, match="is not UTF-8 text") as caught:
        AuthConfig.from_file(path)
    assert str(path) in str(caught.value) and "save it as UTF-8" in str(caught.value)
    path.write_text(raw, encoding="utf-8")  # the same file as UTF-8 is read, Chinese name kept
    who = AuthConfig.from_file(path).authenticate("o-3f9a1b7c6d5e4f30a2b1")
    assert who is not None and who.name == "张三"


@pytest.mark.parametrize(
    "token",
    [
        "with space 0123456789",
        "tab\t0123456789abcdef",
        "中文令牌中文令牌中文令牌中文令牌",
        "zero\u200b0123456789abc",
    ],
)
def test_a_token_an_authorization_header_cannot_carry_is_refused(token: str) -> None:
    with pytest.raises(ConfigError, match="visible ASCII"):
        AuthConfig.from_mapping({"tokens": {token: {"name": "a", "roles": ["viewer"]}}})


def test_a_json_token_with_a_lone_surrogate_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text('{"\\ud800-0123456789abcdef": {"name": "a", "roles": ["viewer"]}}')
    with pytest.raises(ConfigError, match="visible ASCII"):
        AuthConfig.from_file(path)
