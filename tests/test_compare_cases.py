"""``python -m harness compare FILE --case A --case B`` (issue 26 item 2): any two cases, of one file or of two,
with the statistics and verdicts of a comparison by id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.compare import step_samples
from harness.case import PipelineCase
from harness.cli import main
from harness.model.cost import FixedCost
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case
from harness.stats import compare_samples


def _pct(x: float) -> str:
    return f"{100 * x:+.2f}%"


@pytest.fixture(scope="module")
def timed(tmp_path_factory) -> tuple[Path, list[dict]]:
    """Two schedules run on the cpu backend, six recorded steps each (a real bootstrap, not sim's exact change)."""
    cases = [case_to_dict(run_case(PipelineCase(s, stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2)), "cpu", range(1, 7)))
             for s in ("1F1B", "ZB-H1")]
    path = tmp_path_factory.mktemp("timed") / "results.json"
    path.write_text(json.dumps(results_document(cases)))
    return path, cases


def test_two_schedules_of_one_file_give_their_step_difference_with_its_ci(timed, capsys):
    path, cases = timed
    assert main(["compare", str(path), "--case", "1F1B p=2 m=4", "--case", "ZB-H1_p=2_m=4"]) == 0  # as written, and as on disk
    out = capsys.readouterr().out.splitlines()
    row = next(line for line in out if line.startswith("1F1B p=2 m=4 -> ZB-H1 p=2 m=4 "))
    expected = compare_samples(step_samples(cases[0]), step_samples(cases[1]))  # compare's own statistics, seeded
    assert expected.method == "bootstrap" and len(step_samples(cases[0])) == 6
    assert f" {_pct(expected.estimate)} " in row
    assert f"[{_pct(expected.ci_low)}, {_pct(expected.ci_high)}]" in row
    verdict = {"larger": "slower", "smaller": "faster"}.get(expected.verdict, expected.verdict)
    assert f"  {verdict}" in row
    medians = [sorted(step_samples(c)) for c in cases]
    assert f"{(medians[0][2] + medians[0][3]) / 2e6:8.3f} ms" in row  # the base case's median step, of its own samples
    assert out[-1].startswith("1 case(s) compared, 0 past a threshold (gates: none): 1 ")


@pytest.fixture(scope="module")
def exact(tmp_path_factory) -> tuple[Path, Path]:
    """1F1B in one file, ZB-H1 in another (sim: exact figures). p=4, m=8, F=1 ms, B=2 ms (I=W=1 ms): 1F1B
    (m+p-1)(F+B) = 33 ms; ZB-H1 m(F+B) + (p-1)(F+I-W) = 24 + 3 = 27 ms (arXiv:2401.10241, I the backward for inputs)."""
    folder = tmp_path_factory.mktemp("exact")
    paths = []
    for s in ("1F1B", "ZB-H1"):
        case = case_to_dict(run_case(PipelineCase(s, stages=4, microbatches=8, cost=FixedCost.ms(F=1, B=2)), "sim", range(0, 1),
                                     case_id=f"cases/test_zoo.py::test_schedule_zoo[{s}]"))
        path = folder / f"{s}.json"
        path.write_text(json.dumps(results_document([case])))
        paths.append(path)
    return paths[0], paths[1]


def test_a_case_of_one_file_against_a_case_of_another(exact, capsys):
    base, new = exact
    assert main(["compare", str(base), str(new)]) == 2  # by id: no case id is in both
    assert "no case id is in both" in capsys.readouterr().err
    assert main(["compare", str(base), str(new), "--case", "test_schedule_zoo[1F1B]", "--case", "test_schedule_zoo[ZB-H1]"]) == 0
    captured = capsys.readouterr()
    assert "a different pipeline" not in captured.err  # two schedules asked for: not warned as a mismatch
    row = next(line for line in captured.out.splitlines() if "->" in line)
    assert row.split()[0:3] == ["test_schedule_zoo[1F1B]", "->", "test_schedule_zoo[ZB-H1]"]
    assert captured.err.startswith(f"note: comparing case 'cases/test_zoo.py::test_schedule_zoo[1F1B]' of {base} (base) with case "
                                   f"'cases/test_zoo.py::test_schedule_zoo[ZB-H1]' of {new} (new)\n")
    assert "33.000 ms" in row and "27.000 ms" in row and f" {_pct(27 / 33 - 1)} " in row and " exact " in row and "faster" in row
    # a gate reads the pair as it reads a case: ZB-H1 -> 1F1B grows 22 %, past step_time:5%
    assert main(["compare", str(new), str(base), "--case", "test_schedule_zoo[ZB-H1]", "--case", "test_schedule_zoo[1F1B]",
                 "--fail", "step_time:5%"]) == 1
    assert "FAIL step_time" in capsys.readouterr().out


def test_one_case_of_two_files_and_the_errors(exact, timed, capsys):
    base, _ = exact
    path, _ = timed
    assert main(["compare", str(base), str(base), "--case", "test_schedule_zoo[1F1B]"]) == 0  # one --case: that case in both files
    assert "+0.00%" in capsys.readouterr().out
    assert main(["compare", str(path), "--case", "1F1B p=2 m=4"]) == 2
    assert capsys.readouterr().err == (f"error: compare needs NEW (a second results file), or --case A --case B to compare two cases "
                                       f"of {path} (one --case was given: '1F1B p=2 m=4')\n")
    assert main(["compare", str(path), "--case", "a", "--case", "b", "--case", "c"]) == 2
    assert "compare takes two cases: --case A --case B" in capsys.readouterr().err
    assert main(["compare", str(path), "--case", "1F1B p=2 m=4", "--case", "GPipe"]) == 2
    assert f"error: no case 'GPipe' in {path} (by id, label, short label or name on disk)" in capsys.readouterr().err
