"""The column encoders of harness.report.jsontext (issue 13): every number text is the one
``%d`` / ``%r`` (``json.dumps``) writes, over the ranges where orjson and ``repr`` part ways."""

from __future__ import annotations

import numpy as np

from harness.report.jsontext import SMALL_INTS, float_texts, int_texts, join_rows, microbatch_texts, pick


def test_int_texts_are_percent_d_in_the_table_and_past_it():
    small = np.array([0, 1, 9, 10, 255, SMALL_INTS - 1], dtype=np.int64)
    assert int_texts(small) == ["0", "1", "9", "10", "255", str(SMALL_INTS - 1)]
    wide = np.array([-1, SMALL_INTS, 2**31, -(2**63), 2**63 - 1, 7], dtype=np.int64)  # not all small: orjson
    assert int_texts(wide) == [str(x) for x in wide.tolist()]
    assert int_texts(np.zeros(0, dtype=np.int64)) == []


def test_float_texts_are_repr_where_orjson_writes_another_form():
    values = [0.0, -0.0, 0.001, 1e-4, 9.99e-5, 1e-05, 5e-324, 123.456, 1e15, 9999999999999998.0, 1e16, 1.5e300,
              -2.5e-7, float("nan"), float("inf"), float("-inf"), 2.0**53]
    got = float_texts(np.array(values))
    assert got == [repr(x) for x in values]
    assert got[5] == "1e-05" and got[10] == "1e+16" and got[13] == "nan"  # orjson alone: 0.00001, nan -> null


def test_float_texts_match_repr_on_ns_times_in_microseconds():
    rng = np.random.default_rng(13)
    ns = rng.integers(0, 10**15, 20_000)
    us = np.concatenate([ns / 1000.0, ns / 1000.0 - 0.001, (ns[::-1] / 1000.0 + ns / 1000.0) / 2])
    assert float_texts(us) == [repr(x) for x in us.tolist()]


def test_join_rows_interleaves_constants_and_columns():
    assert join_rows(["{", ["a", "b", "c"], ":", "", ["1", "2", "3"], "}"], ",") == "{a:1},{b:2},{c:3}"
    assert join_rows([["x"]], ", ") == "x"
    assert join_rows(["[", []], ",") == ""


def test_pick_and_microbatch_texts():
    assert pick(["F", "B"], np.array([1, 0, 1])) == ["B", "F", "B"]
    assert microbatch_texts(np.array([3, -1, 70000])) == (["3", "", "70000"], ["3", "null", "70000"])
    assert microbatch_texts(np.array([2, 0])) == (["2", "0"], ["2", "0"])
