"""Step numbers as the importers' notes name them: ``step 5``, ``steps 2-5``, ``steps 3, 5``."""

from __future__ import annotations

__all__ = ["steps_text"]


def steps_text(steps: list[int]) -> str:
    """``[5]`` as ``step 5``, ``[2, 3, 4, 5]`` as ``steps 2-5``, ``[3, 5, 6]`` as ``steps 3, 5-6``
    (ascending, each run of consecutive numbers as ``first-last``).

    Raises:
        ValueError: ``steps`` is empty.
    """
    if not steps:
        raise ValueError("steps_text: no steps")
    runs: list[list[int]] = []
    unique = sorted(set(steps))
    for s in unique:
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    text = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return ("step " if len(unique) == 1 else "steps ") + text
