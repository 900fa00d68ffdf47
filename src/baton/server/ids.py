"""The ids a request may name: sessions, requests, cards and end users.

An id is a key, never text: it goes into store keys, URLs and logs, so it is checked where it
enters the server (a path, a query, a body field) against a small ASCII alphabet. `victim/trace`
(an encoded slash), a zero-width space, a newline or a right-to-left mark is then no id, and two
ids that look alike are the same bytes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

SESSION_ID = r"^[A-Za-z0-9._:-]{1,128}$"
"""A session id: letters, digits, `.`, `_`, `:` and `-`, 1 to 128 of them."""

REQUEST_ID = SESSION_ID
"""A request id (a client's retry key): the alphabet and length of a session id."""

CARD_ID = SESSION_ID
"""An approval's or an interrupt's id: the alphabet and length of a session id."""

USER_ID = r"^[A-Za-z0-9._:@+-]{1,128}$"
"""An end user's id: a session id's alphabet plus `@` and `+` (e-mail addresses fit)."""

SessionIdPath = Annotated[
    str,
    Path(pattern=SESSION_ID, description="The session id ([A-Za-z0-9._:-], 1 to 128)."),
]
RequestIdPath = Annotated[
    str, Path(pattern=REQUEST_ID, description="The request id ([A-Za-z0-9._:-], 1 to 128).")
]
CardIdPath = Annotated[
    str, Path(pattern=CARD_ID, description="The card's id ([A-Za-z0-9._:-], 1 to 128).")
]
