"""`import baton` loads only what every program needs (the import-time target in
docs/benchmarks.md): the embedded model, the SQLite store and json-repair load on first use."""

from __future__ import annotations

import subprocess
import sys

LAZY = ("baton.models.local", "baton.backends.sqlite", "sqlite3", "json_repair")


def test_import_baton_leaves_the_optional_parts_unloaded() -> None:
    code = f"import baton, sys; print([m for m in {LAZY!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_lazy_exports_resolve() -> None:
    code = (
        "import baton, baton.backends; "
        "from baton.backends.sqlite import SQLiteStore; "
        "from baton.models.local import LocalModel; "
        "assert baton.SQLiteStore is SQLiteStore is baton.backends.SQLiteStore; "
        "assert baton.LocalModel is LocalModel; "
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_malformed_output_still_reaches_json_repair() -> None:
    from baton.models.parsing import parse_json_object

    assert parse_json_object('{"order_id": "ORD-1",}') == {"order_id": "ORD-1"}
    assert parse_json_object("{'order_id': 'ORD-1'}") == {"order_id": "ORD-1"}
