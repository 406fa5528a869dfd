"""A PaddlePaddle device's jobs cut into steps, and the micro-batch ids checked across devices;
see :mod:`harness.imports.paddle` for the import as a whole.

Every step of a Paddle run executes the same job list, so :func:`_split_steps` cuts a device's jobs
where a (type, micro-batch) pair repeats, or into the equal blocks that run the same jobs best, and
counts job lines the parser skipped in their places; :func:`recorded_steps` finds the steps every
device recorded whole (a log that ends early leaves the later steps out of the figures);
:func:`_micro_batches` finds ``m`` and names the ids that are repeated, out of range or missing, by
file and line.
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

from harness.actions.step_text import steps_text
from harness.imports.paddle_log import _PIPELINE_WORK, PaddleJob, parse_job_type

__all__ = ["MAX_SPLIT_CANDIDATES", "recorded_steps"]

def _split_on_repeat(jobs: list[PaddleJob]) -> list[list[PaddleJob]]:
    """Split a device's jobs into blocks: a new one starts where a (type, micro-batch) pair repeats."""
    steps: list[list[PaddleJob]] = []
    seen: set[tuple[str, int]] = set()
    for j in jobs:
        key = (j.type, j.microbatch)
        if not steps or key in seen:
            steps.append([])
            seen = set()
        steps[-1].append(j)
        seen.add(key)
    return steps


def _split_cost(blocks: list[list[PaddleJob]]) -> int:
    """How far ``blocks`` are from steps that each run the same jobs once: per block, the
    (type, micro-batch) pairs it has twice, has but most blocks lack, and (but for the last
    block, which a truncated log may cut short) lacks but most blocks have."""
    keys = [Counter((j.type, j.microbatch) for j in b) for b in blocks]
    presence = Counter(k for c in keys for k in c)
    common = {k for k, n in presence.items() if 2 * n >= len(blocks)}
    cost = 0
    for i, c in enumerate(keys):
        cost += sum(n - 1 for n in c.values()) + sum(1 for k in c if k not in common)
        if i < len(keys) - 1:
            cost += sum(1 for k in common if k not in c)
    return cost


#: The most step lengths :func:`_split_steps` tries when the plain split fails (each try is
#: linear in the log's lines), so a log with wrong ids costs a few passes, not one per length.
MAX_SPLIT_CANDIDATES = 12


def _hole(line: int) -> PaddleJob:
    """A stand-in for the job of a skipped line (``type`` empty): its pair never repeats."""
    return PaddleJob("", -line, 0, 0, line)


def _hole_cost(blocks: list[list[PaddleJob]]) -> int:
    """:func:`_split_cost` for blocks holding stand-ins of skipped job lines (:func:`_hole`): each
    stand-in fills one job its block lacks; one with nothing to fill costs 1, and so does each job a
    block lacks, the last block's too (else a split that cuts a short last block off would be free).
    A job is one every step runs where most blocks have it, or where the stand-ins could stand for it
    in every block that lacks it (two of three steps with the same line damaged)."""
    keys = [Counter((j.type, j.microbatch) for j in b if j.type) for b in blocks]
    presence = Counter(k for c in keys for k in c)
    stand_ins = sum(1 for b in blocks for j in b if not j.type)
    common = {k for k, n in presence.items() if 2 * n >= len(blocks) or n + stand_ins >= len(blocks)}
    cost = 0
    for b, c in zip(blocks, keys):
        holes = sum(1 for j in b if not j.type)
        lacking = sum(1 for k in common if k not in c)
        cost += sum(n - 1 for n in c.values()) + sum(1 for k in c if k not in common) + abs(holes - lacking)
    return cost


def _split_with_holes(jobs: list[PaddleJob], holes: list[int]) -> list[list[PaddleJob]]:
    """Split a device's jobs into steps where job lines were skipped (``holes``, their line numbers):
    each skipped line still held one job of its step, so a stand-in takes its place in the file's order
    and the split (on a repeat, or into equal blocks, as :func:`_split_steps`) counts it as that job.
    Without the stand-in one missing job shifts every later step's first job into the step before.
    Whole steps followed by the first jobs of one (a log that ends inside a step, its last line
    damaged) are that split, not blocks of another length. The blocks returned keep the stand-ins
    (``type`` empty)."""
    seq = sorted([*jobs, *map(_hole, holes)], key=lambda j: j.line)
    naive = _split_on_repeat(seq)
    best, best_cost = naive, _hole_cost(naive)
    if best_cost == 0:
        return naive
    if len(naive) > 1 and _hole_cost(naive[:-1]) == 0 and _is_prefix(*(
            [None if not j.type else (j.type, j.microbatch) for j in b] for b in (naive[-1], naive[-2]))):
        return naive  # whole steps, then the start of one: a log that ends inside a step (recorded_steps)
    distinct = len({(j.type, j.microbatch) for j in jobs})
    lengths = [len(b) for b in naive]
    ranked = [n for n, _ in Counter(lengths).most_common(4)]
    ranked += [n for n, _ in Counter(a + b for a, b in itertools.pairwise(lengths)).most_common(4)]
    ranked += [distinct, distinct + 1, distinct - 1]
    for length in sorted(set(n for n in ranked if 1 <= n <= len(seq)))[:MAX_SPLIT_CANDIDATES]:
        blocks = [seq[i:i + length] for i in range(0, len(seq), length)]
        if not all(any(j.type for j in b) for b in blocks):  # a step of stand-ins only: no step was logged there
            continue
        cost = _hole_cost(blocks)
        if cost < best_cost:
            best, best_cost = blocks, cost
    return best


def _split_steps(jobs: list[PaddleJob], path: Path | None = None, problems: list[str] | None = None,
                 holes: list[int] | None = None, holes_out: list[list[int]] | None = None) -> list[list[PaddleJob]]:
    """Split a device's jobs into steps (printed blocks).

    ``holes``: the line numbers of job lines :func:`parse_worker_log` skipped (damaged), each a job
    missing from ``jobs`` that the split places by its line (:func:`_split_with_holes`); where given,
    ``holes_out`` receives, per step returned, the skipped lines that fell in it.

    Every step of a Paddle run executes the same job list, so a block normally
    ends where a (type, micro-batch) pair repeats. A wrong ``micro_batch_id``
    (a ``1`` printed or edited as ``0``) repeats a pair inside a step; where the
    blocks so found do not all run the same jobs, the split into equal blocks
    that runs the same jobs in every block best is taken instead, so a wrong id
    is one odd job in its step, not an extra step. The lengths tried are anchored
    on the repeating pattern: the commonest lengths of the plain split's blocks,
    the sums of neighbouring blocks (a wrong id cuts one step in two), and the
    count of distinct pairs and its neighbours, within the old window of that count
    +- max(4, count // 8): at most :data:`MAX_SPLIT_CANDIDATES` lengths, each tried
    in one linear pass, so the split stays linear in the lines whatever the input.
    When two lengths fit equally well, the length of blocks the plain split found
    more than once wins; failing that the split is ambiguous: the shorter length is
    taken and a note naming ``path`` and the line where the chosen second step
    starts goes to ``problems``.
    """
    if holes and jobs:
        blocks = _split_with_holes(jobs, holes)
        if holes_out is not None:
            holes_out.extend([j.line for j in b if not j.type] for b in blocks)
        return [[j for j in b if j.type] for b in blocks]
    steps = _split_plain(jobs, path, problems)
    if holes_out is not None:
        holes_out.extend([] for _ in steps)
    return steps


def _split_plain(jobs: list[PaddleJob], path: Path | None, problems: list[str] | None) -> list[list[PaddleJob]]:
    """:func:`_split_steps` of a log without skipped job lines."""
    naive = _split_on_repeat(jobs)
    first = {(j.type, j.microbatch) for j in naive[0]} if naive else set()
    if all({(j.type, j.microbatch) for j in b} == first for b in naive[:-1]) and \
            all((j.type, j.microbatch) in first for j in (naive[-1] if naive else [])):
        return naive  # the common case: every block runs the same jobs (the last maybe cut short)
    distinct = len({(j.type, j.microbatch) for j in jobs})
    slack = max(4, distinct // 8)
    low, high = max(1, distinct - slack), min(len(jobs), distinct + slack)
    lengths = [len(b) for b in naive]
    ranked: list[int] = [n for n, _ in Counter(lengths).most_common(4)]
    ranked += [n for n, _ in Counter(a + b for a, b in itertools.pairwise(lengths)).most_common(4)]
    ranked += [distinct, distinct + 1, distinct - 1]
    candidates: list[int] = []
    for n in ranked:
        if low <= n <= high and n not in candidates:
            candidates.append(n)
    candidates = sorted(candidates[:MAX_SPLIT_CANDIDATES])
    best, best_cost = naive, _split_cost(naive)
    tied: list[int] = []
    for length in candidates:
        blocks = [jobs[i:i + length] for i in range(0, len(jobs), length)]
        cost = _split_cost(blocks)
        if cost < best_cost:
            best, best_cost, tied = blocks, cost, [length]
        elif cost == best_cost and best is not naive:
            tied.append(length)
    common, repeats = Counter(lengths).most_common(1)[0]
    if len(tied) > 1 and repeats > 1 and common in tied:  # the repeating pattern's own length breaks the tie
        best = [jobs[i:i + common] for i in range(0, len(jobs), common)]
        tied = [common]
    if len(tied) > 1 and problems is not None and len(best) > 1:
        where = f"{path}:{best[1][0].line}" if path is not None else f"line {best[1][0].line}"
        problems.append(
            f"{where}: ambiguous step split (a repeated micro_batch_id?): steps of {' or '.join(map(str, tied))} jobs fit "
            f"this log equally well; took {len(best[0])} jobs per step, the second step starting here"
        )
    return best


def _entries(jobs: list[PaddleJob], holes: list[int]) -> list[tuple[str, int] | None]:
    """A step's job lines in file order: ``(type, micro-batch)`` per job, ``None`` per skipped (damaged) line."""
    at: list[tuple[int, tuple[str, int] | None]] = [(j.line, (j.type, j.microbatch)) for j in jobs]
    at += [(line, None) for line in holes]
    return [e for _, e in sorted(at, key=lambda x: x[0])]


def _is_prefix(last: list[tuple[str, int] | None], ref: list[tuple[str, int] | None]) -> bool:
    """Whether ``last`` is shorter than ``ref`` and runs the jobs ``ref`` begins with: a step whose log
    ends inside it. Every step of a Paddle run prints the same job list in the same order; a skipped
    line in either stands for any job. A step that lacks a job in the middle (a line deleted) is no
    prefix: it keeps its place and its micro-batch warning."""
    if not last or len(last) >= len(ref):
        return False
    head = ref[:len(last)]
    wanted = Counter(e for e in head if e is not None)
    stand_ins = sum(1 for e in head if e is None)
    unmatched = sum((Counter(e for e in last if e is not None) - wanted).values())
    return unmatched <= stand_ins


def _work(jobs: list[PaddleJob], holes: list[int]) -> int:
    """Forward and backward (F, B, I, W) jobs of a step, a skipped line counted as one."""
    return sum(1 for j in jobs if parse_job_type(j.type)[0] in _PIPELINE_WORK) + len(holes)


def recorded_steps(per_rank: list[list[list[PaddleJob]]], holes: list[list[list[int]]], paths: list[Path],
                   labels: list[str], first_step: int, problems: list[str], untrusted: list[str] | None = None) -> int:
    """How many of the logs' steps (from the first) every device recorded whole; the later ones are
    left out of the figures.

    A device whose log has fewer steps than the others' (it ends at a step boundary: a crash,
    a log copied before the run ended), or whose last step is cut short (the log ends inside
    it), did not record the steps after: counted, that device would be idle for them, the
    step's bubble too high and the step time of fewer devices. A step is cut short where it
    has fewer job lines than the device's earlier steps (their commonest length; the latest
    step of that length is the reference) and runs the jobs that step begins with
    (:func:`_is_prefix`; every step of a Paddle run prints the same job list, PR #58313), or,
    on a device with one step only, where it has fewer forward and backward jobs than the
    other devices' whole steps commonly have (every device runs each micro-batch once forward
    and once backward per chunk). Devices without a job (their own warning) are
    not counted; a log of one step on every device is never called cut short.

    One note per device that lacks a step goes to ``problems``, naming its file (and the
    line where a step is cut short), the device and the steps left out. Where no step is
    recorded whole by every device, every step is kept (their figures count the missing
    device as idle), and the notes say so.

    Args:
        per_rank: per device, its steps' jobs (:func:`_split_steps`).
        holes: per device and step, the skipped job lines (:func:`_split_steps` ``holes_out``).
        paths, labels: per device, its log and its name (``"GPU 2"``).
        first_step: the number of the first step.
        problems: receives the notes.
        untrusted: where given, receives the notes of the steps kept although a device lacks
            them (no step whole on every device): their figures are not the run's, and the
            import flags the case (``steps``).

    Returns:
        the number of leading steps to keep (all of them where none is whole on every device).
    """
    active = [r for r, steps in enumerate(per_rank) if steps]
    if not active:
        return 0
    n_steps = max(len(per_rank[r]) for r in active)
    hole = [[holes[r][k] if r < len(holes) and k < len(holes[r]) else [] for k in range(len(per_rank[r]))]
            for r in range(len(per_rank))]
    # The forward and backward jobs of a whole step: the commonest count of the steps that are not a log's last
    # (ties to the smaller), so one odd step does not make every one-step log look cut short.
    works = Counter(_work(per_rank[r][k], hole[r][k]) for r in active for k in range(len(per_rank[r]) - 1))
    whole_work = min(works, key=lambda n: (-works[n], n)) if works else 0
    whole: dict[int, int] = {}
    cut: dict[int, str] = {}  # device -> how its last step is cut short
    for r in active:
        steps = per_rank[r]
        last = _entries(steps[-1], hole[r][-1])
        whole[r] = len(steps)
        if len(steps) > 1:
            # The reference: the latest earlier step of the commonest length (ties to the shorter), so a step
            # with an extra line before does not make a whole last step look cut short.
            earlier = [_entries(steps[k], hole[r][k]) for k in range(len(steps) - 1)]
            sizes = Counter(len(e) for e in earlier)
            size = min(sizes, key=lambda n: (-sizes[n], n))
            k = max(k for k, e in enumerate(earlier) if len(e) == size)
            if _is_prefix(last, earlier[k]):
                whole[r] -= 1
                cut[r] = f"{len(last)} of the {size} job lines its step {first_step + k} has"
        elif len(active) > 1 and _work(steps[0], hole[r][0]) < whole_work:
            whole[r] -= 1
            cut[r] = (f"{len(last)} job line{'' if len(last) == 1 else 's'}; a whole step of another device has "
                      f"{whole_work} forward and backward jobs")
    kept = min(whole.values())
    if kept == n_steps:
        return n_steps
    for r in active:
        if whole[r] == n_steps:
            continue
        lacks = list(range(first_step + whole[r], first_step + n_steps))
        others = [q for q in active if q != r and whole[q] == n_steps]
        them = "it" if len(lacks) == 1 else "them"
        if r in cut:
            line = max([j.line for j in per_rank[r][-1]] + hole[r][-1])
            where = f"{paths[r]}:{line}: {labels[r]}'s log ends inside step {lacks[0]} ({cut[r]})"
        else:
            where = f"{paths[r]}: {labels[r]}'s log ends after step {lacks[0] - 1}"
        if kept == 0:
            note = (f"{where}: no step was recorded whole by every device, so every step is kept, and {labels[r]} "
                    f"counts as idle where its log has no jobs ({steps_text(lacks)}): their step times and bubble "
                    "are not the run's")
            problems.append(note)
            if untrusted is not None:
                untrusted.append(note)
            continue
        who = ("the other devices ran " + them if len(others) == len(active) - 1
               else f"{' and '.join(labels[q] for q in others)} ran {them}" if others else "")
        problems.append(
            f"{where}; {steps_text(lacks)} {'is' if len(lacks) == 1 else 'are'} left out of the figures"
            + (f" ({who})" if who else "")
        )
    return kept or n_steps


#: Job kinds per family of jobs that run each micro-batch once per chunk on a device in
#: every step: its forward, and its backward, full (B) or for inputs only (I; split
#: schedules such as DualPipeV mix the two). W follows I only where the backward split,
#: so its ids are checked for repeats and range, not for completeness.
_FAMILY = {"F": "F", "B": "B", "I": "B", "W": "W"}
#: At most this many micro-batch id warnings per import; the rest are counted.
_MAX_ID_WARNINGS = 20


def _micro_batches(per_rank: list[list[list[PaddleJob]]], paths: list[Path], labels: list[str], first_step: int,
                   problems: list[str], holes: list[list[list[int]]] | None = None) -> int:
    """The number of micro-batches ``m`` of the logs, checking the ids on the way.

    On a device, every step runs each micro-batch ``0 .. m-1`` once per chunk
    forward (``forward``) and once backward (``backward`` or ``backward_b``).
    ``m`` is one more than the largest id that more than half of these (device,
    step, chunk, forward or backward) groups have, ties going to the smaller
    ``m`` (:func:`_majority_m`), so one impossible id (``micro_batch_id = 99``)
    does not make ``m = 100``. Per group, an id seen
    twice, an id ``>= m`` and the ids below ``m`` it lacks are reported in
    ``problems`` naming file and line (``backward_w`` groups: repeats and
    range only); an id no group has (a gap below the largest) is reported once.
    The jobs are kept as logged: their times are real, only an id is wrong.
    Where ``holes`` (per device and step, the job lines skipped as damaged) has lines in a
    step whose group lacks ids, the warning names the first of them: the missing job was there.
    """
    groups: dict[tuple[int, int, str, int], list[PaddleJob]] = {}
    for rank, steps in enumerate(per_rank):
        for k, jobs in enumerate(steps):
            for j in jobs:
                kind, chunk = parse_job_type(j.type)
                if kind in _FAMILY:
                    groups.setdefault((rank, k, _FAMILY[kind], chunk), []).append(j)
    complete = [jobs for (_, _, family, _), jobs in groups.items() if family != "W"]
    if not complete:
        return max((j.microbatch for steps in per_rank for jobs in steps for j in jobs), default=-1) + 1
    presence = Counter(mb for jobs in complete for mb in {j.microbatch for j in jobs})
    m = _majority_m(presence, len(complete))
    # The ids below m that some group has, ascending; the others below m (a gap) no log has.
    # Sets and runs only, never range(m): ids offset by 10**6 cost no more than small ones.
    known = sorted(mb for mb in presence if mb < m)
    absent_runs = _gaps(known, m)
    found: list[str] = []
    if absent_runs:
        top = min((j for jobs in groups.values() for j in jobs if j.microbatch == m - 1), key=lambda j: j.line)
        where = next(paths[r] for (r, *_), jobs in groups.items() if top in jobs)
        found.append(f"{where}:{top.line}: no job in any log has micro_batch_id {_runs(absent_runs)}, though the largest id, "
                     f"{m - 1}, makes m = {m}: the ids leave a gap (lines missing, or ids wrong)")
    for (rank, k, family, _), jobs in groups.items():
        lines: dict[int, list[int]] = {}
        for j in jobs:
            lines.setdefault(j.microbatch, []).append(j.line)
        twice = {mb: ls for mb, ls in lines.items() if len(ls) > 1}
        beyond = {mb: ls for mb, ls in lines.items() if mb >= m}
        missing = [mb for mb in known if mb not in lines] if family != "W" else []
        if not (twice or beyond or missing):
            continue
        what = [f"micro-batch {mb} {'twice' if len(ls) == 2 else f'{len(ls)} times'} (lines {', '.join(map(str, ls))})"
                for mb, ls in sorted(twice.items())]
        what += [f"micro_batch_id {mb} (line {', '.join(map(str, ls))}), beyond m = {m} of the other steps and devices"
                 for mb, ls in sorted(beyond.items())]
        if missing:
            what.append(f"no micro-batch {_ids(missing)}")
        line = min(ls[0] for ls in (*twice.values(), *beyond.values())) if twice or beyond else jobs[0].line
        hint = ("a micro_batch_id on these lines is wrong; the jobs are kept as logged" if twice or beyond
                else "lines are missing (a log cut short?) or an id is wrong")
        skipped = holes[rank][k] if holes and rank < len(holes) and k < len(holes[rank]) else []
        if missing and not (twice or beyond) and skipped:  # the job was on a damaged line, skipped: name that line
            line = skipped[0]
            hint = (f"line{'s' if len(skipped) > 1 else ''} {', '.join(map(str, skipped))} of this step "
                    f"{'were' if len(skipped) > 1 else 'was'} skipped as damaged: the missing job was there")
        types = " or ".join(dict.fromkeys(j.type for j in jobs))
        found.append(f"{paths[rank]}:{line}: {labels[rank]}, step {first_step + k}: {types} has "
                     f"{'; '.join(what)}: {hint}")
    problems.extend(found[:_MAX_ID_WARNINGS])
    if len(found) > _MAX_ID_WARNINGS:
        problems.append(f"... and {len(found) - _MAX_ID_WARNINGS} more (device, step, job type) groups with micro-batch id problems")
    return m


def _majority_m(presence: Counter[int], groups: int) -> int:
    """``m`` from how many of ``groups`` (device, step, chunk, forward or backward)
    groups have each micro-batch id (``presence``): one more than the largest id
    more than half of them have; an id exactly half of them have (a tie: a
    one-device, one-step log has two groups) raises it only through ids all at
    least half of them have (a log cut short), so ties go to the smaller m and
    one stray ``micro_batch_id = 99`` does not make ``m = 100``."""
    half = {mb for mb, n in presence.items() if 2 * n >= groups}
    top = max((mb for mb in half if 2 * presence[mb] > groups), default=None)
    if top is None:  # no id has a majority: the smallest ids at least half have, else every id
        if not half:
            return max(presence) + 1
        top = min(half)
    while top + 1 in half:
        top += 1
    return top + 1


def _gaps(known: list[int], m: int) -> list[tuple[int, int]]:
    """The runs ``(first, last)`` of ids ``0 .. m-1`` missing from ``known`` (ascending)."""
    runs, nxt = [], 0
    for mb in known:
        if mb > nxt:
            runs.append((nxt, mb - 1))
        nxt = mb + 1
    if nxt < m:
        runs.append((nxt, m - 1))
    return runs


def _runs(runs: list[tuple[int, int]]) -> str:
    """``[(1, 3), (7, 7)]`` as ``1-3, 7``."""
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _ids(ids: list[int]) -> str:
    """``[1, 2, 3, 7]`` as ``1-3, 7``."""
    runs: list[list[int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
