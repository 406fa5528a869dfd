"""The report's fast paths for valid input give what the exact paths give (harness.report.fields)."""

from __future__ import annotations

from harness.records import first_duplicate
from harness.report.fields import _step_labels_distinct
from harness.report.jobtable import JobTable


def _table(rank: list[int], step: list[int], stage: list[int]) -> JobTable:
    n = len(rank)
    return JobTable.from_case({"jobs": {"rank": rank, "stream": [0] * n, "stage": stage, "chunk": [0] * n, "step": step,
                                        "start_ns": [0] * n, "end_ns": [1] * n, "kind": ["F"] * n, "microbatch": [0] * n}})


def test_counted_step_label_pairs_prove_no_job_is_listed_twice() -> None:
    distinct = _table([0, 1, 0, 1], [0, 0, 1, 1], [0, 1, 0, 1])  # 0F0 and 1F0 in steps 0 and 1
    assert _step_labels_distinct(distinct) and first_duplicate(distinct.rank, distinct.step, distinct.label) is None


def test_a_repeated_pair_is_left_to_the_sort_which_tells_ranks_apart() -> None:
    two_ranks = _table([0, 1], [0, 0], [0, 0])  # one label on two ranks: counted twice, yet no duplicate
    assert not _step_labels_distinct(two_ranks)
    assert first_duplicate(two_ranks.rank, two_ranks.step, two_ranks.label) is None
    twice = _table([0, 1, 0], [0, 0, 0], [0, 1, 0])
    assert not _step_labels_distinct(twice)
    assert first_duplicate(twice.rank, twice.step, twice.label) == (0, 2)


def test_steps_too_far_apart_to_count_are_left_to_the_sort() -> None:
    wide = _table([0, 0], [0, 10**12], [0, 0])
    assert not _step_labels_distinct(wide)
    assert first_duplicate(wide.rank, wide.step, wide.label) is None
