"""The `HumanQueue` capability: escalation tickets, claimed and answered compare-and-set."""

from __future__ import annotations

import pytest

from baton.backends import Store
from baton.backends.base import HumanQueue
from baton.core.errors import ConflictError, StoreError
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
    make_card,
)


@capability(HumanQueue)
async def test_human_queue_round_trips_the_card(store: Store) -> None:
    assert await store.list_human() == []
    cards = [make_card("s_1", 1), make_card("s_2", 2)]
    ids = [await store.push_human(c) for c in cards]
    assert ids[0] < ids[1]
    tickets = await store.list_human()
    assert [t.id for t in tickets] == ids
    assert [t.card for t in tickets] == cards
    assert all(t.status == "open" for t in tickets)
    assert [t.card for t in await store.list_human(status=None)] == cards
    assert await store.list_human(status="closed") == []


@capability(HumanQueue)
async def test_ticket_claim_is_compare_and_set(store: Store) -> None:
    card = make_card("s_1", 1)
    ticket_id = await store.push_human(card)
    assert await store.get_human(ticket_id + 1000) is None
    ann = await store.get_human(ticket_id)
    bob = await store.get_human(ticket_id)
    assert ann is not None and bob is not None
    assert (ann.status, ann.claimed_by, ann.answer, ann.note) == ("open", None, None, "")
    assert ann.card == card

    ann.status, ann.claimed_by = "claimed", "ann"
    bob.status, bob.claimed_by = "claimed", "bob"
    stored = await store.get_human(ticket_id)
    assert stored is not None and stored.status == "open"  # reads are copies
    await store.update_human(ann, expect="open")
    with pytest.raises(ConflictError, match="'claimed', not 'open'") as info:
        await store.update_human(bob, expect="open")
    assert info.value.key == str(ticket_id)
    got = await store.get_human(ticket_id)
    assert got is not None and (got.status, got.claimed_by) == ("claimed", "ann")
    assert got.updated_at == ann.updated_at

    got.status, got.answer, got.note = "answered", "Your refund is on its way.", "checked ERP"
    await store.update_human(got, expect="claimed")
    [listed] = await store.list_human(status="answered")
    assert (listed.id, listed.claimed_by, listed.answer, listed.note) == (
        ticket_id,
        "ann",
        "Your refund is on its way.",
        "checked ERP",
    )
    assert await store.list_human() == []  # no longer open


@capability(HumanQueue)
async def test_update_of_an_unknown_or_bad_ticket_raises_store_error(store: Store) -> None:
    ticket_id = await store.push_human(make_card("s_1", 1))
    ticket = await store.get_human(ticket_id)
    assert ticket is not None
    ticket.id = ticket_id + 1000
    with pytest.raises(StoreError, match="no ticket") as info:
        await store.update_human(ticket, expect="open")
    assert not isinstance(info.value, ConflictError)
    ticket.id, ticket.status = ticket_id, "lost"  # type: ignore[assignment]
    with pytest.raises(StoreError, match="use one of"):
        await store.update_human(ticket, expect="open")
    again = await store.get_human(ticket_id)
    assert again is not None and again.status == "open"
