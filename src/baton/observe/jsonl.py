"""`JSONLSink`: appends every event to a file as one JSON line."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from types import TracebackType
from typing import IO

from baton.core.events import Event

log = logging.getLogger("baton.observe")


class JSONLSink:
    """Appends one JSON line per event (`event_from_json` reads them back), flushed per line."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = open(  # noqa: SIM115 - closed by close()
            self.path, "a", encoding="utf-8", buffering=1
        )
        self._lock = threading.Lock()
        self._warned = False

    @property
    def closed(self) -> bool:
        """True once `close()` has been called."""
        return self._file is None

    def emit(self, event: Event) -> None:
        """Append `event` as one line; never raises (a failure is logged once)."""
        try:
            line = event.model_dump_json() + "\n"
            with self._lock:
                if self._file is None:
                    raise ValueError(f"JSONLSink for {self.path} is closed")
                self._file.write(line)
        except Exception as exc:  # a sink must never break a run
            if not self._warned:
                self._warned = True
                log.warning("JSONLSink could not write to %s: %s", self.path, exc)

    def close(self) -> None:
        """Flush and close the file; later events are dropped."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> JSONLSink:
        """Use the sink as a context manager; the file closes on exit."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the file."""
        self.close()
