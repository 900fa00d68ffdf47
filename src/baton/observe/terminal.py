"""Text from users and models, made safe to print on a terminal.

A user message, a model reply or a tool's error can carry characters a terminal acts on instead
of showing: ANSI escape sequences (`ESC [2J` clears the screen, `ESC ]0;...BEL` retitles the
window), a carriage return or backspaces that overwrite what came before, Unicode bidi controls
that show `txt.exe` for `exe.txt`, invisible characters that make two different words look the
same. `safe_text` replaces each such character by a visible escape (`\\u202e`, `\\x1b`, `\\r`),
so a reviewer sees that something was there and nothing acts on the terminal; `safe` does the
same into a rich `Text` with the escapes dim. Everything else passes unchanged: Chinese,
Japanese, emoji (ZWJ sequences, variation selectors, subdivision flags), combining marks, ZWNJ
and ZWJ in Persian and Indic scripts.

Neutralised (see `UNSAFE_CHARS`): every C0 control except tab (and newline where the output
is multi-line), DEL and the C1 controls (U+0080-U+009F: 8-bit CSI and OSC included), lone
surrogates, the line and paragraph separators, the bidi controls (U+061C, U+200E, U+200F,
U+202A-U+202E, U+2066-U+2069) and the other invisible format characters (soft hyphen,
zero-width space, word joiner and invisible operators, deprecated format controls, BOM,
interlinear annotation, tag characters outside an emoji flag). An escape sequence loses its
ESC, so what follows it is inert text and is shown as it is.

Text printed through rich must also never be read as markup: append it to a `Text` (as
`safe` does) or pass it through `rich.markup.escape`, never format it into a markup string.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

UNSAFE_CHARS = (
    "\x00-\x08\x0b-\x1f"  # C0 controls but tab and newline (newline: see `newlines`)
    "\x7f-\x9f"  # DEL and the C1 controls (CSI U+009B, OSC U+009D, NEL U+0085, ...)
    "\xad"  # soft hyphen (invisible)
    "\u061c"  # Arabic letter mark (bidi)
    "\u200b"  # zero-width space
    "\u200e\u200f"  # left-to-right and right-to-left marks (bidi)
    "\u2028\u2029"  # line and paragraph separators
    "\u202a-\u202e"  # bidi embeddings and overrides
    "\u2060-\u2064"  # word joiner, invisible function application/times/separator/plus
    "\u2066-\u2069"  # bidi isolates
    "\u206a-\u206f"  # deprecated format controls (symmetric swapping, digit shapes)
    "\ud800-\udfff"  # lone surrogates (cannot even be encoded for the terminal)
    "\ufeff"  # zero-width no-break space (BOM)
    "\ufff9-\ufffb"  # interlinear annotation (hides its text on some renderers)
    "\U000e0001\U000e0020-\U000e007f"  # tag characters (invisible ASCII), but see `_FLAG`
)
"""The characters `safe_text` replaces, as a regex character class body (newline aside)."""

_FLAG = "\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,6}\U000e007f"
"""An emoji subdivision flag (🏴 + tag letters/digits + cancel tag, e.g. England): kept."""

_UNSAFE_LINE = re.compile(f"{_FLAG}|[\n{UNSAFE_CHARS}]")
_UNSAFE_MULTI = re.compile(f"{_FLAG}|\r\n|[{UNSAFE_CHARS}]")
_ONE_LINE_SPACE = re.compile(r"(?:\r?\n|[ \t])+")

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_char(ch: str) -> str:
    """The visible escape for one character: `\\r`, `\\x1b`, `\\u202e`, `\\U000e0041`."""
    if ch in _SHORT:
        return _SHORT[ch]
    cp = ord(ch)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _pieces(text: str, newlines: bool) -> list[tuple[str, bool]]:
    """`text` split into (piece, is_escape) pairs; the escapes replace unsafe characters."""
    pattern = _UNSAFE_MULTI if newlines else _UNSAFE_LINE
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in pattern.finditer(text):
        s = m.group()
        if len(s) > 1:  # an emoji flag, or CRLF where newlines are kept: both stay text
            keep = "\n" if s == "\r\n" else s
            out.append((text[pos : m.start()] + keep, False))
        else:
            if m.start() > pos:
                out.append((text[pos : m.start()], False))
            out.append((escape_char(s), True))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def is_safe(text: str, *, newlines: bool = False) -> bool:
    """True when `safe_text` would return `text` unchanged."""
    return safe_text(text, newlines=newlines) == text


def safe_text(text: str, *, newlines: bool = False) -> str:
    """`text` with every unsafe character replaced by its visible escape.

    Tab always stays; newline stays only with `newlines=True` (multi-line output, where a
    CRLF also becomes a plain newline), else it is shown as `\\n` so text cannot start a
    line that looks like the program's own.
    """
    if not (_UNSAFE_MULTI if newlines else _UNSAFE_LINE).search(text):
        return text
    return "".join(piece for piece, _ in _pieces(text, newlines))


def safe(text: str | None, style: str = "", *, newlines: bool = False) -> Text:
    """A rich `Text` of `text` (literal: no markup), unsafe characters shown as dim escapes."""
    from rich.text import Text

    t = Text()
    dim = f"{style} dim" if style else "dim"
    for piece, esc in _pieces(text or "", newlines):
        t.append(piece, style=dim if esc else (style or None))
    return t


def one_line(text: str | None, limit: int = 80) -> str:
    """`text` on one line cut to `limit` characters with an ellipsis, like `clip`, but only
    spaces, tabs and newlines are folded: other characters stay for `safe` to show."""
    flat = _ONE_LINE_SPACE.sub(" ", text or "").strip(" ")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def safe_clip(text: str | None, limit: int = 80, style: str = "") -> Text:
    """`one_line(text, limit)` as a safe rich `Text` (see `safe`)."""
    return safe(one_line(text, limit), style)


def json_safe(doc: str) -> str:
    """A JSON document with its unsafe characters written as JSON escapes (`\\u202e`).

    `json.dumps(..., ensure_ascii=False)` and pydantic escape the C0 controls but leave DEL,
    the C1 controls, bidi controls and line separators raw; escaped, the document means the
    same to a parser and is harmless on a terminal. Structural newlines stay.
    """

    def esc(m: re.Match[str]) -> str:
        s = m.group()
        if len(s) > 1 or s in "\r\n\t":  # a flag, or JSON whitespace (strings escape these)
            return s
        cp = ord(s)
        if cp >= 0x10000:
            cp -= 0x10000
            return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"
        return f"\\u{cp:04x}"

    return _UNSAFE_MULTI.sub(esc, doc)
