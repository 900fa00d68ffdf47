"""Redaction cost: `Redactor.redact_text` on clean and on secret-bearing texts.

    python benchmarks/redaction.py [--rounds 5] [--baseline-src PATH]

Each text is redacted with the redactor's cache of clean texts emptied first, so every call
pays the cheap checks (and, for a text with a secret, the detectors); the figure is the best
of 7 repeats of CPU time per call, in microseconds. `--baseline-src PATH` measures another
checkout's `src/` too, each side in a fresh process, the sides alternating for `--rounds`
rounds, and prints each side's best round and the ratio.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

WORKER = r"""
import json, time, timeit
from baton.runtime.redact import Redactor

R = Redactor()
CLEAN = {
    "reply (en)": "Your invoice for ORD-202607-99 is issued: 299.00 CNY. Anything else?",
    "reply (zh)": "您的订单 ORD-202607-99 已发货，退款将在3个工作日内到账。请问还有什么可以帮您？",
    "reason": "the user asks about a refund for order ORD-202607-99; billing owns refunds",
    "tool result": '{"order_id": "ORD-202607-99", "status": "shipped", "amount": 299.0, '
    '"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "items": [{"sku": "W2378156", "qty": 2}]}',
    "log, 5 KB": "2026-07-01T10:30:00Z INFO served GET /api/v1/orders/ORD-202607-99 in 12 ms "
    "for user li; " * 60,
}
SECRET = {
    "password": "ok, my password is Zq7hunter2! and thanks",
    "card": "please charge card 4111 1111 1111 1111 for ORD-202607-99",
    "zh": "我的支付密码是123456，卡号6222021234567890128，谢谢",
    "jwt": "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N ok",
    "aws": "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "pem, 1.3 KB": "-----BEGIN RSA PRIVATE KEY-----\n"
    + "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n" * 20
    + "-----END RSA PRIVATE KEY-----",
}
out = {}
clean = R._clean
for group, texts in (("clean", CLEAN), ("secret", SECRET)):
    for name, text in texts.items():
        n = 200 if len(text) > 1000 else 2000

        def call(text=text):
            clean.clear()
            R.redact_text(text)

        best = min(timeit.repeat(call, number=n, repeat=7, timer=time.process_time))
        out[f"{group}: {name}"] = best / n * 1e6
print(json.dumps(out))
"""


def measure(src: Path) -> dict[str, float]:
    """One fresh process with Baton from `src`: µs per call, by text."""
    done = subprocess.run(
        [sys.executable, "-c", WORKER],
        env={"PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline-src", help="compare with Baton from this checkout's src/")
    args = ap.parse_args()
    print(f"# {shlex.join(['python', *sys.argv])}")
    sides = {"this": SRC}
    if args.baseline_src:
        base = Path(args.baseline_src).resolve()
        sides["baseline"] = base / "src" if (base / "src" / "baton").is_dir() else base
    best: dict[str, dict[str, float]] = {}
    for rnd in range(args.rounds):
        order = list(sides.items()) if rnd % 2 == 0 else list(reversed(sides.items()))
        for side, src in order:
            for text, us in measure(src).items():
                row = best.setdefault(text, {})
                row[side] = min(row.get(side, us), us)
    header = f"{'text':22} {'this µs':>9}"
    if args.baseline_src:
        header += f" {'baseline µs':>12} {'ratio':>7}"
    print(header)
    for text, row in best.items():
        line = f"{text:22} {row['this']:9.2f}"
        if args.baseline_src:
            line += f" {row['baseline']:12.2f} {row['this'] / row['baseline']:6.2f}x"
        print(line)


if __name__ == "__main__":
    main()
