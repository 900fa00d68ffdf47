"""Reading eval specs: YAML and JSON, unknown or invalid fields named with their line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.core.errors import EvalError
from baton.evals.spec import Spec, load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[2]

YAML_SPEC = """\
team: examples.eval_quickstart:make_team
cases:
  - id: a
    request: hello
    route: billing
    path: [desk, billing]
    tools:
      - name: [lookup_invoice, other]
        arguments: {order_id: ORD-1}
        ok: any
    status: completed
    answer: {contains: "42", judge: {rubric: polite}}
  - id: b
    split: test
    turns: [one, two]
    tags: [en]
"""


def test_a_yaml_spec_parses_with_its_shorthands() -> None:
    spec = parse_spec(YAML_SPEC)
    a, b = spec.cases
    assert a.path is not None and a.path.prefix == ["desk", "billing"]
    assert a.tools[0].name == ["lookup_invoice", "other"] and a.tools[0].ok == "any"
    assert a.status == ["completed"] and a.answer is not None and a.answer.contains == ["42"]
    assert b.messages == ["one", "two"] and b.split == "test"
    assert [c.id for c in spec.select("test")] == ["b"]
    assert [c.id for c in spec.select(tags=["en"])] == ["b"]
    assert [c.id for c in spec.select(limit=1)] == ["a"]


def test_a_json_spec_parses_the_same(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(yaml.safe_load(YAML_SPEC), indent=2))
    assert load_spec(path) == parse_spec(YAML_SPEC)


def test_an_unknown_yaml_field_names_its_line_and_the_fields_expected() -> None:
    text = YAML_SPEC.replace("    status: completed", "    statsu: completed")
    with pytest.raises(EvalError) as caught:
        parse_spec(text, name="s.yaml")
    assert caught.value.line == 11
    message = str(caught.value)
    assert message.startswith("s.yaml, line 11: cases[0].statsu: unknown field 'statsu'")
    assert "status" in message


def test_an_unknown_json_field_names_its_line(tmp_path: Path) -> None:
    doc = yaml.safe_load(YAML_SPEC)
    doc["cases"][1]["rout"] = "x"
    path = tmp_path / "spec.json"
    text = json.dumps(doc, indent=2)
    path.write_text(text)
    expected = next(i for i, line in enumerate(text.splitlines(), 1) if '"rout"' in line)
    with pytest.raises(EvalError, match=rf"spec.json, line {expected}: cases\[1\]\.rout"):
        load_spec(path)


def test_an_invalid_value_names_its_line() -> None:
    text = YAML_SPEC.replace("split: test", "split: staging")
    with pytest.raises(EvalError, match=r"line 14: cases\[1\]\.split"):
        parse_spec(text)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("team: a:b\ncases:\n  - id: x\n", "exactly one of `request`"),
        ("team: a:b\ncases:\n  - {id: x, request: r}\n  - {id: x, request: s}\n", "two cases"),
        ("team: a:b\ncases:\n  - {id: x, request: r, answer: {regex: '('}}\n", "regular"),
        ("team: [\n", "not valid YAML"),
        ("- 1\n", "a spec is a mapping"),
    ],
)
def test_wrong_specs_say_what_is_wrong(text: str, needle: str) -> None:
    with pytest.raises(EvalError, match=needle):
        parse_spec(text)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="no spec file at"):
        load_spec(tmp_path / "nope.yaml")


def test_the_shipped_specs_load() -> None:
    assert len(load_spec(ROOT / "examples/eval_quickstart.yaml").cases) == 4
    desk = load_spec(ROOT / "benchmarks/desk_routing/desk_eval.yaml")
    assert len(desk.select()) == 44 and len(desk.select("test")) == 44


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_the_loader_never_crashes_on_arbitrary_text(text: str) -> None:
    for fmt in ("yaml", "json"):
        try:
            assert isinstance(parse_spec(text, fmt=fmt), Spec)  # type: ignore[arg-type]
        except EvalError as exc:
            assert str(exc)


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["team", "cases", "model", "split", "x"]), yaml_values))
def test_the_loader_never_crashes_on_arbitrary_yaml_documents(doc: dict[str, object]) -> None:
    try:
        parse_spec(yaml.safe_dump(doc))
    except EvalError as exc:
        assert str(exc)
