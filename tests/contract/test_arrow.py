"""The buffer readers against ``pyarrow.compute``, the outside reference, on random arrays: nulls,
slices, large types, and null lists that own children (which Arrow allows)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.contract.arrow import (
    byte_total,
    kept_rows,
    list_children,
    numbers,
    numpy_array,
    numpy_series,
    present,
    series,
    sorted_unique,
)

ROOT = Path(__file__).resolve().parents[2]

LIST_TYPES = [pa.list_(pa.int64()), pa.large_list(pa.int64())]
STRING_TYPES = [pa.string(), pa.large_string(), pa.binary()]


def sliced(array: pa.Array, data: st.DataObject) -> pa.Array:
    start = data.draw(st.integers(0, len(array)))
    return array.slice(start, data.draw(st.integers(0, len(array) - start)))


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.none() | st.lists(st.none() | st.integers(-(2**40), 2**40), max_size=5), max_size=12),
    kind=st.sampled_from(LIST_TYPES),
    data=st.data(),
)
def test_list_children_are_arrows_flatten_parents_and_lengths(
    rows: list[list[int | None] | None], kind: pa.DataType, data: st.DataObject
) -> None:
    lists = sliced(pa.array(rows, type=kind), data)
    children = list_children(lists)
    assert children.values.equals(pc.list_flatten(lists))
    assert children.rows.tolist() == pc.list_parent_indices(lists).to_pylist()
    assert children.lengths.tolist() == pc.fill_null(pc.list_value_length(lists), 0).to_pylist()
    assert children.firsts.tolist() == (np.cumsum(children.lengths) - children.lengths).tolist()
    assert present(lists).tolist() == pc.is_valid(lists).to_pylist()


@settings(max_examples=100, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 3), min_size=1, max_size=10),
    nulls=st.data(),
)
def test_list_children_leave_out_what_a_null_list_owns(lengths: list[int], nulls: st.DataObject) -> None:
    """Arrow lets a null list own a non-empty range of children; flatten leaves them out (and
    ``list_parent_indices`` does not, so the rows are checked against the lists themselves)."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    mask = nulls.draw(st.lists(st.booleans(), min_size=len(lengths), max_size=len(lengths)))
    lists = pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(np.arange(offsets[-1])), mask=pa.array(mask, type=pa.bool_())
    )
    children = list_children(lists)
    assert children.values.equals(pc.list_flatten(lists))
    rows = [i for i, row in enumerate(lists.to_pylist()) if row is not None for _ in row]
    assert children.rows.tolist() == rows
    assert children.lengths.tolist() == [0 if null else n for n, null in zip(lengths, mask, strict=True)]


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.none() | st.floats(allow_nan=False) | st.booleans(), max_size=12),
    data=st.data(),
)
def test_numbers_and_presence_are_arrows(values: list[float | bool | None], data: st.DataObject) -> None:
    kind = pa.bool_() if any(isinstance(value, bool) for value in values) else pa.float64()
    typed = [None if value is None else (bool(value) if kind == pa.bool_() else float(value)) for value in values]
    array = sliced(pa.array(typed, type=kind), data)
    expected = [-1.0 if value is None else float(value) for value in array.to_pylist()]
    assert numbers(array, -1.0).astype(float).tolist() == expected
    assert present(array).tolist() == pc.is_valid(array).to_pylist()
    assert numbers(pa.chunked_array([array, array], type=kind), -1.0).astype(float).tolist() == expected * 2


def test_an_array_of_the_null_type_is_absent_throughout() -> None:
    assert present(pa.nulls(3)).tolist() == [False, False, False]


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.none() | st.text(max_size=6), max_size=10),
    kind=st.sampled_from(STRING_TYPES),
    data=st.data(),
)
def test_byte_total_is_the_sum_of_binary_lengths(
    texts: list[str | None], kind: pa.DataType, data: st.DataObject
) -> None:
    values = [None if text is None else (text.encode() if kind == pa.binary() else text) for text in texts]
    array = sliced(pa.array(values, type=kind), data)
    expected = pc.sum(pc.binary_length(array)).as_py() or 0
    assert byte_total(array) == expected
    assert byte_total(pa.chunked_array([array, array], type=kind)) == 2 * expected


def test_series_is_what_polars_makes_of_the_array() -> None:
    import polars as pl

    array = pa.array([{"a": 1, "b": "x"}, None, {"a": None, "b": "é"}])
    assert series(array, "name").equals(pl.Series("name", array))
    assert series(array, "name").name == "name"


NUMPY_DTYPES = [np.int64, np.int32, np.uint32, np.uint8, np.float64, np.float32, np.bool_]


@settings(max_examples=100, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(NUMPY_DTYPES), size=st.integers(0, 40))
def test_numpy_series_is_what_polars_makes_of_the_array_and_a_copy(data: st.DataObject, dtype: type, size: int) -> None:
    import polars as pl

    values = np.array(data.draw(st.lists(st.integers(0, 200), min_size=size, max_size=size)), dtype=dtype)
    if data.draw(st.booleans()) and size:
        values = values[:: data.draw(st.integers(1, 3))]  # a strided view
    made = numpy_series(values, "n")
    assert made.equals(pl.Series("n", values), check_names=True)
    if len(values):
        values[0] = not values[0] if dtype is np.bool_ else values[0] + 1
        assert made[0] != values[0]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.booleans(), max_size=40), st.data())
def test_numpy_array_is_pyarrows_and_kept_rows_is_table_filter(keep: list[bool], data: st.DataObject) -> None:
    mask = np.array(keep, dtype=bool)
    assert numpy_array(mask).equals(pa.array(keep, type=pa.bool_()))
    assert numpy_array(np.arange(len(keep), dtype=np.int64)).equals(pa.array(range(len(keep)), type=pa.int64()))
    table = pa.table({"x": list(range(len(keep))), "s": [str(i) for i in range(len(keep))]})
    if data.draw(st.booleans()):  # a table of several chunks
        table = pa.concat_tables([table.slice(0, len(keep) // 2), table.slice(len(keep) // 2)])
    assert kept_rows(table, mask).equals(table.filter(pa.array(keep, type=pa.bool_())))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(-5, 5), st.floats(allow_nan=False)), max_size=30))
def test_sorted_unique_is_numpys_unique(values: list[float]) -> None:
    array = np.array(values, dtype=np.float64)
    assert sorted_unique(array).tolist() == np.unique(array).tolist()
    ints = np.array([int(v) for v in values if abs(v) < 2**62], dtype=np.int64)
    assert sorted_unique(ints).tolist() == np.unique(ints).tolist()


def test_an_assemble_run_imports_neither_pyarrow_compute_nor_numpy_ma(tmp_path: Path) -> None:
    """Guards the start-up: importing ``pyarrow.compute`` costs every command about 40 ms, and
    ``numpy.ma`` (which ``pl.Series`` of a NumPy array and ``np.unique`` import) about 7 ms. The
    sample, and the sample with a search-limit cut and a row the column checks leave to the
    record path (a score of -0.0), which take paths of their own."""
    lines = (ROOT / "data/sample/lanes.jsonl").read_text(encoding="utf-8").splitlines()
    cut, refused = json.loads(lines[0]), json.loads(lines[1])
    cut["query_id"], refused["query_id"] = "cut", "refused"
    cut["request"] = {**cut.get("request", {}), "search_limit": 1}
    refused["lanes"]["passages"][0]["score"] = -0.0
    edges = tmp_path / "edges.jsonl"
    edges.write_text("\n".join([*lines, json.dumps(cut), json.dumps(refused)]) + "\n", encoding="utf-8")
    script = (
        "import sys\n"
        "from assembler.cli import main\n"
        "status = main(['assemble', sys.argv[1], '-o', sys.argv[2], '-q', '--workers', '1'])\n"
        "print(status, 'pyarrow.compute' in sys.modules, 'numpy.ma' in sys.modules)\n"
    )
    for source in (ROOT / "data/sample/lanes.jsonl", edges):
        out = subprocess.run(
            [sys.executable, "-c", script, str(source), "-"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
        assert out.splitlines()[-1] == "0 False False", source
