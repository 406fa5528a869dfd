"""Pipeline actions as PyTorch's pipelining runtime runs them, and their assembly into run records.

One records path for ``import-torch`` (:mod:`harness.imports.torch`, from ``torch.profiler``
traces) and the ``torch`` backend (:mod:`harness.distributed.torch_backend`, from its timing
hooks): both make one :class:`~harness.actions.torch_rank.TorchRank` per rank, of
:class:`~harness.actions.torch_action.TorchAction` s, and hand them to
:func:`~harness.actions.torch_assemble.assemble`; clock offsets across hosts are fitted by
:mod:`~harness.actions.clocks`, notes name steps with :mod:`~harness.actions.step_text`.

Imports :mod:`harness.plan` and the layers below it; it imports no torch.
"""
