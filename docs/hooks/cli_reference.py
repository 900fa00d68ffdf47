"""MkDocs hook: the command-line reference page (`reference/cli.md`), generated at build time
from the `baton` typer application, so it lists exactly the commands and options Baton has.

mkdocs.yml names this file under `hooks:` and keeps it out of the site with `exclude_docs`.
"""

from __future__ import annotations

import html
from typing import Any

PAGE = "reference/cli.md"

INTRO = """# Command-line reference

Every `baton` command, its arguments and options, generated from the command line itself when
the site is built (`baton COMMAND --help` prints the same). Worked examples are on
[the command line](../cli.md) page.

"""


def _text(value: str) -> str:
    """Help text as Markdown: angle brackets and table pipes escaped, lines joined."""
    return html.escape(" ".join(value.split()), quote=False).replace("|", "\\|")


def _code(value: str) -> str:
    """Text for a code span in a table cell (a pipe inside a code span splits no cell)."""
    return " ".join(value.split())


def _command(command: Any, path: list[str], parent: Any, out: list[str]) -> None:
    ctx = command.context_class(command, info_name=path[-1], parent=parent)
    if len(path) > 1:
        level = "#" * min(len(path), 4)
        out.append(f"{level} `{' '.join(path)}`\n")
    usage = " ".join(command.get_usage(ctx).removeprefix("Usage:").split())
    out.append(f"`{usage}`\n")
    if command.help:
        paragraphs = [p for p in command.help.split("\n\n") if p.strip()]
        out.extend(_text(p) + "\n" for p in paragraphs)
    rows = [p.get_help_record(ctx) for p in command.get_params(ctx)]
    rows = [r for r in rows if r and r[0] != "--help"]
    if rows:
        out.append("| argument or option | meaning |\n|---|---|")
        out.extend(f"| `{_code(names)}` | {_text(meaning)} |" for names, meaning in rows)
        out.append("")
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                _command(sub, [*path, name], ctx, out)


def cli_reference() -> str:
    """The page's Markdown."""
    import typer

    from baton.cli.app import app

    out = [INTRO]
    _command(typer.main.get_command(app), ["baton"], None, out)
    return "\n".join(out)


def on_files(files: Any, config: Any) -> Any:
    """Add the generated page to the site's files (mkdocs 1.6 `File.generated`)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=cli_reference()))
    return files
