"""How often PyTorch's runtime refuses a schedule the harness accepts (docs/torch.md "What runs"):

    python benchmarks/torch_refusals.py [--tries 3000] [--seed 0]

Random perturbations (1 to 6 swaps of neighbouring jobs on random ranks) of 1F1B (p=2 m=4, p=4 m=8),
ZB-H1 (p=3 m=6), ZB-V (p=2 m=4, p=3 m=6), Interleaved1F1B and InterleavedZeroBubble (p=2 v=2 m=4); those
the harness's plan accepts are lowered by PyTorch (:func:`harness.distributed.torch_lowering.lower_schedule`,
no process started). Prints the counts; asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import sys


def main(argv: list[str]) -> int:
    from harness.distributed.torch_lowering import lower_schedule
    from harness.errors import HarnessError
    from harness.plan.build import build_plan
    from harness.schedule.model import Schedule
    from harness.schedule.registry import build_schedule

    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    configs = [("1F1B", 2, 4, 1), ("1F1B", 4, 8, 1), ("ZB-H1", 3, 6, 1), ("ZB-V", 2, 4, 2), ("Interleaved1F1B", 2, 4, 2),
               ("InterleavedZeroBubble", 2, 4, 2), ("ZB-V", 3, 6, 2)]
    accepted = refused = 0
    for _ in range(args.tries):
        name, p, m, v = rng.choice(configs)
        base = build_schedule(name, p, m, v)
        rows = [list(r) for r in base.ranks]
        for _ in range(rng.randint(1, 6)):
            r = rng.randrange(p)
            if len(rows[r]) > 1:
                i = rng.randrange(len(rows[r]) - 1)
                rows[r][i], rows[r][i + 1] = rows[r][i + 1], rows[r][i]
        try:
            schedule = Schedule(base.name, m, base.stage_to_rank, tuple(tuple(x) for x in rows), dict(base.params))
            build_plan(schedule)
        except HarnessError:
            continue
        accepted += 1
        try:
            lower_schedule(schedule)
        except HarnessError as exc:
            refused += 1
            print(f"refused: {str(exc).splitlines()[0]}")
    print(f"{args.tries} perturbations: the harness accepted {accepted}; PyTorch's lowering refused {refused} of them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
