"""Reading files into text with their headings: Markdown, plain text, HTML and PDF.

A file is refused, with a message saying why and what to do, when it is empty, larger than
the limit, binary (NUL bytes, or not decodable as text), or a PDF without a text layer.
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from baton.core.text import blank, clean_text
from baton.knowledge.errors import DocumentError

MARKDOWN = frozenset({".md", ".markdown", ".mdx"})
TEXT = frozenset({".txt", ".text", ".rst", ".log", ".csv"})
HTML = frozenset({".html", ".htm", ".xhtml"})
PDF = frozenset({".pdf"})
SUFFIXES = MARKDOWN | TEXT | HTML | PDF
"""The file types `read_document` reads (by suffix, case-insensitive)."""

DEFAULT_MAX_MB = 20.0
"""Largest file ingested, in MB, unless the knowledge base is given another limit."""


@dataclass(frozen=True)
class Heading:
    """A heading in the extracted text: its level (1-6), title and character span."""

    level: int
    title: str
    start: int
    end: int


@dataclass(frozen=True)
class Document:
    """A file's extracted text, the headings in it, and the sha256 of the file's bytes."""

    source: str
    text: str
    sha256: str
    headings: list[Heading] = field(default_factory=list)


def supported(path: Path) -> bool:
    """Whether `read_document` reads files like `path` (by suffix)."""
    return path.suffix.lower() in SUFFIXES


def read_document(path: Path, source: str, max_mb: float = DEFAULT_MAX_MB) -> Document:
    """Read `path` (named `source` in messages and citations); `DocumentError` when refused."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise DocumentError(
            f"{source}: unsupported file type {suffix or '(none)'}; "
            f"supported: {', '.join(sorted(SUFFIXES))}"
        )
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise DocumentError(f"{source}: cannot be read ({exc})") from exc
    limit = int(max_mb * 1024 * 1024)
    if size > limit:
        raise DocumentError(
            f"{source} is {size / 1024 / 1024:.1f} MB, over the {max_mb:g} MB limit for one "
            "file: split it, or raise the limit (KnowledgeBase(max_file_mb=...), "
            "`baton kb ingest --max-file-mb`)"
        )
    if size == 0:
        raise DocumentError(f"{source} is empty: nothing to ingest")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    headings: list[Heading] = []
    if suffix in PDF:
        text = _pdf(data, source)
    else:
        raw = _decode(data, source)
        if suffix in HTML:
            text, headings = _html(raw)
        elif suffix in MARKDOWN:
            text, headings = raw, _markdown_headings(raw)
        else:
            text = raw
    if blank(text):
        raise DocumentError(f"{source} holds no readable text: nothing to ingest")
    return Document(source=source, text=text, sha256=digest, headings=headings)


def _decode(data: bytes, source: str) -> str:
    """UTF-8 (or UTF-16 with a byte order mark) text with `\\n` line ends; binary refused."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return _lines(data.decode("utf-16"))
        except UnicodeDecodeError:
            pass
    elif b"\x00" not in data:
        try:
            # surrogatepass: UTF-8 that encodes lone surrogates (written from a JSON
            # escape, say) is read, and clean_text turns each into U+FFFD
            return _lines(data.decode("utf-8-sig", errors="surrogatepass"))
        except UnicodeDecodeError:
            pass
    raise DocumentError(
        f"{source} is not text (it holds NUL bytes or is not valid UTF-8): a binary file "
        "with a text file's name? Convert it to UTF-8 text, or leave it out"
    )


def _lines(text: str) -> str:
    return clean_text(text.replace("\r\n", "\n").replace("\r", "\n"))


_MD_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.M)


def _markdown_headings(text: str) -> list[Heading]:
    """ATX headings (`# Title`), except inside fenced code blocks."""
    fences = [m.start() for m in _FENCE.finditer(text)]
    out = []
    for m in _MD_HEADING.finditer(text):
        if sum(1 for f in fences if f < m.start()) % 2:  # inside a code block
            continue
        out.append(Heading(len(m.group(1)), m.group(2).strip(), m.start(), m.end()))
    return out


def _pdf(data: bytes, source: str) -> str:
    """The text layer of every page, pages separated by a blank line."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError(f"{source} is an encrypted PDF: decrypt it first")
        pages = [page.extract_text() or "" for page in reader.pages]
    except DocumentError:
        raise
    except Exception as exc:  # pypdf raises many types on damaged files
        raise DocumentError(
            f"{source} cannot be read as a PDF ({type(exc).__name__}: {exc})"
        ) from exc
    text = _lines("\n\n".join(p.strip() for p in pages))
    if blank(text):
        raise DocumentError(
            f"{source} is a PDF without a text layer (scanned images?): run OCR on it "
            "(e.g. ocrmypdf) and ingest the result"
        )
    return text


_BLOCK = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "li", "main",
        "nav", "ol", "p", "pre", "section", "table", "tbody", "td", "tfoot", "th", "thead",
        "tr", "ul",
    }
)  # fmt: skip
_SKIP = frozenset({"script", "style", "head", "title", "noscript", "template", "svg"})
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)
_CHROME_TAGS = frozenset({"nav", "aside", "footer"})
_CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
_CHROME_CLASSES = frozenset(
    {"headerlink", "footer", "sidebar", "sphinxsidebar", "navbar", "breadcrumb", "breadcrumbs"}
)
"""A page's chrome: navigation, sidebars, footers, search boxes and the pilcrow links that
documentation generators (Sphinx, MkDocs) put after headings. Their text is the same on
every page of a site (tables of contents, "Next topic", "Navigation"), so as chunks it
would match many queries and answer none. Landmark elements and ARIA roles are the HTML
standard's own marks for it; the class names are the common generators'. (A boilerplate
library such as trafilatura drops headings and offsets we keep, hence these few lines.)"""


def _is_chrome(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    if tag in _CHROME_TAGS:
        return True
    for name, value in attrs:
        if name == "role" and value and value.strip().lower() in _CHROME_ROLES:
            return True
        if name == "class" and value and not _CHROME_CLASSES.isdisjoint(value.lower().split()):
            return True
    return False


class _HTMLText(HTMLParser):
    """Visible text of an HTML page, with block breaks and the h1-h6 headings' spans."""

    def __init__(self, keep_chrome: bool = False) -> None:
        super().__init__(convert_charrefs=True)
        self.keep_chrome = keep_chrome
        self.parts: list[str] = []
        self.size = 0
        self.headings: list[Heading] = []
        self._skip = 0
        self._pre = 0
        self._newlines = 0  # line ends at the end of the text so far
        self._heading: tuple[int, int, int] | None = None  # (level, start, first part)
        self._chrome: tuple[str, int] | None = None  # (tag, depth) of the chrome being skipped

    def _emit(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        body = text.rstrip("\n")
        self._newlines = len(text) - len(body) + (0 if body else self._newlines)

    def _break(self, n: int) -> None:
        """End the current block: `n` line ends after it (none at the very start)."""
        if self.size and self._newlines < n:
            self._emit("\n" * (n - self._newlines))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._chrome is not None:
            if tag == self._chrome[0]:
                self._chrome = (tag, self._chrome[1] + 1)
            return
        if not self.keep_chrome and tag not in _VOID and _is_chrome(tag, attrs):
            self._chrome = (tag, 1)
            return
        if tag in _SKIP:
            self._skip += 1
        elif tag in _HEADINGS:
            self._break(2)
            self._heading = (_HEADINGS[tag], self.size, len(self.parts))
        elif tag in _BLOCK:
            self._break(2 if tag in ("p", "div", "section", "table", "pre", "ul", "ol") else 1)
            if tag == "pre":
                self._pre += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._chrome is not None or (not self.keep_chrome and _is_chrome(tag, attrs)):
            return  # inside chrome, or an empty chrome element (<div class="sidebar"/>)
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._chrome is not None:
            if tag == self._chrome[0]:
                depth = self._chrome[1] - 1
                self._chrome = (tag, depth) if depth else None
            return
        if tag in _SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in _HEADINGS and self._heading is not None:
            level, start, first = self._heading
            self._heading = None
            title = "".join(self.parts[first:]).strip()
            if title:
                self.headings.append(Heading(level, " ".join(title.split()), start, self.size))
            self._break(2)
        elif tag in _BLOCK:
            if tag == "pre":
                self._pre = max(0, self._pre - 1)
            self._break(2 if tag in ("p", "div", "section", "table", "pre", "ul", "ol") else 1)

    def handle_data(self, data: str) -> None:
        if self._skip or self._chrome is not None:
            return
        if not self._pre:
            data = re.sub(r"\s+", " ", data)
            if not self.parts or self.parts[-1].endswith(("\n", " ")):
                data = data.lstrip(" ")
        if data:
            self._emit(data)


def _html(raw: str, chrome: bool = False) -> tuple[str, list[Heading]]:
    """The page's visible text and headings, without its chrome; with it (`chrome`) when
    dropping the chrome leaves nothing (a page that is all navigation, or whose chrome
    element is never closed)."""
    parser = _HTMLText(keep_chrome=chrome)
    parser.feed(raw)
    parser.close()
    text = "".join(parser.parts)
    if not chrome and blank(text):
        return _html(raw, chrome=True)
    return text, parser.headings
