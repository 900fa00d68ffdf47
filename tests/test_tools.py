"""`@tool`: schemas from type hints and docstrings, policy fields, and safe invocation."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from enum import Enum
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from baton import ConfigError, Tool, tool
from baton.tools import (
    DEFAULT_MAX_RESULT_CHARS,
    UnserialisableResult,
    error_content,
    render_result,
)


class Region(str, Enum):
    NORTH = "cn-north"
    EAST = "cn-east"


class Address(BaseModel):
    city: str
    zip_code: str | None = None


@tool
async def query_invoice(order_id: str, include_pdf: bool = False, copies: int = 1) -> dict:
    """Look up the e-invoice of an order.

    Longer explanation that is still part of the description.

    Args:
        order_id: Order number as the user wrote it,
            e.g. ORD-202607-99.
        include_pdf (bool): Attach the PDF link.
        copies: How many copies.

    Returns:
        The invoice record.

    Raises:
        KeyError: When the order does not exist.
    """
    return {"order_id": order_id}


def test_schema_from_type_hints_required_and_optional() -> None:
    params = query_invoice.parameters
    assert params["type"] == "object"
    assert params["required"] == ["order_id"]
    props = params["properties"]
    assert set(props) == {"order_id", "include_pdf", "copies"}
    assert props["order_id"]["type"] == "string"
    assert props["include_pdf"]["type"] == "boolean"
    assert props["include_pdf"]["default"] is False
    assert props["copies"] == {**props["copies"], "type": "integer", "default": 1}
    assert params.get("additionalProperties") is False
    assert "title" not in params


def test_argument_descriptions_from_a_google_style_docstring() -> None:
    props = query_invoice.parameters["properties"]
    assert props["order_id"]["description"] == (
        "Order number as the user wrote it, e.g. ORD-202607-99."
    )
    assert props["include_pdf"]["description"] == "Attach the PDF link."
    assert props["copies"]["description"] == "How many copies."


def test_description_is_the_docstring_without_its_sections() -> None:
    assert query_invoice.description == (
        "Look up the e-invoice of an order.\n\n"
        "Longer explanation that is still part of the description."
    )
    assert "Returns" not in query_invoice.description
    assert "invoice record" not in query_invoice.description
    assert "KeyError" not in query_invoice.description


def test_sections_without_args_are_left_out_of_the_description() -> None:
    @tool
    def ping() -> str:
        """Check that the service answers.

        Returns:
            The word pong.
        """
        return "pong"

    assert ping.description == "Check that the service answers."
    assert ping.parameters["properties"] == {}
    assert "required" not in ping.parameters


def test_rest_style_param_descriptions() -> None:
    @tool
    def restart(server_id: str) -> str:
        """Restart a server.

        :param server_id: Instance id, e.g. srv-bj-001.
        """
        return server_id

    assert restart.description == "Restart a server."
    assert restart.parameters["properties"]["server_id"]["description"] == (
        "Instance id, e.g. srv-bj-001."
    )


def test_spec_is_what_the_model_sees() -> None:
    spec = query_invoice.spec
    assert spec.name == "query_invoice"
    assert spec.description == query_invoice.description
    assert spec.parameters == query_invoice.parameters
    openai = spec.to_openai()
    assert openai["type"] == "function"
    assert openai["function"]["name"] == "query_invoice"  # type: ignore[index]


def test_rich_types_in_the_schema() -> None:
    @tool
    def ship(
        region: Region,
        address: Address,
        mode: Literal["air", "sea"] = "air",
        tags: list[str] | None = None,
    ) -> str:
        """Ship a parcel."""
        return "ok"

    props = ship.parameters["properties"]
    assert ship.parameters["required"] == ["region", "address"]
    assert set(props) == {"region", "address", "mode", "tags"}
    assert props["mode"]["enum"] == ["air", "sea"]
    assert "$defs" in ship.parameters  # Region and Address are described
    assert json.dumps(ship.parameters)  # the schema is plain JSON


def test_policy_fields_are_stored() -> None:
    @tool(
        scopes=["ops:write", "ops:read"],
        timeout_s=5,
        requires_approval=True,
        max_result_chars=200,
        name="restart_it",
        description="Restart it.",
    )
    async def restart(server_id: str) -> str:
        """Ignored docstring."""
        return server_id

    assert isinstance(restart, Tool)
    assert restart.name == "restart_it"
    assert restart.description == "Restart it."
    assert restart.scopes == ("ops:write", "ops:read")
    assert restart.timeout_s == 5
    assert restart.requires_approval is True
    assert restart.max_result_chars == 200
    assert restart.is_async is True


def test_defaults_of_a_bare_tool() -> None:
    assert query_invoice.scopes == ()
    assert query_invoice.timeout_s is None
    assert query_invoice.requires_approval is False
    assert query_invoice.max_result_chars is None
    assert DEFAULT_MAX_RESULT_CHARS == 1500


def test_a_tool_is_still_callable_directly() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    assert add(2, 3) == 5
    assert add.is_async is False
    assert repr(add) == "Tool('add')"


@pytest.mark.parametrize("name", ["1bad", "has space", "dots.too", "x" * 65])
def test_invalid_tool_names_are_config_errors(name: str) -> None:
    def f() -> None:
        """F."""

    with pytest.raises(ConfigError, match="not valid"):
        Tool(f, name=name)


def test_var_args_are_config_errors() -> None:
    def f(*args: Any, **kwargs: Any) -> None:
        """F."""

    with pytest.raises(ConfigError, match=r"\*args/\*\*kwargs"):
        tool(f)


def test_unresolvable_hints_are_config_errors() -> None:
    def f(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
        """F."""

    with pytest.raises(ConfigError, match="cannot resolve its type hints"):
        tool(f)


class Connection:
    """A type pydantic can neither validate nor describe."""


def _takes_connection(order_id: str, conn: Connection) -> str:
    """Needs a live connection."""
    return order_id


def _takes_callback(order_id: str, on_done: Callable[[str], None]) -> str:
    """Calls back."""
    return order_id


def _takes_lock(lock: threading.Lock) -> str:
    """Needs a lock."""
    return ""


def _positional_only(order_id: str, /) -> str:
    """Positional only."""
    return order_id


@pytest.mark.parametrize(
    ("fn", "param", "shown"),
    [
        (_takes_connection, "conn", "Connection"),
        (_takes_callback, "on_done", "Callable"),
        (_takes_lock, "lock", "lock"),
    ],
    ids=["class", "callable", "lock"],
)
def test_a_parameter_type_no_model_can_send_is_a_config_error_naming_it(
    fn: Any, param: str, shown: str
) -> None:
    with pytest.raises(ConfigError) as info:
        tool(fn)
    message = str(info.value)
    assert f"tool {fn.__name__!r}: parameter {param!r} has type" in message
    assert shown in message and "cannot be described to a model as JSON" in message
    with pytest.raises(ConfigError, match=f"tool 'renamed': parameter {param!r}"):
        tool(name="renamed")(fn)


def test_a_positional_only_parameter_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="parameter 'order_id' is positional-only"):
        tool(_positional_only)
    with pytest.raises(ConfigError, match="tool 'len': parameter 'obj' is positional-only"):
        tool(len)


@pytest.mark.parametrize(
    "thing", [42, "lookup", None, ["a", "list"]], ids=["int", "str", "none", "list"]
)
def test_tool_on_something_that_is_not_a_function_is_a_config_error(thing: Any) -> None:
    with pytest.raises(ConfigError, match="turns a function into a tool") as info:
        Tool(thing)
    assert type(thing).__name__ in str(info.value)
    with pytest.raises(ConfigError, match="tool 'lookup': @tool turns a function"):
        tool(name="lookup")(thing)


async def test_a_callable_without_a_name_needs_one() -> None:
    class Lookup:
        def __call__(self, order_id: str) -> str:
            return order_id

    for fn in (Lookup(), functools.partial(_positional_only)):
        with pytest.raises(ConfigError, match=r"no __name__ .*tool\(name='...'\)"):
            tool(fn)
    named = tool(name="lookup")(Lookup())
    assert named.name == "lookup" and named.parameters["required"] == ["order_id"]

    class AsyncLookup:
        async def __call__(self, order_id: str) -> str:
            return f"{order_id}: shipped"

    ran = await tool(name="lookup")(AsyncLookup()).invoke({"order_id": "ORD-1"}, 100)
    assert ran.ok and ran.value == "ORD-1: shipped"


# ---------------------------------------------------------------- invocation


async def test_invoke_validates_runs_and_renders() -> None:
    out = await query_invoice.invoke({"order_id": "ORD-1"}, 1500)
    assert out.ok is True
    assert json.loads(out.content) == {"order_id": "ORD-1"}
    assert out.value == {"order_id": "ORD-1"}
    assert out.raw_chars == len(out.content)


async def test_invoke_rejects_bad_and_unknown_arguments() -> None:
    missing = await query_invoice.invoke({}, 1500)
    assert missing.ok is False and missing.error is not None
    assert "invalid arguments for query_invoice" in missing.error
    assert "order_id" in missing.error
    assert json.loads(missing.content) == {"ok": False, "error": missing.error}

    extra = await query_invoice.invoke({"order_id": "x", "drop_tables": True}, 1500)
    assert extra.ok is False and "drop_tables" in (extra.error or "")

    wrong = await query_invoice.invoke({"order_id": "x", "copies": "many"}, 1500)
    assert wrong.ok is False and "copies" in (wrong.error or "")


async def test_invoke_turns_exceptions_into_error_results() -> None:
    @tool
    def explode(x: int) -> int:
        """Always raises."""
        raise ValueError(f"bad x={x}")

    out = await explode.invoke({"x": 3}, 1500)
    assert out.ok is False
    assert out.error == "ValueError: bad x=3"
    assert json.loads(out.content) == {"ok": False, "error": "ValueError: bad x=3"}


async def test_sync_tools_run_off_the_event_loop() -> None:
    import threading

    main = threading.get_ident()

    @tool
    def where() -> bool:
        """Which thread."""
        return threading.get_ident() == main

    out = await where.invoke({}, 1500)
    assert out.ok is True
    assert out.content == "false"


async def test_tool_limit_beats_the_default_limit() -> None:
    @tool(max_result_chars=10)
    def long() -> str:
        """Long."""
        return "y" * 50

    out = await long.invoke({}, 1500)
    assert out.truncated is True
    assert out.content.startswith("y" * 10 + "\n")
    assert "showing 10 of 50 characters" in out.content


def test_render_result() -> None:
    assert render_result("abc", 10) == ("abc", False, 3)
    assert render_result({"a": 1}, 10) == ('{"a": 1}', False, 8)
    assert render_result([1, 2], 0) == ("[1, 2]", False, 6)  # 0 = no limit
    text, truncated, n = render_result("z" * 20, 5)
    assert (truncated, n) == (True, 20)
    assert text == "zzzzz\n...[truncated: showing 5 of 20 characters]"
    assert render_result({"k": {3, 1}}, 100)[0] == '{"k": [1, 3]}'
    assert render_result("中文", 10)[0] == "中文"


def test_error_content() -> None:
    assert json.loads(error_content("boom")) == {"ok": False, "error": "boom"}
    assert "错误" in error_content("错误")


# ---------------------------------------------------------------- results that cannot be serialised


class _BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def _self_dict() -> dict[str, Any]:
    d: dict[str, Any] = {"id": "ORD-1"}
    d["self"] = d
    return d


def _self_list() -> list[Any]:
    xs: list[Any] = [1]
    xs.append(xs)
    return xs


def _deep_list() -> list[Any]:
    x: list[Any] = []
    for _ in range(10_000):
        x = [x]
    return x


def _deep_dict() -> dict[str, Any]:
    x: dict[str, Any] = {}
    for _ in range(10_000):
        x = {"a": x}
    return x


UNSERIALISABLE = {
    "self_dict": (_self_dict, "contains itself"),
    "self_list": (_self_list, "contains itself"),
    "bad_str": (lambda: {"thing": _BadStr()}, "RuntimeError: no text for you"),
    "deep_list": (_deep_list, "nested too deeply"),
    "deep_dict": (_deep_dict, "nested too deeply"),
    "bad_key": (lambda: {(1, 2): "tuple key"}, "TypeError"),
}


@pytest.mark.parametrize("case", sorted(UNSERIALISABLE))
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_result_that_cannot_be_serialised_is_an_error_result(
    case: str, is_async: bool
) -> None:
    make, why = UNSERIALISABLE[case]

    if is_async:

        async def fetch() -> Any:
            """Returns something odd."""
            return make()
    else:

        def fetch() -> Any:  # type: ignore[misc]
            """Returns something odd."""
            return make()

    out = await tool(fetch).invoke({}, 1500)

    assert out.ok is False and out.error is not None
    assert out.error.startswith("fetch ran, but its result could not be serialised: ")
    assert why in out.error
    assert "do not call it again" in out.error  # it ran: a retry would repeat its effect
    assert json.loads(out.content) == {"ok": False, "error": out.error}


@pytest.mark.parametrize("case", sorted(UNSERIALISABLE))
def test_render_result_says_why_a_value_cannot_be_serialised(case: str) -> None:
    make, why = UNSERIALISABLE[case]
    with pytest.raises(UnserialisableResult, match=why):
        render_result(make(), 1500)


def test_an_exception_whose_message_fails_is_still_described() -> None:
    class Mute(Exception):
        def __str__(self) -> str:
            raise RuntimeError("not even this")

    class Raises:
        def __str__(self) -> str:
            raise Mute()

    with pytest.raises(UnserialisableResult, match=r"Mute: \(its message cannot be shown\)"):
        render_result([Raises()], 100)


@pytest.mark.parametrize("case", sorted(UNSERIALISABLE))
async def test_a_run_whose_tool_returns_an_unserialisable_value_goes_on(case: str) -> None:
    from baton import Agent, ScriptedModel, Team

    make, why = UNSERIALISABLE[case]

    @tool
    def fetch() -> Any:
        """Returns something odd."""
        return make()

    model = ScriptedModel([ScriptedModel.call("fetch"), ScriptedModel.say("Could not confirm.")])
    team = Team([Agent(name="solo", tools=[fetch])], entry="solo", model=model)

    result = await team.run("go", session_id="S1")

    assert result.status == "completed"
    called = [e for e in result.events if e.type == "tool_called"]
    assert [e.ok for e in called] == [False]
    error = called[0].error or ""
    assert "could not be serialised" in error and why in error
    stored = [m for m in await team.store.get_messages("S1") if m.role == "tool"]
    assert json.loads(stored[0].content or "")["error"] == called[0].error


# ---------------------------------------------------------------- isolation and timeouts


def test_isolation_is_stored_and_checked() -> None:
    assert query_invoice.isolation == "thread"

    def local() -> str:
        """Defined inside a test: a child process cannot import it."""
        return "x"

    with pytest.raises(ConfigError, match="top level of an importable module"):
        tool(isolation="process")(local)
    with pytest.raises(ConfigError, match="for sync functions"):
        Tool(query_invoice.fn, isolation="process")
    with pytest.raises(ConfigError, match="'thread' or 'process'"):
        tool(isolation="fiber")(local)  # type: ignore[call-overload]


def test_the_timeout_error_says_the_call_may_have_taken_effect() -> None:
    @tool
    def sync_call() -> str:
        """Sync."""
        return "x"

    thread = sync_call.timeout_error(0.5)
    assert thread.startswith("sync_call timed out after 0.5s")
    assert "may still be running in the background" in thread
    assert "before calling it again" in thread
    cancelled = query_invoice.timeout_error(2)
    assert "was cancelled" in cancelled and "may have taken effect" in cancelled
    assert "background" not in cancelled
