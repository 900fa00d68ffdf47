"""`LocalAddress`: the names and port a browser may use for an open-mode server.

An open-mode server (no token file) answers to this machine only, so a page of any other name
that reaches it is a DNS-rebinding page: its name was pointed at 127.0.0.1 after the page
loaded. The `Host` header a browser sends names the page's site, and it must be one of ours.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from baton.core.errors import ConfigError

LOCALHOST = "localhost"
LOOPBACK_NAMES = frozenset({LOCALHOST, "localhost.localdomain", "ip6-localhost"})
"""Host names that mean this machine (a page cannot be served from them by anyone else)."""

DEFAULT_PORTS = {"http": 80, "https": 443}

_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]+")


def split_host(value: str) -> tuple[str, int | None] | None:
    """The name (lower case, IPv6 without brackets) and port of a `Host` header value, or None
    when it is no `name[:port]`."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, sep, port_text_ = value.partition(":")
        port_text = port_text_ if sep else None
        if ":" in port_text_:
            return None
    if not name:
        return None
    if port_text is None:
        return name.lower(), None
    if not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
        return None
    if len(port_text) > 1 and port_text.startswith("0"):  # no browser writes a port so
        return None
    return name.lower(), int(port_text)


@dataclass(frozen=True)
class LocalAddress:
    """Where an open-mode server listens, as a browser names it: the loopback host names it
    answers to and its port (None: any port, when the app does not know where it is bound)."""

    names: frozenset[str]
    port: int | None = None

    @classmethod
    def of(cls, host: str | None, port: int | None) -> LocalAddress:
        """The address of a server bound to `host`:`port` (None: not known). Raises
        `ConfigError` for a host that is not this machine's: the open mode is loopback only."""
        if port is not None and not 0 < port < 65536:
            raise ConfigError(f"port {port} is not a TCP port (1 to 65535)")
        if host is None:
            return cls(frozenset({LOCALHOST, "127.0.0.1", "::1"}), port)
        name = host.strip().strip("[]").lower()
        if name in LOOPBACK_NAMES:  # resolves to 127.0.0.1, ::1 or both
            return cls(frozenset({LOCALHOST, name, "127.0.0.1", "::1"}), port)
        try:
            ip = ipaddress.ip_address(name)
        except ValueError:
            ip = None
        if ip is None or not ip.is_loopback:
            raise ConfigError(
                f"without a token file the server answers to this machine only, and {host!r} "
                "is not a loopback address: bind it to 127.0.0.1 (or ::1), or pass auth=... "
                "(baton serve --auth FILE)"
            )
        return cls(frozenset({LOCALHOST, str(ip)}), port)

    def allows(self, host: str, scheme: str) -> bool:
        """`host` (a `Host` header value) names this server."""
        found = split_host(host)
        if found is None or found[0] not in self.names:
            return False
        if self.port is None:
            return True
        return _port(found[1], scheme) == self.port

    def describe(self) -> str:
        """The addresses a browser may use, for a message."""
        port = f":{self.port}" if self.port is not None else ":<port>"
        shown = sorted(f"[{n}]" if ":" in n else n for n in self.names)
        return " or ".join(f"{n}{port}" for n in shown)


def same_origin(origin: str, host: str, scheme: str) -> bool:
    """The `Origin` header names the site of the request's own `Host`: the same scheme, name
    and port. Only the form browsers send, `scheme://name[:port]`, can match."""
    if not _VISIBLE_ASCII.fullmatch(origin):
        return False
    origin_scheme, sep, netloc = origin.partition("://")
    if not sep or origin_scheme.lower() != scheme or any(c in netloc for c in "/?#@\\"):
        return False
    theirs, ours = split_host(netloc), split_host(host)
    if theirs is None or ours is None:
        return False
    return theirs[0] == ours[0] and _port(theirs[1], scheme) == _port(ours[1], scheme)


def _port(port: int | None, scheme: str) -> int | None:
    return DEFAULT_PORTS.get(scheme) if port is None else port
