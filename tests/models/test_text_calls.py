"""Tool calls written as text (fences, `<tool_call>` tags, bare objects) are recognised as
calls, prose never is, and arguments are taken exactly as written."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton import Agent, Team, tool
from baton.core.errors import ParseError
from baton.models.parsing import parse_json_object
from baton.models.scripted import ScriptedModel
from baton.models.text_calls import find_text_calls

TOOLS = {"query_invoice", "restart_service", "transfer_to_billing"}


def test_fenced_json_is_a_call_and_the_prose_stays_text() -> None:
    found = find_text_calls(
        'Let me look.\n```json\n{"name": "query_invoice", "arguments": {"order_id": "A-1"}}\n```',
        TOOLS,
    )
    assert found is not None
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == [
        ("query_invoice", {"order_id": "A-1"})
    ]
    assert found.text == "Let me look."


def test_qwen_hermes_tags_several_in_one_reply() -> None:
    text = (
        '<tool_call>\n{"name": "restart_service", "arguments": {"host": "web-1"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "transfer_to_billing", "arguments": {"reason": "退款"}}\n'
        "</tool_call>"
    )
    found = find_text_calls(text, TOOLS)
    assert found is not None and found.text is None
    assert [c.name for c in found.calls] == ["restart_service", "transfer_to_billing"]
    assert json.loads(found.calls[1].arguments) == {"reason": "退款"}


@pytest.mark.parametrize(
    "text",
    [
        '{"tool": "query_invoice", "arguments": {"order_id": "A-1"}}',
        '[{"name": "query_invoice", "arguments": {"order_id": "A-1"}}]',
        '{"type": "function", "function": {"name": "query_invoice", '
        '"arguments": "{\\"order_id\\": \\"A-1\\"}"}}',
        '<function=query_invoice>{"order_id": "A-1"}</function>',
        "<tool_call>{'name': 'query_invoice', 'arguments': {'order_id': 'A-1'}}</tool_call>",
    ],
)
def test_the_formats_servers_send(text: str) -> None:
    found = find_text_calls(text, TOOLS)
    assert found is not None
    assert [(c.name, parse_json_object(c.arguments)) for c in found.calls] == [
        ("query_invoice", {"order_id": "A-1"})
    ]


def test_a_cut_off_call_is_a_parse_error_not_a_guess() -> None:
    found = find_text_calls(
        '<tool_call>{"name": "query_invoice", "arguments": {"order_id": "A', TOOLS
    )
    assert found is not None and [c.name for c in found.calls] == ["query_invoice"]
    with pytest.raises(ParseError, match="cut off"):
        parse_json_object(found.calls[0].arguments)


@pytest.mark.parametrize(
    "text",
    [
        "Your invoice A-1 was paid on Monday.",
        "Use {braces} in templates, e.g. {name}.",
        '{"name": "Alice", "age": 31}',
        '{"final": "done"}',
        "我会帮你查询发票 {订单}。",
        "```python\nx = {1: 2}\n```",
    ],
)
def test_prose_and_data_are_not_calls(text: str) -> None:
    assert find_text_calls(text, TOOLS) is None


def test_known_only_refuses_invented_names() -> None:
    text = '{"name": "lookup_everything", "arguments": {}}'
    assert find_text_calls(text, TOOLS, known_only=True) is None
    found = find_text_calls(text, TOOLS)
    assert found is not None and found.calls[0].name == "lookup_everything"


_prose = st.text(
    alphabet=st.sampled_from(
        list(string.ascii_letters + string.digits + " .,;:!?'()-\n")
        + list("你好发票退款重启服务。，")
    ),
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(_prose)
def test_property_plain_prose_is_never_a_call(text: str) -> None:
    assert find_text_calls(text, TOOLS) is None


_json_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30
)  # any text, Chinese and control characters included
_args = st.dictionaries(
    st.text(min_size=1, max_size=10),
    st.one_of(_json_text, st.integers(), st.booleans()),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    before=_prose,
    name=st.sampled_from(sorted(TOOLS)),
    args=_args,
    wrap=st.sampled_from(["{}", "```json\n{}\n```", "<tool_call>\n{}\n</tool_call>"]),
    key=st.sampled_from(["name", "tool"]),
)
def test_property_a_written_call_keeps_its_arguments_exactly(
    before: str, name: str, args: dict[str, object], wrap: str, key: str
) -> None:
    call = json.dumps({key: name, "arguments": args}, ensure_ascii=False)
    found = find_text_calls(before + "\n" + wrap.replace("{}", call, 1), TOOLS)
    assert found is not None
    assert [c.name for c in found.calls] == [name]
    assert json.loads(found.calls[0].arguments) == args  # nothing invented, nothing lost


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(sorted(TOOLS)),
    args=st.dictionaries(st.text(min_size=1, max_size=8), _json_text, min_size=1, max_size=3),
    data=st.data(),
)
def test_property_a_truncated_call_is_rejected_by_the_parser(
    name: str, args: dict[str, str], data: st.DataObject
) -> None:
    call = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    start = call.index("arguments")  # cut somewhere inside the arguments
    cut = data.draw(st.integers(min_value=start + 12, max_value=len(call) - 1))
    found = find_text_calls("<tool_call>" + call[:cut], TOOLS)
    assert found is not None and [c.name for c in found.calls] == [name]
    with pytest.raises(ParseError):
        parse_json_object(found.calls[0].arguments)


@tool
def query_invoice(order_id: str) -> str:
    """Look an invoice up."""
    return f"invoice {order_id}: paid"


def test_a_native_model_that_writes_its_calls_as_text_gets_them_run() -> None:
    """A reply with calls as text (no tool_calls field) runs them; the hand-off is made."""
    triage = Agent(name="triage", instructions="Route.", handoffs=["billing"])
    billing = Agent(name="billing", instructions="Invoices.", tools=[query_invoice])
    model = ScriptedModel(
        [
            ScriptedModel.say(
                '<tool_call>\n{"name": "transfer_to_billing", "arguments": '
                '{"reason": "invoice", "objective": "look up A-1"}}\n</tool_call>'
            ),
            ScriptedModel.say(
                'Checking.\n```json\n{"name": "query_invoice", "arguments": '
                '{"order_id": "A-1"}}\n```'
            ),
            ScriptedModel.say("Invoice A-1 is paid."),
        ]
    )
    team = Team(agents=[triage, billing], entry="triage", model=model)
    result = team.run_sync("Is invoice A-1 paid?", session_id="s1")
    assert result.status == "completed", result.error
    assert result.output == "Invoice A-1 is paid."
    assert result.path == ["triage", "billing"]
    ran = [e for e in result.events if e.type == "tool_called"]
    assert [e.tool for e in ran] == ["query_invoice"]
