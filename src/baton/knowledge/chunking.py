"""Chunking by structure: sections under headings, then paragraphs, then sentences.

A chunk never crosses a heading, keeps whole paragraphs when they fit, and holds at most
`budget` tokens; consecutive chunks of a section share up to `overlap` tokens of sentences.
Tokens are counted without assuming spaces between words: each CJK character (and CJK
punctuation mark) is one token, any other run of non-space characters one token per
`WORD_CHARS` characters. Chinese sentences end at 。！？； as well as at line ends.
Every chunk keeps its heading path and its character offsets: `text[start:end]` is its text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from baton.core.text import blank
from baton.knowledge.documents import Heading

CJK = (
    "\u2e80-\u2fdf\u3001-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0002fa1f"
)
"""Character ranges counted one token per character: CJK ideographs, kana, hangul and
CJK punctuation (full-width forms included)."""

READING_VERSION = 2
"""Goes up whenever reading (`baton.knowledge.documents`) or chunking changes what a file
becomes: a knowledge base chunks its files again on the next ingest. 2: HTML page chrome and
heading-only sections are dropped."""

WORD_CHARS = 20
"""A run of non-space, non-CJK characters counts one token per this many characters (so an
unbroken run, such as a base64 blob, cannot make a chunk of unbounded size)."""

_TOKEN = re.compile(rf"[{CJK}]|[^\s{CJK}]{{1,{WORD_CHARS}}}")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"[。！？；][”’」』）)\]]*|[.!?;](?=\s)|\n")


def count_tokens(text: str) -> int:
    """Tokens in `text` as the chunker counts them (an estimate of a model's tokens)."""
    return len(_TOKEN.findall(text))


@dataclass(frozen=True)
class Chunk:
    """A piece of a document: its text, offsets into the extracted text, heading path."""

    index: int
    text: str
    start: int
    end: int
    heading: tuple[str, ...]
    tokens: int


@dataclass(frozen=True)
class _Unit:
    start: int
    end: int
    tokens: int


def chunk_text(
    text: str,
    headings: Sequence[Heading] = (),
    *,
    budget: int = 300,
    overlap: int = 40,
) -> list[Chunk]:
    """Split `text` (with its `headings`) into chunks of at most `budget` tokens."""
    if budget < 1 or overlap < 0 or overlap >= budget:
        raise ValueError("chunking needs budget >= 1 and 0 <= overlap < budget")
    chunks: list[Chunk] = []
    sections = _sections(text, headings)
    # a heading with nothing under it before the next heading is no passage of its own: its
    # title lives on in the heading path of the sections below it (a document of headings
    # alone keeps them, so that it can be found)
    full = [(a, b, path) for a, b, body, path in sections if not blank(text[body:b])]
    for start, end, path in full or [(a, b, path) for a, b, _, path in sections]:
        paragraphs = [_units(text, a, b, budget, overlap) for a, b in _paragraphs(text, start, end)]
        for group in _pack([p for p in paragraphs if p], budget, overlap):
            a, b = group[0].start, group[-1].end
            chunks.append(
                Chunk(
                    index=len(chunks),
                    text=text[a:b],
                    start=a,
                    end=b,
                    heading=path,
                    tokens=sum(u.tokens for u in group),
                )
            )
    return chunks


def _sections(
    text: str, headings: Sequence[Heading]
) -> list[tuple[int, int, int, tuple[str, ...]]]:
    """(start, end, where the body starts after the heading, heading path) of the text before
    the first heading and under each."""
    marks = sorted((h for h in headings if 0 <= h.start < len(text)), key=lambda h: h.start)
    out: list[tuple[int, int, int, tuple[str, ...]]] = []
    first = marks[0].start if marks else len(text)
    if first > 0:
        out.append((0, first, 0, ()))
    stack: list[Heading] = []
    for i, h in enumerate(marks):
        while stack and stack[-1].level >= h.level:
            stack.pop()
        stack.append(h)
        end = marks[i + 1].start if i + 1 < len(marks) else len(text)
        if end > h.start:
            body = min(max(h.end, h.start), end)
            out.append((h.start, end, body, tuple(s.title for s in stack)))
    return out


def _paragraphs(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans between blank lines in text[start:end]."""
    out = []
    at = start
    for m in _PARAGRAPH_BREAK.finditer(text, start, end):
        out.append((at, m.start()))
        at = m.end()
    out.append((at, end))
    return out


def _units(text: str, start: int, end: int, budget: int, overlap: int) -> list[_Unit]:
    """The sentences of a paragraph, trimmed of white space; one too long for a chunk is cut
    into windows of tokens (small enough to serve as overlap)."""
    out: list[_Unit] = []
    at = start
    cuts = [m.end() for m in _SENTENCE_END.finditer(text, start, end)] + [end]
    window = max(1, min(budget, overlap)) if overlap else budget
    for cut in cuts:
        a, b = _trim(text, at, cut)
        at = cut
        if a >= b:
            continue
        tokens = list(_TOKEN.finditer(text, a, b))
        if len(tokens) <= budget:
            out.append(_Unit(a, b, len(tokens)))
            continue
        for i in range(0, len(tokens), window):
            part = tokens[i : i + window]
            out.append(_Unit(part[0].start(), part[-1].end(), len(part)))
    return out


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _pack(paragraphs: list[list[_Unit]], budget: int, overlap: int) -> list[list[_Unit]]:
    """Group units into chunks: whole paragraphs while they fit, sentences otherwise, each
    new chunk starting with the last sentences (up to `overlap` tokens) of the one before."""
    groups: list[list[_Unit]] = []
    current: list[_Unit] = []
    fresh = 0  # units of `current` not yet in an emitted chunk

    def tokens() -> int:
        return sum(u.tokens for u in current)

    def flush() -> None:
        nonlocal current, fresh
        if not fresh:
            return
        groups.append(current)
        carry: list[_Unit] = []
        used = 0
        for u in reversed(current):
            if used + u.tokens > overlap:
                break
            carry.insert(0, u)
            used += u.tokens
        current = carry if len(carry) < len(current) else []
        fresh = 0

    def add(units: list[_Unit]) -> None:
        nonlocal current, fresh
        need = sum(u.tokens for u in units)
        if tokens() + need > budget:
            flush()
            if tokens() + need > budget:  # the overlap does not fit beside it
                current = []
        current = current + units
        fresh += len(units)

    for para in paragraphs:
        size = sum(u.tokens for u in para)
        if size <= budget:
            add(para)
        else:
            for unit in para:
                add([unit])
    flush()
    return groups
