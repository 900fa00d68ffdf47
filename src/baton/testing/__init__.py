"""Baton's store conformance suites, for any store: the ones Baton ships and a third party's.

One suite per capability (`baton.backends`): `sessions`, `checkpoints`, `leases`,
`human_queue` (together what the kernel needs, `Store`), `tasks`, `blackboard`, `snapshots`,
`audit_trail`, `retention`, `outbox`.
Each test is marked with the capabilities it checks (`kit.capability`); run against a store
that lacks one, it is skipped with a reason naming it. To run every suite against a store,
give pytest a `store` fixture that makes a fresh one, in a test module that imports the
suites::

    # tests/test_my_store.py  (pytest-asyncio with asyncio_mode = "auto", and hypothesis)
    import pytest
    from baton.testing import *  # noqa: F403 - every suite's tests

    @pytest.fixture
    async def store():
        made = MyStore("mystore://localhost/test")
        yield made
        await made.close()

`from baton.testing.tasks import *` runs one suite alone. This package imports pytest and
hypothesis: it is for tests only, and `import baton` never loads it.
"""

from __future__ import annotations

from types import ModuleType

from baton.testing import (
    audit_trail,
    blackboard,
    checkpoints,
    human_queue,
    leases,
    outbox,
    retention,
    sessions,
    snapshots,
    tasks,
)
from baton.testing.kit import baton_capability, capability

SUITES: tuple[ModuleType, ...] = (
    sessions,
    checkpoints,
    leases,
    human_queue,
    tasks,
    blackboard,
    snapshots,
    audit_trail,
    retention,
    outbox,
)
"""Every conformance suite, one module per capability."""

# The suites' tests by name, so that `from baton.testing import *` hands pytest all of them.
globals().update({n: getattr(m, n) for m in SUITES for n in dir(m) if n.startswith("test_")})

__all__ = [
    "SUITES",
    "baton_capability",
    "capability",
    *sorted({n for m in SUITES for n in dir(m) if n.startswith("test_")}),
]
