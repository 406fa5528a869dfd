"""The DualPipe/DualPipeV oracle (tests/_reference_dualpipe.py, a transcription of deepseek-ai/DualPipe at
3da1bbea) on its own: the issue's figures, the DualPipe README's table, and where the code's batched
waits part from a plain job model. Exact values (ns); no harness import."""

from __future__ import annotations

import itertools

import pytest
from _reference_dualpipe import (
    Compute,
    check_matching,
    dualpipe_program,
    dualpipev_program,
    harness_jobs,
    simulate,
)

JOBS = {"prefetch": False, "deferred_sends": False}  # the plain job model the harness implements


def _peaks(program, res) -> list[int]:
    """Per rank, the most activations held at once: an F (or a pair's F) takes one at its start,
    a B / pair's B / W (or an I whose W is not split off) frees one at its end; frees first on ties."""
    out = []
    for r, items in enumerate(program):
        comp = [it for it in items if isinstance(it, Compute)]
        split = {(it.stage, it.mb) for it in comp if it.kind == "W"}
        ev = []
        for it, s, e in zip(comp, res.starts[r], res.ends[r]):
            if it.kind in ("F", "FB"):
                ev.append((s, 1, 1))
            if it.kind in ("B", "FB", "W") or (it.kind == "I" and (it.stage, it.mb) not in split):
                ev.append((e, 0, -1))
        held = peak = 0
        for _, _, d in sorted(ev):
            held += d
            peak = max(peak, held)
        out.append(peak)
    return out


# --- the transcription is sound -------------------------------------------------------------
@pytest.mark.parametrize(("p", "m"), [(2, 4), (3, 7), (4, 8), (4, 11), (8, 16), (8, 24)])
def test_dualpipev_messages_match_in_posting_order(p: int, m: int) -> None:
    check_matching(dualpipev_program(p, m))


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (4, 10), (6, 12), (8, 16), (8, 24)])
def test_dualpipe_messages_match_in_posting_order(p: int, m: int) -> None:
    check_matching(dualpipe_program(p, m))


def test_every_stage_runs_its_micro_batches_once() -> None:
    for p, m in [(4, 8), (4, 10)]:
        v = [j for row in harness_jobs(dualpipev_program(p, m)) for j in row]
        assert sorted(j for j in v if "F" in j) == sorted(f"{k}F{i}" for k in range(2 * p) for i in range(m))
        d = [j for row in harness_jobs(dualpipe_program(p, m)) for j in row]
        # direction A: stages 0..p-1, micro-batches 0..m/2-1; direction B: stages p..2p-1, m/2..m-1
        assert sorted(j for j in d if "F" in j) == sorted(
            [f"{k}F{i}" for k in range(p) for i in range(m // 2)] + [f"{k}F{i}" for k in range(p, 2 * p) for i in range(m // 2, m)])


def test_dualpipev_p2_m4_order() -> None:
    # dualpipev.py step() for 2 ranks, 4 chunks: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2
    assert harness_jobs(dualpipev_program(2, 4)) == [
        ["0F0", "0F1", "0F2", "3F0", "3I0", "3W0", "3F1", "0F3", "3B1", "3F2", "0B0", "3B2", "3F3", "0B1", "3B3",
         "0I2", "0W2", "0I3", "0W3"],
        ["1F0", "2F0", "1F1", "2F1", "1F2", "2B0", "2F2", "1B0", "1F3", "2B1", "2F3", "1B1", "2B2", "1B2", "2I3",
         "1I3", "2W3", "1W3"],
    ]


# --- the issue's figures ----------------------------------------------------------------------
def test_issue_p2_m4_idle_is_150_on_both_ranks() -> None:
    r = simulate(dualpipev_program(2, 4), F=100, I=100, W=100, G=250)
    assert (r.makespan, r.busy, r.idle) == (2400, [2250, 2250], [150, 150])
    assert simulate(dualpipev_program(2, 4), F=100, I=100, W=100, G=250, **JOBS).idle == [150, 150]


@pytest.mark.parametrize("jobs", [False, True])
def test_issue_p8_m24_c50_worst_rank_4840(jobs: bool) -> None:
    # one setting that gives the issue's pair (harness before the fix: 3540 on the worst rank, same step)
    r = simulate(dualpipev_program(8, 24), F=100, I=140, W=60, G=200, c=50, **(JOBS if jobs else {}))
    assert r.makespan == 16140
    assert r.idle == [4240, 4340, 4440, 4540, 4640, 4740, 4840, 4840]


# --- the DualPipe README table ------------------------------------------------------------------
REGIME = [(f, f, w) for f in (50, 100, 150) for w in (25, 50, 100, 150) if w <= f]


@pytest.mark.parametrize(("p", "m"), [(2, 4), (3, 6), (4, 8), (4, 11), (6, 12), (8, 16), (8, 24)])
def test_dualpipev_readme_bubble_holds_exactly_when_f_equals_i(p: int, m: int) -> None:
    # (PP/2-1)(F&B+B-3W), PP = 2p stages, B = I + W the full backward, F&B = G: the worst rank's idle
    prog = dualpipev_program(p, m)
    for f, i, w in REGIME:
        for g in sorted({max(f, i + w), f + i + w, (max(f, i + w) + f + i + w) // 2}):
            assert max(simulate(prog, f, i, w, g).idle) == (2 * p // 2 - 1) * (g + (i + w) - 3 * w)


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (4, 10), (6, 12), (8, 16), (8, 24)])
def test_dualpipe_readme_bubble_holds_exactly_when_f_equals_i(p: int, m: int) -> None:
    # (PP/2-1)(F&B+B-3W), PP = p devices = stages of the model
    prog = dualpipe_program(p, m)
    for f, i, w in REGIME:
        for g in sorted({max(f, i + w), f + i + w}):
            assert max(simulate(prog, f, i, w, g).idle) == (p // 2 - 1) * (g + (i + w) - 3 * w)


def test_readme_bubble_misses_outside_its_regime() -> None:
    prog = dualpipev_program(4, 8)
    # F < I, F > I, W > F: worst-rank idle against the formula's
    assert max(simulate(prog, 100, 150, 50, 250).idle) == 800 != 3 * (250 + 200 - 150)
    assert max(simulate(prog, 150, 100, 50, 250).idle) == 950 != 3 * (250 + 150 - 150)
    assert max(simulate(prog, 100, 100, 150, 300).idle) == 450 != 3 * (300 + 250 - 450)


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (4, 12), (8, 16), (8, 24)])
def test_activation_per_device_is_pp_plus_1(p: int, m: int) -> None:
    for f, i, w, g in [(100, 100, 100, 250), (100, 100, 50, 200), (100, 150, 50, 250)]:
        v = dualpipev_program(p, m)
        assert _peaks(v, simulate(v, f, i, w, g)) == [2 * p + 1] * p  # PP = 2p chunks of 1/(2p) of the model
        if m % 2 == 0:
            d = dualpipe_program(p, m) if p % 2 == 0 else None
            if d is not None:
                assert _peaks(d, simulate(d, f, i, w, g)) == [p + 1] * p  # PP = p stages of 1/p of the model


def test_parameters_per_device_are_two_stages() -> None:
    # 2x: every rank holds two of the PP stages (DualPipeV: 2 of 2p; DualPipe: stage r and a copy of stage p-1-r)
    for prog in (dualpipev_program(4, 8), dualpipe_program(4, 8)):
        for r, items in enumerate(prog):
            stages = {it.stage for it in items if isinstance(it, Compute)} | {
                it.stage2 for it in items if isinstance(it, Compute) and it.kind == "FB"}
            assert stages == {r, 7 - r}


# --- where the code's batched waits part from the plain job model -------------------------------
def test_code_equals_job_model_at_c0_when_f_at_most_i() -> None:
    # per-rank idle and step agree (single jobs may start at other times: a W held back by a prefetched
    # receive starts later, its F no later)
    for p, m in [(2, 4), (4, 8), (4, 11), (6, 15)]:
        prog = dualpipev_program(p, m)
        for f, i, w in itertools.product((50, 100), (100, 150), (50, 100)):
            for g in (max(f, i + w), f + i + w):
                code, jobs = simulate(prog, f, i, w, g), simulate(prog, f, i, w, g, **JOBS)
                assert (code.makespan, code.idle) == (jobs.makespan, jobs.idle)


def test_code_semantics_differ_from_job_model_by_these_amounts() -> None:
    # F > I, no comm: the last rank sends its last step-2 F1 output only after step 4's first F0
    # (dualpipev.py: send=False, then _send_forward(1)), and rank 0's step-3 W waits for that input (prefetch)
    prog = dualpipev_program(2, 4)
    assert simulate(prog, 200, 100, 50, 200).idle == [400, 400] and simulate(prog, 200, 100, 50, 200).makespan == 2750
    assert simulate(prog, 200, 100, 50, 200, **JOBS).idle == [300, 300]
    # F = I with an edge delay: 100 ns more on the step, every rank
    big = dualpipev_program(8, 24)
    assert simulate(big, 100, 100, 100, 250, c=50).makespan == 17300
    assert simulate(big, 100, 100, 100, 250, c=50, **JOBS).makespan == 17200
    # each of the two mechanisms alone changes nothing here; together they cost the 100 ns
    assert simulate(big, 100, 100, 100, 250, c=50, prefetch=False).makespan == 17200
    assert simulate(big, 100, 100, 100, 250, c=50, deferred_sends=False).makespan == 17200
    # the code also waits on its send requests: with that wait, c more per exposed send
    assert simulate(big, 100, 100, 100, 250, c=50, send_waits=True).makespan == 17600
