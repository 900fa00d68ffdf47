"""The lexical index: BM25 (package `bm25s`) over the chunks, kept in the knowledge base's
folder and rebuilt from the manifest when it is missing, damaged or stale.

The tokenizer is made for look-ups: text is lowercased; an id or code such as
`ORD-202607-99` or `srv-bj-001` is kept whole *and* split into its parts (a query for the
whole id ranks the exact match first, one for a part still finds it); CJK text, written
without spaces, becomes its characters and character bigrams.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton.knowledge.chunking import CJK

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

DIRNAME = "lexical"
"""The lexical index's folder in the knowledge base's folder."""

_IDEOGRAPHS = (
    "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
)
_TOKENS = re.compile(
    rf"(?P<cjk>[{_IDEOGRAPHS}]+)"
    rf"|(?P<code>[^\W_{CJK}]+(?:[-_./:#][^\W_{CJK}]+)+)"
    rf"|(?P<word>[^\W_{CJK}]+)"
)
_PARTS = re.compile(r"[-_./:#]")


def tokenize(text: str) -> list[str]:
    """The lexical tokens of `text` (lowercased words, whole codes and their parts, CJK
    characters and bigrams)."""
    out: list[str] = []
    for m in _TOKENS.finditer(text.lower()):
        if m.group("cjk"):
            run = m.group("cjk")
            out.extend(run)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
        elif m.group("code"):
            code = m.group("code")
            out.append(code)
            out.extend(p for p in _PARTS.split(code) if p)
        else:
            out.append(m.group("word"))
    return out


def codes(text: str) -> list[str]:
    """The ids and codes in `text` (such as `ord-202607-99`), lowercased."""
    return [m.group("code") for m in _TOKENS.finditer(text.lower()) if m.group("code")]


class LexicalIndex:
    """BM25 over the chunks' texts, in the order of the knowledge base's catalog."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder / DIRNAME
        self._bm25: Any = None
        self.size = 0

    def load(self, generation: int, size: int) -> bool:
        """Load the saved index if it was built from `generation` over `size` chunks."""
        import bm25s

        try:
            mark = (self.folder / "generation").read_text(encoding="utf-8").split()
            if mark != [str(generation), str(size)]:
                return False
            self._bm25 = bm25s.BM25.load(str(self.folder)) if size else None
        except Exception:  # missing or damaged: derived data, the caller rebuilds it
            return False
        self.size = size
        return True

    def build(self, texts: Sequence[str], generation: int) -> None:
        """Index `texts` and save the index (to a new folder, swapped in whole)."""
        import bm25s

        self.size = len(texts)
        self._bm25 = None
        if texts:
            bm25 = bm25s.BM25()
            # a chunk without any token still takes its row, so rows match the catalog
            bm25.index([tokenize(t) or [""] for t in texts], show_progress=False)
            self._bm25 = bm25
        fresh = self.folder.with_name(DIRNAME + ".new")
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir(parents=True)
        if self._bm25 is not None:
            self._bm25.save(str(fresh))
        (fresh / "generation").write_text(f"{generation} {len(texts)}", encoding="utf-8")
        old = self.folder.with_name(DIRNAME + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if self.folder.exists():
            self.folder.rename(old)
        fresh.rename(self.folder)
        shutil.rmtree(old, ignore_errors=True)

    def scores(self, query: str) -> npt.NDArray[np.float32] | None:
        """BM25 score of every chunk for `query`; None when nothing can match."""
        return self._scores([t for t in dict.fromkeys(tokenize(query)) if t])

    def code_scores(self, query: str) -> npt.NDArray[np.float32] | None:
        """BM25 score of every chunk for the ids and codes of `query` alone (nonzero only
        where a chunk holds one of them verbatim); None when the query has none indexed."""
        return self._scores(list(dict.fromkeys(codes(query))))

    def _scores(self, tokens: list[str]) -> npt.NDArray[np.float32] | None:
        if self._bm25 is None or not tokens:
            return None
        known = self._bm25.vocab_dict
        tokens = [t for t in tokens if t in known]
        if not tokens:
            return None
        scores: npt.NDArray[np.float32] = self._bm25.get_scores(tokens)
        return scores
