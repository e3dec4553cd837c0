"""parse_view with the previous request's view: whatever it reuses (a common prefix, members in
place, array elements with the same text anywhere) the result is the parse of the new text."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from headroom_core.wire.view import ARRAYS, parse_view

scalars = st.one_of(
    st.integers(-(10**20), 10**20),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=60),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["type", "text", "cache_control", "role", "id"]), inner, max_size=4),
    ),
    max_leaves=8,
)
arrays = st.lists(values, max_size=8)
separators = st.sampled_from([(",", ":"), (", ", ": "), (",\n  ", ": ")])


def check(old: str, new: str) -> None:
    prev = parse_view(old)
    view = parse_view(new, prev)
    assert view.parsed == json.loads(new)
    for name, spans in view.elements.items():
        assert [json.loads(new[a:b]) for a, b in spans] == json.loads(new)[name]


@settings(max_examples=80, deadline=None, derandomize=True)
@given(arrays, arrays, st.data(), separators, separators)
def test_any_edit_of_the_arrays_parses_as_the_new_text(first, second, data, sep1, sep2):
    name = sorted(ARRAYS)[0]
    old_body = {"model": "m", name: first + second, "tools": second + first}
    # the new body: elements dropped, inserted, reordered and changed, as agents do
    mixed = data.draw(st.permutations(first + second))
    new_body = {"model": "m", name: data.draw(arrays) + mixed + first, "tools": second + data.draw(arrays) + first}
    check(json.dumps(old_body, separators=sep1), json.dumps(new_body, separators=sep2))
    check(json.dumps(old_body, separators=sep1), json.dumps(new_body, separators=sep1))


def test_an_element_that_is_a_prefix_of_a_new_one_is_not_taken_for_it():
    for old_el, new_el in (("12", "123"), ("1", "1.5"), ('"a"', '"ab"'), ("true", "true ")):
        for name in ("messages", "tools"):
            old = f'{{"{name}": [0, {old_el}, 7]}}'
            new = f'{{"{name}": [1, {new_el}, 7]}}'
            check(old, new)
    check('{"messages": [{"a": 1}, 12, 3]}', '{"messages": [{"a": 2}, 123, 3]}')


def test_elements_after_a_change_keep_their_values_instead_of_being_parsed_again():
    tools = [{"name": f"t{i}", "description": "d" * 50, "input_schema": {"type": "object"}} for i in range(5)]
    old = json.dumps({"tools": tools, "messages": [{"role": "user", "content": "hi"}]})
    tools2 = [dict(tools[0], cache_control={"type": "ephemeral"})] + tools[1:]
    new = json.dumps({"tools": [{"name": "new"}] + tools2, "messages": [{"role": "user", "content": "hi"}]})
    prev = parse_view(old)
    view = parse_view(new, prev)
    assert view.parsed == json.loads(new)
    assert view.parsed["tools"][1] is not prev.parsed["tools"][0]  # changed: parsed anew
    assert all(view.parsed["tools"][k + 1] is prev.parsed["tools"][k] for k in range(1, 5))  # moved, same text: kept


def test_a_duplicate_key_leaves_no_element_spans_of_the_earlier_member_behind():
    """json.loads keeps a duplicate key's last value: spans of the earlier array must not be
    taken for that value's elements by the next request."""
    for name, last in (("messages", '"Zq"'), ("tools", '{"x": 1}')):
        first = f'{{"{name}": [0, "{"a" * 60}"], "{name}": {last}}}'
        second = first  # reused as it is
        third = f'{{"{name}": [0, "{"a" * 60}"]}}'
        v1 = parse_view(first)
        v2 = parse_view(second, v1)
        assert name not in v2.elements and v2.parsed == json.loads(second)
        assert parse_view(third, v2).parsed == json.loads(third)


def test_many_elements_with_the_same_start_after_an_early_edit():
    """Agent histories: thousands of tool results whose text starts the same; the first message
    edited, every later one found again (in order) and the result is the parse of the text."""
    msgs = [
        {"role": "user", "content": [{"tool_use_id": "toolu_", "type": "tool_result", "content": f"result {i}"}]}
        for i in range(3000)
    ]
    old = json.dumps({"messages": [{"role": "user", "content": "hi"}] + msgs})
    new = json.dumps(
        {
            "messages": [{"role": "user", "content": "hi, edited"}]
            + msgs[:1500]
            + [{"role": "user", "content": "x"}]
            + msgs[1500:]
        }
    )
    prev = parse_view(old)
    view = parse_view(new, prev)
    assert view.parsed == json.loads(new)
    assert (
        view.parsed["messages"][1] is prev.parsed["messages"][1]
        and view.parsed["messages"][-1] is prev.parsed["messages"][-1]
    )


def test_the_same_conversation_sent_again_counts_every_element_reused():
    """A body resent byte for byte (a client's retry) takes the conversation member whole from
    the previous view: every element counts as reused (the walk then keeps their hashes)."""
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(7)]
    text = json.dumps({"model": "m", "tools": [{"name": "t"}], "messages": msgs})
    again = parse_view(text, parse_view(text))
    assert again.reused_elements == 7 and "messages" in again.reused_members
