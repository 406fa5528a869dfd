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


def test_dependency_texts_resolve_to_label_ids_by_hash_and_by_dict():
    from harness.report.jobtable import JobTable

    jobs = {"rank": [0, 0, 1], "stream": [0, 0, 1], "stage": [0, 0, 1], "kind": ["F", "B", "F"], "microbatch": [0, 0, 0],
            "chunk": [0, 0, 0], "step": [0, 0, 0], "start_ns": [0, 5, 2], "end_ns": [1, 6, 3]}
    table = JobTable.from_case({"jobs": jobs})
    src, dst, start = table.dep_ids([["0F0", "1F0", "end"], ["1F0", "0B0", "start"], ["0F0", "9X9", "end"], ["", "0F00", "end"]])
    labels = table.labels
    assert [labels[i] for i in src[:2]] == ["0F0", "1F0"] and [labels[i] for i in dst[:2]] == ["1F0", "0B0"]
    assert src[2:].tolist() == [labels.index("0F0"), -1] and dst[2:].tolist() == [-1, -1]  # unknown and near texts: -1
    assert start.tolist() == [False, True, False, False]
    # Two labels of one text (an imported kind ending in a digit): the dict's answer, the last id of the text.
    clash = {**jobs, "kind": ["F1", "F", "F"], "microbatch": [0, 10, 0]}  # "0F10" twice
    t2 = JobTable.from_case({"jobs": clash})
    ids, _, _ = t2.dep_ids([["0F10", "1F0", "end"]])
    assert ids.tolist() == [max(i for i, x in enumerate(t2.labels) if x == "0F10")]
    assert len(set(t2.text_ids().tolist())) == 2  # the two jobs of one text count as one


def test_the_float_view_still_finds_a_nan_where_the_checks_allow_floats():
    import pytest

    from harness.case import PipelineCase
    from harness.report.fields import check_cases, float_view
    from harness.report.jsontext import dumps_document
    from harness.report.results import case_to_dict, results_document
    from harness.runner import run_case

    doc = results_document([case_to_dict(run_case(PipelineCase("1F1B", 2, 2, comm=True), "sim"))])
    check_cases(doc)
    view = float_view(doc)
    assert "start_ns" not in view["cases"][0]["jobs"] and doc["cases"][0]["jobs"]["start_ns"]  # a view; the document kept whole
    assert dumps_document(doc, scan=view) == dumps_document(doc)
    doc["cases"][0]["jobs"]["enqueue_ns"] = [float("nan")] * len(doc["cases"][0]["jobs"]["kind"])  # numbers: may be NaN
    with pytest.raises(ValueError, match=r"document\.cases\[0\]\.jobs\.enqueue_ns\[0\]"):
        dumps_document(doc, scan=float_view(doc))


def test_trim_heap_runs_where_glibc_has_it():
    import platform
    import sys

    from harness.report.heap import trim_heap

    took = trim_heap()
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert isinstance(took, float) and took >= 0
    elif not sys.platform.startswith("linux"):
        assert took is None


def test_a_job_time_past_64_bits_is_refused_naming_the_case_and_field(tmp_path):
    import pytest

    from harness.case import PipelineCase
    from harness.errors import InputFormatError
    from harness.report.render import write_report
    from harness.report.results import case_to_dict, results_document
    from harness.runner import run_case

    doc = results_document([case_to_dict(run_case(PipelineCase("1F1B", 2, 2), "sim"))])
    doc["cases"][0]["jobs"]["end_ns"][3] = 2**70
    with pytest.raises(InputFormatError, match=r"case '1F1B p=2 m=2' \(cases\[0\]\): jobs\.end_ns\[3\] is 1180591620717411303424 \(int\), "
                                              r"expected an integer of 64 bits"):
        write_report(tmp_path / "r", doc)
    assert not (tmp_path / "r").exists()
