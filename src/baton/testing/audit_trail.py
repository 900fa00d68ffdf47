"""The `AuditTrail` capability: every committed event, and the messages committed with it,
chained in commit order and verified against what the store holds."""

from __future__ import annotations

import pytest

from baton.backends import Store
from baton.backends.audit import AuditTrail
from baton.backends.base import Sessions
from baton.core.errors import ConflictError
from baton.core.messages import Message
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
    make_events,
    new_session,
)


def trail_of(store: Store) -> AuditTrail:
    assert isinstance(store, AuditTrail)
    return store


@capability(Sessions, AuditTrail)
async def test_every_commit_is_chained_in_order_and_verifies(store: Store) -> None:
    trail = trail_of(store)
    assert (await trail.verify_audit()).ok  # an empty chain is intact
    a, b = new_session(), new_session()
    said = [Message(role="user", content="发票在哪里？"), Message(role="assistant", content="x")]
    await store.commit_run(a, said, make_events(a.session_id, "tr_a", "run_a"))
    await store.commit_run(b, [], make_events(b.session_id, "tr_b", "run_b"))
    await store.commit_run(a, [Message(role="user", content="thanks")], [])  # messages alone
    records = await trail.audit_records()
    assert [r.seq for r in records] == list(range(1, 12))
    stored = await store.get_events()
    assert [r.event_id for r in records[:10]] == [e.id for e in stored]
    assert records[10].type == "messages" and records[10].session_id == a.session_id
    assert records[4].messages and not records[3].messages  # a commit's last event vouches
    result = await trail.verify_audit()
    assert result.ok, result.problem
    assert (result.checked, result.head_seq, result.head_hash) == (11, 11, records[-1].hash)
    assert result.events == 10 and result.messages in (3, None)
    assert [r.seq for r in await trail.audit_records(b.session_id)] == list(range(6, 11))
    assert [r.seq for r in await trail.audit_records(limit=2)] == [10, 11]
    assert [r.seq for r in await trail.audit_records(a.session_id, limit=1)] == [11]
    assert await trail.audit_records(limit=0) == []


@capability(Sessions, AuditTrail)
async def test_a_refused_commit_chains_nothing(store: Store) -> None:
    trail = trail_of(store)
    rec = new_session()
    await store.commit_run(rec, [], make_events(rec.session_id, "tr_1", "run_1"))
    stale = new_session(rec.session_id)
    with pytest.raises(ConflictError):
        await store.commit_run(
            stale,
            [Message(role="user", content="lost")],
            make_events(rec.session_id, "tr_2", "run_2"),
        )
    assert len(await trail.audit_records()) == 5
    assert (await trail.verify_audit()).ok


@capability(Sessions, AuditTrail)
async def test_the_chain_verifies_against_its_anchor_only(store: Store) -> None:
    trail = trail_of(store)
    rec = new_session()
    await store.commit_run(rec, [], make_events(rec.session_id, "tr_1", "run_1"))
    head = (await trail.audit_records())[-1]
    assert (await trail.verify_audit(anchor=(head.seq, head.hash))).ok
    await store.commit_run(rec, [], make_events(rec.session_id, "tr_2", "run_2"))
    assert (await trail.verify_audit(anchor=(head.seq, head.hash))).ok  # the chain grew on
    wrong = await trail.verify_audit(anchor=(head.seq, "0" * 64))
    assert not wrong.ok and wrong.problem
