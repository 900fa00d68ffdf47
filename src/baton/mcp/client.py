"""`MCPServer`: a connection to an MCP server (stdio, streamable HTTP or SSE), made with the
official `mcp` SDK.

The connection lives on an event loop of its own, in a daemon thread: a team is run from
many loops (`team.run_sync` makes a new one each time) and the SDK's connection belongs to
the loop and the task that opened it, so a call from any loop is handed to that one
(cancelling the caller cancels the call there, and the SDK tells the server). It is opened
on first use, reused by every call, and dropped when it fails: a stdio server whose process
ended is started again on the next call. The tool list is cached, and listed again after the
server sends `notifications/tools/list_changed` or the connection is made again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import sys
import threading
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.jsonrpc import CONNECTION_CLOSED

from baton.approvals import PolicyLike
from baton.core.errors import BatonError, ConfigError
from mcp import Client, MCPError, StdioServerParameters

if TYPE_CHECKING:
    from baton.mcp.toolset import MCPToolset

_log = logging.getLogger("baton")
_T = TypeVar("_T")

_TRANSPORT_ERRORS = (
    OSError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    httpx2.TransportError,
)
"""What a connection that broke raises (the next call makes a new one)."""


class MCPServerError(BatonError):
    """An MCP server could not be started, reached or used; the message names the server
    (and its command or URL) and what to do."""


class _Loop:
    """An event loop running in a daemon thread of its own."""

    def __init__(self, name: str, server: str) -> None:
        self.server = server
        self.stopping = False
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name=f"baton-mcp-{name}", daemon=True
        )
        self.thread.start()

    async def run(self, work: Coroutine[Any, Any, _T]) -> _T:
        """`work` run on this loop, awaited from the caller's (cancelling one cancels it);
        work the loop's stop cancelled raises `MCPServerError` to its caller."""
        done = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return await asyncio.wrap_future(done)
        except asyncio.CancelledError:
            if self.stopping and done.cancelled():
                raise MCPServerError(
                    f"{self.server} was closed (aclose) during this call; it opens again on "
                    "the next call"
                ) from None
            raise

    def stop(self) -> None:
        """Stop the loop and its thread (after its connections are closed); work still on
        it is cancelled, so that no caller waits for a loop that no longer runs."""

        self.stopping = True

        async def end() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:  # their callers hear of it before the loop stops
                await asyncio.wait(tasks, timeout=5)
            asyncio.get_running_loop().stop()

        asyncio.run_coroutine_threadsafe(end(), self.loop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


class _Connection:
    """One open connection: the SDK client, and the task that holds it open (the SDK's
    contexts must be left by the task that entered them)."""

    def __init__(self, client: Client, task: asyncio.Task[None], closing: asyncio.Event) -> None:
        self.client = client
        self.task = task
        self.closing = closing
        self.dead = False

    async def close(self) -> None:
        self.closing.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(self.task, 10)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside exception groups (anyio wraps its tasks' errors)."""
    inner = getattr(exc, "exceptions", None)
    while inner:
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc


class MCPServer:
    """An MCP server whose tools agents can call: `MCPServer.stdio(...)`, `MCPServer.http(...)`
    or `MCPServer.sse(...)`; give an agent its tools with `server.tools(...)`."""

    def __init__(
        self,
        *,
        name: str,
        transport: str,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        connect_timeout_s: float = 30.0,
    ) -> None:
        if transport not in ("stdio", "http", "sse"):
            raise ConfigError(f"transport must be stdio, http or sse, not {transport!r}")
        if isinstance(args, str):
            raise ConfigError(f"MCP server {name!r}: args takes a list of strings")
        self.name = name
        """Names the server in errors and logs."""
        self.transport = transport
        self.command = command
        self.args = tuple(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.url = url
        self.headers = dict(headers or {})
        self.connect_timeout_s = connect_timeout_s
        self._loop: _Loop | None = None
        self._loop_lock = threading.Lock()
        self._conn: _Connection | None = None
        self._connecting: asyncio.Lock | None = None
        self._listed: list[mcp_types.Tool] | None = None
        self._version = 0
        """Bumped each time the tool list is listed anew (a toolset builds its tools again)."""
        self._stale = True

    # ------------------------------------------------------------------ construction
    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        cwd: str | None = None,
        connect_timeout_s: float = 30.0,
    ) -> MCPServer:
        """A server run as a child process, spoken to over its stdin/stdout. `env` is added
        to a minimal environment (PATH, HOME...), as the SDK does; `name` defaults to the
        command's file name."""
        if not isinstance(command, str) or not command.strip():
            raise ConfigError("MCPServer.stdio needs the command that starts the server")
        return cls(
            name=name or os.path.basename(command),
            transport="stdio",
            command=command,
            args=args,
            env=env,
            cwd=cwd,
            connect_timeout_s=connect_timeout_s,
        )

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        connect_timeout_s: float = 30.0,
    ) -> MCPServer:
        """A server reached over streamable HTTP at `url` (e.g. `http://host:8000/mcp`);
        `headers` go with every request (an `Authorization`, say)."""
        return cls._remote("http", url, headers, name, connect_timeout_s)

    @classmethod
    def sse(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        connect_timeout_s: float = 30.0,
    ) -> MCPServer:
        """A server that still speaks the older HTTP+SSE transport (its `.../sse` URL)."""
        return cls._remote("sse", url, headers, name, connect_timeout_s)

    @classmethod
    def _remote(
        cls,
        transport: str,
        url: str,
        headers: Mapping[str, str] | None,
        name: str | None,
        timeout: float,
    ) -> MCPServer:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"MCPServer.{transport} needs an http(s) URL, got {url!r}")
        return cls(
            name=name or parts.hostname,
            transport=transport,
            url=url,
            headers=headers,
            connect_timeout_s=timeout,
        )

    def describe(self) -> str:
        """`MCP server 'time' (command: mcp-server-time --flag)`: how errors name it."""
        if self.transport == "stdio":
            where = "command: " + shlex.join([self.command or "", *self.args])
        else:
            parts = urlsplit(self.url or "")
            where = f"{self.transport} {parts.scheme}://{parts.netloc}{parts.path}"
        return f"MCP server {self.name!r} ({where})"

    def __repr__(self) -> str:
        return f"MCPServer({self.name!r}, {self.transport})"

    def tools(
        self,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        *,
        scopes: Sequence[str] = (),
        tool_scopes: Mapping[str, Sequence[str]] | None = None,
        requires_approval: PolicyLike | Mapping[str, PolicyLike] = False,
        approver_roles: Sequence[str] = (),
        dual: bool = False,
        approval_timeout_s: float | None = None,
        timeout_s: float | None = None,
        max_result_chars: int | None = None,
        prefix: str = "",
    ) -> MCPToolset:
        """The server's tools as a toolset for `Agent(tools=[...])`: only those named in
        `include` (None: all), less those in `exclude`. `scopes`: scopes every one needs;
        `tool_scopes`: more per tool. `requires_approval`: as `@tool`'s, for every tool, or a
        dict tool name -> policy. `timeout_s`, `max_result_chars` as `@tool`'s. `prefix` goes
        before each name the model sees (two servers with the same tool names)."""
        from baton.mcp.toolset import MCPToolset

        return MCPToolset(
            self,
            include=include,
            exclude=exclude,
            scopes=scopes,
            tool_scopes=tool_scopes,
            requires_approval=requires_approval,
            approver_roles=approver_roles,
            dual=dual,
            approval_timeout_s=approval_timeout_s,
            timeout_s=timeout_s,
            max_result_chars=max_result_chars,
            prefix=prefix,
        )

    # ------------------------------------------------------------------ use
    async def list_tools(self) -> tuple[int, list[mcp_types.Tool]]:
        """(version, tools): the cached list, listed again when the server said it changed
        or the connection was made again; the version changes with each new list."""
        listed = self._listed
        if listed is not None and not self._stale:
            return self._version, listed
        return await self._on_loop(self._list())

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], meta: Mapping[str, Any] | None = None
    ) -> mcp_types.CallToolResult:
        """Call tool `name` (the server's name for it); `MCPServerError` when the server
        cannot be reached or the connection ends during the call."""
        return await self._on_loop(self._call(name, dict(arguments), dict(meta or {})))

    async def aclose(self) -> None:
        """Close the connection (a stdio server's process ends) and the loop it lives on;
        the next use opens them again."""
        with self._loop_lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            with contextlib.suppress(Exception):
                await loop.run(self._drop())
        finally:
            self._connecting = None  # its lock belonged to the loop that stops now
            await asyncio.get_running_loop().run_in_executor(None, loop.stop)

    def _on_loop(self, work: Coroutine[Any, Any, _T]) -> Awaitable[_T]:
        with self._loop_lock:
            if self._loop is None:
                self._loop = _Loop(self.name, self.describe())
            loop = self._loop
        return loop.run(work)

    # ------------------------------------------------------------------ on the server's loop
    async def _list(self) -> tuple[int, list[mcp_types.Tool]]:
        client = await self._client()
        self._stale = False  # a change announced from here on lists again
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        try:
            for _ in range(100):  # a server whose pages never end cannot hang the run
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except Exception as exc:
            self._stale = True
            raise self._failed("listing its tools", exc) from exc
        self._listed = tools
        self._version += 1
        return self._version, tools

    async def _call(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any]
    ) -> mcp_types.CallToolResult:
        client = await self._client()
        try:
            return await client.call_tool(name, arguments, meta=meta)  # type: ignore[arg-type]
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:  # the request's connection ended
                raise self._failed(f"the call to {name}", exc) from exc
            raise MCPServerError(f"{self.describe()} refused the call to {name}: {exc}") from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._failed(f"the call to {name}", exc) from exc
        except Exception as exc:  # the connection is fine: the answer is what is wrong
            raise MCPServerError(
                f"{self.describe()} answered the call to {name} with a result that cannot be "
                f"used ({type(exc).__name__}: {exc})"
            ) from exc

    def _failed(self, what: str, exc: BaseException) -> MCPServerError:
        """The connection is dropped (the next use opens a new one): the error says so."""
        conn = self._conn
        if conn is not None:
            conn.dead = True
        restart = "started again" if self.transport == "stdio" else "connected again"
        return MCPServerError(
            f"{self.describe()} failed during {what} ({type(_leaf(exc)).__name__}: "
            f"{_leaf(exc)}); its connection was dropped and it is {restart} on the next "
            "call. The call may have taken effect before that"
        )

    async def _client(self) -> Client:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            conn = self._conn
            if conn is not None and not conn.dead and not conn.task.done():
                return conn.client
            await self._drop()
            self._conn = await self._open()
            self._stale = True  # a new connection (a restarted server) is listed again
            return self._conn.client

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _open(self) -> _Connection:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        closing = asyncio.Event()
        task = asyncio.create_task(self._hold(ready, closing))
        try:
            client = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout_s)
        except asyncio.TimeoutError:
            ready.cancel()  # (nobody reads what the handshake ends with now)
            closing.set()
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise MCPServerError(
                f"{self.describe()} did not complete the MCP handshake within "
                f"{self.connect_timeout_s:g}s; check that the command starts an MCP server "
                "(run it by hand), or raise connect_timeout_s"
            ) from None
        except Exception as exc:
            found = _leaf(exc)
            hint = (
                "check that the command is installed and on PATH, and that it runs by hand"
                if self.transport == "stdio"
                else "check the URL, that the server is running, and the headers it needs"
            )
            raise MCPServerError(
                f"{self.describe()} could not be started or reached "
                f"({type(found).__name__}: {found}); {hint}"
            ) from None
        return _Connection(client, task, closing)

    async def _hold(self, ready: asyncio.Future[Client], closing: asyncio.Event) -> None:
        """Open the SDK client, hand it over, and keep it open until `closing` is set."""
        try:
            async with Client(
                self._transport(),
                mode="legacy",  # the initialize handshake: notifications flow unasked
                cache=None,  # the tool list is cached here, with list_changed honoured
                message_handler=self._on_message,
                client_info=mcp_types.Implementation(name="baton", version=_version()),
            ) as client:
                ready.set_result(client)
                await closing.wait()
        except BaseException as exc:
            if not ready.done():
                if isinstance(exc, Exception):
                    ready.set_exception(exc)
                else:  # cancelled (the server closed while it started): nobody waits now
                    ready.cancel()
            elif not isinstance(exc, asyncio.CancelledError) and not closing.is_set():
                _log.warning("%s: its connection ended: %s", self.describe(), _leaf(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise

    def _transport(self) -> Any:
        if self.transport == "stdio":
            params = StdioServerParameters(
                command=self.command or "", args=list(self.args), env=self.env, cwd=self.cwd
            )
            return stdio_client(params, errlog=sys.stderr)  # a server's own log stays visible
        if self.transport == "sse":
            return sse_client(self.url or "", headers=self.headers or None)
        http = create_mcp_http_client(headers=self.headers or None)
        return _owning(http, streamable_http_client(self.url or "", http_client=http))

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._stale = True


@contextlib.asynccontextmanager
async def _owning(http: Any, transport: Any) -> Any:
    """`transport`, closing the HTTP client it was given when it closes."""
    async with http, transport as streams:
        yield streams


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("baton-relay")
    except PackageNotFoundError:
        return "0"
