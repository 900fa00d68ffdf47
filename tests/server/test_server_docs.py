"""The Python example of docs/server.md runs as written, and the document names every route
the app serves."""

from __future__ import annotations

import re
from pathlib import Path

from tests.server.server_kit import desk

from baton.server import create_app

DOC = Path(__file__).resolve().parents[2] / "docs" / "server.md"


def test_the_python_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks
    for i, block in enumerate(blocks, 1):
        exec(compile(block, f"docs/server.md[{i}]", "exec", dont_inherit=True), {"__name__": "doc"})


def test_every_route_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    paths = create_app(desk()).openapi()["paths"]
    for path, operations in paths.items():
        for method in operations:
            assert f"`{method.upper()} {path}`" in text, f"{method.upper()} {path}"


def test_the_endpoint_table_lists_the_documented_status_codes() -> None:
    rows = re.findall(r"^\| `([A-Z]+) (/\S*)` \| [^|]+ \| ([^|]+) \|$", DOC.read_text(), re.M)
    table = {(m.lower(), p): set(re.findall(r"\b[1-5]\d\d\b", codes)) for m, p, codes in rows}
    paths = create_app(desk()).openapi()["paths"]
    schema = {(m, p): set(op["responses"]) for p, ops in paths.items() for m, op in ops.items()}
    assert table == schema
