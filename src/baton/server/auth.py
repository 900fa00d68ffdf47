"""Bearer-token authentication and roles of the API server.

A token file (YAML or JSON) maps each token to a user name and roles, and an operator token
to the end user its runs serve (or the role to run for any end user):

    tokens:
      "o-3f9a1b7c6d5e4f30a2b1": {name: otto, roles: [operator]}
      "w-5e2d7c1b9a8f4e3d2c1b": {name: web, roles: [operator], user_id: u-1842}
      "g-8a7b6c5d4e3f2a1b0c9d": {name: gateway, roles: [operator, act_for_users]}

Roles: `viewer` (every GET), `operator` (runs, tickets, interrupt answers; a viewer too),
`act_for_users` (an operator's runs may name any end user), `approver:<role>` (decide approval
cards whose `required_roles` include `<role>`; a viewer too), `approver:*` (an approver for any
role). Tokens are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.core.errors import ConfigError
from baton.server.ids import USER_ID

VIEWER = "viewer"
"""May read everything (every GET)."""
OPERATOR = "operator"
"""May run, answer interrupts and work the human queue; a viewer too."""
ACT_FOR_USERS = "act_for_users"
"""An operator whose runs may name any end user (`user_id`), e.g. a chat front end's backend."""
APPROVER = "approver:"
"""Prefix of the approver roles, `approver:<role>`; `approver:*` is an approver for any role."""
ANY_ROLE = "*"

MIN_TOKEN_CHARS = 16
"""Shorter tokens are refused: a token is a password."""

_TOKEN_CHARS = re.compile(r"[\x21-\x7e]+")
"""What a token may hold: visible ASCII (an HTTP header carries nothing else intact)."""

OPEN_USER = "local"
"""Who acts in the open mode (no token file; loopback only)."""


@dataclass(frozen=True)
class Principal:
    """The user a request acts as: a name, roles, and the end user its runs serve."""

    name: str
    roles: frozenset[str] = field(default_factory=frozenset)
    user_id: str | None = None
    """The end user every run of this token serves (None: no end user, or any with
    `act_for_users`)."""

    @property
    def approver_roles(self) -> frozenset[str]:
        """The `<role>` of every `approver:<role>` role (`*`: any role)."""
        return frozenset(r[len(APPROVER) :] for r in self.roles if r.startswith(APPROVER))

    def can_view(self) -> bool:
        """Viewers, operators and approvers may read."""
        return bool(self.roles & {VIEWER, OPERATOR}) or bool(self.approver_roles)

    def can_operate(self) -> bool:
        """Operators may run and work the queues."""
        return OPERATOR in self.roles

    def acts_for_users(self) -> bool:
        """Runs may name any end user (`act_for_users`)."""
        return ACT_FOR_USERS in self.roles

    def run_user(self, asked: str | None) -> str | None:
        """The end user a run of this user serves when the request names `asked` (None: none
        named). Raises `PermissionError` with a message when it may not serve `asked`."""
        if self.acts_for_users():
            return asked
        if self.user_id is not None:
            if asked is not None and asked != self.user_id:
                raise PermissionError(
                    f"user {self.name!r} runs for the end user {self.user_id!r} only, not for "
                    f"{asked!r}; omit user_id or send {self.user_id!r}"
                )
            return self.user_id
        if asked is not None:
            raise PermissionError(
                f"user {self.name!r} may not run for the end user {asked!r}: omit user_id, or "
                "give the token `user_id: <id>` (it serves that user) or the role act_for_users "
                "(it serves any user) in the token file"
            )
        return None

    def approver_role_for(self, required: list[str], asked: str | None) -> str | None:
        """The role this user decides a card in (one of `required`, or `asked`, or None for a
        card that requires no role). Raises `PermissionError` with a message when the user
        may not decide it."""
        mine = self.approver_roles
        if not mine:
            raise PermissionError(
                f"user {self.name!r} has no approver role; a token with approver:<role> "
                "decides approvals"
            )
        wildcard = ANY_ROLE in mine
        if asked is not None:
            if asked not in mine and not wildcard:
                raise PermissionError(
                    f"user {self.name!r} is not an approver for role {asked!r} (their approver "
                    f"roles: {', '.join(sorted(mine))})"
                )
            if required and asked not in required:
                raise PermissionError(
                    f"the card needs one of the roles {', '.join(required)}; role {asked!r} "
                    "may not decide it"
                )
            return asked
        if not required:
            return None
        for role in required:
            if wildcard or role in mine:
                return role
        raise PermissionError(
            f"the card needs an approver for one of the roles {', '.join(required)}; user "
            f"{self.name!r} is an approver for {', '.join(sorted(mine))}"
        )


OPEN_PRINCIPAL = Principal(
    OPEN_USER, frozenset({VIEWER, OPERATOR, ACT_FOR_USERS, APPROVER + ANY_ROLE})
)
"""Who every request is without a token file: the local operator, who may act for anyone."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def _check_role(role: object, where: str) -> str:
    if not isinstance(role, str) or not role:
        raise ConfigError(f"{where}: every role must be a non-empty string, got {role!r}")
    if role in (VIEWER, OPERATOR, ACT_FOR_USERS):
        return role
    if role.startswith(APPROVER) and role[len(APPROVER) :].strip():
        return role
    raise ConfigError(
        f"{where}: unknown role {role!r}; use viewer, operator, act_for_users or "
        "approver:<role> (approver:* for any role)"
    )


def _user_id(entry: Mapping[str, Any], roles: frozenset[str], where: str) -> str | None:
    """The entry's `user_id`: the end user an operator token's runs serve."""
    if "user_id" not in entry:
        if ACT_FOR_USERS in roles and OPERATOR not in roles:
            raise ConfigError(f"{where}: act_for_users is a right of operators; add operator")
        return None
    user_id = entry["user_id"]
    if not isinstance(user_id, str) or not re.fullmatch(USER_ID, user_id):
        raise ConfigError(
            f"{where}: `user_id` must be 1 to 128 of the characters A-Z a-z 0-9 . _ : @ + -, "
            f"got {user_id!r}"
        )
    if OPERATOR not in roles:
        raise ConfigError(
            f"{where}: `user_id` names the end user an operator's runs serve; this token has "
            "no operator role (add operator, or drop user_id)"
        )
    if ACT_FOR_USERS in roles:
        raise ConfigError(
            f"{where}: a token with `user_id` serves that user only, while act_for_users lets "
            "it serve any user; keep one of the two"
        )
    return user_id


class AuthConfig:
    """The tokens a server accepts, each with its user."""

    def __init__(self, tokens: Mapping[str, Principal]) -> None:
        if not tokens:
            raise ConfigError("the token file has no tokens; add at least one under `tokens:`")
        self._entries: list[tuple[bytes, Principal]] = [
            (_digest(token), who) for token, who in tokens.items()
        ]

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> AuthConfig:
        """From `{"tokens": {token: {"name": ..., "roles": [...], "user_id": ...}}}` (or the
        inner mapping alone; `user_id` is optional). Raises `ConfigError` naming what is
        wrong."""
        if not isinstance(data, Mapping):
            raise ConfigError("the token file must hold a mapping: tokens: {TOKEN: {name, roles}}")
        raw = data.get("tokens", data)
        if not isinstance(raw, Mapping):
            raise ConfigError("`tokens` must map each token to {name: ..., roles: [...]}")
        out: dict[str, Principal] = {}
        for n, (token, entry) in enumerate(raw.items(), 1):
            where = f"token #{n}"
            if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
                raise ConfigError(
                    f"{where}: a token must be a string of at least {MIN_TOKEN_CHARS} "
                    "characters (e.g. `python -c 'import secrets; print(secrets.token_urlsafe())'`)"
                )
            if not _TOKEN_CHARS.fullmatch(token):
                raise ConfigError(
                    f"{where}: a token may hold only visible ASCII characters (no spaces, no "
                    "other scripts): an Authorization header cannot carry anything else"
                )
            if not isinstance(entry, Mapping):
                raise ConfigError(f"{where}: expected {{name: ..., roles: [...]}}")
            name = entry.get("name")
            if not isinstance(name, str) or not name.strip():
                raise ConfigError(f"{where}: `name` must be a non-empty string")
            roles = entry.get("roles", [])
            if isinstance(roles, str):
                roles = [roles]
            if not isinstance(roles, list) or not roles:
                raise ConfigError(f"{where} ({name}): `roles` must be a non-empty list")
            checked = frozenset(_check_role(r, f"{where} ({name})") for r in roles)
            out[token] = Principal(
                name.strip(), checked, _user_id(entry, checked, f"{where} ({name})")
            )
        return cls(out)

    @classmethod
    def from_file(cls, path: str | Path) -> AuthConfig:
        """Read a token file: JSON (`.json`) or YAML (anything else; needs PyYAML)."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read the token file {p}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"the token file {p} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                f"offset {exc.start}); save it as UTF-8"
            ) from None
        if p.suffix.lower() == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"the token file {p} is not valid JSON: {exc}") from None
        else:
            try:
                import yaml
            except ImportError:
                raise ConfigError(
                    f"reading {p} needs PyYAML (pip install pyyaml), or write it as JSON"
                ) from None
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ConfigError(f"the token file {p} is not valid YAML: {exc}") from None
        try:
            return cls.from_mapping(data)
        except ConfigError as exc:
            raise ConfigError(f"{p}: {exc}") from None

    def authenticate(self, token: str) -> Principal | None:
        """The user of `token`, or None. Every configured token is compared (in constant
        time), so the answer's timing says nothing about which one nearly matched."""
        digest = _digest(token)
        found: Principal | None = None
        for known, who in self._entries:
            if hmac.compare_digest(known, digest):
                found = who
        return found
