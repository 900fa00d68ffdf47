"""`baton.observe.terminal` and `ConsoleSink`: user and model text cannot act on the terminal.

Control characters, ANSI escape sequences, bidi controls and invisible format characters come
out as visible escapes; every other character (Chinese, Japanese, emoji, combining marks, ZWJ
and ZWNJ) passes unchanged; rich markup in the text is shown literally.
"""

from __future__ import annotations

import io
import json
import re
import sys
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from baton.core.events import (
    AgentStarted,
    ApprovalDecided,
    Escalated,
    EscalationCard,
    Event,
    GuardTripped,
    Handoff,
    HandoffRefused,
    ModelCalled,
    RunFinished,
    RunStarted,
    ToolCalled,
    ToolRefused,
)
from baton.core.messages import Usage
from baton.core.payload import HandoffPayload
from baton.observe import ConsoleSink
from baton.observe.terminal import (
    escape_char,
    is_safe,
    json_safe,
    one_line,
    safe,
    safe_clip,
    safe_text,
)

NASTY = (
    "hi \u202etxt.exe \x1b[2J \x1b]0;title\x07 back\x08\x08 cr\rX [bold red]markup[/] "
    "\u2066iso\u2069 zw\u200bsp \x9b31m"
)
"""A user message or model reply that tries to act on the terminal and on rich."""

RAW = ("\x1b", "\u202e", "\x07", "\x08", "\r", "\u2066", "\u2069", "\u200b", "\x9b")

KEPT_FORMAT = {
    0x200C,  # ZWNJ (Persian, Indic)
    0x200D,  # ZWJ (emoji sequences, Indic)
    *range(0x0600, 0x0606),  # Arabic number signs (visible, prepended)
    0x06DD,
    0x070F,
    0x0890,
    0x0891,
    0x08E2,
    0x180E,  # Mongolian vowel separator
    0x110BD,
    0x110CD,  # Kaithi number signs
    *range(0x13430, 0x13460),  # Egyptian hieroglyph format controls
    *range(0x1BCA0, 0x1BCA4),  # shorthand format controls
    *range(0x1D173, 0x1D17B),  # musical symbol beams and ties
}
"""Format characters (Cf) that scripts need: kept."""

FLAG_RE = re.compile("\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,6}\U000e007f")

SAMPLES = [
    "你好，世界。请帮我查一下订单。",
    "日本語のテキスト：カタカナ、ひらがな、漢字。\u3000全角スペース",
    "한국어 텍스트",
    "👩\u200d👩\u200d👧\u200d👦 👍🏽 ❤\ufe0f 🇯🇵 🏳\ufe0f\u200d🌈",
    "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f England",
    "e\u0301 a\u0308 Z\u0336\u0337 \u0928\u093f",
    "می\u200cخواهم",  # Persian with ZWNJ
    "क\u094d\u200dष",  # Devanagari with ZWJ
    "مرحبا بالعالم",  # right-to-left text itself is fine: only the controls go
    "tabs\tstay",
    "\u0660\u0661 ١٢٣ \u00a0nbsp",
]


def unsafe(ch: str, *, newlines: bool = False) -> bool:
    """The rule the sanitiser implements, written from Unicode categories."""
    if ch == "\t" or (newlines and ch == "\n"):
        return False
    cat = unicodedata.category(ch)
    if cat in ("Cc", "Cs", "Zl", "Zp"):
        return True
    return cat == "Cf" and ord(ch) not in KEPT_FORMAT


def leftovers(text: str, *, newlines: bool = False) -> list[str]:
    """The unsafe characters in `text` (an emoji subdivision flag is allowed)."""
    return [ch for ch in FLAG_RE.sub("", text) if unsafe(ch, newlines=newlines)]


# ------------------------------------------------------------------------------ safe_text
def test_every_code_point_is_classified_by_the_rule() -> None:
    wrong = [
        f"U+{cp:04X}"
        for cp in range(sys.maxunicode + 1)
        if (safe_text(chr(cp)) != chr(cp)) != unsafe(chr(cp))
    ]
    assert wrong == []


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_output_holds_no_unsafe_character(text: str) -> None:
    assert leftovers(safe_text(text)) == []
    assert leftovers(safe_text(text, newlines=True), newlines=True) == []
    assert "\n" not in safe_text(text)


@given(
    st.lists(
        st.one_of(
            st.text(
                alphabet=st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp", "Cf")),
            ),
            st.sampled_from(["\t", "\u200c", "\u200d", "\ufe0f", "\u0301", *SAMPLES]),
        )
    ).map("".join)
)
def test_text_without_unsafe_characters_is_unchanged(text: str) -> None:
    assert safe_text(text) == text
    assert safe_text(text + "\n" + text, newlines=True) == text + "\n" + text
    assert is_safe(text)


@pytest.mark.parametrize("text", SAMPLES)
def test_scripts_emoji_and_combining_marks_pass_unchanged(text: str) -> None:
    assert safe_text(text) == text
    assert safe(text).plain == text
    assert safe(text).spans == []


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\u202e", "\\u202e"),
        ("\x1b[2J", "\\x1b[2J"),
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
        ("a\rb", "a\\rb"),
        ("a\x08", "a\\x08"),
        ("\x9b1m", "\\x9b1m"),
        ("x\u2028y", "x\\u2028y"),
        ("ad\u200bmin", "ad\\u200bmin"),
        ("\ud800", "\\ud800"),
        ("hidden\U000e0041\U000e0042", "hidden\\U000e0041\\U000e0042"),
        ("🏴\U000e0041\U000e007f", "🏴\\U000e0041\\U000e007f"),  # not a valid flag
        ("a\nb", "a\\nb"),
    ],
)
def test_unsafe_characters_become_visible_escapes(raw: str, shown: str) -> None:
    assert safe_text(raw) == shown
    assert not is_safe(raw)


def test_newlines_stay_only_when_asked_and_crlf_becomes_a_newline() -> None:
    assert safe_text("a\nb\tc") == "a\\nb\tc"
    assert safe_text("a\nb\tc", newlines=True) == "a\nb\tc"
    assert safe_text("a\r\nb\rc", newlines=True) == "a\nb\\rc"


def test_escapes_are_dim_in_the_style_of_their_text() -> None:
    t = safe("a\u202eb", "bold red")
    assert t.plain == "a\\u202eb"
    styles = {t.plain[s.start : s.end]: str(s.style) for s in t.spans}
    assert styles == {"a": "bold red", "\\u202e": "bold red dim", "b": "bold red"}
    assert escape_char("\x1b") == "\\x1b" and escape_char("\U000e0041") == "\\U000e0041"


def test_one_line_folds_only_plain_whitespace() -> None:
    assert one_line("  a \n\t b\r\nc  ") == "a b c"
    assert one_line("a\rb\x0bc\u2028d") == "a\rb\x0bc\u2028d"  # left for `safe` to show
    assert one_line("日本語\u3000テキスト") == "日本語\u3000テキスト"
    assert one_line("x" * 10, 5) == "xxxx…"
    assert safe_clip("a\r b", 80, "dim").plain == "a\\r b"


@settings(max_examples=200)
@given(
    st.recursive(st.text() | st.integers(), lambda c: st.lists(c) | st.dictionaries(st.text(), c))
)
def test_json_safe_keeps_the_document_and_drops_unsafe_characters(value: object) -> None:
    for doc in (
        json.dumps(value, ensure_ascii=False),
        json.dumps(value, ensure_ascii=False, indent=2),
    ):
        escaped = json_safe(doc)
        assert json.loads(escaped) == value
        assert leftovers(escaped, newlines=True) == []


def test_json_safe_escapes_lone_surrogates_and_astral_tags() -> None:
    doc = json.dumps(["\ud800", "\U000e0041", "\u202e", "\x85"], ensure_ascii=False)
    escaped = json_safe(doc)
    assert escaped == '["\\ud800", "\\udb40\\udc41", "\\u202e", "\\u0085"]'
    assert json.loads(escaped) == ["\ud800", "\U000e0041", "\u202e", "\x85"]


# ---------------------------------------------------------------------------- ConsoleSink
def events() -> list[Event]:
    base: dict[str, Any] = {"run_id": "r1", "session_id": "s1", "trace_id": "t1"}
    usage = Usage(input_tokens=3, output_tokens=4)
    payload = HandoffPayload(
        reason=NASTY,
        objective=NASTY,
        state={NASTY: 1},
        source="triage",
        target="billing",
        hop=1,
        path=["triage"],
        history_ref="s1",
        trace_id="t1",
        session_id="s1",
    )
    card = EscalationCard(session_id="s1", trace_id="t1", path=["triage"], reasons=[NASTY])
    return [
        RunStarted(**base, message=NASTY, user_id="u\x1b[1m"),
        AgentStarted(**base, agent="triage", reason=NASTY),
        ModelCalled(**base, agent="triage", model="m", usage=usage, latency_ms=1.0, text=NASTY),
        ModelCalled(**base, agent="triage", model="m", usage=usage, latency_ms=1.0, error=NASTY),
        ModelCalled(
            **base, agent="triage", model="m", usage=usage, latency_ms=1.0, tool_calls=(NASTY,)
        ),
        ToolCalled(
            **base, agent="triage", tool="t", call_id="c1", ok=False, error=NASTY, latency_ms=1.0
        ),
        ToolRefused(**base, agent="triage", tool=NASTY, call_id="c2", reason=NASTY),
        Handoff(**base, agent="triage", payload=payload),
        HandoffRefused(**base, agent="triage", target=NASTY, reason=NASTY),
        GuardTripped(**base, agent="triage", guard="g", detail=NASTY),
        Escalated(**base, agent="triage", to="human", card=card),
        ApprovalDecided(
            **base, approval_id="a1", decision="rejected", by=NASTY, role=NASTY, reason=NASTY
        ),
        RunFinished(
            **base,
            status="failed",
            output=NASTY,
            error=NASTY,
            path=["triage", NASTY],
            latency_ms=1.0,
            usage={"triage": usage},
        ),
    ]


def assert_shown_safely(out: str) -> None:
    for ch in RAW:
        assert ch not in out, (ch, out)
    assert leftovers(out, newlines=True) == []
    assert "[bold red]markup[/]" in out
    assert "\\u202etxt.exe" in out and "\\x1b[2J" in out and "\\x1b]0;title\\x07" in out
    assert "cr\\rX" in out and "back\\x08\\x08" in out


@pytest.mark.parametrize("colour", [False, True])
def test_console_sink_shows_user_and_model_text_safely(colour: bool) -> None:
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=400,
        force_terminal=colour,
        color_system="truecolor" if colour else None,
        highlight=False,
    )
    sink = ConsoleSink(console, verbose=True)
    for event in events():
        assert sink.render(event) is not None, event
        sink.emit(event)
    out = buf.getvalue()
    if colour:  # rich's own styling is the only escape sequence left
        assert "\x1b[" in out
        out = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert_shown_safely(out)
    assert "u\\x1b[1m" in out  # the user id too
    assert not sink._warned
