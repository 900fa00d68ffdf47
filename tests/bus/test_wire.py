"""`baton.bus.wire`: an envelope survives the trip whatever its text, and anything else read
from a stream is an `EnvelopeError`, never another exception and never a turn."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.bus import Envelope, EnvelopeError
from baton.bus.wire import MAX_ID_CHARS, decode, encode, scoped

ids = st.text(min_size=1, max_size=40)
texts = st.text(max_size=300)  # any Unicode, Chinese, zero-width and control characters


@settings(max_examples=300, deadline=None)
@given(
    session_id=ids,
    request_id=ids,
    message=texts,
    user_id=st.none() | ids,
    headers=st.dictionaries(st.text(max_size=20), st.text(max_size=60), max_size=4),
    submitted_at=st.floats(allow_nan=False, allow_infinity=False),
)
def test_every_valid_envelope_reads_back_the_same(
    session_id: str,
    request_id: str,
    message: str,
    user_id: str | None,
    headers: dict[str, str],
    submitted_at: float,
) -> None:
    sent = Envelope(
        session_id=session_id,
        message=message,
        user_id=user_id,
        id=request_id,
        headers=headers,
        submitted_at=submitted_at,
    )
    data = encode(sent)
    assert decode(data) == sent
    data.decode("utf-8")  # the stream holds UTF-8 text, never an escape of a lone surrogate


@settings(max_examples=500, deadline=None)
@given(
    st.binary(max_size=400)
    | st.text(max_size=400).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
def test_any_bytes_are_an_envelope_or_an_envelope_error(raw: bytes) -> None:
    try:
        envelope = decode(raw)
    except EnvelopeError as exc:
        assert str(exc)  # says what is wrong
    else:
        assert encode(envelope)  # what was read can be published again


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["session_id", "message", "user_id", "id", "headers", "submitted_at"]),
        st.none() | st.booleans() | st.integers() | st.floats() | texts | st.lists(st.integers()),
    )
)
def test_any_json_object_is_an_envelope_or_an_envelope_error(fields: dict[str, object]) -> None:
    try:
        envelope = decode(json.dumps(fields).encode())
    except EnvelopeError:
        return
    assert isinstance(envelope.session_id, str) and isinstance(envelope.message, str)
    assert isinstance(envelope.submitted_at, float)


@given(st.text(max_size=20), st.text(max_size=20), st.text(max_size=20), st.text(max_size=20))
def test_scoped_keys_never_collide(s1: str, r1: str, s2: str, r2: str) -> None:
    if (s1, r1) != (s2, r2):
        assert scoped(s1, r1) != scoped(s2, r2)


def test_an_id_at_the_limit_travels_and_one_past_it_does_not() -> None:
    assert decode(encode(Envelope(session_id="s" * MAX_ID_CHARS, message="m"))).session_id
    with pytest.raises(EnvelopeError, match="at most 512 characters"):
        encode(Envelope(session_id="s" * (MAX_ID_CHARS + 1), message="m"))


def test_a_value_json_cannot_hold_is_named() -> None:
    odd: dict[str, Any] = {"k": object()}
    with pytest.raises(EnvelopeError, match=r"headers\.k: input should be a valid string"):
        encode(Envelope(session_id="s1", message="m", headers=odd))
