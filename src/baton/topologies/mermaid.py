"""Mermaid flowcharts of topologies: who may pass the baton to whom, who asks whom.

`Team.to_mermaid()` draws agents as nodes and permitted hand-offs as edges (the entry, or the
router, first; the human queue as its own node); `Supervisor.to_mermaid()` adds the lead's
`ask` edges to its workers. Paste the text into any Mermaid renderer (GitHub renders it in
Markdown) or print it with `baton graph module:team`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_UNSAFE = re.compile(r'["<>`#;\[\]{}|\\\n\r\t]')


def label(text: str) -> str:
    """Text safe inside a quoted Mermaid label (no statement, quote or bracket breakers)."""
    return _UNSAFE.sub(" ", text).strip() or "-"


class Flowchart:
    """A small builder of `flowchart LR` diagrams with stable node ids."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.lines: list[str] = ["flowchart LR"]

    def node(self, name: str, shape: str = "box", note: str = "") -> str:
        """The node's id, declared on first use (`box`, `round`, `stadium` or `circle`)."""
        found = self.ids.get(name)
        if found is not None:
            return found
        nid = self.ids[name] = f"n{len(self.ids) + 1}"
        text = label(name) + (f"<br/>{label(note)}" if note else "")
        opened, closed = {
            "box": ("[", "]"),
            "round": ("(", ")"),
            "stadium": ("([", "])"),
            "circle": ("((", "))"),
        }[shape]
        self.lines.append(f'    {nid}{opened}"{text}"{closed}')
        return nid

    def edge(self, source: str, target: str, text: str = "", dotted: bool = False) -> None:
        arrow = "-.->" if dotted else "-->"
        middle = f'|"{label(text)}"|' if text else ""
        self.lines.append(f"    {self.ids[source]} {arrow}{middle} {self.ids[target]}")

    def edges(self, pairs: Iterable[tuple[str, str, str]], dotted: bool = False) -> None:
        for a, b, text in pairs:
            self.edge(a, b, text, dotted)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
