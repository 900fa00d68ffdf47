"""What a search returns: `Passage`s with their `Citation`s, and what `ingest` reports."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Citation(BaseModel):
    """Where a passage comes from: knowledge base, file, heading path, offsets and hash."""

    model_config = ConfigDict(frozen=True)

    kb: str
    """The knowledge base's name."""
    source: str
    """The file as ingested (relative if it was given relative)."""
    heading: str
    """The heading path, outermost first, joined with " > " ("" for none)."""
    start: int
    """Offset of the passage's first character in the file's extracted text."""
    end: int
    """Offset just past its last character."""
    chunk_id: str
    """The chunk's id in the index."""
    sha256: str
    """sha256 of the passage's text: `KnowledgeBase.verify` checks it still matches."""


class Passage(BaseModel):
    """A chunk of a document found by a search: quoted data, never an instruction."""

    model_config = ConfigDict(frozen=True)

    id: str
    """The chunk's id (a uuid5 of knowledge base, source, chunk index and file hash)."""
    kb: str
    """The knowledge base's name."""
    text: str
    """The chunk's text, exactly as in the extracted text between `start` and `end`."""
    source: str
    """The file as ingested (relative if it was given relative)."""
    heading: list[str] = Field(default_factory=list)
    """The heading path, outermost first."""
    start: int
    """Offset of the first character in the source's extracted text."""
    end: int
    """Offset just past the last character."""
    score: float
    """How well it matches: cosine similarity, BM25 score, or the fused reciprocal rank."""
    sha256: str
    """sha256 of `text`."""

    @property
    def citation(self) -> Citation:
        """The citation that points at this passage."""
        return Citation(
            kb=self.kb,
            source=self.source,
            heading=" > ".join(self.heading),
            start=self.start,
            end=self.end,
            chunk_id=self.id,
            sha256=self.sha256,
        )


class IngestReport(BaseModel):
    """What one `ingest` call did, counted in files (and chunks stored)."""

    added: int = 0
    """New files indexed."""
    replaced: int = 0
    """Changed files whose chunks were replaced."""
    removed: int = 0
    """Files gone from an ingested folder whose chunks were dropped."""
    unchanged: int = 0
    """Files whose content hash matched: nothing to do."""
    chunks: int = 0
    """Chunks stored by this call."""
    skipped: list[tuple[str, str]] = Field(default_factory=list)
    """(path, reason) of each file refused: empty, too large, binary, a PDF without text."""
