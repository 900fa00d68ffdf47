"""Reading files: Markdown and HTML headings, PDF text, and the files that are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.knowledge.pdfs import blank_pdf, text_pdf

from baton.knowledge.documents import read_document
from baton.knowledge.errors import DocumentError


def test_markdown_headings_skip_code_blocks(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text("# Top\n\ntext\n\n```\n# not a heading\n```\n\n## Sub\n\nmore\n", encoding="utf-8")
    doc = read_document(f, "a.md")
    assert [(h.level, h.title) for h in doc.headings] == [(1, "Top"), (2, "Sub")]
    assert doc.text.startswith("# Top")
    assert len(doc.sha256) == 64


def test_html_keeps_headings_and_drops_scripts(tmp_path: Path) -> None:
    f = tmp_path / "p.html"
    f.write_text(
        "<html><head><title>T</title><style>p{color:red}</style></head><body>"
        "<h1>Shipping &amp; returns</h1><p>We ship\n   worldwide.</p>"
        "<h3>Times</h3><p>Three to seven days.</p><script>alert('x')</script></body></html>",
        encoding="utf-8",
    )
    doc = read_document(f, "p.html")
    assert [(h.level, h.title) for h in doc.headings] == [(1, "Shipping & returns"), (3, "Times")]
    for h in doc.headings:
        assert doc.text[h.start : h.end].strip() == h.title
    assert "We ship worldwide." in doc.text
    assert "alert" not in doc.text and "color" not in doc.text


def test_html_drops_the_page_chrome(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<html><body><nav><ul><li>Home</li><li>Next topic</li></ul></nav>"
        '<div class="related" role="navigation"><a href="i">index</a> <div>modules</div></div>'
        '<main><h1>Refunds<a class="headerlink" href="#r">\u00b6</a></h1>'
        "<p>Refunds take <b>5</b> days.<br/>Cards too.</p></main>"
        '<div class="sphinxsidebar"><h3>Table of Contents</h3><div><p>Refunds</p></div></div>'
        '<div class="footer"/><p>Kept after an empty footer.</p>'
        "<footer>Copyright 2026</footer></body></html>",
        encoding="utf-8",
    )
    doc = read_document(page, "page.html")
    assert [h.title for h in doc.headings] == ["Refunds"]
    for gone in ("Home", "Next topic", "index", "modules", "\u00b6", "Table of", "Copyright"):
        assert gone not in doc.text
    assert "Refunds take 5 days." in doc.text and "Kept after an empty footer." in doc.text
    # a page that is nothing but chrome (or never closes it) keeps its text
    nav = tmp_path / "nav.html"
    nav.write_text("<nav><p>Site map: refunds, cards</p><div>unclosed", encoding="utf-8")
    assert "Site map" in read_document(nav, "nav.html").text


def test_pdf_text_layer_is_read(tmp_path: Path) -> None:
    f = text_pdf(tmp_path / "p.pdf", ["Refund policy", "Refunds take five days."])
    doc = read_document(f, "p.pdf")
    assert "Refunds take five days." in doc.text


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("empty.md", b"", "is empty"),
        ("blank.txt", b"  \n\t\n", "no readable text"),
        ("binary.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not text"),
        ("latin1.md", "caf\xe9 cr\xe8me".encode("latin-1"), "not valid UTF-8"),
        ("broken.pdf", b"%PDF-1.4 this is no pdf", "cannot be read as a PDF"),
        ("picture.png", b"\x89PNG", "unsupported file type"),
    ],
)
def test_bad_files_are_refused_clearly(
    tmp_path: Path, name: str, content: bytes, says: str
) -> None:
    f = tmp_path / name
    f.write_bytes(content)
    with pytest.raises(DocumentError, match=says) as caught:
        read_document(f, name)
    assert name in str(caught.value)


def test_pdf_without_text_layer_is_refused(tmp_path: Path) -> None:
    f = blank_pdf(tmp_path / "scan.pdf")
    with pytest.raises(DocumentError, match=r"without a text layer.*OCR"):
        read_document(f, "scan.pdf")


def test_a_50_mb_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    f = tmp_path / "huge.txt"
    with f.open("wb") as out:  # sparse: 50 MB on paper, nothing written
        out.truncate(50 * 1024 * 1024)
    with pytest.raises(DocumentError, match=r"huge.txt is 50.0 MB, over the 20 MB limit"):
        read_document(f, "huge.txt")
    assert read_document(_small(tmp_path), "ok.txt", max_mb=0.01).text == "fine"


def _small(tmp_path: Path) -> Path:
    f = tmp_path / "ok.txt"
    f.write_text("fine", encoding="utf-8")
    return f
