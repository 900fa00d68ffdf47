"""Lone surrogates never reach a store: text entering a run is cleaned."""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baton import Agent, ScriptedModel, Team, tool
from baton.core.text import BLANK_RANGES, blank, clean_text, clean_value


@given(st.text(alphabet=st.characters(codec=None)))
def test_clean_text_always_encodes_and_keeps_valid_text(text: str) -> None:
    out = clean_text(text)
    out.encode("utf-8")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        assert "\ufffd" in out
    else:
        assert out is text


def test_clean_value_cleans_nested_keys_and_values_and_keeps_clean_ones() -> None:
    clean = {"a": ["x", {"订单": "ORD-1"}]}
    assert clean_value(clean) is clean
    dirty = {"k\ud800": ["v\udfff", {"n": 1}]}
    assert clean_value(dirty) == {"k\ufffd": ["v\ufffd", {"n": 1}]}
    two_halves = dict([("a\ud800", 1), ("a\udfff", 2)])  # two keys that clean to one
    assert clean_value(two_halves) == {"a\ufffd": 2}


async def test_a_run_full_of_lone_surrogates_is_stored(tmp_path: Path) -> None:
    @tool
    async def echo(text: str) -> str:
        """Echo."""
        return text + "\udc00"

    S = ScriptedModel
    model = S([S.call("echo", text="\ud800 half"), S.say("done \ud83d")])
    team = Team(
        [Agent(name="a", tools=[echo])],
        entry="a",
        model=model,
        store=f"sqlite:///{tmp_path / 'b.db'}",
    )
    result = await team.run("hi \udfff", session_id="S")
    assert result.status == "completed" and result.output == "done \ufffd"
    stored = await team.store.get_messages("S")
    assert [m.content for m in stored if m.role == "user"] == ["hi \ufffd"]
    assert any(m.role == "tool" and m.content == "\ufffd half\ufffd" for m in stored)
    await team.aclose()


@pytest.mark.parametrize("text", ["", "  \n\t", "\x00\x07", "\u200b\u200d\ufeff", "\u3000 \x1b"])
def test_text_of_only_white_space_control_or_invisible_characters_is_blank(text: str) -> None:
    assert blank(text)


@pytest.mark.parametrize("text", ["a", " 退款 ", "\x00?", "\u200bhi", "🙂"])
def test_text_a_person_can_read_is_not_blank(text: str) -> None:
    assert not blank(text)


@pytest.mark.parametrize("message", ["\x00\x07", "\u200b \u200b"])
def test_a_team_refuses_a_message_with_nothing_to_read(message: str) -> None:
    team = Team([Agent(name="solo")], entry="solo", model=ScriptedModel([ScriptedModel.say("hi")]))
    with pytest.raises(ValueError, match="invisible characters"):
        team.run_sync(message, session_id="S1")


def test_the_blank_ranges_are_unicode_14s_white_space_control_and_format_characters() -> None:
    listed = {c for a, b in BLANK_RANGES for c in map(chr, range(a, b + 1))}
    for c in listed:  # categories of assigned characters do not change between versions
        assert c.isspace() or unicodedata.category(c) in ("Cc", "Cf"), hex(ord(c))
    if unicodedata.unidata_version == "14.0.0":  # Python 3.11's: the list is all of them
        found = {
            c
            for c in map(chr, range(sys.maxunicode + 1))
            if c.isspace() or unicodedata.category(c) in ("Cc", "Cf")
        }
        assert found == listed
