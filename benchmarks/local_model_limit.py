"""The embedded model against its physical limit on this machine.

    python benchmarks/local_model_limit.py [--model qwen2.5-coder-1.5b] [--rounds 3]
        [--threads 1 2] [--prompt-tokens 512] [--decode-tokens 64] [--demo] [--states DIR]
        [--full-grammar] [--batches 64 128 256 512]

1. llama.cpp alone (no Baton), the same GGUF and batch size as the embedded engine, at each
   `--threads`: prefill tokens/s (a prompt of `--prompt-tokens` read into an empty context)
   and decode tokens/s (`--decode-tokens` generated greedily after it, no grammar), the median
   of `--rounds`. The engine's own thread count (`default_threads()`) is marked. With
   `--batches`: prefill at the engine's thread count for each llama.cpp batch size instead of
   the engine's `N_BATCH` (decode reads one token at a time: the batch size does not touch it).
2. With `--demo`: the demo desk's six requests on the embedded model, played in this process
   as `baton demo` plays them. Per request: the seconds Baton took, the prompt tokens the
   model read (evaluated; the rest came from a saved prompt state), the tokens it generated,
   and the seconds those would take at part 1's rates for the engine's thread count
   (read / prefill + generated / decode). Baton / limit is the overhead left to remove:
   grammar-constrained sampling, prompt formatting, re-asks, the kernel. `--states DIR` keeps
   the agents' prompt states on disk there, as `baton demo` does: run it twice to see a cold
   and a warm start.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from baton.models.local.engine import N_BATCH, default_threads, import_llama  # noqa: E402
from baton.models.local.weights import DEFAULT_MODEL, weights_path  # noqa: E402

TEXT = (
    "You are billing. You answer questions about invoices, refunds and payments of the "
    "customer's orders, using the tools below, and hand the customer to another desk when "
    "the request is not yours. 你好，我的订单 ORD-1042 的发票金额不对，请帮我查一下。 "
)


def rates(
    model: str,
    threads: int,
    prompt_tokens: int,
    decode_tokens: int,
    rounds: int,
    n_batch: int = N_BATCH,
) -> dict[str, float]:
    """Median prefill and decode tokens/s of llama.cpp alone."""
    llama_cpp = import_llama()
    llm = llama_cpp.Llama(
        model_path=str(weights_path(model)),
        n_ctx=prompt_tokens + decode_tokens + 16,
        n_threads=threads,
        n_threads_batch=threads,
        n_batch=n_batch,
        seed=0,
        verbose=False,
    )
    try:
        words = llm.tokenize(TEXT.encode("utf-8"), add_bos=False)
        prompt = [llm.token_bos(), *(words * (prompt_tokens // len(words) + 1))][:prompt_tokens]
        prefill, decode = [], []
        for _ in range(rounds):
            llm.reset()
            t = time.perf_counter()
            llm.eval(prompt)
            prefill.append(len(prompt) / (time.perf_counter() - t))
            t = time.perf_counter()
            for _ in range(decode_tokens):
                token = llm.sample(top_k=1, temp=0.0)
                llm.eval([token])
            decode.append(decode_tokens / (time.perf_counter() - t))
        return {"prefill": statistics.median(prefill), "decode": statistics.median(decode)}
    finally:
        llm.close()


async def demo(
    model: str, states: Path | None, full_grammar: bool = False
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The demo's six requests on the embedded model: seconds and tokens per request, and the
    prompt states' figures: the share of model calls that restored a saved state (or went on
    from the live context), and the prompt share read per call after each agent's first."""
    from baton.cli.demo import DemoTurn
    from baton.desk import DEMO, build_desk
    from baton.models.local import LocalModel

    local = LocalModel(model, prompt_states=states)
    local.load().llama.greedy_first = not full_grammar
    desk = build_desk(model=local, store="memory://")
    rows = []
    agents: set[str] = set()
    later: list[float] = []
    reused = calls_all = 0
    for req in DEMO:
        t = time.perf_counter()
        result = await desk.team.run(req.text, session_id=f"demo-{req.session}")
        seconds = time.perf_counter() - t
        turn = DemoTurn(req.text, req.session, result, seconds, req.note, req)
        usage = result.total_usage
        calls = 0
        for e in result.events:
            if e.type != "model_called":
                continue
            calls += 1
            reused += e.usage.cached_input_tokens > 0
            if e.agent in agents and e.usage.input_tokens:
                later.append(e.usage.evaluated_input_tokens / e.usage.input_tokens)
            agents.add(e.agent or "")
        calls_all += calls
        rows.append(
            {
                "request": req.note or req.text[:40],
                "seconds": seconds,
                "calls": calls,
                "prompt": usage.input_tokens,
                "read": usage.evaluated_input_tokens,
                "generated": usage.output_tokens,
                "ok": turn.as_expected,
            }
        )
    figures = {
        "reused": reused / calls_all if calls_all else 0.0,
        "read_after_first": statistics.mean(later) if later else 0.0,
    }
    return rows, figures


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=None)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--demo", action="store_true", help="also play the demo's six requests")
    ap.add_argument(
        "--states",
        type=Path,
        default=None,
        help="keep the prompt states on disk in this folder (a second run starts warm)",
    )
    ap.add_argument(
        "--full-grammar",
        action="store_true",
        help="constrain every candidate token by the grammar (no greedy-first check): the "
        "engine as it decoded before, for comparison",
    )
    ap.add_argument(
        "--batches",
        type=int,
        nargs="+",
        default=None,
        help="also measure prefill at the engine's thread count for each of these batch sizes",
    )
    args = ap.parse_args()
    engine_threads = default_threads()
    threads = args.threads or sorted({engine_threads, os.cpu_count() or 1})
    print(f"# python benchmarks/local_model_limit.py {' '.join(sys.argv[1:])}")
    print(f"# {args.model}, {os.cpu_count()} cores, the engine uses {engine_threads} thread(s)")
    print()
    print("llama.cpp alone: tokens/s, median of", args.rounds, "rounds")
    print(f"{'threads':>8} {'prefill':>10} {'decode':>10}")
    measured = {}
    for n in threads:
        r = rates(args.model, n, args.prompt_tokens, args.decode_tokens, args.rounds)
        measured[n] = r
        mark = "  (the engine's)" if n == engine_threads else ""
        print(f"{n:>8} {r['prefill']:>10.1f} {r['decode']:>10.1f}{mark}")
    if args.batches:
        print()
        print(f"prefill by batch size at {engine_threads} thread(s), tokens/s")
        print(f"{'n_batch':>8} {'prefill':>10}")
        for size in args.batches:
            r = rates(args.model, engine_threads, args.prompt_tokens, 1, args.rounds, size)
            mark = "  (the engine's)" if size == N_BATCH else ""
            print(f"{size:>8} {r['prefill']:>10.1f}{mark}")
    if not args.demo:
        return
    limit = measured.get(engine_threads) or rates(
        args.model, engine_threads, args.prompt_tokens, args.decode_tokens, args.rounds
    )
    rows, figures = asyncio.run(demo(args.model, args.states, args.full_grammar))
    print()
    print(f"the demo's requests against the limit at {engine_threads} thread(s)")
    print(
        f"{'request':<34} {'s':>7} {'calls':>5} {'prompt':>7} {'read':>6} {'gen':>5} "
        f"{'limit s':>8} {'x limit':>8}  ok"
    )
    total = total_limit = 0.0
    for row in rows:
        at_limit = row["read"] / limit["prefill"] + row["generated"] / limit["decode"]
        total, total_limit = total + row["seconds"], total_limit + at_limit
        print(
            f"{row['request'][:34]:<34} {row['seconds']:>7.1f} {row['calls']:>5} "
            f"{row['prompt']:>7} {row['read']:>6} {row['generated']:>5} {at_limit:>8.1f} "
            f"{row['seconds'] / at_limit if at_limit else 0:>7.2f}x  {'✓' if row['ok'] else '✗'}"
        )
    prompt = sum(r["prompt"] for r in rows)
    read = sum(r["read"] for r in rows)
    print(
        f"{'all six':<34} {total:>7.1f} {sum(r['calls'] for r in rows):>5} {prompt:>7} "
        f"{read:>6} {sum(r['generated'] for r in rows):>5} {total_limit:>8.1f} "
        f"{total / total_limit if total_limit else 0:>7.2f}x"
    )
    print(f"prompt tokens read: {read / prompt:.0%} of those sent" if prompt else "")
    print(f"model calls that reused a saved prompt state: {figures['reused']:.0%}")
    print(
        "prompt read per model call after each agent's first: "
        f"{figures['read_after_first']:.0%} on average"
    )


if __name__ == "__main__":
    main()
