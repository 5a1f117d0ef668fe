"""The compiled one-pass validator-emitters agree with the declarative validate/emit pair."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.contract import wire
from tests.strategies import associations, communities, passages

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**33) | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(["source", "text", "x"]), children)
    ),
    max_leaves=8,
)


@settings(max_examples=200)
@given(
    st.one_of(
        associations().map(lambda a: (wire.ASSOCIATION, a)),
        passages().map(lambda p: (wire.PASSAGE_HIT, p)),
        communities().map(lambda c: (wire.COMMUNITY_HIT, c)),
    )
)
def test_compiled_equals_validate_then_emit(case: tuple[wire.Shape, dict[str, Any]]) -> None:
    shape, value = case
    clean, text = wire.compile_kind(shape)(value)
    assert clean == wire.validate(shape, value, "")
    assert text == wire.emit(shape, clean)


@settings(max_examples=300)
@given(st.sampled_from([wire.ASSOCIATION, wire.PASSAGE_HIT, wire.COMMUNITY_HIT, wire.CITATION_ENTRY]), JSON)
def test_compiled_rejects_exactly_what_validate_rejects(shape: wire.Shape, value: Any) -> None:
    try:
        expected: Any = wire.validate(shape, value, "")
    except wire.ShapeError as exc:
        with pytest.raises(wire.ShapeError) as caught:
            wire.compile_kind(shape)(value)
        assert (caught.value.path, caught.value.rule) == (exc.path, exc.rule)
    else:
        assert wire.compile_kind(shape)(value)[0] == expected
