"""A case's assumptions: one short sentence per modelling choice that moves its figures.

Each concept contributes its own sentences and this module collects them, in this order:

* the cost model (:func:`harness.model.assumptions.cost_assumptions`): how durations are derived,
  the tensor/sequence-parallel setting, attention FLOPs counted or not, the activation formula,
  recomputation and its cost, per-chunk durations;
* overlapped groups (:func:`harness.model.overlap.overlap_assumptions`): how long a group lasts;
* communication (:func:`harness.model.comm.comm_assumptions`): the comm model, the transfer time and
  the placement of send/receive jobs.

:func:`harness.runner.run_case` stores them in :attr:`CaseResult.assumptions
<harness.analysis.result.CaseResult.assumptions>`; they go into ``results.json`` (``assumptions``),
the page (case header, overview tooltip), the pytest summary's legend and the output of ``run`` and
``show``. A new concept adds its function here.
"""

from __future__ import annotations

from typing import Any

from harness.model.assumptions import cost_assumptions
from harness.model.comm import comm_assumptions
from harness.model.overlap import overlap_assumptions
from harness.schedule.model import Schedule

__all__ = ["case_assumptions"]


def case_assumptions(source: Schedule, lowered: Schedule, cost: Any, comm_model: str, placement: str | None) -> list[str]:
    """The assumptions of a case whose schedule ``source`` ran as ``lowered`` (after
    :func:`harness.model.comm.lower`) under ``cost`` and ``comm_model``, send/receive jobs placed as
    ``placement`` says (``None``: the model's default); each sentence once, in the order of the module doc.

    Raises:
        ConfigError: a cost model's ``assumptions`` method answers something other than texts.
    """
    out = [*cost_assumptions(cost, lowered), *overlap_assumptions(cost, lowered),
           *comm_assumptions(source, lowered, cost, comm_model, placement)]
    return list(dict.fromkeys(out))
