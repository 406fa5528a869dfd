"""The chooser's task runner (harness.choose.parallel.map_tasks): results in the tasks' order whatever the
submission order, and a progress bar only on a terminal."""

from __future__ import annotations

import time

import pytest

from harness.choose.parallel import map_tasks


def _slow_square(x: int) -> int:
    time.sleep(0.35)
    return x * x


def test_results_keep_the_items_order_whatever_the_submission_order() -> None:
    results, how = map_tasks(_slow_square, [1, 2, 3], executor="serial", progress=False, order=[2, 0, 1])
    assert (results, how) == ([1, 4, 9], "serial")
    with pytest.raises(ValueError, match="permutation"):
        map_tasks(_slow_square, [1, 2], executor="serial", progress=False, order=[0, 0])


def test_no_progress_bar_where_standard_error_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    # four tasks of 0.35 s: past the bar's one-second delay, so tqdm would draw it on any stream it was given
    results, _ = map_tasks(_slow_square, [1, 2, 3, 4], executor="serial", progress=True)
    assert results == [1, 4, 9, 16]
    assert capsys.readouterr().err == ""
