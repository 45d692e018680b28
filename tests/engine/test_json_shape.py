"""``json_shape``: the nesting and the containers of JSON text, read from its brackets,
held to a second reading (the parsed value, walked recursively)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentfsm.engine import json_shape

STRINGS = st.text(st.sampled_from(['"', "\\", "[", "]", "{", "}", "a", "\u2028", "\ud800", "é"]))
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | STRINGS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(STRINGS, inner, max_size=4),
    max_leaves=40,
)


def walked(value: Any) -> tuple[int, int]:
    """``(depth, containers)`` of a parsed value, by recursion."""
    if isinstance(value, dict):
        value = list(value.values())
    elif not isinstance(value, list):
        return 0, 0
    shapes = [walked(item) for item in value]
    depth = 1 + max((d for d, _ in shapes), default=0)
    return depth, 1 + sum(c for _, c in shapes)


@given(VALUES, st.booleans(), st.booleans())
def test_the_brackets_tell_what_the_parsed_value_holds(
    value: Any, ascii_only: bool, as_bytes: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    data: str | bytes = text.encode("utf-8", "surrogatepass") if as_bytes else text
    assert json_shape(data) == walked(json.loads(text))


def test_text_that_is_not_json_counts_its_brackets() -> None:
    assert json_shape("[[[[") == (4, 4)
    assert json_shape('"[[[') == (3, 3)  # an unclosed string: its brackets count
    assert json_shape("") == (0, 0)
