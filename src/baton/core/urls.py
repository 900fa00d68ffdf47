"""URL helpers the backends share."""

from __future__ import annotations

from urllib.parse import SplitResult, urlunsplit


def unsplit(parts: SplitResult) -> str:
    """`urlunsplit`, keeping the `//` of a URL without a host: Python writes `unix:///run/x.sock`
    back as `unix:/run/x.sock`, which redis-py (8 and newer) refuses."""
    text = urlunsplit(parts)
    scheme = parts.scheme
    if scheme and not parts.netloc and not text.startswith(f"{scheme}://"):
        text = f"{scheme}://{text[len(scheme) + 1 :]}"
    return text
