"""A run's CSVs (jobs, tasks, utilization, balance) are written column by column (``results._write_columns``):
byte for byte what ``csv.writer`` writes for the same cells, for any values, in any chunking."""

import csv
import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedemu.tools.results import results

_FLOAT = st.one_of(st.floats(width=64), st.sampled_from([0.0, -0.0, 0.0015, 1e-05, 1e16, float("nan")]))
_INT = st.integers(-3, 2**40)


def csv_writer_text(header, cols: dict, blank, nan: str) -> str:
    """The model: ``csv.writer`` over Python cells; NaN as None when ``nan`` is empty (what has not
    happened), else as a float (``nan``); in ``blank`` columns negative numbers as None."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    rows = []
    for name in header:
        column = cols[name]
        if column.dtype == bool:
            cells = [int(v) for v in column.tolist()]
        elif column.dtype.kind == "f":
            cells = [None if v != v and not nan else v for v in column.tolist()]
        else:
            cells = [None if name in blank and v < 0 else v for v in column.tolist()]
        rows.append(cells)
    w.writerows(zip(*rows))
    return out.getvalue()


@st.composite
def tables(draw):
    n = draw(st.integers(0, 40))

    def column(values):
        if draw(st.booleans()):  # few distinct values: formatted once each
            distinct = draw(st.lists(values, min_size=1, max_size=draw(st.integers(1, 6))))
            return [distinct[i] for i in draw(st.lists(st.integers(0, len(distinct) - 1), min_size=n, max_size=n))]
        return draw(st.lists(values, min_size=n, max_size=n))

    cols = {
        "f": np.array(column(_FLOAT), dtype=np.float64),
        "i": np.array(column(_INT), dtype=np.int64),
        "worker": np.array(column(_INT), dtype=np.int64),
        "b": np.array(column(st.booleans()), dtype=bool),
        "g": np.array(column(_FLOAT), dtype=np.float64),
    }
    return ("i", "f", "worker", "b", "g"), cols


@given(table=tables(), chunk=st.one_of(st.just(64), st.integers(1, 50)), nan=st.sampled_from(["", "nan"]),
       as_dict=st.booleans())
def test_columns_are_written_as_csv_writer_writes_their_cells(table, chunk, nan, as_dict, tmp_path_factory):
    header, cols = table
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    given_cols = cols if as_dict else tuple(cols[name] for name in header)
    results._write_columns(path, header, given_cols, {"worker"}, nan=nan, chunk=chunk)
    assert path.read_text() == csv_writer_text(header, cols, {"worker"}, nan)


@pytest.mark.parametrize("values, nan, expected", [
    ([0.0, -0.0, 0.0, -0.0, 0.0, 0.0, 0.0, 0.0], "", ["0.0", "-0.0", "0.0", "-0.0", "0.0", "0.0", "0.0", "0.0"]),
    ([5e-05] * 4 + [float("nan")] * 4, "", ["5e-05"] * 4 + [""] * 4),
    ([5e-05] * 4 + [float("nan")] * 4, "nan", ["5e-05"] * 4 + ["nan"] * 4),
    ([1.5, float("nan")], "nan", ["1.5", "nan"]),
])
def test_floats_keep_their_repr_and_sign(values, nan, expected):
    """Few distinct values (each formatted once) and many (each cell formatted)."""
    assert results._text(np.array(values), nan=nan) == expected


def test_a_float32_column_keeps_its_sign_and_its_values_repr():
    column = np.array([0.0, -0.0, 0.1, 0.1] * 4, dtype=np.float32)
    assert results._text(column) == [repr(v) for v in column.tolist()]
