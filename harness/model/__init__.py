"""What a case describes: cost models (durations in ns, FLOPs, bytes), stage layouts,
communication models, overlapped-group durations and data-parallel job durations.

Cost models: :mod:`~harness.model.cost` (the protocol and :class:`~harness.model.cost.FixedCost`),
:mod:`~harness.model.transformer` (:class:`~harness.model.transformer.TransformerCost`),
:mod:`~harness.model.checked` (a user's model checked where it enters a run); the values they are
given: :mod:`~harness.model.values`. Stage layouts: :mod:`~harness.model.layout`. Communication
models: :mod:`~harness.model.comm`. Optional cost-model terms: :mod:`~harness.model.overlap`,
:mod:`~harness.model.data_parallel`. A case's costs as plain per-stage numbers for a builder that plans
from them: :mod:`~harness.model.stage_costs`.

Imports only :mod:`harness.schedule` (the job vocabulary) and the base modules.
"""
