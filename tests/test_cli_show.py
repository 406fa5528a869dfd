"""``show``: what it says about paths that are no schedule file, its cost flags, an
unused ``--weight-ms``, and long grids."""

from __future__ import annotations

import pytest

from harness.cli import main


def _grid_steps(out: str) -> list[str]:
    """The first column of the grid's rows (step numbers, or '...' for a cut), up to the blank line."""
    rows = out.split("\n\n", 1)[0].splitlines()[1:]
    return [row.split()[0] for row in rows]


def test_a_path_that_is_no_file_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    for argv, err in [
        (["./1F1B", "-p", "4", "-m", "8"], "error: ./1F1B: no such file; for the built-in schedule, give its name alone: show 1F1B\n"),
        (["sub/nope.csv"], "error: sub/nope.csv: no such file\n"),
        (["folder"], "error: folder: is a directory, not a schedule file (a PyTorch pipeline .csv)\n"),
        (["folder/"], "error: folder/: is a directory, not a schedule file (a PyTorch pipeline .csv)\n"),
        ([str(tmp_path)], f"error: {tmp_path}: is a directory, not a schedule file (a PyTorch pipeline .csv)\n"),
    ]:
        assert main(["show", *argv]) == 2, argv
        captured = capsys.readouterr()
        assert (captured.out, captured.err) == ("", err)


@pytest.mark.parametrize(("flags", "err"), [
    (["--forward-ms", "-1"], "error: --forward-ms must be positive, got -1 ms\n"),
    (["--backward-ms", "0"], "error: --backward-ms must be positive, got 0 ms\n"),
    (["--forward-ms", "nan"], "error: --forward-ms must be a finite number of milliseconds, got nan\n"),
    (["--backward-ms", "inf"], "error: --backward-ms must be a finite number of milliseconds, got inf\n"),
    (["--weight-ms", "1e-7"], "error: --weight-ms must be at least 1 ns (0.000001 ms), got 1e-07 ms\n"),
    (["--forward-ms", "1e13"], "error: --forward-ms must be below 9.0072e+09 ms (2**53 ns, about 104 days), got 1e+13 ms\n"),
    (["--weight-ms", "2"], "error: --weight-ms 2 must be below --backward-ms 2: W is the weight part of the full backward, "
                           "the rest (I = 2 - 2 ms) is the input part\n"),
    (["--backward-ms", "3", "--weight-ms", "4.5"], "error: --weight-ms 4.5 must be below --backward-ms 3: W is the weight part of "
                                                   "the full backward, the rest (I = 3 - 4.5 ms) is the input part\n"),
])
def test_cost_errors_name_the_flags(capsys, flags, err):
    assert main(["show", "ZB-H1", "-p", "4", "-m", "8", *flags]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", err)


def test_weight_ms_for_a_schedule_without_a_split_backward_gets_a_note(capsys):
    assert main(["show", "1F1B", "-p", "4", "-m", "8", "--weight-ms", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ("note: --weight-ms is unused: 1F1B does not split the backward (no I or W jobs); "
                            "its B jobs take --backward-ms\n")
    assert "step time 33.000 ms" in captured.out  # (m+p-1)(F+B): W changed nothing
    assert main(["show", "ZB-H1", "-p", "4", "-m", "8", "--weight-ms", "1"]) == 0
    assert capsys.readouterr().err == ""


def test_a_long_grid_shows_its_first_and_last_steps(capsys):
    assert main(["show", "1F1B", "-p", "4", "-m", "300"]) == 0  # 600 steps
    out = capsys.readouterr().out
    assert _grid_steps(out) == [*map(str, range(20)), "...", *map(str, range(580, 600))]
    assert "\n  ... (560 slots not shown; --all-steps shows all 600)\n" in out
    assert "\n599   0B299     1B299     2B299     3B299\n" in out  # the drain, where the schedule ends
    assert main(["show", "1F1B", "-p", "4", "-m", "300", "--all-steps"]) == 0
    assert _grid_steps(capsys.readouterr().out) == [str(k) for k in range(600)]
    assert main(["show", "1F1B", "-p", "4", "-m", "100"]) == 0  # 200 steps: drawn whole
    assert _grid_steps(capsys.readouterr().out) == [str(k) for k in range(200)]


def test_show_states_the_backward_split_it_assumed(capsys):
    from harness.cli import main

    assert main(["show", "ZB-H1", "-p", "2", "-m", "2"]) == 0
    assert "cost F=1 ms, B=2 ms (I=1 ms, W=1 ms: B split in half; --weight-ms sets W)\n" in capsys.readouterr().out
    assert main(["show", "ZB-H1", "-p", "2", "-m", "2", "--weight-ms", "0.5"]) == 0
    assert "cost F=1 ms, B=2 ms (I=1.5 ms, W=0.5 ms)\n" in capsys.readouterr().out
    assert main(["show", "1F1B", "-p", "2", "-m", "2"]) == 0
    assert "cost F=1 ms, B=2 ms\n" in capsys.readouterr().out  # no I or W jobs: nothing to split


def test_show_names_durations_as_typed_and_says_when_ns_rounding_makes_them_equal(capsys):
    from harness.cli import main

    assert main(["show", "ZB-H2", "-p", "4", "-m", "8", "--weight-ms", "1", "--backward-ms", "1.0000001"]) == 2
    assert capsys.readouterr().err == (
        "error: --weight-ms 1 must be below --backward-ms 1.0000001 (durations are whole ns: 1000000 ns is not below "
        "1000000 ns): W is the weight part of the full backward, the rest (I = 1.0000001 - 1 ms) is the input part\n"
    )


def test_show_reads_a_file_given_without_a_folder_part(tmp_path, capsys, monkeypatch):
    from harness.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.json").write_text("{}")
    assert main(["show", "empty.json"]) == 2
    assert capsys.readouterr().err == "error: empty.json: unknown schedule file type '.json'; expected a PyTorch pipeline .csv\n"
