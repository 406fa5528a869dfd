"""Backends of one pipeline rank per process: the ``mpi`` backend (:mod:`~harness.distributed.mpi`,
:mod:`~harness.distributed.mpi_cuda`) over its transport (:mod:`~harness.distributed.transport`),
clock alignment (:mod:`~harness.distributed.clock_sync`), merging per-rank records
(:mod:`~harness.distributed.rank_merge`), point-to-point figures (:mod:`~harness.distributed.p2p`),
launch checks (:mod:`~harness.distributed.launch`); the ``torch`` backend, a case on PyTorch's own
pipelining runtime (:mod:`~harness.distributed.torch_backend` and its ``torch_*`` parts); the profiling
window every rank follows (:mod:`~harness.distributed.synced_window`); and the names of every backend
a case can give (:mod:`~harness.distributed.backends`).

Imports :mod:`harness.run` and the layers below it.
"""
