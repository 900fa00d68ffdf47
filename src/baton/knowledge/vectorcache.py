"""A copy of the local mode's vectors in one `.npy` file, so a large knowledge base opens
fast: reading 100k vectors back through qdrant-client's scroll takes ~12 s on a 2-core CPU,
loading this file a fraction of a second.

Derived data, like the lexical index: Qdrant stays the store of record. The copy is used only
when it was written for the manifest's current generation and the same chunk ids; anything
else (missing, stale, damaged) and the vectors are read from Qdrant again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

FILENAME = "vectors.npy"
"""The copy's file name in the knowledge base's folder (its ids and generation beside it)."""


class VectorCache:
    """The `.npy` copy of the vector matrix in a knowledge base's folder."""

    def __init__(self, folder: Path) -> None:
        self.matrix_file = folder / FILENAME
        self.ids_file = folder / (FILENAME + ".json")

    def load(self, generation: int, ids: Sequence[str], dim: int) -> npt.NDArray[np.float32] | None:
        """The matrix, if the copy was written for `generation` with exactly `ids`."""
        import numpy as np

        try:
            meta = json.loads(self.ids_file.read_text(encoding="utf-8"))
            if meta.get("generation") != generation or meta.get("ids") != list(ids):
                return None
            matrix = np.load(self.matrix_file, allow_pickle=False)
        except (OSError, ValueError):
            return None
        if matrix.dtype != np.float32 or matrix.shape != (len(ids), dim):
            return None
        return matrix  # type: ignore[no-any-return]

    def save(self, generation: int, ids: Sequence[str], matrix: npt.NDArray[np.float32]) -> None:
        """Write the copy (each file to a temporary name first, then renamed)."""
        import numpy as np

        self.ids_file.unlink(missing_ok=True)  # a half-written pair never matches
        tmp = self.matrix_file.with_name(FILENAME + ".tmp")
        with tmp.open("wb") as f:
            np.save(f, matrix, allow_pickle=False)
        os.replace(tmp, self.matrix_file)
        tmp_ids = self.ids_file.with_name(self.ids_file.name + ".tmp")
        tmp_ids.write_text(json.dumps({"generation": generation, "ids": list(ids)}), "utf-8")
        os.replace(tmp_ids, self.ids_file)
