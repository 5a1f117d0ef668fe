"""Arrow arrays read through their buffers with NumPy: which elements are present, numbers, the
children of list arrays and the byte lengths of strings.

The columnar reader and the run need only these few of ``pyarrow.compute``'s kernels, and
importing ``pyarrow.compute`` costs every command about 40 ms of CPU before any work (it builds a
Python wrapper, with its documentation, for each of Arrow's several hundred functions): more than
a five-record run's whole assembly. Reading the buffers answers the same, with no import and no
Arrow arrays built. (``pyarrow``'s own conversions to NumPy would import pandas, when it is
installed, on first use.) The way back, NumPy arrays into Polars, goes through Arrow's buffers too
(:func:`numpy_series`).

>>> import pyarrow.json as pj
>>> lines = '{"x": [1, 2], "s": "ab"}\\n{"x": null, "s": null}\\n{"x": [3], "s": "é"}'.encode()
>>> table = pj.read_json(pa.py_buffer(lines))
>>> present(table.column("x").chunk(0)).tolist()
[True, False, True]
>>> children = list_children(table.column("x").chunk(0))
>>> numbers(children.values).tolist(), children.rows.tolist(), children.lengths.tolist()
([1, 2, 3], [0, 0, 2], [2, 0, 1])
>>> byte_total(table.column("s"))
4
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import polars as pl
import pyarrow as pa

__all__ = [
    "ListChildren",
    "byte_total",
    "kept_rows",
    "list_children",
    "numbers",
    "numpy_array",
    "numpy_series",
    "present",
    "series",
    "sorted_unique",
]


def present(values: pa.Array) -> np.ndarray:
    """Per element: whether it is present (not null), as ``pyarrow.compute.is_valid``."""
    n = len(values)
    if values.null_count == 0:
        return np.ones(n, dtype=bool)
    validity = values.buffers()[0]
    if validity is None:  # an array of the null type: every element is null
        return np.zeros(n, dtype=bool)
    return _bits(validity, values.offset, n)


def numbers(values: pa.Array | pa.ChunkedArray, null: float = 0) -> np.ndarray:
    """A boolean or numeric array as NumPy, nulls replaced by ``null``."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    n, offset = len(values), values.offset
    buffers = values.buffers()
    if pa.types.is_boolean(values.type):
        data = _bits(buffers[1], offset, n)
    else:
        data = np.frombuffer(
            buffers[1], dtype=values.type.to_pandas_dtype(), count=n, offset=offset * values.type.byte_width
        )
    if values.null_count:
        data = np.where(present(values), data, null)
    return data


class ListChildren(NamedTuple):
    """The children of a list array's present lists, in order (``pyarrow.compute.list_flatten``):
    ``values`` the child elements, ``rows`` the list each belongs to
    (``list_parent_indices``), ``lengths`` each list's length, 0 for a null list
    (``list_value_length`` with nulls as 0) and ``firsts`` the position in ``values`` of each
    list's first child."""

    values: pa.Array
    rows: np.ndarray
    lengths: np.ndarray
    firsts: np.ndarray


def list_children(lists: pa.Array) -> ListChildren:
    """The children of ``lists`` (a list or large-list array) and where each belongs.

    Arrow lets a null list own a range of children; those are left out, as
    ``pyarrow.compute.list_flatten`` leaves them, by a take that only such an array pays for."""
    offsets = _offsets(lists)
    lengths = np.diff(offsets)
    start = int(offsets[0])
    values = lists.values.slice(start, int(offsets[-1]) - start)
    rows = np.repeat(np.arange(len(lists), dtype=np.int64), lengths)
    if lists.null_count:
        listed = present(lists)
        if lengths[~listed].any():
            kept = listed[rows]
            values = values.take(numpy_array(np.flatnonzero(kept)))
            rows = rows[kept]
        lengths = np.where(listed, lengths, 0)
    firsts = np.cumsum(lengths) - lengths
    return ListChildren(values, rows, lengths, firsts)


def byte_total(values: pa.Array | pa.ChunkedArray) -> int:
    """The bytes of the present elements of a string or binary array, as the sum of
    ``pyarrow.compute.binary_length`` (0 when there are none)."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    total = 0
    for chunk in chunks:
        lengths = np.diff(_offsets(chunk))
        if chunk.null_count:
            lengths = lengths[present(chunk)]
        total += int(lengths.sum())
    return total


def series(values: pa.Array, name: str = "") -> pl.Series:
    """A Polars series of an Arrow array, as ``pl.Series(name, values)`` makes it, taken through
    the Arrow C data interface: Polars converts a ``pyarrow`` array by a path that imports
    ``pyarrow.compute``, and this one is also a little faster."""
    return pl.Series(_ArrowArray(values)).alias(name)  # the interface path leaves the name out


def numpy_array(values: np.ndarray) -> pa.Array:
    """An Arrow array of a copy of a 1-D NumPy array of numbers or booleans, made from its buffers:
    ``pa.array`` imports pandas, when it is installed, on first use.

    >>> numpy_array(np.array([True, False, True])).to_pylist()
    [True, False, True]
    """
    if values.dtype == np.bool_:
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
    else:
        data = pa.py_buffer(np.array(values, order="C"))  # a copy: the caller may change its array
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, data])


def numpy_series(values: np.ndarray, name: str = "") -> pl.Series:
    """A Polars series of a copy of a 1-D NumPy array of numbers or booleans, as
    ``pl.Series(name, values)`` makes it, taken through Arrow's buffers (:func:`numpy_array`):
    Polars checks an array for a NumPy mask, which imports ``numpy.ma`` (about 7 ms of CPU) in
    every process that does.

    >>> numpy_series(np.array([3, 1], dtype=np.uint32), "n").to_list(), numpy_series(np.array([True, False])).dtype
    ([3, 1], Boolean)
    """
    return series(numpy_array(values), name)


def kept_rows(table: pa.Table, keep: np.ndarray) -> pa.Table:
    """The rows of ``table`` where ``keep`` is true, as ``table.filter`` gives them (which imports
    ``pyarrow.compute``): the runs of kept rows, sliced (no copy) and joined.

    >>> kept_rows(pa.table({"x": [1, 2, 3, 4]}), np.array([True, False, True, True])).column("x").to_pylist()
    [1, 3, 4]
    """
    edges = np.flatnonzero(np.diff(np.concatenate([[False], keep, [False]]).astype(np.int8)))
    runs = [
        table.slice(start, stop - start) for start, stop in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True)
    ]
    return pa.concat_tables(runs) if runs else table.slice(0, 0)


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct elements of a 1-D array of integers (or of numbers with no NaN), sorted, as
    ``np.unique`` returns them: NumPy's own asks whether the array is masked, which imports
    ``numpy.ma``.

    >>> sorted_unique(np.array([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    ordered = np.sort(values)
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


class _ArrowArray:
    """An Arrow array offered only through the Arrow PyCapsule interface."""

    __slots__ = ("array",)

    def __init__(self, array: pa.Array) -> None:
        self.array = array

    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        return self.array.__arrow_c_array__(requested_schema)  # type: ignore[no-any-return]


def _offsets(values: pa.Array) -> np.ndarray:
    """The ``len(values) + 1`` offsets of a list, string or binary array, as int64."""
    large = (
        pa.types.is_large_list(values.type)
        or pa.types.is_large_string(values.type)
        or pa.types.is_large_binary(values.type)
    )
    buffer = values.buffers()[1]
    if buffer is None:  # an empty array may have no offsets buffer
        return np.zeros(len(values) + 1, dtype=np.int64)
    width = np.dtype(np.int64 if large else np.int32)
    offsets = np.frombuffer(buffer, dtype=width, count=len(values) + 1, offset=values.offset * width.itemsize)
    return offsets.astype(np.int64)


def _bits(buffer: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """``n`` bits of an Arrow bitmap from bit ``offset``, as booleans (only the bytes that hold
    them are unpacked: a slice of a long array reads its own part of the bitmap)."""
    first = offset // 8
    count = (offset + n + 7) // 8 - first
    bits = np.unpackbits(np.frombuffer(buffer, dtype=np.uint8, count=count, offset=first), bitorder="little")
    return bits[offset - 8 * first : offset - 8 * first + n].astype(bool)
