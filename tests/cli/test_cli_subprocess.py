"""The acceptance line, as a user types it: `baton run ...` then `baton trace ...` from the repo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "baton"


def baton(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """Run the `baton` console script (or `python -m baton.cli.app` where it is not installed)."""
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "baton.cli.app"]
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "PYTHONPATH")}
    env.update(COLUMNS="200", NO_COLOR="1", TERM="dumb", PYTHONIOENCODING="utf-8")
    return subprocess.run(
        [*cmd, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def test_run_then_trace_from_the_repo_root(tmp_path):
    url = f"sqlite:///{tmp_path}/b.db"
    ran = baton(
        "run",
        "examples.customer_service:team",
        "please check the invoice for order ORD-202607-99",
        "--store",
        url,
    )
    assert ran.returncode == 0, ran.stderr
    assert "The invoice for ORD-202607-99 is ISSUED" in ran.stdout
    assert "triage -> billing" in ran.stdout
    assert "Traceback" not in ran.stderr
    sid = re.search(r"^session: (\S+)", ran.stdout, re.M)
    assert sid, ran.stdout

    shown = baton("trace", sid.group(1), "--store", url)
    assert shown.returncode == 0, shown.stderr
    assert "billing" in shown.stdout
    assert "query_invoice" in shown.stdout
    assert "billing question" in shown.stdout  # the hand-off reason


def test_chinese_request_and_bad_target(tmp_path):
    url = f"sqlite:///{tmp_path}/b.db"
    ran = baton(
        "run",
        "examples.customer_service:team",
        "大事不好了，我们的生产服务器 srv-bj-001 发生告警，请帮我执行紧急重启！",
        "--store",
        url,
    )
    assert ran.returncode == 0, ran.stderr
    assert "大事不好了" in ran.stdout
    assert "path: triage -> tech_support" in ran.stdout
    bad = baton("run", "examples.nope:team", "hello", "--store", url)
    assert bad.returncode == 2
    assert "error: cannot import module 'examples.nope'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_demo_desk_ships_with_the_package_and_plays_anywhere(tmp_path):
    shown = baton("demo", "--model", "scripted", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "6/6" in shown.stdout, shown.stdout
    assert "Traceback" not in shown.stderr
