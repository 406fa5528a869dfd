"""Activation recomputation as a cost model describes it: one mode for every stage, or one per stage.

A mode is ``"none"``, ``"selective"`` or ``"full"`` (Korthikanti et al., arXiv:2205.05198, §5):

* ``none``: a forward keeps every activation its backward reads;
* ``selective``: the attention core (``Q K^T``, softmax, its dropout, the product with ``V``) is
  not kept but re-run at the start of the backward;
* ``full``: only each layer's input is kept and the whole forward is re-run in the backward.

:class:`~harness.model.transformer.TransformerCost` takes ``recompute`` as one mode (every stage)
or a list of modes, one per stage (``p x v``, stage 0 first, the order of a layout), as a
layout or recomputation search chooses them per stage. This module checks and reads that value;
what each mode keeps and costs is the cost model's.
"""

from __future__ import annotations

from typing import Any

from harness.errors import ConfigError

__all__ = ["RECOMPUTE", "Recompute", "check_recompute", "modes_of", "recompute_assumption", "recompute_of"]

#: Activation recomputation modes (Korthikanti et al., arXiv:2205.05198, §4-5).
RECOMPUTE = ("none", "selective", "full")

#: A recomputation setting: one mode for every stage, or one per stage.
Recompute = str | tuple[str, ...]


def _mode(value: object, what: str) -> str:
    if not isinstance(value, str) or value not in RECOMPUTE:
        raise ConfigError(f"cost model: {what}={value!r}; choose one of {', '.join(RECOMPUTE)}")
    return value


def check_recompute(value: Any) -> Recompute:
    """``value`` as a recomputation setting: a mode, or a tuple of modes (a list or tuple given).

    Raises:
        ConfigError: not a mode of :data:`RECOMPUTE` nor a non-empty list of them (names the
            entry and its stage).
    """
    if isinstance(value, (list, tuple)):
        if not value:
            raise ConfigError("cost model: recompute is an empty list; give one mode per stage "
                              f"({', '.join(RECOMPUTE)}), or one mode for all")
        return tuple(_mode(v, f"recompute[{k}] (stage {k})") for k, v in enumerate(value))
    if isinstance(value, str):
        return _mode(value, "recompute")
    raise ConfigError(f"cost model: recompute={value!r}; give one of {', '.join(RECOMPUTE)} for every stage, "
                      "or a list of them, one per stage")


def recompute_of(value: Recompute, stage: int, num_stages: int) -> str:
    """The mode of ``stage`` of ``num_stages`` under the setting ``value`` (from :func:`check_recompute`).

    Raises:
        ConfigError: a per-stage list for another stage count.
    """
    if isinstance(value, str):
        return value
    if len(value) != num_stages:
        raise ConfigError(f"cost model: recompute gives {len(value)} stage(s), but the pipeline has {num_stages} "
                          "(p x v; one mode per virtual stage, in model order)")
    return value[stage]


def modes_of(value: Recompute, num_stages: int) -> tuple[str, ...]:
    """Every stage's mode, stage 0 first.

    Raises:
        ConfigError: a per-stage list for another stage count.
    """
    return tuple(recompute_of(value, k, num_stages) for k in range(num_stages))


def recompute_assumption(modes: tuple[str, ...], attention_counted: bool, backward_ns: dict[int, int]) -> str:
    """A sentence naming a case's recomputation and what it costs: ``modes`` per stage (stage 0 first),
    ``backward_ns`` the recomputed ns of one backward of each stage that recomputes (first of each mode shown)."""
    if set(modes) == {"none"}:
        return "no activation recomputation"
    costs = []
    for mode in ("selective", "full"):
        stages = [k for k, m in enumerate(modes) if m == mode]
        if not stages:
            continue
        what = "the attention core (Q K^T, softmax, times V)" if mode == "selective" else "its stage's forward"
        costs.append(f"{'' if len(set(modes)) == 1 else mode + ': '}each backward re-runs {what}, "
                     f"{backward_ns.get(stages[0], 0) / 1e6:.3f} ms on stage {stages[0]}")
    if len(set(modes)) == 1:
        head = f"{modes[0]} recomputation on every stage"
    else:
        shown = ", ".join(modes) if len(modes) <= 16 else ", ".join(modes[:16]) + f", ... ({len(modes)} stages)"
        head = f"recomputation per stage (stage 0 first): {shown}"
    tail = "" if attention_counted else " (the attention products charged there though attention=False leaves them out of F and B)"
    return (f"{head}{': ' if len(set(modes)) == 1 else '; '}{'; '.join(costs)}{tail}; counted as busy time in the bubble "
            "figures (mindformers' normalization counts it as bubble)")
