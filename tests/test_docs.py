"""The Python examples in README.md and docs/ run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


@pytest.mark.parametrize(
    "doc",
    [
        "README.md",
        "docs/api.md",
        "docs/bus.md",
        "docs/context.md",
        "docs/guardrails.md",
        "docs/observability.md",
        "docs/supervisor.md",
        "docs/pipeline.md",
        "docs/debate.md",
        "docs/plan_execute_review.md",
        "docs/blackboard.md",
        "docs/graph.md",
        "docs/deploy.md",
        "docs/stores.md",
        "docs/server.md",
        "docs/mcp-server.md",
        "docs/a2a-server.md",
        "docs/mcp.md",
        "docs/a2a.md",
        "docs/notifications.md",
        "docs/memory.md",
        "docs/knowledge.md",
        "docs/retrieval.md",
        "docs/replay.md",
    ],
)
def test_python_blocks_run(doc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples may create files such as baton.db
    blocks = BLOCK.findall((ROOT / doc).read_text(encoding="utf-8"))
    assert blocks, f"{doc} has no python examples"
    namespace: dict[str, object] = {"__name__": f"doc_{Path(doc).stem}"}
    for i, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"{doc}[{i}]", "exec", dont_inherit=True), namespace)
        except Exception as exc:  # pragma: no cover - the message is the point
            pytest.fail(f"{doc} example {i} failed: {type(exc).__name__}: {exc}\n{block}")


def test_every_test_the_security_table_names_exists() -> None:
    """docs/security.md names the test that proves each trust boundary (in tests/, or in a
    conformance suite of baton.testing that tests/ runs over every store): each must exist."""
    text = (ROOT / "docs/security.md").read_text(encoding="utf-8")
    named = re.findall(r"`((?:tests|src/baton/testing)/[\w/]+\.py)::(test_\w+)`", text)
    assert len(named) >= 30, named
    missing = []
    for path, name in named:
        source = ROOT / path
        found = source.is_file() and re.search(
            rf"^(?:async )?def {name}\(", source.read_text(encoding="utf-8"), re.M
        )
        if not found:
            missing.append(f"{path}::{name}")
    assert not missing, f"docs/security.md names tests that do not exist: {missing}"


def test_every_relative_link_of_the_readme_leads_somewhere() -> None:
    """The README is the front page: each link into docs/ names a file that exists."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?!https?://|#)[^)#\s]+)(?:#[^)]*)?\)", text)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
