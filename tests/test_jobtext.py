"""Job texts parsed in numpy (harness.report.jobtext) give the ids the hash lookup gives."""

from __future__ import annotations

import random

import numpy as np
import pytest

from harness.report.jobtable import JobTable
from harness.report.jobtext import parsable_kinds, parse_job_texts
from harness.report.layout import job_label


def _case(jobs: list[tuple[int, str, int | None]]) -> dict:
    n = len(jobs)
    return {"jobs": {"rank": [0] * n, "stream": [0] * n, "stage": [s for s, _, _ in jobs], "chunk": [0] * n, "step": [0] * n,
                     "start_ns": list(range(n)), "end_ns": list(range(1, n + 1)), "kind": [k for _, k, _ in jobs],
                     "microbatch": [m for _, _, m in jobs]}}


def _by_dict(table: JobTable, names: list[str]) -> list[int]:
    """The reference: per text, the last label id of that text, or -1."""
    index = {text: i for i, text in enumerate(table.labels)}
    return [index.get(x, -1) for x in names]


def test_parse_reads_stage_kind_and_microbatch() -> None:
    names = ["2F0", "0OPT", "01F2", "12SEND_B345", "F1", "3X1", "", "7", "1F", "0F00", "5OPT0", "3F" + "9" * 19, "10F10"]
    got = parse_job_texts(names, ["F", "OPT", "SEND_B"])
    assert got is not None
    stage, kind, mb = got
    ok = kind >= 0
    assert [(int(s), int(k), int(m)) if o else None for s, k, m, o in zip(stage, kind, mb, ok)] == [
        (2, 0, 0), (0, 1, -1), None, (12, 2, 345), None, None, None, None, (1, 0, -1), None, (5, 1, 0), None, (10, 0, 10)]


@pytest.mark.parametrize("kinds", [["F1"], [""], ["a\nb"], ["X" * 17], ["\ud800"]])
def test_kinds_the_parser_cannot_read_exactly(kinds: list[str]) -> None:
    assert parsable_kinds(kinds) is None
    assert parse_job_texts(["0F0"], kinds) is None


def test_texts_with_a_newline_or_not_text_are_left_to_the_hash_lookup() -> None:
    assert parse_job_texts(["0F0", "1F\n0"], ["F"]) is None
    assert parse_job_texts(["0F0", 3], ["F"]) is None  # type: ignore[list-item]
    assert parse_job_texts(["0F\ud800"], ["F"]) is None


def test_ids_of_by_parse_equals_the_hash_lookup_on_random_tables() -> None:
    rng = random.Random(17)
    kinds = ["F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "OPT", "REDUCE_GRAD", "Fé"]
    for _ in range(30):
        jobs = {(rng.randrange(0, 40), rng.choice(kinds[: rng.randrange(1, len(kinds) + 1)]),
                 None if rng.random() < 0.1 else rng.randrange(0, 300)) for _ in range(rng.randrange(1, 400))}
        table = JobTable.from_case(_case(sorted(jobs, key=str)))
        assert table._parse_keys is not None
        names = [job_label(*j) for j in jobs]
        names += [job_label(rng.randrange(0, 60), rng.choice(kinds), rng.randrange(0, 400)) for _ in range(200)]  # mostly absent
        names += ["", "0", "F", "00F0", "0F01", "-1F0", "0 F0", "0F0 ", "0f0", "0SEND_F", "12345678901234567890F1",
                  "1F" + "1" * 25, "0REDUCE_GRAD", "0FF0", "٣F0", "0F٣", "0Fé"]
        rng.shuffle(names)
        fast = table.ids_of(names)
        slow = JobTable.from_case(_case(sorted(jobs, key=str)))
        slow._parse_keys = None
        assert fast.tolist() == slow.ids_of(names).tolist() == _by_dict(table, names)


def test_a_table_the_parser_cannot_read_keeps_the_hash_lookup() -> None:
    # kinds ending in digits: "1F12" is stage 1, kind F1, micro-batch 2 and stage 1, kind F, micro-batch 12
    table = JobTable.from_case(_case([(1, "F1", 2), (1, "F", 12), (0, "OPT", None)]))
    assert table._parse_keys is None
    assert table.ids_of(["1F12", "0OPT", "1F1"]).tolist() == _by_dict(table, ["1F12", "0OPT", "1F1"])
    assert _by_dict(table, ["1F12"]) != [-1]
    negative = JobTable.from_case(_case([(-1, "F", 0), (0, "F", 0)]))  # an unchecked case: "-1F0" is no parsable text
    assert negative._parse_keys is None
    assert negative.ids_of(["-1F0", "0F0"]).tolist() == _by_dict(negative, ["-1F0", "0F0"])


def test_find_step_is_find_of_the_step_and_is_remembered() -> None:
    jobs = [(s, k, m) for s in range(3) for k in ("F", "B") for m in range(4)]
    case = _case(jobs + jobs)
    case["jobs"]["step"] = [0] * len(jobs) + [1] * len(jobs)
    table = JobTable.from_case(case)
    label = table.ids_of(["0F0", "2B3", "9F9", "1B1"])
    for step in (0, 1, 2):
        want = table.find(np.full(len(label), step, dtype=np.int64), label)
        assert table.find_step(step, label).tolist() == want.tolist() == table.find_step(step, label, by_text=True).tolist()
    assert table.find_step(1, label).tolist() == [len(jobs) + 0, len(jobs) + 23, -1, len(jobs) + 13]
    assert table.find_step(1, label) is table.find_step(1, label)


@pytest.mark.parametrize("far", [False, True])
@pytest.mark.parametrize("dense", [True, False])
def test_lookups_by_table_and_by_sort_agree_with_a_dict(monkeypatch: pytest.MonkeyPatch, dense: bool, far: bool) -> None:
    from harness.report import jobtable

    if not dense:
        monkeypatch.setattr(jobtable, "_dense", lambda size, n: False)
    rng = random.Random(3)
    jobs = [(rng.randrange(0, 6), rng.choice(["F", "B", "SEND_F"]), rng.randrange(0, 20)) for _ in range(500)]  # repeats too
    case = _case(jobs)
    steps = [2, 5, 9, 10**12 if far else 11]  # far: too wide a range to count the steps
    case["jobs"]["step"] = [rng.choice(steps) for _ in jobs]
    table = JobTable.from_case(case)
    values, code = table.step_codes()
    want_values, want_code = np.unique(np.asarray(case["jobs"]["step"]), return_inverse=True)
    assert values.tolist() == want_values.tolist() and code.tolist() == want_code.tolist()
    names = [job_label(*j) for j in jobs[:100]] + ["9F99", "0B0", "x"]
    assert table.ids_of(names).tolist() == _by_dict(table, names)
    last = {}
    for i, (text, step) in enumerate(zip((job_label(*j) for j in jobs), case["jobs"]["step"])):
        last[(step, text)] = i
    label = table.ids_of(names)
    for step in (*steps, 3):
        got = table.find(np.full(len(names), step, dtype=np.int64), label)
        assert got.tolist() == [last.get((step, x), -1) for x in names]
    assert table.find(np.array([2]), np.array([len(table.label_kind)])).tolist() == [-1]  # no label: no job
