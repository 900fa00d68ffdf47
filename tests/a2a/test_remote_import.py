"""`baton.a2a` imports the SDK only when a name is used, and says how to install it when it
is missing."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_importing_baton_a2a_loads_no_sdk() -> None:
    code = (
        "import sys, baton.a2a\n"
        "assert 'a2a' not in sys.modules, 'the SDK was imported'\n"
        "from baton.a2a import RemoteAgent\n"
        "assert 'a2a' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import baton.a2a

    for name in list(sys.modules):
        if name == "a2a" or name.startswith(("a2a.", "baton.a2a.")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "a2a", None)  # as if a2a-sdk were not installed
    with pytest.raises(ImportError, match=r"pip install 'baton-relay\[a2a\]'"):
        baton.a2a.RemoteAgent  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        baton.a2a.Nope  # noqa: B018
