"""JSON read and written on every call (jsonwire) means what the standard library's means:
the same values, and for a text that is no JSON the standard library's own error."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omds_ld import jsonwire

# every value JSON can carry, with what orjson refuses among them: integers beyond 64 bits,
# lone surrogates, any code point in keys and strings
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63, max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec=None))
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(values)
def test_a_value_written_reads_back_as_the_standard_library_reads_it(value: Any) -> None:
    written = jsonwire.dumps(value)
    assert isinstance(written, bytes)
    assert jsonwire.loads(written) == json.loads(written) == value


@given(st.text(max_size=40) | st.binary(max_size=40))
def test_a_text_is_read_as_the_standard_library_reads_it_or_refused_as_it_refuses(
    text: str | bytes,
) -> None:
    try:
        expected: Any = json.loads(text)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        with pytest.raises(type(error)) as raised:
            jsonwire.loads(text)
        assert str(raised.value) == str(error)
    else:
        got = jsonwire.loads(text)
        assert got == expected or (math.isnan(got) and math.isnan(expected))


def test_what_orjson_refuses_is_read_and_written_all_the_same() -> None:
    assert jsonwire.loads(b'{"n": 123456789012345678901234567890}') == {
        "n": 123456789012345678901234567890
    }
    assert jsonwire.loads('"\\ud800"') == "\ud800"
    assert math.isnan(jsonwire.loads("NaN"))
    assert json.loads(jsonwire.dumps({"s": "\ud800x"})) == {"s": "\ud800x"}
    with pytest.raises(RecursionError):
        jsonwire.loads("[" * 100_000 + "]" * 100_000)


def test_written_as_compact_utf8() -> None:
    assert jsonwire.dumps({"a": [1, 2.5, "ü"], "b": None}) == '{"a":[1,2.5,"ü"],"b":null}'.encode()
