"""Cost models over a schedule of several chains (DualPipe's two directions,
:mod:`harness.schedule.chains`).

A cost model is asked per stage of the harness's numbering, with the schedule's stage count.
:class:`~harness.model.cost.FixedCost` (and a custom model) answers per stage as given, so for
DualPipe its per-stage values name the ``2p`` harness stages (stage ``p+k`` is the second copy of
model stage ``k``). :class:`~harness.model.transformer.TransformerCost` reads the stage count as one
pipeline's: it splits ``num_layers`` over all the stages, puts the embedding on stage 0 only and the
LM head on the last stage only. Over DualPipe's two chains that would give each micro-batch half the
model, one direction no embedding and the other no LM head, so it is refused with the reason
rather than answered wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.errors import ConfigError
from harness.schedule.chains import CHAINS_PARAM, chains_of

if TYPE_CHECKING:
    from harness.schedule.model import Schedule

__all__ = ["check_cost_for_chains"]


def check_cost_for_chains(cost: object, schedule: Schedule) -> None:
    """Refuse a cost model that cannot describe ``schedule``'s chains (module doc); nothing for a
    schedule of one chain.

    Raises:
        ConfigError: a :class:`~harness.model.transformer.TransformerCost` (checked or not) with a
            schedule of several chains; names the schedule, the chains and what to use instead.
    """
    if not schedule.params.get(CHAINS_PARAM):
        return
    from harness.model.transformer import TransformerCost

    if isinstance(getattr(cost, "inner", cost), TransformerCost):
        # the stages only (they depend on p alone): a chooser's exclusions of the schedule at several m then read alike
        chains = "stages " + " and ".join(f"{a}..{b - 1}" for a, b, _, _ in chains_of(schedule))
        raise ConfigError(
            f"cost model TransformerCost cannot time schedule {schedule.name!r}: it runs several chains ({chains}, each a "
            "pipeline of its own micro-batches; schedule.params['chains']), but TransformerCost splits num_layers, the "
            "embedding and the LM head over one chain "
            "of all the stages, so each micro-batch would run part of the model. Use FixedCost with per-stage values for "
            f"the {schedule.num_stages} stages, or DualPipeV (one chain on the same V placement) for a TransformerCost"
        )
