"""Baton's conformance suites (`baton.testing`) run against every backend (the `store` fixture
of conftest.py), and a check that each backend Baton ships has every capability, so that none
of their tests is skipped (but the audit trail's on `MemoryStore`, which keeps none)."""

from __future__ import annotations

import pytest

from baton.backends import (
    AuditTrail,
    Blackboard,
    Checkpoints,
    FencedCheckpoints,
    HumanQueue,
    Leases,
    Retaining,
    Sessions,
    Snapshots,
    Store,
    Tasks,
)
from baton.backends.archive import Archiving
from baton.backends.memory import MemoryStore
from baton.backends.outbox import Outbox
from baton.testing import *  # noqa: F403 - every suite's tests, over the `store` fixture
from baton.testing import SUITES, leases, retention, sessions, tasks
from baton.testing.kit import skip_unless_capable

CAPABILITIES = (
    Sessions,
    Checkpoints,
    Leases,
    FencedCheckpoints,
    HumanQueue,
    Store,
    Tasks,
    Blackboard,
    Snapshots,
    Retaining,
)


def test_every_shipped_store_has_every_capability(store: Store) -> None:
    missing = [p.__name__ for p in CAPABILITIES if not isinstance(store, p)]
    assert not missing, f"{type(store).__name__} lacks {missing}"
    assert isinstance(store.shared, bool) and isinstance(store.url, str)
    if type(store).__name__ != "MemoryStore":  # the persistent stores keep an audit chain
        assert isinstance(store, AuditTrail)
        assert isinstance(store, Archiving)
    assert isinstance(store, Outbox)  # the notifications' outbox


class Partial:
    """A store with the `Sessions` capability alone (it lacks every other)."""

    def __init__(self, inner: Store) -> None:
        self.get_session = inner.get_session
        self.commit_run = inner.commit_run
        self.get_messages = inner.get_messages
        self.get_events = inner.get_events
        self.list_sessions = inner.list_sessions


def test_no_two_suites_share_a_test_name() -> None:
    names = [n for m in SUITES for n in dir(m) if n.startswith("test_")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_a_test_of_a_capability_the_store_lacks_is_skipped_naming_it() -> None:
    partial = Partial(MemoryStore())
    assert isinstance(partial, Sessions) and not isinstance(partial, Leases)
    for test in (
        leases.test_lease_is_renewed_by_its_owner,
        tasks.test_reads_are_copies,
        retention.test_keep_last_counts_per_session,
    ):
        with pytest.raises(
            pytest.skip.Exception, match=r"Partial lacks the (Leases|Tasks|Retaining) cap"
        ):
            skip_unless_capable(test, partial)
    skip_unless_capable(sessions.test_commit_increments_the_version, partial)  # not skipped
