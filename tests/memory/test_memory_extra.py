"""`baton.memory` without its extra: a clear ImportError naming what to install."""

from __future__ import annotations

import sys

import pytest


def test_without_qdrant_client_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import baton.memory

    for name in [
        m for m in sys.modules if m == "baton.memory.store" or m.startswith("qdrant_client")
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "qdrant_client", None)  # what an uninstalled package does
    with pytest.raises(ImportError, match=r"pip install 'baton-relay\[kb\]'"):
        baton.memory.Memory  # noqa: B018
    assert baton.memory.Provenance.__name__ == "Provenance"  # the data needs no engine


def test_import_baton_never_imports_the_memory_engine() -> None:
    import subprocess

    code = (
        "import sys, baton; assert 'qdrant_client' not in sys.modules; "
        "assert 'baton.memory.store' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
