"""What one conversation turn costs a durable store, counted: store calls and round trips.

    python benchmarks/durable_calls.py [--stores sqlite postgres redis] [--turns 20]
        [--postgres postgresql://localhost/test] [--redis redis://127.0.0.1:6379/0]

The conversation of `benchmarks/overhead.py` (triage hands off to billing, which calls one
tool and answers), `--turns` times on fresh sessions after one warm-up, per store. Printed per
turn: the store calls the kernel made, by method, and what reached the server:

- SQLite: trips to the store's worker thread (each a call of `SQLiteStore._run`);
- PostgreSQL: round trips, counted at the driver: every statement asyncpg sends (`execute`,
  `fetch*`, `executemany`), with the BEGIN and COMMIT of each transaction;
- Redis: commands sent (a Lua script call is one).

A service that is not running is reported as skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from overhead import build_team  # noqa: E402

QUESTION = "Where is my invoice for ORD-202607-99?"

STORE_METHODS = (
    "get_session",
    "commit_run",
    "get_messages",
    "put_checkpoint",
    "put_checkpoint_fenced",
    "get_checkpoint",
    "delete_checkpoint",
    "acquire_lease",
    "release_lease",
)


def counting(obj: Any, names: tuple[str, ...], into: Counter[str], prefix: str = "") -> None:
    """Wrap `obj`'s coroutine methods `names` (those it has) to count their calls."""
    for name in names:
        fn = getattr(obj, name, None)
        if fn is None:
            continue

        def wrap(fn: Callable[..., Any] = fn, name: str = name) -> Callable[..., Any]:
            async def counted(*args: Any, **kw: Any) -> Any:
                into[prefix + name] += 1
                return await fn(*args, **kw)

            return counted

        setattr(obj, name, wrap())


def count_server(kind: str, store: Any, into: Counter[str]) -> Callable[[], None]:
    """Count what reaches the server; returns the undo."""
    if kind == "sqlite":
        run = store._run

        async def hop(action: str, work: Any) -> Any:
            into["server: thread trips"] += 1
            return await run(action, work)

        store._run = hop
        return lambda: None
    if kind == "postgres":
        import asyncpg

        saved: dict[tuple[Any, str], Any] = {}
        # BEGIN, COMMIT and the pool's reset of a released connection go through `execute`
        names = ("execute", "fetch", "fetchrow", "fetchval", "executemany")
        for cls, name in [(asyncpg.Connection, n) for n in names]:
            fn = saved[cls, name] = getattr(cls, name)

            def wrap(fn: Any = fn) -> Any:
                async def counted(self: Any, query: str, *args: Any, **kw: Any) -> Any:
                    into["server: round trips"] += 1
                    head = query.split(None, 1)[0].upper() if query.strip() else "?"
                    into[f"server:   {head} ..."] += 1
                    return await fn(self, query, *args, **kw)

                return counted

            setattr(cls, name, wrap())

        def undo() -> None:
            for (cls, name), fn in saved.items():
                setattr(cls, name, fn)

        return undo
    import redis.asyncio as aioredis

    execute = aioredis.Redis.execute_command

    async def command(self: Any, *args: Any, **kw: Any) -> Any:
        into["server: commands"] += 1
        return await execute(self, *args, **kw)

    aioredis.Redis.execute_command = command  # type: ignore[method-assign]

    def undo_redis() -> None:
        aioredis.Redis.execute_command = execute  # type: ignore[method-assign]

    return undo_redis


def url_for(kind: str, args: argparse.Namespace, folder: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{folder / 'durable.db'}"
    if kind == "postgres":
        return f"{args.postgres}?schema=bench_{uuid.uuid4().hex[:8]}"
    return f"{args.redis}?prefix=bench-{uuid.uuid4().hex[:8]}:"


async def measure(kind: str, args: argparse.Namespace) -> Counter[str] | str:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            team = build_team(url_for(kind, args, Path(tmp)))
            await team.run(QUESTION, session_id="warm-up")
        except Exception as exc:  # a service that is not running
            return f"skipped ({type(exc).__name__}: {str(exc)[:120]})"
        calls: Counter[str] = Counter()
        store = team.store
        counting(store, STORE_METHODS, calls, "store: ")
        undo = count_server(kind, store, calls)
        try:
            for i in range(args.turns):
                result = await team.run(QUESTION, session_id=f"s{i}")
                assert result.status == "completed", result.error
        finally:
            undo()
            if kind == "postgres":
                await store.drop()
            await team.aclose()
        return calls


async def run(args: argparse.Namespace) -> None:
    for kind in args.stores:
        got = await measure(kind, args)
        print(f"\n{kind}: per conversation turn ({args.turns} turns, each a fresh session)")
        if isinstance(got, str):
            print(f"  {got}")
            continue
        for name, n in sorted(got.items()):
            print(f"  {name:36s} {n / args.turns:5.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--stores", nargs="+", default=["sqlite", "postgres", "redis"])
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--postgres", default="postgresql://localhost/test")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
