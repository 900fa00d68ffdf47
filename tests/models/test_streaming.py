"""What streamed replies show: the incremental answer scanner and the text-mode filter."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from baton.models.parsing import parse_text_mode
from baton.models.streaming import ReplyScanner, VisibleText, word_chunks

ANSWER_KEYS = ("final", "answer", "final_answer", "response", "reply")
TOOLS = {"query_invoice", "transfer_to_billing"}


def split(text: str, cuts: list[int]) -> list[str]:
    """`text` cut at the given offsets (taken modulo its length, in order)."""
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def scan(pieces: list[str]) -> str:
    scanner = ReplyScanner()
    return "".join(scanner.feed(p) for p in pieces) + scanner.finish()


def shown(raw: str, pieces: list[str], text_mode: bool = True) -> str:
    visible = VisibleText(text_mode=text_mode)
    return "".join(visible.feed(p) for p in pieces) + visible.finish(raw, TOOLS)


cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)
any_text = st.text(st.characters(exclude_categories=()), max_size=60)
"""Any code points, lone surrogates included."""


# ---------------------------------------------------------------- ReplyScanner


@settings(max_examples=400)
@given(
    text=any_text,
    ensure_ascii=st.booleans(),
    indent=st.sampled_from([None, 2]),
    key=st.sampled_from(ANSWER_KEYS),
    cut=cuts,
)
@example(text="发票已开具 😀", ensure_ascii=True, indent=None, key="final", cut=[13, 14, 15, 18])
@example(text='a "quoted"\\ line\n\t', ensure_ascii=False, indent=None, key="final", cut=[11, 12])
def test_scanner_decodes_any_json_string_split_anywhere(
    text: str, ensure_ascii: bool, indent: int | None, key: str, cut: list[int]
) -> None:
    raw = json.dumps({key: text}, ensure_ascii=ensure_ascii, indent=indent)
    assert scan(split(raw, cut)) == json.loads(raw)[key]


@given(text=st.text(max_size=60), ensure_ascii=st.booleans(), cut=cuts)
def test_scanner_gives_back_the_original_text(
    text: str, ensure_ascii: bool, cut: list[int]
) -> None:
    raw = json.dumps({"final": text}, ensure_ascii=ensure_ascii)
    assert scan(split(raw, cut)) == text


@given(
    before=st.dictionaries(
        st.sampled_from(["thought", "confidence", "notes", "meta"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=10),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.sampled_from(["final", "x", "}"]), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=3,
    ),
    text=st.text(max_size=30),
    cut=cuts,
)
def test_scanner_skips_other_keys_and_nested_values(
    before: dict[str, object], text: str, cut: list[int]
) -> None:
    raw = json.dumps({**before, "final": text, "after": {"final": "not this"}})
    assert scan(split(raw, cut)) == text


@given(
    name_key=st.sampled_from(["tool", "name", "function", "tool_name"]),
    args=st.dictionaries(st.sampled_from(["final", "answer", "reason"]), st.text(max_size=20)),
    cut=cuts,
)
def test_scanner_streams_nothing_from_a_tool_call(
    name_key: str, args: dict[str, str], cut: list[int]
) -> None:
    raw = json.dumps({name_key: "transfer_to_billing", "arguments": args, "final": "late"})
    assert scan(split(raw, cut)) == ""


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"final": "\\ud83d\\ude00"}', "😀"),  # a surrogate pair
        ('{"final": "\\ud83d"}', "\ud83d"),  # a lone high surrogate, as json.loads keeps it
        ('{"final": "\\ud83dx"}', "\ud83dx"),
        ('{"final": "\\ud83d\\u0041"}', "\ud83dA"),
        ('{"final": "\\ud83d\\ud83d\\ude00"}', "\ud83d😀"),
        ('{"final": "\\ude00"}', "\ude00"),  # a lone low one
        ('{"final": "\\u4e2d\\u6587"}', "中文"),
        (
            '{"final": "line\\nbreak \\"q\\" \\\\ \\/ \\t\\b\\f\\r"}',
            'line\nbreak "q" \\ / \t\b\f\r',
        ),
        ('  \n{ "final" :\n "spaced" }', "spaced"),
        ('{"final": 42}', ""),
        ('["final", "x"]', ""),
        ("plain text", ""),
        ('{"final": "trunca', "trunca"),  # output cut by max_tokens: what there is
    ],
)
def test_scanner_cases(raw: str, expected: str) -> None:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict) and isinstance(value.get("final"), str):
        assert value["final"] == expected  # the scanner agrees with json.loads
    for size in (1, 2, 3, len(raw)):
        pieces = [raw[i : i + size] for i in range(0, len(raw), size)]
        assert scan(pieces) == expected


def test_scanner_holds_a_high_surrogate_until_it_knows_its_pair() -> None:
    scanner = ReplyScanner()
    assert scanner.feed('{"final": "a\\ud83d') == "a"
    assert scanner.feed("\\ude") == ""
    assert scanner.feed('00b"}') == "😀b"
    assert scanner.done


# ---------------------------------------------------------------- VisibleText


HANDOFF = json.dumps(
    {"tool": "transfer_to_billing", "arguments": {"reason": "billing", "objective": "invoice"}}
)
REPLIES = [
    HANDOFF,
    f"```json\n{HANDOFF}\n```",
    f"```\n{HANDOFF}\n```",
    f"  \n{HANDOFF}",
    f"[{HANDOFF}, {HANDOFF}]",
    f"[ \n{HANDOFF}]",
    f"I'll pass you on.\n{HANDOFF}",
    f"I'll pass you on.\n```json\n{HANDOFF}\n```",
    json.dumps({"final": "Your invoice is ISSUED.\n金额 299 元 😀"}),
    json.dumps({"final": "Your invoice is ISSUED."}, indent=2),
    f"```json\n{json.dumps({'final': 'fenced answer'})}\n```",
    json.dumps({"name": "Bob", "final": "hi Bob"}),  # "name" that is no tool: an answer
    "A plain answer with `code` and a [link](x) and ``` fences ```.",
    "Use {braces} in prose, then more prose.",
    "   ",
    "",
]


@pytest.mark.parametrize("raw", REPLIES)
@given(cut=cuts)
def test_visible_text_adds_up_to_the_answer_and_hides_calls(raw: str, cut: list[int]) -> None:
    answer = parse_text_mode(raw, TOOLS).text
    seen = shown(raw, split(raw, cut))
    if answer is None:  # a tool call: at most the prose before it
        assert "transfer_to_billing" not in seen and "{" not in seen
        assert raw.startswith(seen)
    else:
        assert seen == answer


@pytest.mark.parametrize("raw", REPLIES)
def test_visible_text_never_shows_json(raw: str) -> None:
    visible = VisibleText(text_mode=True)
    streamed = "".join(visible.feed(ch) for ch in raw)  # one character at a time
    assert "transfer_to_billing" not in streamed
    assert '"final"' not in streamed and '"tool"' not in streamed


def test_visible_text_streams_an_answer_while_it_is_generated() -> None:
    visible = VisibleText(text_mode=True)
    assert visible.feed('{"fi') == ""
    assert visible.feed('nal": "Your in') == "Your in"
    assert visible.feed("voice is \\") == "voice is "
    assert visible.feed('"ISSUED\\"."}') == '"ISSUED".'
    assert visible.finish('{"final": "Your invoice is \\"ISSUED\\"."}', TOOLS) == ""


def test_visible_text_shows_prose_up_to_a_call() -> None:
    visible = VisibleText(text_mode=True)
    assert visible.feed("Sure, ") == "Sure, "
    assert visible.feed("one moment.\n`") == "one moment.\n"  # a fence may be starting
    assert visible.feed('``json\n{"tool": "query_invoice"') == ""
    assert visible.feed(', "arguments": {}}\n```') == ""
    raw = 'Sure, one moment.\n```json\n{"tool": "query_invoice", "arguments": {}}\n```'
    assert visible.finish(raw, TOOLS) == ""


def test_visible_text_passes_everything_through_outside_text_mode() -> None:
    visible = VisibleText(text_mode=False)
    raw = '{"tool": "query_invoice"} is literally what I say'
    assert "".join(visible.feed(p) for p in word_chunks(raw)) == raw
    assert visible.finish(raw) == ""
    assert VisibleText(text_mode=False).finish("all at the end") == "all at the end"


@given(st.text())
def test_word_chunks_add_up(text: str) -> None:
    pieces = word_chunks(text)
    assert "".join(pieces) == text
    assert all(p.strip() for p in pieces) or len(pieces) <= 1
