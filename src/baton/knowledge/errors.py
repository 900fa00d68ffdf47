"""The knowledge base's errors: each names the folder or file and what to do."""

from __future__ import annotations

from baton.core.errors import BatonError


class KnowledgeBaseError(BatonError):
    """A knowledge base cannot be opened, read or written (the message says what to do)."""


class DocumentError(KnowledgeBaseError):
    """A file cannot be ingested: empty, too large, binary, or a PDF without text."""
